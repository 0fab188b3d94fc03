// l2_prefetch / l2_touch / l2_demote never change memory, handle any alignment and size (head
// and tail pieces, sizes below one sector, zero), and reject bad parameters with a Status.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "kernels/common/testing.h"
#include "kernels/l2_prefetch/params.h"

namespace gossamer::kern {
namespace {

using testing::DevBuf;

constexpr L2Method kMethods[] = {L2Method::kBulk, L2Method::kSector, L2Method::kLoad};
constexpr L2Priority kPrios[] = {L2Priority::kNormal, L2Priority::kLast, L2Priority::kFirst};

// Runs every method / priority / helper over [off, off + bytes) of a random buffer (with
// random guard bytes around the range) and checks that no byte of the buffer changed.
void check_unchanged(size_t off, size_t bytes, int blocks, std::mt19937_64& rng) {
  const size_t total = off + bytes + 4096;
  const std::vector<uint8_t> host = testing::rand_bytes(rng, total, 0, 255);
  DevBuf<uint8_t> buf(total);
  ASSERT_NE(buf.get(), nullptr);
  buf.upload(host);
  for (L2Method m : kMethods) {
    for (L2Priority pr : kPrios) {
      L2PrefetchParams p;
      p.ptr = buf.get() + off;
      p.bytes = bytes;
      p.method = m;
      p.priority = pr;
      p.blocks = blocks;
      p.pdl = pr == L2Priority::kLast;  // both launch paths
      if (m == L2Method::kSector && pr == L2Priority::kFirst) {
        EXPECT_FALSE(launch_l2_prefetch(p, 0).ok());
        continue;
      }
      ASSERT_TRUE(launch_l2_prefetch(p, 0).ok())
          << "method " << static_cast<int>(m) << " prio " << static_cast<int>(pr);
    }
  }
  ASSERT_TRUE(launch_l2_touch(buf.get() + off, bytes, 0).ok());
  ASSERT_TRUE(launch_l2_demote(buf.get() + off, bytes, 0).ok());
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const std::vector<uint8_t> after = buf.download();
  size_t diff = 0;
  for (size_t i = 0; i < total; ++i) diff += after[i] != host[i];
  EXPECT_EQ(diff, 0u) << "offset " << off << " bytes " << bytes;
}

TEST(L2Prefetch, LeavesMemoryUnchangedAtOddOffsetsAndSizes) {
  std::mt19937_64 rng(testing::fresh_seed("L2Prefetch.LeavesMemoryUnchanged"));
  const size_t offs[] = {0, 1, 3, 15, 16, 17, 31, 33, 127, 129};
  const size_t sizes[] = {0, 1, 2, 15, 16, 17, 31, 32, 33, 4095, 4096, 4097, 12345, 65536 + 7};
  for (size_t off : offs) {
    for (size_t bytes : sizes) {
      check_unchanged(off, bytes, 0, rng);
      if (::testing::Test::HasFatalFailure()) return;
    }
  }
  // A range larger than blocks x threads pieces (grid-stride loops) and a one-block grid.
  check_unchanged(5, (size_t{3} << 20) + 11, 0, rng);
  check_unchanged(40, (size_t{1} << 20) + 3, 1, rng);
}

TEST(L2Prefetch, RejectsBadParams) {
  L2PrefetchParams p;
  EXPECT_TRUE(p.validate().ok());  // empty range
  EXPECT_TRUE(launch_l2_prefetch(p, 0).ok());
  p.bytes = 64;
  const Status st = launch_l2_prefetch(p, 0);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("null"), std::string::npos) << st.message();
  DevBuf<uint8_t> buf(64);
  p.ptr = buf.get();
  p.blocks = -1;
  EXPECT_FALSE(launch_l2_prefetch(p, 0).ok());
  p.blocks = 0;
  p.method = L2Method::kSector;
  p.priority = L2Priority::kFirst;
  EXPECT_FALSE(launch_l2_prefetch(p, 0).ok());
  EXPECT_FALSE(launch_l2_touch(nullptr, 8, 0).ok());
  EXPECT_FALSE(launch_l2_demote(nullptr, 8, 0).ok());
  EXPECT_TRUE(launch_l2_touch(nullptr, 0, 0).ok());
  EXPECT_TRUE(launch_l2_spin(1000, 0).ok());
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
}

}  // namespace
}  // namespace gossamer::kern

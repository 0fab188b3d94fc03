#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <vector>

#include "kernels/common/testing.h"
#include "kernels/gemv/cases.h"
#include "kernels/gemv/chain_probe.h"
#include "kernels/gemv/params.h"

namespace gossamer::kern {
namespace {

using testing::DevBuf;

struct GemvRun {
  std::vector<float> y;
  std::vector<unsigned long long> keys;
};

// Runs launch_gemv with `variant` (and PDL on or off) on the case's inputs.
GemvRun run_case(const GemvCase& c, int variant, bool pdl, const std::vector<uint16_t>& w,
                 const std::vector<float>& bias, const std::vector<float>& x,
                 const std::vector<float>& y0) {
  DevBuf<uint16_t> dw(w.size());
  DevBuf<float> db(bias.size()), dx(x.size()), dy(y0.size());
  DevBuf<unsigned long long> dam(c.batch);
  dw.upload(w);
  db.upload(bias);
  dx.upload(x);
  if (c.accumulate)
    dy.upload(y0);
  else
    dy.poison();
  cudaMemset(dam.get(), 0, dam.bytes());
  GemvParams p{dw.get(), db.get(), dx.get(), dy.get(),     c.rows,
               c.cols,   c.batch,  c.rows,   c.accumulate, c.argmax ? dam.get() : nullptr};
  p.variant = variant;
  p.pdl = pdl;
  const Status st = launch_gemv(p, 0);
  EXPECT_TRUE(st.ok()) << c.name << ": " << st.ToString();
  testing::sync_or_die(std::string("gemv ") + c.name);
  return {dy.download(), dam.download()};
}

void check_argmax(const GemvCase& c, const GemvRun& r, const std::vector<double>& ref) {
  for (int b = 0; b < c.batch; ++b) {
    const auto first = ref.begin() + static_cast<size_t>(b) * c.rows;
    const int want = static_cast<int>(std::max_element(first, first + c.rows) - first);
    const int got = argmax_key_to_index(r.keys[b]);
    // The GPU's own fp32 maximum must be at `got`; a near-tie may legitimately differ from
    // the fp64 winner, so compare values rather than indices when they disagree.
    if (got != want) {
      EXPECT_NEAR(ref[static_cast<size_t>(b) * c.rows + got], first[want], 1e-4) << c.name;
    }
    EXPECT_EQ(r.y[static_cast<size_t>(b) * c.rows + got],
              *std::max_element(r.y.begin() + static_cast<size_t>(b) * c.rows,
                                r.y.begin() + static_cast<size_t>(b + 1) * c.rows))
        << c.name;
  }
}

// Every variant that supports the case (1 = warp GEMV, 2 = bulk at batch 1..4, 3 = tensor cores at
// batch >= 2), PDL off and on: within 2e-6 of fp64, and the bulk kernel bit-identical to the warp
// GEMV (same summation order; the mma kernel sums in another order).
TEST(Gemv, MatchesFp64Reference) {
  std::mt19937_64 rng(testing::fresh_seed("gemv"));
  for (const auto& c : kGemvCases) {
    if (!c.in_test) continue;
    const size_t nw = static_cast<size_t>(c.rows) * c.cols;
    auto w = testing::rand_bf16(rng, nw, -1.f, 1.f);
    auto bias = testing::rand_f32(rng, c.rows, -1.f, 1.f);
    auto x = testing::rand_f32(rng, static_cast<size_t>(c.batch) * c.cols, -1.f, 1.f);
    auto y0 = testing::rand_f32(rng, static_cast<size_t>(c.batch) * c.rows, -2.f, 2.f);
    const auto ref =
        gemv_ref(w, bias, x, c.accumulate ? y0 : std::vector<float>{}, c.rows, c.cols, c.batch);
    const GemvRun base = run_case(c, 1, false, w, bias, x, y0);
    unsigned long long key = 0;  // only whether argmax is set matters to gemv_bulk_supported
    GemvParams shape;
    shape.rows = c.rows;
    shape.cols = c.cols;
    shape.batch = c.batch;
    shape.argmax = c.argmax ? &key : nullptr;
    for (int variant = 1; variant <= 3; ++variant) {
      if (variant == 2 && !gemv_bulk_supported(shape)) continue;
      if (variant == 3 && !gemv_mma_supported(shape)) continue;
      for (const bool pdl : {false, true}) {
        const GemvRun r = run_case(c, variant, pdl, w, bias, x, y0);
        const double err = testing::rel_err(r.y, ref);
        std::printf("gemv v%d pdl %d %-34s rel_err %.3g\n", variant, pdl, c.name, err);
        EXPECT_LT(err, 2e-6) << c.name << " variant " << variant;
        if (variant != 3) {
          EXPECT_EQ(std::memcmp(r.y.data(), base.y.data(), r.y.size() * sizeof(float)), 0)
              << c.name << " variant " << variant << " pdl " << pdl << " differs from variant 1";
        }
        if (c.argmax) check_argmax(c, r, ref);
      }
    }
  }
}

TEST(Gemv, RejectsBadParams) {
  GemvParams p;
  EXPECT_FALSE(p.validate().ok());
  alignas(16) uint16_t w[16] = {};
  alignas(16) float x[16] = {}, y[16] = {};
  p = GemvParams{w, nullptr, x, y, 2, 12, 1, 2, false, nullptr};
  EXPECT_NE(p.validate().message().find("multiple of 8"), std::string::npos);
  p.cols = 8;
  p.ldy = 1;
  EXPECT_NE(p.validate().message().find("ldy"), std::string::npos);
  p.ldy = 2;
  EXPECT_TRUE(p.validate().ok());
  p.variant = 4;
  EXPECT_NE(p.validate().message().find("variant 4 does not exist"), std::string::npos);
  p.variant = 2;
  unsigned long long key = 0;
  p.argmax = &key;  // the bulk kernel has no argmax: refused with a message, not run
  EXPECT_NE(launch_gemv_bulk(p, 0).message().find("no argmax"), std::string::npos);
}

// gemv_bulk is sized for one block per SM (an even split of the rows over sm_count blocks). Its
// launch keeps it there whatever its registers allow: two blocks on one SM stream twice the rows
// while other SMs idle (batch 3 of the O-projection, 88 registers, ran 4% slower end to end).
// An occupancy query: nothing is launched, so the pointers need not be valid.
TEST(Gemv, BulkKeepsOneBlockPerSm) {
  alignas(16) uint16_t w[16] = {};
  alignas(16) float x[16] = {}, y[16] = {};
  if (!gemv_bulk_supported(GemvParams{w, nullptr, x, y, 16, 16, 1, 16, false, nullptr})) {
    GTEST_SKIP() << "needs an sm_90 GPU";
  }
  for (const int rows : {2880, 5120, 201088})
    for (const int cols : {2880, 4096, 8192})
      for (int batch = 1; batch <= kGemvBulkMaxBatch; ++batch) {
        GemvParams p{w, nullptr, x, y, rows, cols, batch, rows, true, nullptr};
        ASSERT_TRUE(gemv_bulk_supported(p)) << rows << "x" << cols << " batch " << batch;
        const auto n = gemv_bulk_blocks_per_sm(p);
        ASSERT_TRUE(n.ok()) << n.status().ToString();
        EXPECT_EQ(*n, 1) << rows << "x" << cols << " batch " << batch;
      }
  // 16384 columns of x at 3 rows (192 KB) leave no room for two weight rows (64 KB): not
  // supported, so that the auto variant takes another kernel instead of failing at launch.
  GemvParams p{w, nullptr, x, y, 2880, 16384, 2, 2880, false, nullptr};
  EXPECT_TRUE(gemv_bulk_supported(p));
  p.batch = 3;
  EXPECT_FALSE(gemv_bulk_supported(p));
  EXPECT_NE(gemv_resolved_variant(p), 2);
}

// The persistent-chain probe (chain_probe.h) on small odd shapes: its final activations equal
// those of the same steps as PDL launches of the bulk GEMV (bitwise) and are within 1e-5 of an
// fp64 chain (each step's input rounded to f32 as on the GPU).
TEST(GemvChainProbe, MatchesPdlChainAndFp64) {
  std::mt19937_64 rng(testing::fresh_seed("gemv chain probe"));
  constexpr int kSteps = 5, kLen = 1000;
  const int rows[kSteps] = {1000, 520, 999, 264, 136}, cols[kSteps] = {520, 512, 520, 992, 264};
  std::vector<std::unique_ptr<DevBuf<uint16_t>>> mats;
  std::vector<std::vector<uint16_t>> hmats;
  std::vector<const uint16_t*> ptrs;
  for (int m = 0; m < kSteps; ++m) {
    const float a = std::sqrt(3.f / static_cast<float>(cols[m]));
    hmats.push_back(testing::rand_bf16(rng, static_cast<size_t>(rows[m]) * cols[m], -a, a));
    mats.push_back(std::make_unique<DevBuf<uint16_t>>(hmats.back().size()));
    mats.back()->upload(hmats.back());
    ptrs.push_back(mats.back()->get());
  }
  std::vector<float> init(2 * kLen, 0.f), x = testing::rand_f32(rng, cols[0], -1.f, 1.f);
  std::copy(x.begin(), x.end(), init.begin());
  std::vector<double> ref;
  for (int m = 0; m < kSteps; ++m) {
    ref = gemv_ref(hmats[m], {}, x, {}, rows[m], cols[m], 1);
    if (m + 1 < kSteps) x.assign(ref.begin(), ref.begin() + cols[m + 1]);  // f32, as on the GPU
  }
  DevBuf<float> act(2 * kLen);
  DevBuf<unsigned> counters(kSteps + 1);
  const GemvChainProbe probe{ptrs.data(), rows, cols,           kSteps,
                             act.get(),   kLen, counters.get(), 16 * 1024};
  act.upload(init);
  ASSERT_TRUE(launch_gemv_chain_pdl(probe, 0).ok());
  testing::sync_or_die("gemv chain");
  const auto chain = act.download();
  act.upload(init);
  cudaMemset(counters.get(), 0, counters.bytes());
  ASSERT_TRUE(launch_gemv_chain_probe(probe, 0).ok());
  testing::sync_or_die("gemv chain probe");
  const auto got = act.download();
  const float* last = got.data() + (kSteps & 1) * kLen;  // step kSteps - 1 wrote this half
  const double err = testing::rel_err(last, ref.data(), rows[kSteps - 1]);
  std::printf("gemv chain probe: %d steps, rel_err vs fp64 %.3g\n", kSteps, err);
  EXPECT_LT(err, 1e-5);
  EXPECT_EQ(std::memcmp(last, chain.data() + (kSteps & 1) * kLen, rows[kSteps - 1] * sizeof(float)),
            0);
  GemvChainProbe bad = probe;
  const int bad_cols[kSteps] = {520, 512, 1000, 264, 136};  // step 2 reads more than step 1 wrote
  bad.cols = bad_cols;
  EXPECT_FALSE(bad.validate().ok());
}

}  // namespace
}  // namespace gossamer::kern

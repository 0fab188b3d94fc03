#include <gtest/gtest.h>

#include "kernels/common/testing.h"
#include "kernels/sample/cases.h"
#include "kernels/sample/params.h"

namespace gossamer::kern {
namespace {

using testing::DevBuf;

TEST(Greedy, ArgmaxAndFinalizeMatchReference) {
  std::mt19937_64 rng(testing::fresh_seed("argmax"));
  for (const auto& c : kArgmaxCases) {
    auto logits = testing::rand_f32(rng, static_cast<size_t>(c.batch) * c.vocab, -30.f, 30.f);
    // A duplicated maximum in row 0 must resolve to the lower index.
    if (c.vocab > 5) logits[4] = logits[2] = 100.f;
    DevBuf<float> dl(logits.size());
    DevBuf<unsigned long long> keys(c.batch);
    DevBuf<int32_t> tok(c.batch), next(c.batch), pos(c.batch);
    dl.upload(logits);
    cudaMemset(keys.get(), 0, keys.bytes());
    tok.poison();
    std::vector<int32_t> pos0(c.batch, 7);
    pos.upload(pos0);
    ASSERT_TRUE(launch_argmax({dl.get(), keys.get(), c.batch, c.vocab, c.vocab}, 0).ok());
    ASSERT_TRUE(
        launch_greedy_finalize({keys.get(), tok.get(), next.get(), pos.get(), c.batch}, 0).ok());
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    const auto want = argmax_ref(logits, c.batch, c.vocab);
    EXPECT_EQ(tok.download(), want) << c.name;
    EXPECT_EQ(next.download(), want) << c.name;
    EXPECT_EQ(pos.download(), std::vector<int32_t>(c.batch, 8)) << c.name;
    EXPECT_EQ(keys.download(), std::vector<unsigned long long>(c.batch, 0ull)) << c.name;
  }
}

TEST(Greedy, RejectsBadParams) {
  EXPECT_FALSE(ArgmaxParams{}.validate().ok());
  EXPECT_FALSE(GreedyFinalizeParams{}.validate().ok());
}

}  // namespace
}  // namespace gossamer::kern

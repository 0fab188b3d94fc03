#include <gtest/gtest.h>

#include "kernels/common/testing.h"
#include "kernels/router/cases.h"
#include "kernels/router/params.h"

namespace gossamer::kern {
namespace {

using testing::DevBuf;

TEST(TopkSoftmax, MatchesReference) {
  std::mt19937_64 rng(testing::fresh_seed("topk"));
  for (const auto& c : kTopkCases) {
    auto logits = testing::rand_f32(rng, static_cast<size_t>(c.batch) * c.n_experts, -3.f, 3.f);
    // Exact ties (values repeated) must resolve to the lower index, as torch.topk does: across
    // lanes (1, 3), within one lane's values (1, 33: lane 1 of the warp top-k) and, in row 1,
    // a row of equal values with -0 and +0 mixed (ids 0..k-1, equal weights).
    if (c.n_experts > 4) logits[3] = logits[1] = 10.f;
    if (c.n_experts > 33) logits[33] = 10.f;
    if (c.batch > 1) {
      for (int e = 0; e < c.n_experts; ++e) logits[c.n_experts + e] = e % 2 ? -0.f : 0.f;
    }
    DevBuf<float> dl(logits.size()), dw(static_cast<size_t>(c.batch) * c.k);
    DevBuf<int32_t> di(static_cast<size_t>(c.batch) * c.k);
    dl.upload(logits);
    dw.poison();
    di.poison();
    TopkParams p{dl.get(), di.get(), dw.get(), c.batch, c.n_experts, c.k};
    ASSERT_TRUE(launch_topk_softmax(p, 0).ok());
    std::vector<int32_t> ids;
    std::vector<double> w;
    topk_softmax_ref(logits, c.batch, c.n_experts, c.k, &ids, &w);
    EXPECT_EQ(di.download(), ids) << c.name;
    const double err = testing::rel_err(dw.download(), w);
    std::printf("topk %-16s rel_err %.3g\n", c.name, err);
    EXPECT_LT(err, 1e-6) << c.name;
  }
}

TEST(TopkSoftmax, RejectsBadParams) {
  float l = 0, w = 0;
  int32_t i = 0;
  TopkParams p{&l, &i, &w, 1, 4, 5};
  EXPECT_FALSE(p.validate().ok());
}

}  // namespace
}  // namespace gossamer::kern

#include <gtest/gtest.h>

#include "kernels/common/testing.h"
#include "kernels/rmsnorm/cases.h"
#include "kernels/rmsnorm/params.h"

namespace gossamer::kern {
namespace {

using testing::DevBuf;

TEST(RmsNorm, MatchesFp64Reference) {
  std::mt19937_64 rng(testing::fresh_seed("rmsnorm"));
  for (const auto& c : kRmsNormCases) {
    const size_t n = static_cast<size_t>(c.rows) * c.dim;
    auto x = testing::rand_f32(rng, n, -4.f, 4.f);
    auto w = testing::rand_bf16(rng, c.dim, -2.f, 2.f);
    DevBuf<float> dx(n), dy(n);
    DevBuf<uint16_t> dw(c.dim);
    dx.upload(x);
    dw.upload(w);
    dy.poison();
    RmsNormParams p{dx.get(), dw.get(), nullptr, dy.get(), c.rows, c.dim, 1e-5f};
    ASSERT_TRUE(launch_rmsnorm(p, 0).ok()) << c.name;
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    const double err = testing::rel_err(dy.download(), rmsnorm_ref(x, w, c.rows, c.dim, 1e-5f));
    std::printf("rmsnorm %-28s rel_err %.3g\n", c.name, err);
    EXPECT_LT(err, 1e-6) << c.name;
  }
}

TEST(RmsNorm, GathersRows) {
  std::mt19937_64 rng(testing::fresh_seed("rmsnorm gather"));
  const int rows = 6, dim = 128;
  auto x = testing::rand_f32(rng, rows * dim, -1.f, 1.f);
  auto w = testing::rand_bf16(rng, dim, -1.f, 1.f);
  std::vector<int32_t> idx = {5, 0, 3};
  DevBuf<float> dx(x.size()), dy(3 * dim);
  DevBuf<uint16_t> dw(dim);
  DevBuf<int32_t> di(3);
  dx.upload(x);
  dw.upload(w);
  di.upload(idx);
  dy.poison();
  RmsNormParams p{dx.get(), dw.get(), di.get(), dy.get(), 3, dim, 1e-5f};
  ASSERT_TRUE(launch_rmsnorm(p, 0).ok());
  auto ref_all = rmsnorm_ref(x, w, rows, dim, 1e-5f);
  std::vector<double> ref;
  for (int r : idx)
    ref.insert(ref.end(), ref_all.begin() + r * dim, ref_all.begin() + (r + 1) * dim);
  EXPECT_LT(testing::rel_err(dy.download(), ref), 1e-6);
}

TEST(RmsNorm, RejectsBadParams) {
  RmsNormParams p;
  EXPECT_FALSE(p.validate().ok());
  float f = 0;
  uint16_t w = 0;
  p = RmsNormParams{&f, &w, nullptr, &f, 1, 6, 1e-5f};
  const Status s = p.validate();
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("multiple of 4"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace gossamer::kern

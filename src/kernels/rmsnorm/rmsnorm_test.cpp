#include <gtest/gtest.h>

#include "common/numerics.h"
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

// The prefill's fused bf16 outputs: yb must equal the host RNE conversion of the f32 output of
// the same launch bit for bit, hi + lo must be near fp32, and bf16-only (y = null) must give the
// same bits; all checked against the fp64 reference too.
TEST(RmsNorm, Bf16OutputsMatchF32AndReference) {
  std::mt19937_64 rng(testing::fresh_seed("rmsnorm bf16"));
  const int rows = 37, dim = 2880;
  const size_t n = static_cast<size_t>(rows) * dim;
  auto x = testing::rand_f32(rng, n, -4.f, 4.f);
  auto w = testing::rand_bf16(rng, dim, -2.f, 2.f);
  DevBuf<float> dx(n), dy(n);
  DevBuf<uint16_t> dw(dim), dhi(n), dlo(n), dhi2(n);
  dx.upload(x);
  dw.upload(w);
  dy.poison();
  dhi.poison();
  dlo.poison();
  dhi2.poison();
  RmsNormParams p{dx.get(), dw.get(), nullptr, dy.get(), rows, dim, 1e-5f};
  p.yb = dhi.get();
  p.yb_lo = dlo.get();
  ASSERT_TRUE(launch_rmsnorm(p, 0).ok());
  RmsNormParams p2{dx.get(), dw.get(), nullptr, nullptr, rows, dim, 1e-5f};
  p2.yb = dhi2.get();
  ASSERT_TRUE(launch_rmsnorm(p2, 0).ok());
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const auto y = dy.download();
  const auto hi = dhi.download(), lo = dlo.download(), hi2 = dhi2.download();
  const auto ref = rmsnorm_ref(x, w, rows, dim, 1e-5f);
  size_t mism = 0;
  std::vector<float> hi_f(n), sum_f(n);
  for (size_t i = 0; i < n; ++i) {
    mism += hi[i] != float_to_bf16(y[i]) || hi2[i] != hi[i] ||
            lo[i] != float_to_bf16(y[i] - bf16_to_float(hi[i]));
    hi_f[i] = bf16_to_float(hi[i]);
    sum_f[i] = hi_f[i] + bf16_to_float(lo[i]);
  }
  const double e_y = testing::rel_err(y, ref), e_hi = testing::rel_err(hi_f, ref),
               e_sum = testing::rel_err(sum_f, ref);
  std::printf("rmsnorm bf16 %dx%d: f32 %.3g, bf16 %.3g, hi+lo %.3g rel_err; %zu bit mismatches\n",
              rows, dim, e_y, e_hi, e_sum, mism);
  EXPECT_EQ(mism, 0u);
  EXPECT_LT(e_y, 1e-6);
  EXPECT_LT(e_hi, 4e-3);   // bf16: <= 2^-9 per element
  EXPECT_LT(e_sum, 2e-5);  // ~16 significant bits
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
  p = RmsNormParams{&f, &w, nullptr, nullptr, 1, 4, 1e-5f};
  EXPECT_FALSE(p.validate().ok());  // neither y nor yb
  p.yb_lo = &w;
  p.y = &f;
  const Status s2 = p.validate();
  EXPECT_FALSE(s2.ok());
  EXPECT_NE(s2.message().find("yb_lo needs yb"), std::string::npos) << s2.message();
}

}  // namespace
}  // namespace gossamer::kern

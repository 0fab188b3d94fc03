#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "common/numerics.h"
#include "kernels/common/testing.h"
#include "kernels/gemm/cases.h"
#include "kernels/gemm/params.h"

namespace gossamer::kern {
namespace {

using testing::DevBuf;

TEST(Gemm, MatchesFp64Reference) {
  std::mt19937_64 rng(testing::fresh_seed("gemm"));
  auto ctx = GemmContext::create();
  ASSERT_TRUE(ctx.ok()) << ctx.status().ToString();
  double worst = 0;
  for (const auto& c : kGemmCases) {
    if (!c.in_test) continue;
    auto a = testing::rand_bf16(rng, static_cast<size_t>(c.m) * c.k, -1.f, 1.f);
    auto w = testing::rand_bf16(rng, static_cast<size_t>(c.n) * c.k, -1.f, 1.f);
    auto bias = c.bias ? testing::rand_f32(rng, c.n, -1.f, 1.f) : std::vector<float>{};
    auto d0 = testing::rand_f32(rng, static_cast<size_t>(c.m) * c.n, -4.f, 4.f);
    DevBuf<uint16_t> da(a.size()), dw(w.size());
    DevBuf<float> db(std::max<size_t>(bias.size(), 1)), dd(d0.size());
    da.upload(a);
    dw.upload(w);
    if (c.bias) db.upload(bias);
    if (c.accumulate)
      dd.upload(d0);
    else
      dd.poison();  // NaN: every output must be written
    GemmParams p;
    p.a = da.get();
    p.w = dw.get();
    p.bias = c.bias ? db.get() : nullptr;
    p.d = dd.get();
    p.m = c.m;
    p.n = c.n;
    p.k = c.k;
    p.accumulate = c.accumulate;
    const Status s = (*ctx)->run(p, 0);
    ASSERT_TRUE(s.ok()) << c.name << ": " << s.ToString();
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess) << c.name;
    const auto ref = gemm_ref(a, w, bias, c.accumulate ? d0 : std::vector<float>{}, c.m, c.n, c.k);
    const double e = testing::rel_err(dd.download(), ref);
    std::printf("gemm %-34s rel_err %.3g\n", c.name, e);
    EXPECT_LT(e, 1e-5) << c.name;  // fp32 accumulation of exact bf16 products
    worst = std::max(worst, e);
  }
  std::printf("gemm worst rel_err %.3g\n", worst);
}

TEST(Gemm, StridedOperandsAndPlanReuse) {
  // Row strides larger than k / n (sub-matrices), run twice through the cached plan: the second
  // run must give bit-identical results (same algorithm, no state carried between calls).
  std::mt19937_64 rng(testing::fresh_seed("gemm strided"));
  auto ctx = GemmContext::create();
  ASSERT_TRUE(ctx.ok());
  const int m = 37, n = 72, k = 96, lda = 136, ldw = 104, ldd = 84;
  auto a = testing::rand_bf16(rng, static_cast<size_t>(m) * lda, -1.f, 1.f);
  auto w = testing::rand_bf16(rng, static_cast<size_t>(n) * ldw, -1.f, 1.f);
  auto bias = testing::rand_f32(rng, n, -1.f, 1.f);
  DevBuf<uint16_t> da(a.size()), dw(w.size());
  DevBuf<float> db(n), dd(static_cast<size_t>(m) * ldd);
  da.upload(a);
  dw.upload(w);
  db.upload(bias);
  dd.poison();
  GemmParams p{da.get(), dw.get(), db.get(), dd.get(), m, n, k, lda, ldw, ldd, false};
  ASSERT_TRUE((*ctx)->run(p, 0).ok());
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const auto first = dd.download();
  ASSERT_TRUE((*ctx)->run(p, 0).ok());
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const auto second = dd.download();  // bitwise (the NaN poison past n included)
  EXPECT_EQ(std::memcmp(first.data(), second.data(), first.size() * sizeof(float)), 0);
  std::vector<uint16_t> ac(static_cast<size_t>(m) * k), wc(static_cast<size_t>(n) * k);
  for (int i = 0; i < m; ++i)
    for (int c = 0; c < k; ++c)
      ac[static_cast<size_t>(i) * k + c] = a[static_cast<size_t>(i) * lda + c];
  for (int j = 0; j < n; ++j)
    for (int c = 0; c < k; ++c)
      wc[static_cast<size_t>(j) * k + c] = w[static_cast<size_t>(j) * ldw + c];
  const auto ref = gemm_ref(ac, wc, bias, {}, m, n, k);
  std::vector<float> got(static_cast<size_t>(m) * n);
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j)
      got[static_cast<size_t>(i) * n + j] = first[static_cast<size_t>(i) * ldd + j];
  const double e = testing::rel_err(got, ref);
  std::printf("gemm strided rel_err %.3g\n", e);
  EXPECT_LT(e, 1e-5);
  // Columns past n in each ldd row are not touched (still the NaN poison).
  EXPECT_TRUE(std::isnan(first[n]));
}

TEST(Gemm, F32ToBf16RoundsToNearestEven) {
  std::mt19937_64 rng(testing::fresh_seed("f32_to_bf16"));
  auto x = testing::rand_f32(rng, 4096, -1e3f, 1e3f);
  x[0] = NAN;
  x[1] = INFINITY;
  x[2] = -0.f;
  x[3] = 1.00390625f;  // exactly halfway between two bf16 values: rounds to even (1.0)
  DevBuf<float> dx(x.size());
  DevBuf<uint16_t> dy(x.size());
  dx.upload(x);
  dy.poison();
  ASSERT_TRUE(launch_f32_to_bf16(dx.get(), dy.get(), x.size(), 0).ok());
  const auto y = dy.download();
  EXPECT_TRUE(std::isnan(bf16_to_float(y[0])));
  EXPECT_EQ(bf16_to_float(y[3]), 1.0f);
  for (size_t i = 1; i < x.size(); ++i) ASSERT_EQ(y[i], float_to_bf16(x[i])) << "index " << i;
  // Split mode: hi identical, hi + lo within 2^-16 relative of x (the lo part's own rounding).
  DevBuf<uint16_t> dhi(x.size()), dlo(x.size());
  dhi.poison();
  dlo.poison();
  ASSERT_TRUE(launch_f32_to_bf16(dx.get(), dhi.get(), x.size(), 0, dlo.get(), true).ok());  // PDL
  const auto hi = dhi.download(), lo = dlo.download();
  double worst = 0;
  for (size_t i = 1; i < x.size(); ++i) {
    ASSERT_EQ(hi[i], y[i]) << "index " << i;
    if (!std::isfinite(x[i]) || x[i] == 0.f) continue;
    const double sum = static_cast<double>(bf16_to_float(hi[i])) + bf16_to_float(lo[i]);
    worst = std::max(worst, std::fabs(sum - x[i]) / std::fabs(x[i]));
  }
  std::printf("f32 -> bf16 hi + lo: worst relative error %.3g (bf16 alone ~3.9e-3)\n", worst);
  EXPECT_LT(worst, 1.0 / 65536);
}

TEST(Gemm, RejectsBadParams) {
  auto ctx = GemmContext::create(0);
  ASSERT_TRUE(ctx.ok());
  GemmParams p;
  EXPECT_FALSE((*ctx)->run(p, 0).ok());
  DevBuf<uint16_t> a(64), w(64);
  DevBuf<float> d(64);
  p = GemmParams{a.get(), w.get(), nullptr, d.get(), 2, 2, 12, 0, 0, 0, false};  // k % 8 != 0
  const Status s = (*ctx)->run(p, 0);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("2x2x12"), std::string::npos) << s.message();
  p = GemmParams{a.get() + 1, w.get(), nullptr, d.get(), 2, 2, 16, 0, 0, 0, false};
  EXPECT_FALSE((*ctx)->run(p, 0).ok());
  EXPECT_FALSE(launch_f32_to_bf16(d.get(), a.get(), 6, 0).ok());
}

}  // namespace
}  // namespace gossamer::kern

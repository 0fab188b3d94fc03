#include <cstdio>

#include "kernels/common/testing.h"
#include "kernels/rmsnorm/cases.h"
#include "kernels/rmsnorm/params.h"

int main() {
  using namespace gossamer::kern;
  const double ceil = testing::copy_ceiling_gbs();
  std::printf("rmsnorm_f32a_bf16w (copy ceiling %.0f GB/s)\n", ceil);
  for (const auto& c : kRmsNormCases) {
    const size_t n = static_cast<size_t>(c.rows) * c.dim;
    testing::DevBuf<float> x(n), y(n);
    testing::DevBuf<uint16_t> w(c.dim);
    cudaMemset(x.get(), 0, x.bytes());
    cudaMemset(w.get(), 0, w.bytes());
    RmsNormParams p{x.get(), w.get(), nullptr, y.get(), c.rows, c.dim, 1e-5f};
    const double ms = testing::time_ms([&] { (void)launch_rmsnorm(p, 0); }, 200);
    testing::print_bench_line(std::string("rmsnorm ") + c.name, 8.0 * n + 2.0 * c.dim, ms, ceil);
  }
  // Prefill shapes: f32 out + rmsnorm_f32a_bf16w's fused bf16 copy (vs rmsnorm + cvt_f32_bf16),
  // and the split hi + lo pair of the router input.
  for (int rows : {512, 2048, 16384}) {
    const int dim = 2880;
    const size_t n = static_cast<size_t>(rows) * dim;
    testing::DevBuf<float> x(n), y(n);
    testing::DevBuf<uint16_t> w(dim), hi(n), lo(n);
    cudaMemset(x.get(), 0, x.bytes());
    cudaMemset(w.get(), 0, w.bytes());
    RmsNormParams p{x.get(), w.get(), nullptr, nullptr, rows, dim, 1e-5f};
    p.yb = hi.get();
    double ms = testing::time_ms([&] { (void)launch_rmsnorm(p, 0); }, 100);
    const std::string shape = std::to_string(rows) + "x" + std::to_string(dim);
    testing::print_bench_line("rmsnorm -> bf16 " + shape, 6.0 * n, ms, ceil);
    p.y = y.get();
    p.yb_lo = lo.get();
    ms = testing::time_ms([&] { (void)launch_rmsnorm(p, 0); }, 100);
    testing::print_bench_line("rmsnorm -> f32 + bf16 hi/lo " + shape, 12.0 * n, ms, ceil);
  }
  return 0;
}

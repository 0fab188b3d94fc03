// gemm_bench: TFLOP/s of the cuBLASLt prefill GEMMs (bf16 x bf16 -> f32, bias epilogue) on the
// gpt-oss projection shapes and the 8192^3 ceiling case; plus the f32 -> bf16 conversion.
#include <cstdio>
#include <string>

#include "kernels/common/testing.h"
#include "kernels/gemm/cases.h"
#include "kernels/gemm/params.h"

int main() {
  using namespace gossamer::kern;
  auto ctx = GemmContext::create();
  if (!ctx.ok()) {
    std::fprintf(stderr, "%s\n", ctx.status().ToString().c_str());
    return 1;
  }
  std::printf("| case | ms | TFLOP/s |\n| --- | ---: | ---: |\n");
  for (const auto& c : kGemmCases) {
    testing::DevBuf<uint16_t> a(static_cast<size_t>(c.m) * c.k), w(static_cast<size_t>(c.n) * c.k);
    testing::DevBuf<float> b(c.n), d(static_cast<size_t>(c.m) * c.n);
    // Random-like bits (not zeros: tensor-core power and so clocks depend on the data).
    std::mt19937_64 rng(1);
    a.upload(testing::rand_bf16(rng, a.size(), -1.f, 1.f));
    w.upload(testing::rand_bf16(rng, w.size(), -1.f, 1.f));
    cudaMemset(b.get(), 0, b.bytes());
    cudaMemset(d.get(), 0, d.bytes());
    GemmParams p{a.get(), w.get(),     c.bias ? b.get() : nullptr, d.get(), c.m, c.n, c.k, 0, 0,
                 0,       c.accumulate};
    gossamer::Status st;
    const double ms = testing::time_ms([&] { st = (*ctx)->run(p, 0); }, 20);
    if (!st.ok()) {
      std::fprintf(stderr, "%s: %s\n", c.name, st.ToString().c_str());
      return 1;
    }
    std::printf("| %s | %.3f | %.1f |\n", c.name, ms, 2.0 * c.m * c.n * c.k / (ms * 1e-3) / 1e12);
  }
  const double ceil = testing::copy_ceiling_gbs();
  const size_t n = size_t{16384} * 2880;
  testing::DevBuf<float> x(n);
  testing::DevBuf<uint16_t> y(n);
  cudaMemset(x.get(), 0, x.bytes());
  const double ms = testing::time_ms([&] { (void)launch_f32_to_bf16(x.get(), y.get(), n, 0); }, 20);
  testing::print_bench_line("cvt_f32_bf16 16384x2880", 6.0 * n, ms, ceil);
  return 0;
}

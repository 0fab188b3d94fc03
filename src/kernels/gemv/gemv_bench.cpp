// gemv bench. Part 1, every case of cases.h and every variant that supports it, back-to-back
// launches of one weight matrix (small matrices stay in the 50 MB L2: warm figures). Part 2,
// "chain": the decode step's situation, batch 1: a CUDA graph of 32 launches with PDL over 8
// distinct weight matrices (> the L2 in total, so each launch streams its weights from DRAM),
// us per launch, for the decode GEMV shapes (O-projection with the residual add; the QKV shape
// without RoPE, for comparison with qkv_rope).
#include <algorithm>
#include <cstdio>
#include <string>

#include "kernels/common/testing.h"
#include "kernels/gemv/cases.h"
#include "kernels/gemv/params.h"

namespace gossamer::kern {
namespace {

void warm_cases(double ceil) {
  for (const auto& c : kGemvCases) {
    const size_t nw = static_cast<size_t>(c.rows) * c.cols;
    testing::DevBuf<uint16_t> w(nw);
    testing::DevBuf<float> x(static_cast<size_t>(c.batch) * c.cols),
        y(static_cast<size_t>(c.batch) * c.rows);
    testing::DevBuf<unsigned long long> am(c.batch);
    cudaMemset(w.get(), 0, w.bytes());
    cudaMemset(x.get(), 0, x.bytes());
    cudaMemset(y.get(), 0, y.bytes());
    for (int variant = 1; variant <= 2; ++variant) {
      GemvParams p{w.get(), nullptr, x.get(), y.get(),      c.rows,
                   c.cols,  c.batch, c.rows,  c.accumulate, c.argmax ? am.get() : nullptr};
      p.variant = variant;
      if (variant == 2 && !gemv_bulk_supported(p)) continue;
      const double ms = testing::time_ms([&] { (void)launch_gemv(p, 0); }, 50);
      const double bytes = 2.0 * nw + 4.0 * c.batch * (c.cols + c.rows);
      testing::print_bench_line(std::string(gemv_variant(p)) + " " + c.name, bytes, ms, ceil);
    }
  }
}

void chain_case(const char* name, int rows, int cols, bool accumulate, double ceil) {
  constexpr int kMats = 8, kLaunches = 32;
  const size_t nw = static_cast<size_t>(rows) * cols;
  testing::DevBuf<uint16_t> w(nw * kMats);
  testing::DevBuf<float> x(cols), y(rows), bias(rows);
  cudaMemset(w.get(), 0, w.bytes());
  cudaMemset(x.get(), 0, x.bytes());
  cudaMemset(y.get(), 0, y.bytes());
  cudaMemset(bias.get(), 0, bias.bytes());
  for (const int ring_kb : {-1, 0, 128, 96, 64, 48}) {  // -1: variant 1
    GemvParams p{w.get(), bias.get(), x.get(), y.get(), rows, cols, 1, rows, accumulate, nullptr};
    p.pdl = true;
    p.variant = ring_kb < 0 ? 1 : 2;
    p.bulk_ring_bytes = std::max(0, ring_kb) * 1024;
    const double ms = testing::graph_ms(
        [&](cudaStream_t s, int i) {
          GemvParams q = p;
          q.w = w.get() + nw * (i % kMats);
          return launch_gemv(q, s).ok();
        },
        kLaunches, 10);
    const double bytes = 2.0 * nw + 4.0 * (cols + 2 * rows);
    const std::string ring = ring_kb > 0 ? " ring " + std::to_string(ring_kb) + " KB" : "";
    testing::print_bench_line(std::string("chain+pdl ") + gemv_variant(p) + ring + " " + name,
                              bytes, ms, ceil);
  }
}

}  // namespace
}  // namespace gossamer::kern

int main() {
  using namespace gossamer::kern;
  const double ceil = testing::copy_ceiling_gbs();
  std::printf("gemv (copy ceiling %.0f GB/s)\n", ceil);
  warm_cases(ceil);
  chain_case("o_proj 2880x4096 b1 +res", 2880, 4096, true, ceil);
  chain_case("qkv shape 5120x2880 b1", 5120, 2880, false, ceil);
  chain_case("router 128x2880 b1", 128, 2880, false, ceil);
  return 0;
}

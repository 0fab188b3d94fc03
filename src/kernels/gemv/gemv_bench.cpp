// gemv bench. Part 1, every case of cases.h and every variant that supports it, back-to-back
// launches of one weight matrix (small matrices stay in the 50 MB L2: warm figures). Part 2,
// "chain": the decode step's situation, batch 1: a CUDA graph of 32 launches with PDL over 8
// distinct weight matrices (> the L2 in total, so each launch streams its weights from DRAM),
// us per launch, for the decode GEMV shapes (O-projection with the residual add; the QKV shape
// without RoPE, for comparison with qkv_rope). Part 3, "persistent chain" (chain_probe.h): 32
// dependent GEMVs alternating the QKV and O shapes, as 32 PDL launches of the bulk GEMV and as
// one persistent kernel (docs/decode-budget.md).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "kernels/common/testing.h"
#include "kernels/gemv/cases.h"
#include "kernels/gemv/chain_probe.h"
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
    for (int variant = 1; variant <= 3; ++variant) {
      GemvParams p{w.get(), nullptr, x.get(), y.get(),      c.rows,
                   c.cols,  c.batch, c.rows,  c.accumulate, c.argmax ? am.get() : nullptr};
      p.variant = variant;
      if (variant == 2 && !gemv_bulk_supported(p)) continue;
      if (variant == 3 && !gemv_mma_supported(p)) continue;
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

// Part 3: steps alternate A = 5120 x 2880 (QKV shape) and B = 2880 x 4096 (O shape), 4 weight
// sets of each (220 MB: from DRAM); both versions start from the same x and must agree bitwise.
void persistent_chain(double ceil) {
  constexpr int kSteps = 32, kSets = 4, kLen = 5120;
  const int shape[2][2] = {{5120, 2880}, {2880, 4096}};
  std::mt19937_64 rng(testing::fresh_seed("gemv persistent chain"));
  std::vector<std::unique_ptr<testing::DevBuf<uint16_t>>> mats;
  for (int i = 0; i < 2 * kSets; ++i) {
    const int r = shape[i % 2][0], c = shape[i % 2][1];
    const float a = std::sqrt(3.f / static_cast<float>(c));  // keeps |x| about constant
    mats.push_back(std::make_unique<testing::DevBuf<uint16_t>>(static_cast<size_t>(r) * c));
    mats.back()->upload(testing::rand_bf16(rng, static_cast<size_t>(r) * c, -a, a));
  }
  std::vector<const uint16_t*> hw(kSteps);
  std::vector<int> rows(kSteps), cols(kSteps);
  double bytes = 0;
  for (int m = 0; m < kSteps; ++m) {
    hw[m] = mats[m % (2 * kSets)]->get();
    rows[m] = shape[m % 2][0], cols[m] = shape[m % 2][1];
    bytes += 2.0 * rows[m] * cols[m];
  }
  const auto x0 = testing::rand_f32(rng, kLen, -1.f, 1.f);
  testing::DevBuf<float> act(2 * kLen);
  testing::DevBuf<unsigned> counters(kSteps + 1);
  GemvChainProbe probe{hw.data(), rows.data(), cols.data(),    kSteps,
                       act.get(), kLen,        counters.get(), 0};
  auto chain = [&](cudaStream_t s) { return launch_gemv_chain_pdl(probe, s).ok(); };
  auto persistent = [&](cudaStream_t s, int ring_kb) {
    GemvChainProbe q = probe;
    q.ring_bytes = ring_kb * 1024;
    return cudaMemsetAsync(counters.get(), 0, counters.bytes(), s) == cudaSuccess &&
           launch_gemv_chain_probe(q, s).ok();
  };
  std::vector<float> init(2 * kLen, 0.f);
  std::copy(x0.begin(), x0.end(), init.begin());
  // Correctness first: one run of each from x0, final activations compared bitwise.
  act.upload(init);
  const bool ok1 = chain(0);
  cudaDeviceSynchronize();
  const auto ref = act.download();
  act.upload(init);
  const bool ok2 = persistent(0, 128);
  cudaDeviceSynchronize();
  const auto got = act.download();
  size_t diff = 0;
  for (int i = 0; i < kLen; ++i) diff += std::memcmp(&ref[i], &got[i], sizeof(float)) != 0;
  std::printf(
      "persistent chain: %d steps (5120x2880 / 2880x4096 alternating), %s; final "
      "activations differing from the PDL chain: %zu of %d\n",
      kSteps, ok1 && ok2 ? "both ran" : "LAUNCH FAILED", diff, kLen);
  const double t_chain = testing::graph_ms([&](cudaStream_t s, int) { return chain(s); }, 1, 20);
  testing::print_bench_line("32 PDL launches of gemv_bulk (ring 64 KB), per step", bytes / kSteps,
                            t_chain / kSteps, ceil);
  for (int ring_kb : {64, 128, 192}) {
    const double t =
        testing::graph_ms([&](cudaStream_t s, int) { return persistent(s, ring_kb); }, 1, 20);
    testing::print_bench_line(
        "persistent kernel, ring " + std::to_string(ring_kb) + " KB, per step", bytes / kSteps,
        t / kSteps, ceil);
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
  persistent_chain(ceil);
  return 0;
}

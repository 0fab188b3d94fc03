// flash_attn bench: one gpt-oss layer's attention over a chunk at depth p0 (random inputs,
// identity block table). TFLOP/s count 4 * 64 * nh FLOPs per (query, key) pair actually
// attended (causal, window); GB/s count the distinct K/V bytes of the attended context.
// Usage: flash_attn_bench [case-substring [config index]] (one config: for ncu)
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/common/testing.h"
#include "kernels/flash_attn/cases.h"
#include "kernels/flash_attn/params.h"

int main(int argc, char** argv) {
  using namespace gossamer::kern;
  const double ceil = testing::copy_ceiling_gbs();
  const double tflops_ceil = 790.0;  // dense bf16 GEMM ceiling measured on the H200 (perf-notes)
  std::printf(
      "flash_attn_paged_bf16kv_f32q (copy ceiling %.0f GB/s, bf16 MMA ceiling %.0f TFLOP/s)\n",
      ceil, tflops_ceil);
  std::printf(
      "| case | variant | time | TFLOP/s | %% of %.0f | KV GB/s |\n|---|---|---:|---:|---:|---:|\n",
      tflops_ceil);
  std::mt19937_64 rng(1);
  for (const auto& c : kFlashCases) {
    if (c.in_test) continue;
    if (argc > 1 && !std::strstr(c.name, argv[1])) continue;
    const int bs = c.block_size, D = 64, T = c.tokens, ctx = c.p0 + T;
    const int max_blocks = (ctx + bs - 1) / bs;
    const size_t ncache = static_cast<size_t>(max_blocks) * c.n_kv_heads * bs * D;
    testing::DevBuf<uint16_t> k(ncache), v(ncache);
    testing::DevBuf<float> q(static_cast<size_t>(T) * c.n_heads * D), s(c.n_heads), out(q.size()),
        po(q.size() * c.splits), ml(static_cast<size_t>(T) * c.n_heads * c.splits * 2);
    testing::DevBuf<int32_t> pos(T), table(max_blocks), seq(T);
    std::vector<int32_t> t(max_blocks), ps(T);
    for (int i = 0; i < max_blocks; ++i) t[i] = i;
    for (int i = 0; i < T; ++i) ps[i] = c.p0 + i;
    table.upload(t);
    seq.upload(std::vector<int32_t>(T, 0));  // one sequence: every token uses table row 0
    pos.upload(ps);
    k.upload(testing::rand_bf16(rng, ncache, -1.f, 1.f));
    v.upload(testing::rand_bf16(rng, ncache, -1.f, 1.f));
    q.upload(testing::rand_f32(rng, q.size(), -2.f, 2.f));
    s.upload(testing::rand_f32(rng, s.size(), -2.f, 2.f));
    FlashAttnParams p;
    p.q = q.get();
    p.k_cache = k.get();
    p.v_cache = v.get();
    p.block_table = table.get();
    p.pos = pos.get();
    p.row_seq = seq.get();
    p.sinks = s.get();
    p.out = out.get();
    p.part_o = po.get();
    p.part_ml = ml.get();
    p.tokens = T;
    p.n_heads = c.n_heads;
    p.n_kv_heads = c.n_kv_heads;
    p.block_size = bs;
    p.max_blocks = max_blocks;
    p.num_blocks = max_blocks;
    p.window = c.window;
    p.splits = c.splits;
    const double pairs = flash_attn_pairs(c.p0, T, c.window);
    const int lo0 = c.window > 0 ? std::max(0, c.p0 - c.window + 1) : 0;
    const double kv_bytes = 2.0 * 2 * D * c.n_kv_heads * static_cast<double>(ctx - lo0);
    // (variant, stages, precise, legacy softmax): the session-2 default for A/B, the wide shapes
    // in bf16, then the default in precise mode (legacy and new).
    const int cfgs[][4] = {{2, 3, 0, 1}, {2, 3, 0, 0}, {2, 4, 0, 0}, {3, 3, 0, 0}, {5, 3, 0, 0},
                           {6, 3, 0, 0}, {6, 4, 0, 0}, {7, 3, 0, 0}, {7, 4, 0, 0}, {8, 3, 0, 0},
                           {8, 4, 0, 0}, {8, 5, 0, 0}, {9, 4, 0, 0}, {9, 5, 0, 0}, {10, 4, 0, 0},
                           {0, 0, 1, 1}, {0, 0, 1, 0}};
    for (const auto& cfg : cfgs) {
      if (argc > 2 && &cfg - cfgs != std::atoi(argv[2])) continue;
      p.variant = cfg[0];
      p.stages = cfg[1];
      p.precise = cfg[2] != 0;
      p.legacy_softmax = cfg[3] != 0;
      if (!launch_flash_attn(p, 0).ok()) return 1;
      const double ms = testing::time_ms([&] { (void)launch_flash_attn(p, 0); }, 10);
      const double tf = 4.0 * D * c.n_heads * pairs / (ms * 1e-3) / 1e12;
      std::printf("| %s | v%d s%d %s%s | %.1f us | %.1f | %.1f%% | %.0f |\n", c.name, cfg[0],
                  cfg[1], cfg[2] ? "precise" : "bf16", cfg[3] ? " legacy" : "", ms * 1e3, tf,
                  100.0 * tf / tflops_ceil, kv_bytes / (ms * 1e-3) / 1e9);
    }
  }
  return cudaDeviceSynchronize() == cudaSuccess ? 0 : 1;
}

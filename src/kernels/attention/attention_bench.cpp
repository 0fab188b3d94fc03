// attention bench (decode): each case timed two ways. "host": back-to-back launches from the
// host (launch-bound below ~17 us on the H200: that is the host floor, not the GPU time).
// "graph": 20 launches captured in a CUDA graph (as the decode step runs), replayed; per launch;
// "graph+pdl": the same with programmatic dependent launch (as the runner launches it).
// Configurations: "kK rS" = kernel K, ring depth S, split + combine kernels; "1k kK rS tT" =
// the one-kernel decode (tickets) with split_tiles T.
// Usage: attention_bench [case-substring]
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/attention/cases.h"
#include "kernels/attention/params.h"
#include "kernels/common/testing.h"

namespace gossamer::kern {
namespace {

// Mean ms per launch_attention when replayed from a CUDA graph of 20 launches; < 0 when
// capture fails.
double graph_ms(const AttnParams& p) {
  return testing::graph_ms([&](cudaStream_t st, int) { return launch_attention(p, st).ok(); }, 20,
                           10);
}

struct BenchCfg {
  int kernel, stages;
  bool one_kernel;
  int split_tiles;
};

void bench_case(const AttnCase& c, const BenchCfg& cfg, double ceil) {
  const int kernel = cfg.kernel, stages = cfg.stages;
  const int bs = 16, D = 64, max_blocks = (c.ctx + bs - 1) / bs, nblk = c.batch * max_blocks;
  AttnParams p;
  p.batch = c.batch;
  p.n_heads = c.n_heads;
  p.n_kv_heads = c.n_kv_heads;
  p.block_size = bs;
  p.max_blocks = max_blocks;
  p.num_blocks = nblk;
  p.window = c.window;
  p.kernel = kernel;
  p.stages = stages;
  p.splits = c.splits > 0 ? c.splits : attention_splits(c.batch, c.n_kv_heads, 132);
  const size_t ncache = static_cast<size_t>(nblk) * c.n_kv_heads * bs * D;
  testing::DevBuf<uint16_t> k(ncache), v(ncache);
  testing::DevBuf<float> q(static_cast<size_t>(c.batch) * c.n_heads * D), s(c.n_heads),
      out(q.size()), po(static_cast<size_t>(c.batch) * c.n_heads * p.splits * D),
      ml(po.size() / 32);
  testing::DevBuf<int32_t> pos(c.batch), table(static_cast<size_t>(nblk)),
      tickets(static_cast<size_t>(c.batch) * c.n_kv_heads);
  cudaMemset(tickets.get(), 0, tickets.bytes());
  if (cfg.one_kernel) p.tickets = tickets.get();
  p.split_tiles = cfg.split_tiles;
  std::vector<int32_t> t(nblk), ps(c.batch, c.ctx - 1);
  for (int i = 0; i < nblk; ++i) t[i] = i;
  table.upload(t);
  pos.upload(ps);
  cudaMemset(k.get(), 0, k.bytes());
  cudaMemset(v.get(), 0, v.bytes());
  cudaMemset(q.get(), 0, q.bytes());
  cudaMemset(s.get(), 0, s.bytes());
  p.q = q.get();
  p.k_cache = k.get();
  p.v_cache = v.get();
  p.block_table = table.get();
  p.pos = pos.get();
  p.sinks = s.get();
  p.part_o = po.get();
  p.part_ml = ml.get();
  p.out = out.get();
  const int keys = c.window > 0 ? std::min(c.window, c.ctx) : c.ctx;
  const double bytes = 2.0 * 2 * D * c.n_kv_heads * static_cast<double>(keys) * c.batch;
  const std::string name = (cfg.one_kernel ? "1k t" + std::to_string(cfg.split_tiles) + " " : "") +
                           "k" + std::to_string(kernel) + " r" + std::to_string(stages) + " " +
                           c.name + " s" + std::to_string(p.splits);
  const double ms = testing::time_ms([&] { (void)launch_attention(p, 0); }, 50);
  testing::print_bench_line(name + " host", bytes, ms, ceil);
  for (const bool pdl : {false, true}) {
    if (pdl && !cfg.one_kernel) continue;
    p.pdl = pdl;
    const double gms = graph_ms(p);
    if (gms > 0) {
      testing::print_bench_line(name + (pdl ? " graph+pdl" : " graph"), bytes, gms, ceil);
    } else {
      std::printf("| %-44s | graph capture failed |\n", name.c_str());
    }
  }
}

}  // namespace
}  // namespace gossamer::kern

int main(int argc, char** argv) {
  using namespace gossamer::kern;
  const double ceil = testing::copy_ceiling_gbs();
  std::printf(
      "kernel 0: attn_decode_split_bf16kv_f32q + attn_combine_f32; kernels 1 (precise) / 2 "
      "(bf16): flash_attn narrow + combine; rN: cp.async ring depth (copy ceiling %.0f GB/s)\n",
      ceil);
  const BenchCfg cfgs[] = {{1, 2, false, 0}, {1, 3, true, 4}, {1, 4, true, 4},
                           {1, 3, true, 2},  {1, 3, true, 8}, {2, 3, true, 4}};
  for (const auto& cfg : cfgs)
    for (const auto& c : kAttnCases)
      if (argc < 2 || std::strstr(c.name, argv[1])) bench_case(c, cfg, ceil);
  return 0;
}

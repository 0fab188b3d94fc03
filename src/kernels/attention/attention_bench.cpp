#include <cstdio>
#include <string>
#include <vector>

#include "kernels/attention/cases.h"
#include "kernels/attention/params.h"
#include "kernels/common/testing.h"

int main() {
  using namespace gossamer::kern;
  const double ceil = testing::copy_ceiling_gbs();
  std::printf("attn_decode_split_bf16kv_f32q + attn_combine_f32 (copy ceiling %.0f GB/s)\n", ceil);
  for (const auto& c : kAttnCases) {
    const int bs = 16, D = 64, max_blocks = (c.ctx + bs - 1) / bs, nblk = c.batch * max_blocks;
    AttnParams p;
    p.batch = c.batch;
    p.n_heads = c.n_heads;
    p.n_kv_heads = c.n_kv_heads;
    p.block_size = bs;
    p.max_blocks = max_blocks;
    p.num_blocks = nblk;
    p.window = c.window;
    p.splits = c.splits > 0 ? c.splits : attention_splits(c.batch, c.n_kv_heads, 132);
    const size_t ncache = static_cast<size_t>(nblk) * c.n_kv_heads * bs * D;
    testing::DevBuf<uint16_t> k(ncache), v(ncache);
    testing::DevBuf<float> q(static_cast<size_t>(c.batch) * c.n_heads * D), s(c.n_heads),
        out(q.size()), po(static_cast<size_t>(c.batch) * c.n_heads * p.splits * D),
        ml(po.size() / 32);
    testing::DevBuf<int32_t> pos(c.batch), table(static_cast<size_t>(nblk));
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
    const double ms = testing::time_ms([&] { (void)launch_attention(p, 0); }, 50);
    const int keys = c.window > 0 ? std::min(c.window, c.ctx) : c.ctx;
    const double bytes = 2.0 * 2 * D * c.n_kv_heads * static_cast<double>(keys) * c.batch;
    testing::print_bench_line("attention " + std::string(c.name) + " s" + std::to_string(p.splits),
                              bytes, ms, ceil);
  }
  return 0;
}

// rope_kv_bench: bytes moved (qkv read, q written f32, k/v written bf16) per launch vs the copy
// ceiling, on the prefill shapes.
#include <cstdio>
#include <string>
#include <vector>

#include "kernels/common/testing.h"
#include "kernels/rope_kv/cases.h"
#include "kernels/rope_kv/params.h"

int main() {
  using namespace gossamer::kern;
  const double ceil = testing::copy_ceiling_gbs();
  std::printf("rope_kv_f32 (copy ceiling %.0f GB/s)\n", ceil);
  for (const auto& c : kRopeKvCases) {
    const int units = c.n_heads + 2 * c.n_kv_heads, bs = 16;
    const int blocks = (c.rows + bs - 1) / bs;
    testing::DevBuf<float> qkv(static_cast<size_t>(c.rows) * units * 64),
        q(static_cast<size_t>(c.rows) * c.n_heads * 64);
    testing::DevBuf<uint16_t> k(static_cast<size_t>(blocks) * c.n_kv_heads * bs * 64), v(k.size());
    testing::DevBuf<int32_t> pos(c.rows), table(blocks), seq(c.rows);  // one sequence
    std::vector<int32_t> hp(c.rows), ht(blocks);
    for (int r = 0; r < c.rows; ++r) hp[r] = r;
    for (int b = 0; b < blocks; ++b) ht[b] = b;
    pos.upload(hp);
    table.upload(ht);
    cudaMemset(qkv.get(), 0, qkv.bytes());
    cudaMemset(seq.get(), 0, seq.bytes());
    RopeKvParams p;
    p.qkv = qkv.get();
    p.pos = pos.get();
    p.block_table = table.get();
    p.row_seq = seq.get();
    p.q = q.get();
    p.k_cache = k.get();
    p.v_cache = v.get();
    p.rows = c.rows;
    p.ld = units * 64;
    p.n_heads = c.n_heads;
    p.n_kv_heads = c.n_kv_heads;
    p.block_size = bs;
    p.max_blocks = blocks;
    p.num_blocks = blocks;
    const double ms = testing::time_ms([&] { (void)launch_rope_kv(p, 0); }, 50);
    const double bytes =
        c.rows * (units * 64 * 4.0 + c.n_heads * 64 * 4.0 + c.n_kv_heads * 64 * 4.0);
    testing::print_bench_line(std::string("rope_kv_f32 ") + c.name, bytes, ms, ceil);
  }
  return 0;
}

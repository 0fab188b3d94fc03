#include <cstdio>
#include <string>

#include "kernels/common/testing.h"
#include "kernels/qkv_rope/cases.h"
#include "kernels/qkv_rope/params.h"

int main() {
  using namespace gossamer::kern;
  const double ceil = testing::copy_ceiling_gbs();
  std::printf("qkv_rope_bf16w_f32a (copy ceiling %.0f GB/s)\n", ceil);
  for (const auto& c : kQkvRopeCases) {
    const int units = c.n_heads + 2 * c.n_kv_heads;
    const size_t nw = static_cast<size_t>(units) * kHeadDim * c.hidden;
    testing::DevBuf<uint16_t> w(nw), k(static_cast<size_t>(c.batch) * c.n_kv_heads * 16 * 64),
        v(k.size());
    testing::DevBuf<float> x(static_cast<size_t>(c.batch) * c.hidden),
        q(static_cast<size_t>(c.batch) * c.n_heads * kHeadDim);
    testing::DevBuf<int32_t> pos(c.batch), table(c.batch);
    cudaMemset(w.get(), 0, w.bytes());
    cudaMemset(x.get(), 0, x.bytes());
    cudaMemset(pos.get(), 0, pos.bytes());
    std::vector<int32_t> t(c.batch);
    for (int i = 0; i < c.batch; ++i) t[i] = i;
    table.upload(t);
    QkvRopeParams p;
    p.w = w.get();
    p.x = x.get();
    p.pos = pos.get();
    p.block_table = table.get();
    p.q = q.get();
    p.k_cache = k.get();
    p.v_cache = v.get();
    p.batch = c.batch;
    p.hidden = c.hidden;
    p.n_heads = c.n_heads;
    p.n_kv_heads = c.n_kv_heads;
    p.block_size = 16;
    p.max_blocks = 1;
    p.num_blocks = c.batch;
    for (int variant = 1; variant <= (c.batch == 1 ? 2 : 1); ++variant) {
      p.variant = variant;
      const double ms = testing::time_ms([&] { (void)launch_qkv_rope(p, 0); }, 50);
      testing::print_bench_line(std::string(qkv_rope_variant(p)) + " " + c.name,
                                2.0 * nw + 4.0 * c.batch * c.hidden, ms, ceil);
    }
  }
  return 0;
}

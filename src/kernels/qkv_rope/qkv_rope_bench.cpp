// qkv_rope bench. Part 1: every case, back-to-back launches of one weight matrix (below ~50 MB
// it stays in the L2: warm figures). Part 2, "chain": the decode step's situation for the
// gpt-oss shape at batch 1 (fused RMSNorm, PDL): a CUDA graph of 32 launches over 8 distinct
// weight matrices (236 MB, so each launch streams its weights from DRAM), us per launch, for the
// warp kernel and the bulk kernel at several ring sizes.
#include <cstdio>
#include <string>

#include "kernels/common/testing.h"
#include "kernels/qkv_rope/cases.h"
#include "kernels/qkv_rope/params.h"

namespace gossamer::kern {
namespace {

void chain(double ceil) {
  constexpr int kMats = 8, kLaunches = 32, kHidden = 2880, kHeads = 64, kKv = 8;
  const size_t nw = static_cast<size_t>(kHeads + 2 * kKv) * kHeadDim * kHidden;
  testing::DevBuf<uint16_t> w(nw * kMats), g(kHidden), k(kKv * 16 * 64), v(k.size());
  testing::DevBuf<float> x(kHidden), q(kHeads * kHeadDim);
  testing::DevBuf<int32_t> pos(1), table(1);
  for (auto* b : {&w, &g, &k, &v}) cudaMemset(b->get(), 0, b->bytes());
  for (auto* b : {&x, &q}) cudaMemset(b->get(), 0, b->bytes());
  cudaMemset(pos.get(), 0, pos.bytes());
  cudaMemset(table.get(), 0, table.bytes());
  QkvRopeParams p;
  p.x = x.get();
  p.norm_w = g.get();
  p.pos = pos.get();
  p.block_table = table.get();
  p.q = q.get();
  p.k_cache = k.get();
  p.v_cache = v.get();
  p.batch = p.max_blocks = p.num_blocks = 1;
  p.hidden = kHidden;
  p.n_heads = kHeads;
  p.n_kv_heads = kKv;
  p.pdl = true;
  for (const int ring_kb : {-1, 32, 48, 64, 96}) {  // -1: the warp kernel
    p.variant = ring_kb < 0 ? 1 : 2;
    p.bulk_ring_bytes = ring_kb > 0 ? ring_kb * 1024 : 0;
    const double ms = testing::graph_ms(
        [&](cudaStream_t s, int i) {
          QkvRopeParams c = p;
          c.w = w.get() + nw * (i % kMats);
          return launch_qkv_rope(c, s).ok();
        },
        kLaunches, 10);
    const std::string ring = ring_kb > 0 ? " ring " + std::to_string(ring_kb) + " KB" : "";
    testing::print_bench_line(
        std::string("chain+pdl ") + qkv_rope_variant(p) + ring + " 120b/20b b1 +norm",
        2.0 * nw + 4.0 * kHidden, ms, ceil);
  }
}

}  // namespace
}  // namespace gossamer::kern

int main() {
  using namespace gossamer::kern;
  const double ceil = testing::copy_ceiling_gbs();
  std::printf("qkv_rope (copy ceiling %.0f GB/s)\n", ceil);
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
  chain(ceil);
  return 0;
}

// qkv_rope bench. Part 1: every case, back-to-back launches of one weight matrix (below ~50 MB
// it stays in the L2: warm figures). Part 2, "chain": the decode step's situation for the
// gpt-oss shape at batch 1 (fused RMSNorm, PDL): a CUDA graph of 32 launches over 8 distinct
// weight matrices (236 MB, so each launch streams its weights from DRAM), us per launch, for the
// warp kernel and the bulk kernel at several ring sizes.
#include <cstdio>
#include <string>
#include <vector>

#include "kernels/common/testing.h"
#include "kernels/qkv_rope/cases.h"
#include "kernels/qkv_rope/params.h"

namespace gossamer::kern {
namespace {

// Zeroed device buffers of one shape (`mats` weight matrices side by side, a norm gain, q, a
// one-block paged cache per row with table row b -> block b) and the params that point at them
// (w = the first matrix; no norm, no PDL).
struct BenchSetup {
  size_t nw;
  testing::DevBuf<uint16_t> w, g, k, v;
  testing::DevBuf<float> x, q;
  testing::DevBuf<int32_t> pos, table;
  QkvRopeParams p;

  BenchSetup(int batch, int hidden, int n_heads, int n_kv_heads, int mats)
      : nw(static_cast<size_t>(n_heads + 2 * n_kv_heads) * kHeadDim * hidden),
        w(nw * mats),
        g(hidden),
        k(static_cast<size_t>(batch) * n_kv_heads * 16 * kHeadDim),
        v(k.size()),
        x(static_cast<size_t>(batch) * hidden),
        q(static_cast<size_t>(batch) * n_heads * kHeadDim),
        pos(batch),
        table(batch) {
    for (auto* b : {&w, &g, &k, &v}) cudaMemset(b->get(), 0, b->bytes());
    for (auto* b : {&x, &q}) cudaMemset(b->get(), 0, b->bytes());
    cudaMemset(pos.get(), 0, pos.bytes());
    std::vector<int32_t> t(batch);
    for (int i = 0; i < batch; ++i) t[i] = i;
    table.upload(t);
    p.w = w.get();
    p.x = x.get();
    p.pos = pos.get();
    p.block_table = table.get();
    p.q = q.get();
    p.k_cache = k.get();
    p.v_cache = v.get();
    p.batch = batch;
    p.hidden = hidden;
    p.n_heads = n_heads;
    p.n_kv_heads = n_kv_heads;
    p.block_size = 16;
    p.max_blocks = 1;
    p.num_blocks = batch;
  }
};

void chain(double ceil) {
  constexpr int kMats = 8, kLaunches = 32, kHidden = 2880;
  BenchSetup b(1, kHidden, 64, 8, kMats);
  QkvRopeParams p = b.p;
  p.norm_w = b.g.get();
  p.pdl = true;
  for (const int ring_kb : {-1, 32, 48, 64, 96}) {  // -1: the warp kernel
    p.variant = ring_kb < 0 ? 1 : 2;
    p.bulk_ring_bytes = ring_kb > 0 ? ring_kb * 1024 : 0;
    const double ms = testing::graph_ms(
        [&](cudaStream_t s, int i) {
          QkvRopeParams c = p;
          c.w = b.w.get() + b.nw * (i % kMats);
          return launch_qkv_rope(c, s).ok();
        },
        kLaunches, 10);
    const std::string ring = ring_kb > 0 ? " ring " + std::to_string(ring_kb) + " KB" : "";
    testing::print_bench_line(
        std::string("chain+pdl ") + qkv_rope_variant(p) + ring + " 120b/20b b1 +norm",
        2.0 * b.nw + 4.0 * kHidden, ms, ceil);
  }
}

}  // namespace
}  // namespace gossamer::kern

int main() {
  using namespace gossamer::kern;
  const double ceil = testing::copy_ceiling_gbs();
  std::printf("qkv_rope (copy ceiling %.0f GB/s)\n", ceil);
  for (const auto& c : kQkvRopeCases) {
    BenchSetup b(c.batch, c.hidden, c.n_heads, c.n_kv_heads, 1);
    QkvRopeParams p = b.p;
    for (int variant = 1; variant <= 3; ++variant) {
      p.variant = variant;
      if ((variant == 2 && c.batch > kQkvBulkMaxBatch) ||
          (variant == 3 && !qkv_rope_mma_supported(p)))
        continue;
      const double ms = testing::time_ms([&] { (void)launch_qkv_rope(p, 0); }, 50);
      testing::print_bench_line(std::string(qkv_rope_variant(p)) + " " + c.name,
                                2.0 * b.nw + 4.0 * c.batch * c.hidden, ms, ceil);
    }
  }
  chain(ceil);
  return 0;
}

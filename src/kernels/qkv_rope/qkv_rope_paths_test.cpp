// qkv_rope's kernels against each other (fused RMSNorm vs rmsnorm + qkv_rope; the bulk kernel
// vs the warp kernel, bit for bit). The fp64-reference tests are in qkv_rope_test.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "common/numerics.h"
#include "kernels/common/testing.h"
#include "kernels/qkv_rope/cases.h"
#include "kernels/qkv_rope/params.h"
#include "kernels/qkv_rope/qkv_rope_test_util.h"
#include "kernels/rmsnorm/params.h"

namespace gossamer::kern {
namespace {

using testing::DevBuf;
using testing::shaped_params;

// A fused kernel (1/rms applied to the dot products) against the unfused path: q relative error
// (vector norm) below 1e-6, and every cache value within one bf16 ulp.
void expect_close_outputs(const char* name, const DevBuf<float>& q1, const DevBuf<uint16_t>& k1,
                          const DevBuf<uint16_t>& v1, const DevBuf<float>& q2,
                          const DevBuf<uint16_t>& k2, const DevBuf<uint16_t>& v2) {
  const auto a = q1.download(), b = q2.download();
  const double e = testing::rel_err(b, std::vector<double>(a.begin(), a.end()));
  size_t far = 0, cache = 0;
  for (const auto* pr : {&k1, &v1}) {
    const auto x = pr->download(), y = (pr == &k1 ? k2 : v2).download();
    for (size_t i = 0; i < x.size(); ++i) {
      const float fx = bf16_to_float(x[i]), fy = bf16_to_float(y[i]);
      // One bf16 ulp (<= 2^-7 relative), plus 1e-5 absolute for values near zero, where the
      // ~1e-7 relative difference of the fp32 dot products (values ~10) exceeds a tiny value's ulp.
      far += std::fabs(fx - fy) > 0x1p-7f * std::max(std::fabs(fx), std::fabs(fy)) + 1e-5f;
      cache += x[i] != y[i];
    }
  }
  std::printf("qkv_rope %-24s fused vs unfused: q rel %.3g, %zu cache values differ (one ulp)\n",
              name, e, cache);
  EXPECT_LT(e, 1e-6) << name;
  EXPECT_EQ(far, 0u) << name;
}

void expect_same_outputs(const char* name, const char* what, const DevBuf<float>& q1,
                         const DevBuf<uint16_t>& k1, const DevBuf<uint16_t>& v1,
                         const DevBuf<float>& q2, const DevBuf<uint16_t>& k2,
                         const DevBuf<uint16_t>& v2) {
  const auto a = q1.download(), b = q2.download();
  size_t diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff += std::memcmp(&a[i], &b[i], sizeof(float)) != 0;
  std::printf("qkv_rope %-24s %s: %zu of %zu q values differ\n", name, what, diff, a.size());
  EXPECT_EQ(diff, 0u) << name << " " << what;
  EXPECT_EQ(k1.download(), k2.download()) << name << " " << what;
  EXPECT_EQ(v1.download(), v2.download()) << name << " " << what;
}

// Random device inputs of the bitwise tests (shape from p: batch, hidden, heads, block_size,
// max_blocks; a table row per batch row): weights, bias (optional), x, norm gains, positions in
// [0, pos_range) and the block table, plus two output sets (q, K, V caches; caches poisoned).
// bind() points p at the inputs, out(i, &p) at output set i.
struct QkvTestBufs {
  DevBuf<uint16_t> w, g, k[2], v[2];
  DevBuf<float> x, bias, q[2];
  DevBuf<int32_t> pos, table;
  QkvTestBufs(std::mt19937_64& rng, const QkvRopeParams& p, bool with_bias, int pos_range,
              const std::vector<int32_t>& tab) {
    const size_t units = p.n_heads + 2 * p.n_kv_heads;
    const auto hw = testing::rand_bf16(rng, units * kHeadDim * p.hidden, -.1f, .1f);
    const auto hb = testing::rand_f32(rng, with_bias ? units * kHeadDim : 0, -.5f, .5f);
    const auto hx = testing::rand_f32(rng, static_cast<size_t>(p.batch) * p.hidden, -3.f, 3.f);
    const auto hg = testing::rand_bf16(rng, p.hidden, 0.25f, 2.f);
    std::vector<int32_t> hp(p.batch);
    for (auto& e : hp) e = static_cast<int32_t>(rng() % pos_range);
    const size_t nq = static_cast<size_t>(p.batch) * p.n_heads * kHeadDim;
    const size_t nc = static_cast<size_t>(p.num_blocks) * p.n_kv_heads * p.block_size * kHeadDim;
    w = DevBuf<uint16_t>(hw.size());
    g = DevBuf<uint16_t>(hg.size());
    x = DevBuf<float>(hx.size());
    bias = DevBuf<float>(hb.size());
    pos = DevBuf<int32_t>(hp.size());
    table = DevBuf<int32_t>(tab.size());
    for (int i = 0; i < 2; ++i) {
      q[i] = DevBuf<float>(nq);
      k[i] = DevBuf<uint16_t>(nc);
      v[i] = DevBuf<uint16_t>(nc);
      k[i].poison();
      v[i].poison();
    }
    w.upload(hw);
    g.upload(hg);
    x.upload(hx);
    if (with_bias) bias.upload(hb);
    pos.upload(hp);
    table.upload(tab);
  }
  void bind(QkvRopeParams* p) const {
    p->w = w.get();
    p->bias = bias.size() > 0 ? bias.get() : nullptr;
    p->pos = pos.get();
    p->block_table = table.get();
  }
  void out(int i, QkvRopeParams* p) const {
    p->q = q[i].get();
    p->k_cache = k[i].get();
    p->v_cache = v[i].get();
  }
  void expect_same(const char* name, const char* what) const {
    expect_same_outputs(name, what, q[0], k[0], v[0], q[1], k[1], v[1]);
  }
};

// Fused RMSNorm (+PDL) against rmsnorm + qkv_rope: the fused kernels apply 1/rms to the dot
// products (dot(w, x * g) * inv instead of dot(w, (x * inv) * g)), so q is within 1e-6 of the
// unfused result and a cache value may differ from it only where the rounding to bf16 flips (one
// ulp); at batch 1..4 the bulk kernel (fused) must be bit-identical to the fused warp kernel.
TEST(QkvRope, FusedNormMatchesUnfusedPath) {
  std::mt19937_64 rng(testing::fresh_seed("qkv_rope fused bitwise"));
  for (const auto& c : kQkvRopeCases) {
    const int bs = 16;
    QkvRopeParams p = shaped_params(c.batch, c.hidden, c.n_heads, c.n_kv_heads, bs, 1, c.batch);
    p.variant = 1;  // the warp kernel first (auto would pick the bulk kernel at batch 1)
    std::vector<int32_t> table(c.batch);
    for (int b = 0; b < c.batch; ++b) table[b] = b;
    QkvTestBufs t(rng, p, false, bs, table);
    DevBuf<float> xn(t.x.size());
    t.bind(&p);
    ASSERT_TRUE(
        launch_rmsnorm({t.x.get(), t.g.get(), nullptr, xn.get(), c.batch, c.hidden, 1e-5f}, 0)
            .ok());
    p.x = xn.get();
    t.out(0, &p);
    ASSERT_TRUE(launch_qkv_rope(p, 0).ok()) << c.name;
    p.x = t.x.get();
    p.norm_w = t.g.get();
    p.pdl = true;
    t.out(1, &p);
    ASSERT_TRUE(launch_qkv_rope(p, 0).ok()) << c.name;
    testing::sync_or_die(std::string("qkv_rope fused ") + c.name);
    expect_close_outputs(c.name, t.q[0], t.k[0], t.v[0], t.q[1], t.k[1], t.v[1]);
    if (c.batch > kQkvBulkMaxBatch) continue;
    p.variant = 2;  // the bulk kernel, fused norm + PDL, against the fused warp kernel
    t.out(0, &p);
    t.q[0].poison();
    t.k[0].poison();
    t.v[0].poison();
    ASSERT_TRUE(launch_qkv_rope(p, 0).ok()) << c.name;
    testing::sync_or_die(std::string("qkv_rope bulk fused ") + c.name);
    expect_same_outputs(c.name, "bulk fused vs fused", t.q[1], t.k[1], t.v[1], t.q[0], t.k[0],
                        t.v[0]);
  }
}

// The bulk kernel (batch 1) against the warp kernel at batch 1, bit for bit, on the small
// shapes of the engine tests (hidden 64..192, 1..8 query heads, 1..2 kv heads: fewer pairs than
// SMs), with bias, the fused norm, positions over 4 KV blocks and 8 fresh draws per shape.
TEST(QkvRope, BulkMatchesWarpKernelOnSmallShapes) {
  std::mt19937_64 rng(testing::fresh_seed("qkv_rope bulk small shapes"));
  const int shapes[][3] = {{64, 1, 1},  {64, 4, 2},  {128, 2, 1}, {128, 8, 2},
                           {192, 4, 1}, {192, 2, 2}, {128, 4, 2}, {64, 2, 2}};
  for (const auto& sh : shapes) {
    for (int trial = 0; trial < 8; ++trial) {
      const int bs = 16, mb = 4;
      QkvRopeParams p = shaped_params(1, sh[0], sh[1], sh[2], bs, mb, mb);
      const QkvTestBufs t(rng, p, true, bs * mb, {2, 0, 3, 1});
      t.bind(&p);
      p.x = t.x.get();
      p.norm_w = t.g.get();
      p.eps = 1e-5f;
      p.pdl = true;
      p.variant = 1;
      t.out(0, &p);
      ASSERT_TRUE(launch_qkv_rope(p, 0).ok());
      p.variant = 2;
      t.out(1, &p);
      ASSERT_TRUE(launch_qkv_rope(p, 0).ok());
      testing::sync_or_die("qkv_rope bulk small shapes");
      const int pos0 = t.pos.download()[0];
      const std::string name = "h" + std::to_string(p.hidden) + " " + std::to_string(p.n_heads) +
                               "/" + std::to_string(p.n_kv_heads) + " pos " + std::to_string(pos0);
      t.expect_same(name.c_str(), "bulk vs warp");
    }
  }
}

}  // namespace
}  // namespace gossamer::kern

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "common/numerics.h"
#include "kernels/common/testing.h"
#include "kernels/qkv_rope/cases.h"
#include "kernels/qkv_rope/params.h"
#include "kernels/rmsnorm/params.h"

namespace gossamer::kern {
namespace {

using testing::DevBuf;

// gpt-oss-like YaRN frequencies (theta 150000, factor 32, beta 32/1, original ctx 4096).
void fill_yarn(QkvRopeParams* p) {
  const double theta = 150000, factor = 32, d = kHeadDim;
  auto corr = [&](double rot) {
    return d * std::log(4096 / (rot * 2 * M_PI)) / (2 * std::log(theta));
  };
  const double lo = corr(32), hi = corr(1);
  for (int i = 0; i < kHeadDim / 2; ++i) {
    const double ex = std::pow(theta, -2.0 * i / d);
    const double ramp = std::fmin(std::fmax((i - lo) / (hi - lo), 0.0), 1.0);
    p->inv_freq[i] = ex / factor * ramp + ex * (1 - ramp);
  }
  p->rope_scale = static_cast<float>(0.1 * std::log(factor) + 1);
}

// fused: x is a raw residual row and the RMSNorm (gain norm_w) runs inside the kernel, with PDL
// on; the reference gets the fp64 normed rows (rounded to f32). variant: QkvRopeParams::variant.
void check_case(const QkvRopeCase& c, bool fused, int variant, std::mt19937_64& rng) {
  {
    const int units = c.n_heads + 2 * c.n_kv_heads, bs = 16, max_blocks = 4;
    const int num_blocks = c.batch * max_blocks;
    QkvRopeParams p;
    p.batch = c.batch;
    p.hidden = c.hidden;
    p.n_heads = c.n_heads;
    p.n_kv_heads = c.n_kv_heads;
    p.block_size = bs;
    p.max_blocks = max_blocks;
    p.num_blocks = num_blocks;
    fill_yarn(&p);
    const size_t nw = static_cast<size_t>(units) * kHeadDim * c.hidden;
    auto w = testing::rand_bf16(rng, nw, -0.1f, 0.1f);
    auto bias = testing::rand_f32(rng, static_cast<size_t>(units) * kHeadDim, -0.5f, 0.5f);
    auto x = testing::rand_f32(rng, static_cast<size_t>(c.batch) * c.hidden, -1.f, 1.f);
    auto xref = x;
    const auto gain = testing::rand_bf16(rng, c.hidden, 0.25f, 2.f);
    DevBuf<uint16_t> dg(gain.size());
    dg.upload(gain);
    if (fused) {
      const auto xn = rmsnorm_ref(x, gain, c.batch, c.hidden, 1e-5f);
      for (size_t i = 0; i < x.size(); ++i) xref[i] = static_cast<float>(xn[i]);
      p.norm_w = dg.get();
      p.pdl = true;
    }
    // Positions: within the 4 logical blocks' reach of the table but offset by a large base
    // handled through the table (block index pos / bs must be < max_blocks).
    std::vector<int32_t> pos(c.batch), table(static_cast<size_t>(c.batch) * max_blocks);
    std::uniform_int_distribution<int> dpos(0, max_blocks * bs - 1);
    for (int b = 0; b < c.batch; ++b) pos[b] = dpos(rng);
    // Random permutation of physical blocks: every (row, logical block) gets a distinct one.
    for (size_t i = 0; i < table.size(); ++i) table[i] = static_cast<int32_t>(i);
    std::shuffle(table.begin(), table.end(), rng);
    DevBuf<uint16_t> dw(nw), dk(static_cast<size_t>(num_blocks) * c.n_kv_heads * bs * kHeadDim),
        dv(dk.size());
    DevBuf<float> db(bias.size()), dx(x.size()),
        dq(static_cast<size_t>(c.batch) * c.n_heads * kHeadDim);
    DevBuf<int32_t> dpos_(pos.size()), dt(table.size());
    dw.upload(w);
    db.upload(bias);
    dx.upload(x);
    dpos_.upload(pos);
    dt.upload(table);
    dq.poison();
    dk.poison();
    dv.poison();
    p.w = dw.get();
    p.bias = db.get();
    p.x = dx.get();
    p.pos = dpos_.get();
    p.block_table = dt.get();
    p.q = dq.get();
    p.k_cache = dk.get();
    p.v_cache = dv.get();
    p.variant = variant;
    ASSERT_TRUE(launch_qkv_rope(p, 0).ok()) << c.name;
    testing::sync_or_die(std::string("qkv_rope ") + c.name);
    std::vector<double> kref, vref;
    const auto qref = qkv_rope_ref(w, bias, xref, pos, p, &kref, &vref);
    const double eq = testing::rel_err(dq.download(), qref);
    // Gather the written cache slots.
    const auto kc = dk.download(), vc = dv.download();
    std::vector<float> kg(kref.size()), vg(vref.size());
    for (int b = 0; b < c.batch; ++b) {
      const int blk = table[static_cast<size_t>(b) * max_blocks + pos[b] / bs];
      for (int h = 0; h < c.n_kv_heads; ++h)
        for (int d = 0; d < kHeadDim; ++d) {
          const size_t src =
              ((static_cast<size_t>(blk) * c.n_kv_heads + h) * bs + pos[b] % bs) * kHeadDim + d;
          const size_t dst = (static_cast<size_t>(b) * c.n_kv_heads + h) * kHeadDim + d;
          kg[dst] = bf16_to_float(kc[src]);
          vg[dst] = bf16_to_float(vc[src]);
        }
    }
    const double ek = testing::rel_err(kg, kref), ev = testing::rel_err(vg, vref);
    std::printf("qkv_rope v%d %-24s %-5s rel_err q %.3g k %.3g v %.3g\n", variant, c.name,
                fused ? "fused" : "plain", eq, ek, ev);
    EXPECT_LT(eq, 1e-5) << c.name;
    EXPECT_LT(ek, 4e-3) << c.name;  // bf16 cache: rounding ~2^-9 relative
    EXPECT_LT(ev, 4e-3) << c.name;
  }
}

// Variant 1 (warp GEMV) for every case, 2 (bulk) for batches of 1..4 rows, 3 (mma) for batches
// of 2..8 rows with hidden % 32 == 0.
std::vector<int> variants_for(const QkvRopeCase& c) {
  std::vector<int> v{1};
  if (c.batch <= kQkvBulkMaxBatch) v.push_back(2);
  if (c.batch >= 2 && c.batch <= 8 && c.hidden % 32 == 0) v.push_back(3);
  return v;
}

TEST(QkvRope, MatchesFp64ReferenceAndWritesCache) {
  std::mt19937_64 rng(testing::fresh_seed("qkv_rope"));
  for (const auto& c : kQkvRopeCases)
    for (int v : variants_for(c)) check_case(c, false, v, rng);
}

TEST(QkvRope, FusedRmsNormWithPdlMatchesReference) {
  std::mt19937_64 rng(testing::fresh_seed("qkv_rope fused norm"));
  for (const auto& c : kQkvRopeCases)
    for (int v : variants_for(c)) check_case(c, true, v, rng);
}

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
    QkvRopeParams p;
    p.batch = c.batch;
    p.hidden = c.hidden;
    p.n_heads = c.n_heads;
    p.n_kv_heads = c.n_kv_heads;
    p.block_size = bs;
    p.max_blocks = 1;
    p.num_blocks = c.batch;
    p.variant = 1;  // the warp kernel first (auto would pick the bulk kernel at batch 1)
    fill_yarn(&p);
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
      QkvRopeParams p;
      p.batch = 1;
      p.hidden = sh[0];
      p.n_heads = sh[1];
      p.n_kv_heads = sh[2];
      p.block_size = bs;
      p.max_blocks = mb;
      p.num_blocks = mb;
      fill_yarn(&p);
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

TEST(QkvRope, LargePositionsKeepRopeAccurate) {
  // Positions ~1e5 through a table with enough logical blocks.
  std::mt19937_64 rng(testing::fresh_seed("qkv_rope large pos"));
  QkvRopeParams p;
  p.batch = 2;
  p.hidden = 64;
  p.n_heads = 2;
  p.n_kv_heads = 1;
  p.block_size = 16;
  p.max_blocks = 131072 / 16;
  p.num_blocks = 2;
  fill_yarn(&p);
  const int units = 4;
  auto w = testing::rand_bf16(rng, static_cast<size_t>(units) * kHeadDim * 64, -0.5f, 0.5f);
  auto x = testing::rand_f32(rng, 2 * 64, -1.f, 1.f);
  std::vector<int32_t> pos = {131071, 99999};
  std::vector<int32_t> table(static_cast<size_t>(2) * p.max_blocks, 0);
  table[pos[0] / 16] = 0;
  table[p.max_blocks + pos[1] / 16] = 1;
  DevBuf<uint16_t> dw(w.size()), dk(2 * 16 * 64), dv(2 * 16 * 64);
  DevBuf<float> dx(x.size()), dq(2 * 2 * 64);
  DevBuf<int32_t> dp(2), dt(table.size());
  dw.upload(w);
  dx.upload(x);
  dp.upload(pos);
  dt.upload(table);
  p.w = dw.get();
  p.x = dx.get();
  p.pos = dp.get();
  p.block_table = dt.get();
  p.q = dq.get();
  p.k_cache = dk.get();
  p.v_cache = dv.get();
  ASSERT_TRUE(launch_qkv_rope(p, 0).ok());
  std::vector<double> kref, vref;
  const auto qref = qkv_rope_ref(w, {}, x, pos, p, &kref, &vref);
  const double e = testing::rel_err(dq.download(), qref);
  std::printf("qkv_rope large positions rel_err q %.3g\n", e);
  EXPECT_LT(e, 1e-5);
}

// qkv_rope_bulk is sized for one block per SM; with 76..151 registers two of its blocks would
// fit on one SM, which then streams twice the rows (batch 1 of both models ran 1.3% slower end
// to end). The launch's shared memory keeps it at one. An occupancy query: nothing is launched.
TEST(QkvRope, BulkKeepsOneBlockPerSm) {
  alignas(16) uint16_t w[16] = {};
  alignas(16) float x[16] = {};
  int32_t table[1] = {};
  QkvRopeParams p;
  p.w = w;
  p.x = x;
  p.q = x;
  p.k_cache = p.v_cache = w;
  p.pos = p.block_table = table;
  p.max_blocks = p.num_blocks = 1;
  p.hidden = p.n_heads = p.n_kv_heads = 8;
  p.batch = 1;
  if (!qkv_rope_bulk_supported(p)) GTEST_SKIP() << "needs an sm_90 GPU";
  const int shapes[][3] = {{2880, 64, 8}, {2880, 8, 1}, {8192, 64, 8}, {512, 4, 2}};
  for (const auto& sh : shapes)
    for (const bool norm : {false, true})
      for (int batch = 1; batch <= kQkvBulkMaxBatch; ++batch) {
        p.hidden = sh[0], p.n_heads = sh[1], p.n_kv_heads = sh[2], p.batch = batch;
        p.norm_w = norm ? w : nullptr;
        ASSERT_TRUE(qkv_rope_bulk_supported(p)) << "hidden " << sh[0] << " batch " << batch;
        const auto n = qkv_rope_bulk_blocks_per_sm(p);
        ASSERT_TRUE(n.ok()) << n.status().ToString();
        EXPECT_EQ(*n, 1) << "hidden " << sh[0] << " heads " << sh[1] << " norm " << norm
                         << " batch " << batch;
      }
}

TEST(QkvRope, RejectsBadParams) {
  QkvRopeParams p;
  EXPECT_FALSE(p.validate().ok());
  alignas(16) uint16_t w[16] = {};
  alignas(16) float x[16] = {};
  int32_t table[1] = {};
  p.w = w;
  p.x = x;
  p.q = x;
  p.k_cache = p.v_cache = w;
  p.pos = p.block_table = table;
  p.batch = p.n_heads = p.n_kv_heads = p.max_blocks = p.num_blocks = 1;
  p.hidden = 8;
  EXPECT_TRUE(p.validate().ok()) << p.validate().ToString();
  p.variant = 4;
  EXPECT_NE(p.validate().message().find("variant 4 does not exist"), std::string::npos);
  // Auto: the bulk kernel for 1..4 rows on sm_90, else the mma kernel for 3..8 rows when
  // hidden % 32 == 0, else the warp kernel. {batch, hidden, variant with bulk, without}
  p.variant = 0;
  const int want[][4] = {{1, 2880, 2, 1}, {2, 2880, 2, 1}, {3, 2880, 2, 3}, {4, 2888, 2, 1},
                         {5, 2880, 3, 3}, {8, 2880, 3, 3}, {9, 2880, 1, 1}, {6, 2888, 1, 1}};
  for (const auto& c : want) {
    p.batch = c[0];
    p.hidden = c[1];
    const int v = qkv_rope_bulk_supported(p) ? c[2] : c[3];
    EXPECT_EQ(qkv_rope_resolved_variant(p), v) << "batch " << c[0] << " hidden " << c[1];
  }
}

}  // namespace
}  // namespace gossamer::kern

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "common/numerics.h"
#include "kernels/common/testing.h"
#include "kernels/rope_kv/cases.h"
#include "kernels/rope_kv/params.h"

namespace gossamer::kern {
namespace {

using testing::DevBuf;

// gpt-oss YaRN frequencies (theta 150000, factor 32, beta 32 / 1, original context 4096).
void fill_yarn(RopeKvParams* p) {
  const double theta = 150000, factor = 32, d = 64;
  auto corr = [&](double rot) {
    return d * std::log(4096 / (rot * 2 * M_PI)) / (2 * std::log(theta));
  };
  const double lo = corr(32), hi = corr(1);
  for (int i = 0; i < 32; ++i) {
    const double ex = std::pow(theta, -2.0 * i / d);
    const double ramp = std::fmin(std::fmax((i - lo) / (hi - lo), 0.0), 1.0);
    p->inv_freq[i] = ex / factor * ramp + ex * (1 - ramp);
  }
  p->rope_scale = static_cast<float>(0.1 * std::log(factor) + 1);
}

// A case's rows split evenly over its sequences at positions pos0.., with distinct physical
// blocks in random order for every touched (sequence, logical block).
struct Layout {
  int bs = 16, per = 0, max_blocks = 0, num_blocks = 0;
  std::vector<int32_t> pos, seq, table;
};
Layout make_layout(const RopeKvCase& c, std::mt19937_64& rng) {
  Layout l;
  l.per = (c.rows + c.seqs - 1) / c.seqs;
  l.max_blocks = (c.pos0 + l.per) / l.bs + 1;
  const int first = c.pos0 / l.bs;
  l.num_blocks = c.seqs * (l.max_blocks - first) + 3;
  l.pos.resize(c.rows);
  l.seq.resize(c.rows);
  for (int r = 0; r < c.rows; ++r) {
    l.seq[r] = r / l.per;
    l.pos[r] = c.pos0 + r % l.per;
  }
  std::vector<int32_t> phys(l.num_blocks);
  for (int i = 0; i < l.num_blocks; ++i) phys[i] = i;
  std::shuffle(phys.begin(), phys.end(), rng);
  l.table.assign(static_cast<size_t>(c.seqs) * l.max_blocks, -1);
  for (int s = 0, n = 0; s < c.seqs; ++s)
    for (int b = first; b < l.max_blocks; ++b)
      l.table[static_cast<size_t>(s) * l.max_blocks + b] = phys[n++];
  return l;
}

// Gathers each row's K/V cache slot into [rows, kvh, 64] (as float) and marks the slot as
// accounted for (0xffff); returns the number of cache elements written anywhere else.
size_t gather_slots(const RopeKvCase& c, const Layout& l, std::vector<uint16_t>* kc,
                    std::vector<uint16_t>* vc, std::vector<float>* kg, std::vector<float>* vg) {
  kg->assign(static_cast<size_t>(c.rows) * c.n_kv_heads * 64, 0.f);
  vg->assign(kg->size(), 0.f);
  for (int r = 0; r < c.rows; ++r) {
    const int blk = l.table[static_cast<size_t>(l.seq[r]) * l.max_blocks + l.pos[r] / l.bs];
    for (int h = 0; h < c.n_kv_heads; ++h)
      for (int d = 0; d < 64; ++d) {
        const size_t src =
            ((static_cast<size_t>(blk) * c.n_kv_heads + h) * l.bs + l.pos[r] % l.bs) * 64 + d;
        const size_t dst = (static_cast<size_t>(r) * c.n_kv_heads + h) * 64 + d;
        (*kg)[dst] = bf16_to_float((*kc)[src]);
        (*vg)[dst] = bf16_to_float((*vc)[src]);
        (*kc)[src] = (*vc)[src] = 0xffff;
      }
  }
  auto written = [](const std::vector<uint16_t>& v) {
    return static_cast<size_t>(
        std::count_if(v.begin(), v.end(), [](uint16_t x) { return x != 0xffff; }));
  };
  return written(*kc) + written(*vc);
}

TEST(RopeKv, MatchesFp64ReferenceAndWritesOnlyItsSlots) {
  std::mt19937_64 rng(testing::fresh_seed("rope_kv"));
  for (const auto& c : kRopeKvCases) {
    if (!c.in_test) continue;
    const Layout l = make_layout(c, rng);
    RopeKvParams p;
    p.rows = c.rows;
    p.n_heads = c.n_heads;
    p.n_kv_heads = c.n_kv_heads;
    p.ld = (c.n_heads + 2 * c.n_kv_heads) * 64 + 8;  // padded stride
    p.block_size = l.bs;
    p.max_blocks = l.max_blocks;
    p.num_blocks = l.num_blocks;
    fill_yarn(&p);
    auto qkv = testing::rand_f32(rng, static_cast<size_t>(c.rows) * p.ld, -2.f, 2.f);
    const size_t cache_n = static_cast<size_t>(l.num_blocks) * c.n_kv_heads * l.bs * 64;
    DevBuf<float> dqkv(qkv.size()), dq(static_cast<size_t>(c.rows) * c.n_heads * 64);
    DevBuf<uint16_t> dqb(dq.size()), dk(cache_n), dv(cache_n);
    DevBuf<int32_t> dpos(l.pos.size()), dseq(l.seq.size()), dt(l.table.size());
    dqkv.upload(qkv);
    dpos.upload(l.pos);
    dseq.upload(l.seq);
    dt.upload(l.table);
    dq.poison();
    dqb.poison();
    dk.poison();
    dv.poison();
    p.qkv = dqkv.get();
    p.pos = dpos.get();
    p.row_seq = dseq.get();
    p.block_table = dt.get();
    p.q = dq.get();
    p.q_bf16 = dqb.get();
    p.k_cache = dk.get();
    p.v_cache = dv.get();
    p.pdl = (&c - kRopeKvCases) % 2 == 1;  // both launch paths (PDL: angles before the wait)
    ASSERT_TRUE(launch_rope_kv(p, 0).ok()) << c.name;
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess) << c.name;
    std::vector<double> kref, vref;
    const auto qref = rope_kv_ref(qkv, l.pos, p, &kref, &vref);
    const double eq = testing::rel_err(dq.download(), qref);
    const auto qb = dqb.download();
    std::vector<float> qbf(qb.size()), kg, vg;
    for (size_t i = 0; i < qb.size(); ++i) qbf[i] = bf16_to_float(qb[i]);
    const double eqb = testing::rel_err(qbf, qref);
    auto kc = dk.download(), vc = dv.download();
    const size_t stray = gather_slots(c, l, &kc, &vc, &kg, &vg);
    const double ek = testing::rel_err(kg, kref), ev = testing::rel_err(vg, vref);
    std::printf("rope_kv %-32s rel_err q %.3g q_bf16 %.3g k %.3g v %.3g, stray writes %zu\n",
                c.name, eq, eqb, ek, ev, stray);
    EXPECT_LT(eq, 1e-5) << c.name;
    EXPECT_LT(eqb, 4e-3) << c.name;  // bf16 rounding ~2^-9 relative
    EXPECT_LT(ek, 4e-3) << c.name;
    EXPECT_LT(ev, 4e-3) << c.name;
    EXPECT_EQ(stray, 0u) << c.name << ": cache elements written outside the rows' slots";
  }
}

TEST(RopeKv, RejectsBadParams) {
  RopeKvParams p;
  EXPECT_FALSE(p.validate().ok());
  DevBuf<float> x(64);
  DevBuf<int32_t> i(4);
  DevBuf<uint16_t> k(64);
  p.qkv = x.get();
  p.pos = p.block_table = i.get();
  p.q = x.get();
  p.k_cache = p.v_cache = k.get();
  p.rows = 1;
  p.n_heads = 2;
  p.n_kv_heads = 1;
  p.ld = 200;  // < 4 * 64
  p.max_blocks = p.num_blocks = 1;
  const Status s = launch_rope_kv(p, 0);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("row stride"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace gossamer::kern

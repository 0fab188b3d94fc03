#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "kernels/attention/cases.h"
#include "kernels/attention/decode_mma.h"
#include "kernels/attention/params.h"
#include "kernels/common/testing.h"

namespace gossamer::kern {
namespace {

using testing::DevBuf;

// One random decode problem of a case (host copies for the fp64 reference + device buffers).
struct Problem {
  AttnParams p;
  std::vector<int32_t> pos, table;
  std::vector<uint16_t> kc, vc;
  std::vector<float> q, sinks;
  DevBuf<uint16_t> dk, dv;
  DevBuf<float> dq, ds, dout, dpo, dml;
  DevBuf<int32_t> dp, dt, dtk;

  static size_t ncache(const AttnCase& c) {
    return static_cast<size_t>(c.batch) * ((c.ctx + 15) / 16) * c.n_kv_heads * 16 * 64;
  }
  static size_t nq(const AttnCase& c) { return static_cast<size_t>(c.batch) * c.n_heads * 64; }

  Problem(const AttnCase& c, int splits, std::mt19937_64& rng)
      : dk(ncache(c)),
        dv(ncache(c)),
        dq(nq(c)),
        ds(c.n_heads),
        dout(nq(c)),
        dpo(nq(c) * splits),
        dml(nq(c) / 32 * splits),
        dp(c.batch),
        dt(static_cast<size_t>(c.batch) * ((c.ctx + 15) / 16)),
        dtk(static_cast<size_t>(c.batch) * c.n_kv_heads) {
    const int bs = 16, max_blocks = (c.ctx + bs - 1) / bs;
    p.batch = c.batch;
    p.n_heads = c.n_heads;
    p.n_kv_heads = c.n_kv_heads;
    p.block_size = bs;
    p.max_blocks = max_blocks;
    p.num_blocks = c.batch * max_blocks;
    p.window = c.window;
    p.splits = splits;
    table.resize(dt.size());
    for (size_t i = 0; i < table.size(); ++i) table[i] = static_cast<int32_t>(i);
    std::shuffle(table.begin(), table.end(), rng);
    kc = testing::rand_bf16(rng, ncache(c), -1.f, 1.f);
    vc = testing::rand_bf16(rng, ncache(c), -1.f, 1.f);
    q = testing::rand_f32(rng, nq(c), -2.f, 2.f);
    sinks = testing::rand_f32(rng, c.n_heads, -2.f, 4.f);
    dk.upload(kc);
    dv.upload(vc);
    dq.upload(q);
    ds.upload(sinks);
    dt.upload(table);
    cudaMemset(dtk.get(), 0, dtk.bytes());
    p.q = dq.get();
    p.k_cache = dk.get();
    p.v_cache = dv.get();
    p.block_table = dt.get();
    p.pos = dp.get();
    p.sinks = ds.get();
    p.part_o = dpo.get();
    p.part_ml = dml.get();
    p.out = dout.get();
  }
  // Draws positions in [ctx/2, ctx) and uploads them.
  void draw_positions(const AttnCase& c, std::mt19937_64& rng) {
    pos.resize(c.batch);
    std::uniform_int_distribution<int> dpos(c.ctx / 2, c.ctx - 1);
    for (auto& v : pos) v = dpos(rng);
    dp.upload(pos);
  }
  // Launches with poisoned outputs / scratch; relative error vs the fp64 reference.
  double run() {
    dout.poison();
    dpo.poison();
    dml.poison();
    if (!launch_attention(p, 0).ok()) return INFINITY;
    if (cudaDeviceSynchronize() != cudaSuccess) return INFINITY;
    return testing::rel_err(dout.download(), attention_ref(q, kc, vc, table, pos, sinks, p));
  }
  bool tickets_zero() const {
    const auto t = dtk.download();
    return std::all_of(t.begin(), t.end(), [](int32_t v) { return v == 0; });
  }
};

int case_splits(const AttnCase& c) {
  return c.splits > 0 ? c.splits : attention_splits(c.batch, c.n_kv_heads, 132);
}

// kernel 0: scalar f32 kernel; kernel 1: mma kernel with bf16 hi/lo split inputs (~1e-6);
// kernel 2: mma kernel with bf16 q and P (bf16 rounding: ~2e-3). Split + combine kernels.
TEST(Attention, MatchesFp64Reference) {
  std::mt19937_64 rng(testing::fresh_seed("attention"));
  for (int kernel = 0; kernel < 3; ++kernel)
    for (const auto& c : kAttnCases) {
      if (!c.in_test) continue;
      Problem pr(c, case_splits(c), rng);
      pr.p.kernel = kernel;
      pr.draw_positions(c, rng);
      const double err = pr.run();
      std::printf("attention kernel %d %-38s splits %2d rel_err %.3g\n", kernel, c.name,
                  pr.p.splits, err);
      EXPECT_LT(err, kernel == 0 ? 1e-5 : (kernel == 1 ? 5e-5 : 1e-2))
          << c.name << " kernel " << kernel;
    }
}

// The one-kernel decode (tickets): device-side split count, in-kernel merge. Every case with
// split_tiles 1 (many splits, ticket merge even for short contexts), 4, 64 and 1000
// (one split for most: sink folded in directly; 1000: a CTA spans more block-table entries than
// it stages in shared memory, so it reads the table directly) and 0 (the default rule), both
// precisions, 2, 3 and 4 stages,
// PDL on for some; three
// launches per problem with fresh positions (the split count changes between launches, as it
// does inside a replayed graph) and the tickets must be back to zero after each.
constexpr int kTiles[5] = {1, 4, 64, 1000, 0};

TEST(Attention, OneKernelDecodeMatchesFp64Reference) {
  std::mt19937_64 rng(testing::fresh_seed("attention one-kernel decode"));
  const bool small = std::getenv("GOSSAMER_TEST_SMALL") != nullptr;
  double worst[5] = {0, 0, 0, 0, 0};
  for (int kernel = 1; kernel <= (small ? 1 : 2); ++kernel)
    for (int ti = 0; ti < 5; ++ti)
      for (const auto& c : kAttnCases) {
        const int tiles = kTiles[ti];
        if (!c.in_test || (small && (c.ctx > 2000 || tiles == 64))) continue;
        Problem pr(c, case_splits(c), rng);
        pr.p.kernel = kernel;
        pr.p.split_tiles = tiles;
        pr.p.stages = tiles == 1 ? 2 : tiles == 64 ? 4 : 0;
        pr.p.pdl = tiles == 4;
        pr.p.tickets = pr.dtk.get();
        for (int round = 0; round < (small ? 1 : 3); ++round) {
          pr.draw_positions(c, rng);
          const double err = pr.run();
          std::printf("one-kernel decode kernel %d tiles %2d %-38s zmax %2d rel_err %.3g\n", kernel,
                      tiles, c.name, decode_mma_max_splits(pr.p), err);
          EXPECT_LT(err, kernel == 1 ? 5e-5 : 1e-2) << c.name << " kernel " << kernel;
          EXPECT_TRUE(pr.tickets_zero()) << c.name << " tiles " << tiles;
          if (kernel == 1) worst[ti] = std::max(worst[ti], err);
        }
      }
  std::printf(
      "one-kernel decode precise worst rel_err: tiles 1 %.3g, 4 %.3g, 64 %.3g, "
      "1000 %.3g, default %.3g\n",
      worst[0], worst[1], worst[2], worst[3], worst[4]);
}

// Positions that cross block and tile boundaries one step at a time inside a captured graph:
// the graph is captured once and replayed while the positions advance (as in decode).
TEST(Attention, OneKernelDecodeGraphReplayAsPositionsAdvance) {
  std::mt19937_64 rng(testing::fresh_seed("attention one-kernel graph"));
  const AttnCase c{"b3 64/8 ctx 600", 3, 64, 8, 0, 600, 0, true};
  Problem pr(c, 16, rng);
  pr.p.kernel = 1;
  pr.p.split_tiles = 1;
  pr.p.pdl = true;
  pr.p.tickets = pr.dtk.get();
  cudaStream_t st = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking), cudaSuccess);
  cudaGraph_t g = nullptr;
  cudaGraphExec_t ge = nullptr;
  ASSERT_EQ(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  const bool launched = launch_attention(pr.p, st).ok() && launch_attention(pr.p, st).ok();
  ASSERT_EQ(cudaStreamEndCapture(st, &g), cudaSuccess);
  ASSERT_TRUE(launched);
  ASSERT_EQ(cudaGraphInstantiate(&ge, g, 0), cudaSuccess);
  pr.pos = {0, 62, 190};
  double worst = 0;
  for (int step = 0; step < 70; ++step) {
    pr.dp.upload(pr.pos);
    pr.dout.poison();
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);  // legacy-stream copies before `st`
    ASSERT_EQ(cudaGraphLaunch(ge, st), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(st), cudaSuccess);
    const double err = testing::rel_err(
        pr.dout.download(), attention_ref(pr.q, pr.kc, pr.vc, pr.table, pr.pos, pr.sinks, pr.p));
    worst = std::max(worst, err);
    EXPECT_LT(err, 5e-5) << "step " << step;
    EXPECT_TRUE(pr.tickets_zero()) << "step " << step;
    for (auto& v : pr.pos) v = std::min(v + 1 + step % 3, c.ctx - 1);
  }
  std::printf("one-kernel decode graph replay, 70 steps: worst rel_err %.3g\n", worst);
  cudaGraphExecDestroy(ge);
  cudaGraphDestroy(g);
  cudaStreamDestroy(st);
}

// The device-side split rule (host-callable): every key tile of [lo, pos] is in exactly one
// non-empty run, at most zmax runs, and the default rule's regimes (docs/attention.md).
TEST(Attention, DecodeSplitRule) {
  for (const int window : {0, 128, 1000})
    for (const int zmax : {1, 3, 16, 64})
      for (const int per : {0, 1, 2, 4, 64})
        for (int pos = 0; pos < 20000; pos += 1 + pos / 64) {
          const DecodeSplit d = decode_split(pos, window, zmax, per);
          const int lo = window > 0 ? std::max(0, pos - window + 1) : 0;
          ASSERT_EQ(d.lo, lo);
          ASSERT_EQ(d.tb0, lo / 64);
          ASSERT_EQ(d.n, pos / 64 - lo / 64 + 1);
          ASSERT_GE(d.ns, 1);
          ASSERT_LE(d.ns, zmax);
          ASSERT_GE(d.ns * d.chunk, d.n) << pos;        // every tile covered
          ASSERT_LT((d.ns - 1) * d.chunk, d.n) << pos;  // no empty run
          if (per > 0) {
            ASSERT_LE(d.ns, (d.n + per - 1) / per) << pos;
          }
        }
  // Default rule: one split up to 3 tiles (the 128-token window), 2 tiles per split at ctx 300
  // and 1024, 4 at 4096, 8 at 16384.
  EXPECT_EQ(decode_split(999, 128, 64, 0).ns, 1);
  EXPECT_EQ(decode_split(191, 0, 64, 0).ns, 1);
  EXPECT_EQ(decode_split(299, 0, 64, 0).chunk, 2);
  EXPECT_EQ(decode_split(1023, 0, 64, 0).ns, 8);
  EXPECT_EQ(decode_split(4095, 0, 64, 0).ns, 16);
  EXPECT_EQ(decode_split(16383, 0, 64, 0).ns, 32);
  EXPECT_EQ(decode_split(-1, 0, 64, 0).ns, 1);  // no keys: one CTA writes the sink-only zeros
}

TEST(Attention, RejectsBadParams) {
  AttnParams p;
  EXPECT_FALSE(p.validate().ok());
  p.kernel = 3;
  EXPECT_FALSE(p.validate().ok());
}

}  // namespace
}  // namespace gossamer::kern

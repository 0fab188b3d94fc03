#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iterator>
#include <string>

#include "kernels/attention/params.h"
#include "kernels/common/testing.h"
#include "kernels/flash_attn/cases.h"
#include "kernels/flash_attn/params.h"

namespace gossamer::kern {
namespace {

using testing::DevBuf;
constexpr int kD = 64;

// Host inputs of one case: sequences with p0_s cached positions followed by `tokens` new ones
// (rows of a sequence contiguous), K/V random over a shuffled set of physical blocks.
struct Inputs {
  std::vector<int32_t> pos, row_seq, table;
  std::vector<uint16_t> kc, vc;
  std::vector<float> q, sinks;
  int tokens = 0, max_blocks = 0, num_blocks = 0, block_size = 16;
};

Inputs make_inputs(const FlashCase& c, std::mt19937_64& rng) {
  Inputs in;
  const int bs = c.block_size;
  in.block_size = bs;
  std::vector<int> p0(c.seqs);
  std::uniform_int_distribution<int> dp0(c.p0 / 2, c.p0);
  for (int s = 0; s < c.seqs; ++s) {
    p0[s] = dp0(rng);
    const int nb = (p0[s] + c.tokens + bs - 1) / bs;
    in.max_blocks = std::max(in.max_blocks, nb + 1);
    in.num_blocks += nb;
  }
  std::vector<int32_t> phys(in.num_blocks);
  for (int i = 0; i < in.num_blocks; ++i) phys[i] = i;
  std::shuffle(phys.begin(), phys.end(), rng);
  in.table.assign(static_cast<size_t>(c.seqs) * in.max_blocks, 1 << 30);  // unused: invalid id
  size_t next = 0;
  for (int s = 0; s < c.seqs; ++s) {
    for (int b = 0; b < (p0[s] + c.tokens + bs - 1) / bs; ++b)
      in.table[static_cast<size_t>(s) * in.max_blocks + b] = phys[next++];
    for (int t = 0; t < c.tokens; ++t) {
      in.pos.push_back(p0[s] + t);
      in.row_seq.push_back(s);
    }
  }
  in.tokens = c.seqs * c.tokens;
  const size_t ncache = static_cast<size_t>(in.num_blocks) * c.n_kv_heads * bs * kD;
  in.kc = testing::rand_bf16(rng, ncache, -1.f, 1.f);
  in.vc = testing::rand_bf16(rng, ncache, -1.f, 1.f);
  in.q = testing::rand_f32(rng, static_cast<size_t>(in.tokens) * c.n_heads * kD, -c.q_amp, c.q_amp);
  in.sinks = testing::rand_f32(rng, c.n_heads, -c.sink_amp, c.sink_amp);
  return in;
}

// Runs the kernel; returns the output [tokens, nh * 64].
std::vector<float> run_gpu(const FlashCase& c, const Inputs& in, bool precise, int variant,
                           int stages, bool legacy = false) {
  DevBuf<uint16_t> dk(in.kc.size()), dv(in.vc.size());
  DevBuf<float> dq(in.q.size()), ds(in.sinks.size()), dout(in.q.size()),
      dpo(in.q.size() * c.splits), dml(static_cast<size_t>(in.tokens) * c.n_heads * c.splits * 2);
  DevBuf<int32_t> dp(in.pos.size()), drs(in.row_seq.size()), dt(in.table.size());
  dk.upload(in.kc);
  dv.upload(in.vc);
  dq.upload(in.q);
  ds.upload(in.sinks);
  dp.upload(in.pos);
  drs.upload(in.row_seq);
  dt.upload(in.table);
  dout.poison();
  dpo.poison();
  dml.poison();
  FlashAttnParams p;
  p.q = dq.get();
  p.k_cache = dk.get();
  p.v_cache = dv.get();
  p.block_table = dt.get();
  p.row_seq = drs.get();
  p.pos = dp.get();
  p.sinks = ds.get();
  p.out = dout.get();
  p.part_o = dpo.get();
  p.part_ml = dml.get();
  p.tokens = in.tokens;
  p.n_heads = c.n_heads;
  p.n_kv_heads = c.n_kv_heads;
  p.block_size = in.block_size;
  p.max_blocks = in.max_blocks;
  p.num_blocks = in.num_blocks;
  p.window = c.window;
  p.splits = c.splits;
  p.variant = variant;
  p.stages = stages;
  p.precise = precise;
  p.legacy_softmax = legacy;
  const Status st = launch_flash_attn(p, 0);
  EXPECT_TRUE(st.ok()) << c.name << ": " << st.ToString();
  testing::sync_or_die(std::string(c.name) + " variant " + std::to_string(variant) + " stages " +
                       std::to_string(stages) + (precise ? " precise" : " bf16"));
  return dout.download();
}

// fp64 reference (kernels/attention attention_ref) on every check_every-th token of each
// sequence plus its last: the selected tokens and their reference rows.
struct Ref {
  std::vector<int> sel;
  std::vector<double> out;
};

Ref reference(const FlashCase& c, const Inputs& in) {
  const size_t row = static_cast<size_t>(c.n_heads) * kD;
  Ref ref;
  for (int t = 0; t < in.tokens; ++t)
    if ((t % c.tokens) % c.check_every == 0 || t % c.tokens == c.tokens - 1) ref.sel.push_back(t);
  std::vector<float> q;
  std::vector<int32_t> pos, table;
  for (int t : ref.sel) {
    q.insert(q.end(), in.q.begin() + t * row, in.q.begin() + (t + 1) * row);
    pos.push_back(in.pos[t]);
    const auto* tr = &in.table[static_cast<size_t>(in.row_seq[t]) * in.max_blocks];
    table.insert(table.end(), tr, tr + in.max_blocks);
  }
  AttnParams shape;
  shape.batch = static_cast<int>(ref.sel.size());
  shape.n_heads = c.n_heads;
  shape.n_kv_heads = c.n_kv_heads;
  shape.block_size = in.block_size;
  shape.max_blocks = in.max_blocks;
  shape.num_blocks = in.num_blocks;
  shape.window = c.window;
  ref.out = attention_ref(q, in.kc, in.vc, table, pos, in.sinks, shape);
  return ref;
}

// Relative error of the selected rows; +inf if any output (selected or not) is not finite.
double compare(const FlashCase& c, const Ref& ref, const std::vector<float>& gpu) {
  if (!std::all_of(gpu.begin(), gpu.end(), [](float v) { return std::isfinite(v); })) {
    return INFINITY;
  }
  const size_t row = static_cast<size_t>(c.n_heads) * kD;
  std::vector<float> got;
  for (int t : ref.sel) got.insert(got.end(), gpu.begin() + t * row, gpu.begin() + (t + 1) * row);
  const double err = testing::rel_err(got, ref.out);
  if (err > 0.1) {  // diagnosis of a gross mismatch: the first dims of the first checked row
    std::printf("  first checked row, dims 0..7: gpu");
    for (int d = 0; d < 8; ++d) std::printf(" %.4f", got[d]);
    std::printf(" | ref");
    for (int d = 0; d < 8; ++d) std::printf(" %.4f", ref.out[d]);
    std::printf("\n");
  }
  return err;
}

TEST(FlashAttn, MatchesFp64Reference) {
  std::mt19937_64 rng(testing::fresh_seed("flash_attn"));
  double worst[2] = {0, 0};
  // GOSSAMER_TEST_SMALL=1 (sanitizer runs): only chunks of <= 300 tokens at depth <= 1000.
  const bool small = std::getenv("GOSSAMER_TEST_SMALL") != nullptr;
  for (const auto& c : kFlashCases) {
    if (!c.in_test) continue;
    if (small && (c.seqs * c.tokens > 300 || c.p0 > 1000)) continue;
    const Inputs in = make_inputs(c, rng);
    const Ref ref = reference(c, in);
    // The case's variant, then (auto cases) the mbarrier-ring shapes 6, 7 and wgmma 8..10 too.
    const int variants[] = {c.variant,
                            c.variant == 0 ? 6 : -1,
                            c.variant == 0 ? 7 : -1,
                            c.variant == 0 ? 8 : -1,
                            c.variant == 0 ? 9 : -1,
                            c.variant == 0 ? 10 : -1};
    for (const int v : variants) {
      if (v < 0) continue;
      for (int precise = 0; precise < (v >= 8 ? 1 : 2); ++precise) {  // 8, 9: bf16 only
        const double err = compare(c, ref, run_gpu(c, in, precise != 0, v, 0));
        worst[precise] = std::max(worst[precise], err);
        std::printf("flash_attn %-40s v%d %s rel_err %.3g\n", c.name, v,
                    precise ? "precise" : "bf16   ", err);
        // bf16 q and P: ~2^-9 relative per input, averaged over the keys. NaN/unwritten: inf.
        EXPECT_LT(err, precise ? 5e-5 : 1e-2)
            << c.name << " variant " << v << (precise ? " precise" : " bf16");
      }
    }
  }
  std::printf("flash_attn worst rel_err: bf16 %.3g, precise %.3g\n", worst[0], worst[1]);
}

// Every CTA shape (variant 1..10) and ring depth (2..5) on a few structurally different cases,
// with the current softmax and (variant 2) the session-2 one kept for A/B timing.
TEST(FlashAttn, AllVariantsMatch) {
  std::mt19937_64 rng(testing::fresh_seed("flash_attn variants"));
  const char* names[] = {"T7 64/8 p0 150 sliding 128", "3 seqs x T100 64/8 p0 500 full",
                         "5 seqs x T13 12/3 (G=4) sliding 64",
                         "T40 64/8 p0 3000 sliding 128 splits 5",
                         "2 seqs x T90 64/8 p0 300 sliding 128, blocks of 5"};
  double worst[2] = {0, 0};
  for (const auto& c : kFlashCases) {
    if (std::find_if(std::begin(names), std::end(names),
                     [&](const char* n) { return std::string(n) == c.name; }) == std::end(names)) {
      continue;
    }
    const Inputs in = make_inputs(c, rng);
    const Ref ref = reference(c, in);
    for (int variant = 1; variant <= 11; ++variant)  // 11: variant 2 with the legacy softmax
      for (int stages = 2; stages <= 5; ++stages)
        for (int precise = 0; precise < (variant >= 8 && variant <= 10 ? 1 : 2); ++precise) {
          const double err = compare(
              c, ref,
              run_gpu(c, in, precise != 0, variant == 11 ? 2 : variant, stages, variant == 11));
          worst[precise] = std::max(worst[precise], err);
          EXPECT_LT(err, precise ? 5e-5 : 1e-2)
              << c.name << " variant " << variant << " stages " << stages << " precise " << precise;
        }
  }
  std::printf("flash_attn all variants worst rel_err: bf16 %.3g, precise %.3g\n", worst[0],
              worst[1]);
}

TEST(FlashAttn, RejectsBadParams) {
  FlashAttnParams p;
  EXPECT_FALSE(p.validate().ok());
  float f = 0;
  uint16_t h = 0;
  int32_t i = 0;
  p.q = p.sinks = p.out = &f;
  p.k_cache = p.v_cache = &h;
  p.block_table = p.pos = &i;
  p.tokens = 4;
  p.n_heads = 64;
  p.n_kv_heads = 8;
  p.max_blocks = p.num_blocks = 1;
  EXPECT_TRUE(p.validate().ok());
  p.splits = 2;  // no scratch
  EXPECT_FALSE(p.validate().ok());
  p.splits = 1;
  p.n_heads = 60;  // not a multiple of 8
  EXPECT_FALSE(p.validate().ok());
  p.n_heads = 8 * 17;  // G = 17 > 16
  EXPECT_FALSE(p.validate().ok());
  p.n_heads = 64;
  p.variant = kFlashAttnMaxVariant + 1;
  EXPECT_FALSE(p.validate().ok());
  p.variant = 8;
  p.precise = true;  // wgmma variants: bf16 only
  EXPECT_FALSE(p.validate().ok());
  p.precise = false;
  p.variant = 1;
  p.stages = 1;
  EXPECT_FALSE(p.validate().ok());
}

}  // namespace
}  // namespace gossamer::kern

// CPU reference engine tests: the paged runner against a naive cache-free forward
// (engine_test_util) on random in-memory models: prefill, decode, mixed batches, dropped sliding
// blocks, copy_block, bad inputs and activation dumps.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <random>

#include "common/npy.h"
#include "engine/cpu_runner.h"
#include "engine/engine_test_common.h"
#include "engine/engine_test_util.h"

namespace gossamer {
namespace {

using enginetest::fresh_seed;
using enginetest::rel_err;
using testing::make_tiny_model;
using testing::naive_forward;
using testing::TinySpec;

struct Seq {
  std::vector<int32_t> full, sliding;  // block tables
};

KvCacheSpec small_spec() {
  return KvCacheSpec{2, 64, 64};
}

std::unique_ptr<ModelRunner> runner_for(const testing::TinyModel& tm, KvCacheSpec spec,
                                        int threads = 2) {
  auto r = make_cpu_runner(tm.model, spec, threads);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return std::move(r).value();
}

std::vector<int32_t> random_tokens(std::mt19937_64& rng, int64_t n, int64_t vocab) {
  std::uniform_int_distribution<int32_t> ud(0, static_cast<int32_t>(vocab - 1));
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (auto& v : t) v = ud(rng);
  return t;
}

// Whole prompt in one chunk (kAll) and token-by-token decode both match the naive forward, for
// MXFP4 and bf16 experts, GQA 2:1 and 4:1, sequences longer than the window and the YaRN context.
TEST(CpuRunner, PrefillAndDecodeMatchNaiveForward) {
  std::mt19937_64 rng(fresh_seed("CpuRunner.PrefillAndDecode"));
  for (int variant = 0; variant < 3; ++variant) {
    TinySpec s;
    s.mxfp4 = variant != 1;
    s.kv_heads = variant == 2 ? 1 : 2;
    s.layers = 3;
    auto tm = make_tiny_model(s, rng);
    const int64_t T = 13;
    auto toks = random_tokens(rng, T, s.vocab);
    const auto ref = naive_forward(*tm.model, toks);
    Seq q;
    for (int32_t b = 0; b < 7; ++b) {
      q.full.push_back(10 + b);  // scattered physical blocks
      q.sliding.push_back(40 - b);
    }
    auto r1 = runner_for(tm, small_spec(), 3);
    SeqChunk ch{toks, 0, q.full, q.sliding, LogitsMode::kAll};
    StepOutput out;
    ASSERT_TRUE(r1->step({&ch, 1}, &out).ok());
    ASSERT_EQ(out.rows, T);
    const double e_prefill = rel_err(out.logits, ref);
    auto r2 = runner_for(tm, small_spec(), 1);
    std::vector<float> dec;
    for (int64_t t = 0; t < T; ++t) {
      SeqChunk d{std::span<const int32_t>(&toks[t], 1), t, q.full, q.sliding, LogitsMode::kLast};
      ASSERT_TRUE(r2->step({&d, 1}, &out).ok());
      dec.insert(dec.end(), out.logits.begin(), out.logits.end());
    }
    const double e_decode = rel_err(dec, ref);
    std::printf("variant %d: prefill rel err %.3g, decode rel err %.3g\n", variant, e_prefill,
                e_decode);
    EXPECT_LT(e_prefill, 1e-5);
    EXPECT_LT(e_decode, 1e-5);
    for (int64_t t = 0; t < T; ++t) {
      EXPECT_LT(rel_err(dec, ref, t * s.vocab, s.vocab), 1e-5) << "position " << t;
    }
  }
}

// kv_bf16 (the GPU's K/V storage, for GPU tests) rounds the cache and nothing else: the logits
// move away from the fp32 naive forward by a bf16-sized amount (2^-9 relative per element ->
// ~1e-3 on the logits), far more than the fp32 runner's ~1e-7 and far less than a broken forward.
TEST(CpuRunner, KvBf16OptionRoundsTheCache) {
  std::mt19937_64 rng(fresh_seed("CpuRunner.KvBf16"));
  TinySpec s;
  s.layers = 2;
  auto tm = make_tiny_model(s, rng);
  const int64_t T = 11;
  auto toks = random_tokens(rng, T, s.vocab);
  const auto ref = naive_forward(*tm.model, toks);
  Seq q;
  for (int32_t b = 0; b < 6; ++b) {
    q.full.push_back(b);
    q.sliding.push_back(20 + b);
  }
  CpuRunnerOptions o;
  o.threads = 2;
  o.kv_bf16 = true;
  auto r = make_cpu_runner(tm.model, small_spec(), o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  SeqChunk ch{toks, 0, q.full, q.sliding, LogitsMode::kAll};
  StepOutput out;
  ASSERT_TRUE((*r)->step({&ch, 1}, &out).ok());
  // Per-position errors; the median is robust to a near-tied routing choice flipping (one row).
  std::vector<double> e;
  for (int64_t t = 0; t < T; ++t) e.push_back(rel_err(out.logits, ref, t * s.vocab, s.vocab));
  std::sort(e.begin(), e.end());
  const double median = e[e.size() / 2];
  std::printf("kv_bf16 vs naive fp32 forward: median row rel err %.3g, max %.3g\n", median,
              e.back());
  EXPECT_GT(median, 1e-5);
  EXPECT_LT(median, 2e-2);
}

// Two sequences in one step (a prefill chunk and a decode token), with sliding blocks that fell
// out of the window marked kNoBlock, equal running them alone.
TEST(CpuRunner, MixedBatchAndDroppedSlidingBlocks) {
  std::mt19937_64 rng(fresh_seed("CpuRunner.MixedBatch"));
  TinySpec s;
  auto tm = make_tiny_model(s, rng);
  auto a = random_tokens(rng, 11, s.vocab), b = random_tokens(rng, 6, s.vocab);
  auto ref_a = naive_forward(*tm.model, a), ref_b = naive_forward(*tm.model, b);
  auto r = runner_for(tm, small_spec());
  Seq qa{{0, 1, 2, 3, 4, 5}, {6, 7, 8, 9, 10, 11}}, qb{{20, 21, 22}, {30, 31, 32}};
  StepOutput out;
  // Step 1: prefill a[0..9) and b[0..5).
  SeqChunk c1[2] = {
      {std::span<const int32_t>(a.data(), 9), 0, qa.full, qa.sliding, LogitsMode::kAll},
      {std::span<const int32_t>(b.data(), 5), 0, qb.full, qb.sliding, LogitsMode::kLast}};
  ASSERT_TRUE(r->step(c1, &out).ok());
  ASSERT_EQ(out.rows, 10);
  EXPECT_LT(rel_err(out.logits, ref_a, 0, 9 * s.vocab), 1e-5);
  std::vector<float> last_b(out.logits.begin() + 9 * s.vocab, out.logits.end());
  EXPECT_LT(
      rel_err(last_b, std::vector<float>(ref_b.begin() + 4 * s.vocab, ref_b.begin() + 5 * s.vocab)),
      1e-5);
  // Window 4, block size 2: position 9 needs positions 6..9 only, so blocks 0..2 may be gone.
  qa.sliding[0] = qa.sliding[1] = qa.sliding[2] = kNoBlock;
  SeqChunk c2[2] = {{std::span<const int32_t>(&b[5], 1), 5, qb.full, qb.sliding, LogitsMode::kLast},
                    {std::span<const int32_t>(&a[9], 2), 9, qa.full, qa.sliding, LogitsMode::kAll}};
  ASSERT_TRUE(r->step(c2, &out).ok());
  ASSERT_EQ(out.rows, 3);
  EXPECT_LT(rel_err(out.logits, std::vector<float>(ref_b.end() - s.vocab, ref_b.end()), 0, s.vocab),
            1e-5);
  EXPECT_LT(rel_err(std::vector<float>(out.logits.begin() + s.vocab, out.logits.end()),
                    std::vector<float>(ref_a.begin() + 9 * s.vocab, ref_a.end())),
            1e-5);
  // A dropped block that the window still needs is an error, not garbage.
  qa.sliding[4] = kNoBlock;
  SeqChunk c3{std::span<const int32_t>(&a[10], 1), 11, qa.full, qa.sliding, LogitsMode::kLast};
  Status st = r->step({&c3, 1}, &out);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("sliding block table entry 4"), std::string::npos) << st.message();
}

// copy_block duplicates a prefix: continuing from the copy equals continuing the original.
TEST(CpuRunner, CopyBlockSharesPrefix) {
  std::mt19937_64 rng(fresh_seed("CpuRunner.CopyBlock"));
  TinySpec s;
  s.sliding_window = 64;
  auto tm = make_tiny_model(s, rng);
  auto toks = random_tokens(rng, 5, s.vocab);
  auto ref = naive_forward(*tm.model, toks);
  auto r = runner_for(tm, small_spec());
  Seq a{{0, 1, 2}, {0, 1, 2}};
  StepOutput out;
  SeqChunk p{std::span<const int32_t>(toks.data(), 3), 0, a.full, a.sliding, LogitsMode::kNone};
  ASSERT_TRUE(r->step({&p, 1}, &out).ok());
  EXPECT_EQ(out.rows, 0);
  // Sequence b shares block 0 and gets a copy of the half-filled block 1 in block 9.
  ASSERT_TRUE(r->copy_block(false, 1, 9).ok());
  ASSERT_TRUE(r->copy_block(true, 1, 9).ok());
  Seq b{{0, 9, 10}, {0, 9, 10}};
  SeqChunk d{std::span<const int32_t>(&toks[3], 2), 3, b.full, b.sliding, LogitsMode::kAll};
  ASSERT_TRUE(r->step({&d, 1}, &out).ok());
  EXPECT_LT(rel_err(out.logits, std::vector<float>(ref.begin() + 3 * s.vocab, ref.end())), 1e-5);
  EXPECT_FALSE(r->copy_block(false, 0, 64).ok());
  EXPECT_FALSE(r->copy_block(true, -1, 0).ok());
}

TEST(CpuRunner, BadInputsAreErrors) {
  std::mt19937_64 rng(fresh_seed("CpuRunner.BadInputs"));
  TinySpec s;
  auto tm = make_tiny_model(s, rng);
  auto r = runner_for(tm, small_spec());
  std::vector<int32_t> toks{1, 2, 99};
  std::vector<int32_t> blocks{0, 1};
  StepOutput out;
  SeqChunk c{toks, 0, blocks, blocks, LogitsMode::kLast};
  Status st = r->step({&c, 1}, &out);
  EXPECT_NE(st.message().find("id 99 outside the vocabulary"), std::string::npos) << st.message();
  toks[2] = 3;
  c.tokens = toks;
  c.pos0 = 3;  // positions 3..5 need 3 blocks
  st = r->step({&c, 1}, &out);
  EXPECT_NE(st.message().find("block table has 2 entries"), std::string::npos) << st.message();
  EXPECT_FALSE(r->step({&c, 1}, nullptr).ok());
  // Weight/config mismatches name the tensor.
  auto bad = make_tiny_model(s, rng);
  bad.model->weights.layers[1].k_w.shape = {s.kv_heads * s.head_dim + 1, s.hidden};
  auto br = make_cpu_runner(bad.model, small_spec(), 1);
  ASSERT_FALSE(br.ok());
  EXPECT_NE(br.status().message().find("model.layers.1.self_attn.k_proj.weight"),
            std::string::npos);
  EXPECT_FALSE(make_cpu_runner(tm.model, KvCacheSpec{16, 0, 4}, 1).ok());
}

TEST(CpuRunner, DumpsNamedActivations) {
  std::mt19937_64 rng(fresh_seed("CpuRunner.Dump"));
  TinySpec s;
  auto tm = make_tiny_model(s, rng);
  const auto dir =
      std::filesystem::temp_directory_path() / ("gossamer_dump_" + std::to_string(rng()));
  CpuRunnerOptions o;
  o.threads = 2;
  o.dump_dir = dir.string();
  auto r = make_cpu_runner(tm.model, small_spec(), o);
  ASSERT_TRUE(r.ok());
  auto toks = random_tokens(rng, 4, s.vocab);
  std::vector<int32_t> blocks{0, 1};
  SeqChunk c{toks, 0, blocks, blocks, LogitsMode::kAll};
  StepOutput out;
  ASSERT_TRUE((*r)->step({&c, 1}, &out).ok());
  auto q = read_npy_f32((dir / "s0.L01.q_rope.npy").string());
  ASSERT_TRUE(q.ok()) << q.status().ToString();
  EXPECT_EQ(q->shape, (std::vector<int64_t>{4, s.heads, s.head_dim}));
  auto lg = read_npy_f32((dir / "s0.logits.npy").string());
  ASSERT_TRUE(lg.ok());
  EXPECT_EQ(lg->data, out.logits);
  auto ids = read_npy_f32((dir / "s0.L00.expert_ids.npy").string());
  ASSERT_TRUE(ids.ok());
  for (float v : ids->data) EXPECT_TRUE(v >= 0 && v < s.experts && v == std::floor(v));
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace gossamer

// CPU reference engine tests: ops against direct loops / hand-checked values, and the paged
// runner against a naive cache-free forward (engine_test_util) on random in-memory models.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <numbers>
#include <numeric>
#include <random>

#include "common/npy.h"
#include "common/numerics.h"
#include "engine/cpu_ops.h"
#include "engine/cpu_runner.h"
#include "engine/engine_test_util.h"
#include "engine/rope.h"

namespace gossamer {
namespace {

using testing::make_tiny_model;
using testing::naive_forward;
using testing::TinySpec;

uint64_t fresh_seed(const char* what) {
  const uint64_t s = (static_cast<uint64_t>(std::random_device{}()) << 32) ^ std::random_device{}();
  std::printf("[seed] %s: %llu\n", what, static_cast<unsigned long long>(s));
  return s;
}

double rel_err(const std::vector<float>& a, const std::vector<float>& b, size_t off = 0,
               size_t n = 0) {
  if (n == 0) n = b.size() - off;
  double num = 0, den = 0;
  for (size_t i = off; i < off + n; ++i) {
    num += (static_cast<double>(a[i]) - b[i]) * (static_cast<double>(a[i]) - b[i]);
    den += static_cast<double>(b[i]) * b[i];
  }
  return std::sqrt(num / den);
}

TEST(Rope, PlainFrequenciesHandChecked) {
  ModelConfig c;
  c.head_dim = 4;
  c.rope_theta = 10000.0;
  c.rope_scaling.rope_type = "none";
  auto t = make_rope_table(c);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  ASSERT_EQ(t->inv_freq.size(), 2u);
  EXPECT_DOUBLE_EQ(t->inv_freq[0], 1.0);
  EXPECT_DOUBLE_EQ(t->inv_freq[1], 0.01);  // 10000^(-2/4)
  float cs[2], sn[2];
  rope_cos_sin(*t, 3, cs, sn);
  EXPECT_FLOAT_EQ(cs[0], static_cast<float>(std::cos(3.0)));
  EXPECT_FLOAT_EQ(sn[1], static_cast<float>(std::sin(0.03)));
  // Half-split rotation: pairs are (x0, x2) and (x1, x3).
  float x[4] = {1, 2, 3, 4};
  apply_rope(x, cs, sn, 4);
  EXPECT_FLOAT_EQ(x[0], 1 * cs[0] - 3 * sn[0]);
  EXPECT_FLOAT_EQ(x[2], 3 * cs[0] + 1 * sn[0]);
  EXPECT_FLOAT_EQ(x[1], 2 * cs[1] - 4 * sn[1]);
  EXPECT_FLOAT_EQ(x[3], 4 * cs[1] + 2 * sn[1]);
}

TEST(Rope, YarnEndsAndMscale) {
  ModelConfig c;
  c.head_dim = 64;
  c.rope_theta = 150000.0;
  c.rope_scaling.factor = 32.0;
  c.rope_scaling.original_max_position_embeddings = 4096;
  auto t = make_rope_table(c);
  ASSERT_TRUE(t.ok());
  EXPECT_NEAR(t->attention_scaling, 0.1 * std::log(32.0) + 1.0, 1e-12);  // 1.34657...
  // Highest frequencies (many turns over 4096 positions) are kept; lowest are divided by 32.
  EXPECT_DOUBLE_EQ(t->inv_freq[0], 1.0);
  const double plain_last = std::pow(150000.0, -62.0 / 64.0);
  EXPECT_NEAR(t->inv_freq[31], plain_last / 32.0, plain_last * 1e-12);
  for (size_t i = 1; i < t->inv_freq.size(); ++i) EXPECT_LT(t->inv_freq[i], t->inv_freq[i - 1]);
  // An explicit yarn attention_factor (or mscale / mscale_all_dim, resolved by the config
  // parser into it) replaces 0.1 ln(factor) + 1; the frequencies stay the same.
  c.rope_scaling.attention_factor = 0.625;
  auto af = make_rope_table(c);
  ASSERT_TRUE(af.ok());
  EXPECT_EQ(af->attention_scaling, 0.625);
  EXPECT_EQ(af->inv_freq, t->inv_freq);
  c.rope_scaling.rope_type = "longrope";
  EXPECT_FALSE(make_rope_table(c).ok());
}

TEST(Ops, SwigluHandChecked) {
  const float gu[6] = {1.0f, 0.0f, 10.0f, 9.0f, -2.0f, -9.0f};
  float y[3];
  cpu::swiglu(gu, 3, 7.0f, y);
  EXPECT_NEAR(y[0], 1.0 / (1.0 + std::exp(-1.702)), 1e-6);               // up 0 -> x1
  EXPECT_NEAR(y[1], 8.0 * 7.0 / (1.0 + std::exp(-1.702 * 7.0)), 1e-5);   // gate, up clamped
  EXPECT_NEAR(y[2], -6.0 * -2.0 / (1.0 + std::exp(1.702 * 2.0)), 1e-6);  // up clamped to -7
}

TEST(Ops, LinearMatchesDirectLoops) {
  std::mt19937_64 rng(fresh_seed("Ops.Linear"));
  std::normal_distribution<float> nd;
  const int64_t rows = 37, cols = 45, T = 3;
  std::vector<uint16_t> w(rows * cols);
  std::vector<float> bias(rows), x(T * cols), y(T * rows), ref(T * rows);
  for (auto& v : w) v = float_to_bf16(nd(rng));
  for (auto& v : bias) v = nd(rng);
  for (auto& v : x) v = nd(rng);
  TensorRef tw{w.data(), DType::kBF16, {rows, cols}};
  auto mv = cpu::mat_view(tw, rows, cols, "w");
  ASSERT_TRUE(mv.ok());
  ThreadPool pool(3);
  cpu::linear(pool, *mv, bias, x.data(), T, y.data());
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t r = 0; r < rows; ++r) {
      double s = bias[r];
      for (int64_t c = 0; c < cols; ++c)
        s += bf16_to_float(w[r * cols + c]) * double(x[t * cols + c]);
      ref[t * rows + r] = static_cast<float>(s);
    }
  }
  const double e = rel_err(y, ref);
  std::printf("linear rel err %.3g\n", e);
  EXPECT_LT(e, 1e-6);
  auto bad = cpu::mat_view(tw, cols, rows, "model.layers.0.self_attn.q_proj.weight");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("q_proj"), std::string::npos);
}

TEST(Ops, SinkAttentionMatchesDefinition) {
  std::mt19937_64 rng(fresh_seed("Ops.SinkAttention"));
  std::normal_distribution<float> nd;
  const int64_t n = 5, D = 8;
  for (float sink : {-3.0f, 0.0f, 2.5f}) {
    std::vector<float> q(D), k(n * D), v(n * D), out(D), scratch(n);
    for (auto* vec : {&q, &k, &v}) {
      for (auto& e : *vec) e = nd(rng);
    }
    std::vector<const float*> kp, vp;
    for (int64_t j = 0; j < n; ++j) {
      kp.push_back(&k[j * D]);
      vp.push_back(&v[j * D]);
    }
    cpu::sink_attention(q.data(), kp.data(), vp.data(), n, D, 0.5f, sink, scratch.data(),
                        out.data());
    std::vector<double> s(n);
    double den = std::exp(double(sink));
    for (int64_t j = 0; j < n; ++j) {
      double d = 0;
      for (int64_t i = 0; i < D; ++i) d += double(q[i]) * k[j * D + i];
      den += (s[j] = std::exp(0.5 * d));
    }
    for (int64_t i = 0; i < D; ++i) {
      double r = 0;
      for (int64_t j = 0; j < n; ++j) r += s[j] / den * v[j * D + i];
      EXPECT_NEAR(out[i], r, 1e-5) << "sink " << sink << " dim " << i;
    }
  }
}

// MXFP4 experts and the same values in the bf16 [E, cols, rows] layout give the same products.
TEST(Ops, ExpertMatmulMxfp4EqualsBf16Layout) {
  std::mt19937_64 rng(fresh_seed("Ops.ExpertMatmul"));
  TinySpec s;
  auto tm = make_tiny_model(s, rng);
  const ExpertMatrix& mx = tm.model->weights.layers[0].gate_up;
  const int64_t E = s.experts, rows = mx.rows, cols = mx.cols;
  std::vector<uint16_t> dense(E * cols * rows);
  std::vector<float> row(cols);
  for (int64_t e = 0; e < E; ++e) {
    for (int64_t r = 0; r < rows; ++r) {
      cpu::mxfp4_row(mx, e, r, row.data());
      for (int64_t c = 0; c < cols; ++c) {
        ASSERT_EQ(round_to_bf16(row[c]), row[c]);  // E2M1 * 2^k is exact in bf16
        dense[(e * cols + c) * rows + r] = float_to_bf16(row[c]);
      }
    }
  }
  ExpertMatrix bf = mx;
  bf.format = ExpertFormat::kBf16;
  bf.dense = TensorRef{dense.data(), DType::kBF16, {E, cols, rows}};
  ASSERT_TRUE(cpu::check_expert_matrix(bf, E, rows, cols, "bf").ok());
  std::normal_distribution<float> nd;
  const int64_t n = 3;
  std::vector<float> x(n * cols), y1(n * rows), y2(n * rows);
  for (auto& v : x) v = nd(rng);
  ThreadPool pool(2);
  const TensorRef& bias = tm.model->weights.layers[0].gate_up_b;
  std::vector<cpu::ExpertBatch> b1{{2, x.data(), n, y1.data()}}, b2{{2, x.data(), n, y2.data()}};
  cpu::expert_matmul(pool, mx, bias, b1);
  cpu::expert_matmul(pool, bf, bias, b2);
  const double e = rel_err(y1, y2);
  std::printf("mxfp4 vs bf16 expert layout rel err %.3g\n", e);
  EXPECT_LT(e, 1e-6);
}

// ---- the paged runner against the naive forward --------------------------------------------

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

// CPU reference engine tests: RoPE tables and the ops against direct loops / hand-checked
// values. The paged runner is tested in engine_runner_test.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <random>

#include "common/numerics.h"
#include "engine/cpu_ops.h"
#include "engine/engine_test_common.h"
#include "engine/engine_test_util.h"
#include "engine/rope.h"

namespace gossamer {
namespace {

using enginetest::fresh_seed;
using enginetest::rel_err;
using testing::make_tiny_model;
using testing::TinySpec;

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

}  // namespace
}  // namespace gossamer

// Implementation of engine_test_util.h (named *_test.cpp so it is built into the test binary).
#include "engine/engine_test_util.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <numeric>

#include "common/numerics.h"

namespace gossamer::testing {
namespace {

struct Builder {
  TinyModel* tm;
  std::mt19937_64* rng;

  TensorRef bf16(std::vector<int64_t> shape, float scale, float offset = 0.0f) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    auto v = std::make_shared<std::vector<uint16_t>>(static_cast<size_t>(n));
    std::normal_distribution<float> nd(0.0f, 1.0f);
    for (auto& x : *v) x = float_to_bf16(offset + scale * nd(*rng));
    tm->bf16_store.push_back(v);
    return TensorRef{v->data(), DType::kBF16, std::move(shape)};
  }
  TensorRef u8(std::vector<int64_t> shape, int lo, int hi) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    auto v = std::make_shared<std::vector<uint8_t>>(static_cast<size_t>(n));
    std::uniform_int_distribution<int> ud(lo, hi);
    for (auto& x : *v) x = static_cast<uint8_t>(ud(*rng));
    tm->u8_store.push_back(v);
    return TensorRef{v->data(), DType::kU8, std::move(shape)};
  }
  ExpertMatrix experts(bool mx, int64_t E, int64_t rows, int64_t cols) {
    ExpertMatrix m;
    m.format = mx ? ExpertFormat::kMxfp4 : ExpertFormat::kBf16;
    m.rows = rows;
    m.cols = cols;
    const float scale = 1.0f / std::sqrt(static_cast<float>(cols));
    if (mx) {
      m.blocks = u8({E, rows, cols / 32, 16}, 0, 255);
      m.scales = u8({E, rows, cols / 32}, 122, 124);  // 2^-5 .. 2^-3
    } else {
      m.dense = bf16({E, cols, rows}, scale);
    }
    return m;
  }
};

float at(const TensorRef& t, int64_t i) {
  if (t.dtype == DType::kF32) return static_cast<const float*>(t.data)[i];
  return bf16_to_float(t.bf16()[i]);
}

// Expert weight W_e[r, c] read straight from the checkpoint layout.
float expert_w(const ExpertMatrix& m, int64_t e, int64_t r, int64_t c) {
  if (m.format == ExpertFormat::kBf16) return at(m.dense, (e * m.cols + c) * m.rows + r);
  const int64_t nb = m.cols / 32, row = e * m.rows + r;
  const uint8_t byte = m.blocks.u8()[(row * nb + c / 32) * 16 + (c % 32) / 2];
  const uint8_t code = (c % 2 == 0) ? (byte & 0xf) : (byte >> 4);
  return e2m1_to_float(code) * e8m0_to_float(m.scales.u8()[row * nb + c / 32]);
}

// y[r] = sum_c W[r, c] x[c] + b[r] over a dense [rows, cols] tensor.
std::vector<double> matvec(const TensorRef& w, const TensorRef* b, const std::vector<double>& x,
                           int64_t rows) {
  const int64_t cols = static_cast<int64_t>(x.size());
  std::vector<double> y(static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) {
    double s = b ? at(*b, r) : 0.0;
    for (int64_t c = 0; c < cols; ++c) s += static_cast<double>(at(w, r * cols + c)) * x[c];
    y[r] = s;
  }
  return y;
}

std::vector<double> norm(const std::vector<double>& x, const TensorRef& w, double eps) {
  double ss = 0;
  for (double v : x) ss += v * v;
  const double inv = 1.0 / std::sqrt(ss / static_cast<double>(x.size()) + eps);
  std::vector<double> y(x.size());
  for (size_t i = 0; i < x.size(); ++i) y[i] = x[i] * inv * at(w, static_cast<int64_t>(i));
  return y;
}

}  // namespace

TinyModel make_tiny_model(const TinySpec& s, std::mt19937_64& rng) {
  TinyModel tm;
  tm.model = std::make_shared<LoadedModel>();
  ModelConfig& c = tm.model->config;
  c.vocab_size = s.vocab;
  c.hidden_size = s.hidden;
  c.intermediate_size = s.intermediate;
  c.num_hidden_layers = s.layers;
  c.num_attention_heads = s.heads;
  c.num_key_value_heads = s.kv_heads;
  c.head_dim = s.head_dim;
  c.num_local_experts = s.experts;
  c.experts_per_token = s.top_k;
  c.sliding_window = s.sliding_window;
  c.max_position_embeddings = 4096;
  c.rope_theta = 150000.0;
  c.rms_norm_eps = 1e-5;
  c.swiglu_limit = 7.0;
  c.rope_scaling.factor = s.yarn_factor;
  c.rope_scaling.original_max_position_embeddings = s.original_max_pos;
  c.expert_format = s.mxfp4 ? ExpertFormat::kMxfp4 : ExpertFormat::kBf16;
  for (int64_t l = 0; l < s.layers; ++l) {
    c.layer_types.push_back(l % 2 == 0 ? LayerType::kSlidingAttention : LayerType::kFullAttention);
  }
  Builder b{&tm, &rng};
  const int64_t hd = s.hidden, qd = s.heads * s.head_dim, kvd = s.kv_heads * s.head_dim;
  const float ws = 1.0f / std::sqrt(static_cast<float>(hd));
  ModelWeights& w = tm.model->weights;
  w.embed = b.bf16({s.vocab, hd}, 1.0f);
  w.lm_head = b.bf16({s.vocab, hd}, ws);
  w.final_norm = b.bf16({hd}, 0.1f, 1.0f);
  for (int64_t l = 0; l < s.layers; ++l) {
    LayerWeights L;
    L.attn_norm = b.bf16({hd}, 0.1f, 1.0f);
    L.q_w = b.bf16({qd, hd}, ws);
    L.q_b = b.bf16({qd}, 0.1f);
    L.k_w = b.bf16({kvd, hd}, ws);
    L.k_b = b.bf16({kvd}, 0.1f);
    L.v_w = b.bf16({kvd, hd}, ws);
    L.v_b = b.bf16({kvd}, 0.1f);
    L.o_w = b.bf16({hd, qd}, 1.0f / std::sqrt(static_cast<float>(qd)));
    L.o_b = b.bf16({hd}, 0.1f);
    L.sinks = b.bf16({s.heads}, 1.0f);
    L.mlp_norm = b.bf16({hd}, 0.1f, 1.0f);
    L.router_w = b.bf16({s.experts, hd}, ws);
    L.router_b = b.bf16({s.experts}, 0.1f);
    L.gate_up = b.experts(s.mxfp4, s.experts, 2 * s.intermediate, hd);
    L.gate_up_b = b.bf16({s.experts, 2 * s.intermediate}, 0.1f);
    L.down = b.experts(s.mxfp4, s.experts, hd, s.intermediate);
    L.down_b = b.bf16({s.experts, hd}, 0.1f);
    w.layers.push_back(std::move(L));
  }
  return tm;
}

namespace {

// YaRN inverse frequencies and mscale, recomputed from the paper's definitions.
void yarn(const ModelConfig& c, std::vector<double>& inv, double& mscale) {
  const double d = static_cast<double>(c.head_dim), base = c.rope_theta;
  const double f = c.rope_scaling.factor;
  const double L = static_cast<double>(c.rope_scaling.original_max_position_embeddings);
  auto dim_for = [&](double rot) {
    return d * std::log(L / (rot * 2 * std::numbers::pi)) / (2 * std::log(base));
  };
  const double lo = std::max(0.0, dim_for(c.rope_scaling.beta_fast));
  const double hi = std::min(d - 1, dim_for(c.rope_scaling.beta_slow));
  inv.resize(static_cast<size_t>(c.head_dim / 2));
  for (size_t i = 0; i < inv.size(); ++i) {
    const double plain = std::pow(base, -2.0 * static_cast<double>(i) / d);
    const double ramp = std::clamp((static_cast<double>(i) - lo) / (hi - lo), 0.0, 1.0);
    inv[i] = plain * (1 - ramp) + plain / f * ramp;  // ramp 0: extrapolate, 1: interpolate
  }
  mscale = f > 1 ? 0.1 * std::log(f) + 1.0 : 1.0;
}

}  // namespace

namespace {

using Rows = std::vector<std::vector<double>>;  // [T][n]

struct NaiveRope {
  std::vector<double> inv;
  double mscale = 1;
  int64_t D = 0;
  void rotate(std::vector<double>& v, int64_t head, int64_t pos) const {
    for (int64_t i = 0; i < D / 2; ++i) {
      const double a = v[head * D + i], bb = v[head * D + i + D / 2];
      const double cs = std::cos(pos * inv[i]) * mscale, sn = std::sin(pos * inv[i]) * mscale;
      v[head * D + i] = a * cs - bb * sn;
      v[head * D + i + D / 2] = bb * cs + a * sn;
    }
  }
};

// x[t] += o_proj(sink attention over positions visible from t).
void naive_attention(const ModelConfig& c, const LayerWeights& L, bool sliding,
                     const NaiveRope& rope, Rows& x) {
  const int64_t T = static_cast<int64_t>(x.size()), D = c.head_dim;
  const int64_t H = c.num_attention_heads, KV = c.num_key_value_heads;
  Rows q(T), k(T), v(T);
  for (int64_t t = 0; t < T; ++t) {
    auto h = norm(x[t], L.attn_norm, c.rms_norm_eps);
    q[t] = matvec(L.q_w, &L.q_b, h, H * D);
    k[t] = matvec(L.k_w, &L.k_b, h, KV * D);
    v[t] = matvec(L.v_w, &L.v_b, h, KV * D);
    for (int64_t hh = 0; hh < H; ++hh) rope.rotate(q[t], hh, t);
    for (int64_t hh = 0; hh < KV; ++hh) rope.rotate(k[t], hh, t);
  }
  for (int64_t t = 0; t < T; ++t) {
    std::vector<double> att(static_cast<size_t>(H * D), 0.0);
    for (int64_t hh = 0; hh < H; ++hh) {
      const int64_t g = hh / (H / KV);
      const double sink = at(L.sinks, hh);
      std::vector<double> s;
      const int64_t lo = sliding ? std::max<int64_t>(0, t - c.sliding_window + 1) : 0;
      double mx = sink;
      for (int64_t j = lo; j <= t; ++j) {
        double d = 0;
        for (int64_t i = 0; i < D; ++i) d += q[t][hh * D + i] * k[j][g * D + i];
        s.push_back(d / std::sqrt(static_cast<double>(D)));
        mx = std::max(mx, s.back());
      }
      double den = std::exp(sink - mx);
      for (double& e : s) den += (e = std::exp(e - mx));
      for (int64_t j = lo; j <= t; ++j) {
        for (int64_t i = 0; i < D; ++i) att[hh * D + i] += s[j - lo] / den * v[j][g * D + i];
      }
    }
    auto o = matvec(L.o_w, &L.o_b, att, c.hidden_size);
    for (int64_t i = 0; i < c.hidden_size; ++i) x[t][i] += o[i];
  }
}

// x[t] += sum over the top-k experts of softmax weight * expert(norm(x[t])).
void naive_moe(const ModelConfig& c, const LayerWeights& L, Rows& x) {
  const int64_t hd = c.hidden_size, I = c.intermediate_size;
  for (auto& xt : x) {
    auto h = norm(xt, L.mlp_norm, c.rms_norm_eps);
    auto r = matvec(L.router_w, &L.router_b, h, c.num_local_experts);
    std::vector<int64_t> ids(r.size());
    std::iota(ids.begin(), ids.end(), 0);
    std::stable_sort(ids.begin(), ids.end(), [&](int64_t a, int64_t b) { return r[a] > r[b]; });
    double den = 0;
    for (int64_t j = 0; j < c.experts_per_token; ++j) den += std::exp(r[ids[j]] - r[ids[0]]);
    for (int64_t j = 0; j < c.experts_per_token; ++j) {
      const int64_t e = ids[j];
      const double wt = std::exp(r[e] - r[ids[0]]) / den;
      std::vector<double> y(static_cast<size_t>(I));
      for (int64_t jj = 0; jj < I; ++jj) {
        double gt = at(L.gate_up_b, e * 2 * I + 2 * jj);
        double up = at(L.gate_up_b, e * 2 * I + 2 * jj + 1);
        for (int64_t i = 0; i < hd; ++i) {
          gt += expert_w(L.gate_up, e, 2 * jj, i) * h[i];
          up += expert_w(L.gate_up, e, 2 * jj + 1, i) * h[i];
        }
        gt = std::min(gt, c.swiglu_limit);
        up = std::clamp(up, -c.swiglu_limit, c.swiglu_limit);
        y[jj] = (up + 1) * gt / (1 + std::exp(-1.702 * gt));
      }
      for (int64_t i = 0; i < hd; ++i) {
        double s = at(L.down_b, e * hd + i);
        for (int64_t jj = 0; jj < I; ++jj) s += expert_w(L.down, e, i, jj) * y[jj];
        xt[i] += wt * s;
      }
    }
  }
}

}  // namespace

std::vector<float> naive_forward(const LoadedModel& m, const std::vector<int32_t>& tokens) {
  const ModelConfig& c = m.config;
  const ModelWeights& w = m.weights;
  const int64_t T = static_cast<int64_t>(tokens.size()), hd = c.hidden_size;
  NaiveRope rope;
  rope.D = c.head_dim;
  yarn(c, rope.inv, rope.mscale);
  Rows x(static_cast<size_t>(T), std::vector<double>(hd));
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t i = 0; i < hd; ++i) x[t][i] = at(w.embed, tokens[t] * hd + i);
  }
  for (size_t l = 0; l < w.layers.size(); ++l) {
    naive_attention(c, w.layers[l], c.layer_types[l] == LayerType::kSlidingAttention, rope, x);
    naive_moe(c, w.layers[l], x);
  }
  std::vector<float> out;
  for (int64_t t = 0; t < T; ++t) {
    auto h = norm(x[t], w.final_norm, c.rms_norm_eps);
    for (double z : matvec(w.lm_head, nullptr, h, c.vocab_size)) {
      out.push_back(static_cast<float>(z));
    }
  }
  return out;
}

}  // namespace gossamer::testing

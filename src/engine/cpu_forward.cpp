#include "engine/cpu_forward.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <numeric>

#include "common/npy.h"
#include "common/numerics.h"

namespace gossamer::cpu {
namespace {

std::string lname(int64_t l, const char* what) {
  return "model.layers." + std::to_string(l) + "." + what;
}

Status prepare_layer(const ModelConfig& c, const LayerWeights& w, int64_t l, PreparedLayer& p) {
  const int64_t hd = c.hidden_size, qd = c.num_attention_heads * c.head_dim;
  const int64_t kvd = c.num_key_value_heads * c.head_dim, E = c.num_local_experts;
  const int64_t I = c.intermediate_size;
  p.w = &w;
  GS_ASSIGN_OR_RETURN(p.q, mat_view(w.q_w, qd, hd, lname(l, "self_attn.q_proj.weight")));
  GS_ASSIGN_OR_RETURN(p.k, mat_view(w.k_w, kvd, hd, lname(l, "self_attn.k_proj.weight")));
  GS_ASSIGN_OR_RETURN(p.v, mat_view(w.v_w, kvd, hd, lname(l, "self_attn.v_proj.weight")));
  GS_ASSIGN_OR_RETURN(p.o, mat_view(w.o_w, hd, qd, lname(l, "self_attn.o_proj.weight")));
  GS_ASSIGN_OR_RETURN(p.router, mat_view(w.router_w, E, hd, lname(l, "mlp.router.weight")));
  GS_ASSIGN_OR_RETURN(p.attn_norm, vec_f32(w.attn_norm, hd, lname(l, "input_layernorm.weight")));
  GS_ASSIGN_OR_RETURN(p.mlp_norm,
                      vec_f32(w.mlp_norm, hd, lname(l, "post_attention_layernorm.weight")));
  GS_ASSIGN_OR_RETURN(p.sinks,
                      vec_f32(w.sinks, c.num_attention_heads, lname(l, "self_attn.sinks")));
  GS_ASSIGN_OR_RETURN(p.router_b, vec_f32(w.router_b, E, lname(l, "mlp.router.bias")));
  if (c.attention_bias) {
    GS_ASSIGN_OR_RETURN(p.q_b, vec_f32(w.q_b, qd, lname(l, "self_attn.q_proj.bias")));
    GS_ASSIGN_OR_RETURN(p.k_b, vec_f32(w.k_b, kvd, lname(l, "self_attn.k_proj.bias")));
    GS_ASSIGN_OR_RETURN(p.v_b, vec_f32(w.v_b, kvd, lname(l, "self_attn.v_proj.bias")));
    GS_ASSIGN_OR_RETURN(p.o_b, vec_f32(w.o_b, hd, lname(l, "self_attn.o_proj.bias")));
  }
  GS_RETURN_IF_ERROR(
      check_expert_matrix(w.gate_up, E, 2 * I, hd, lname(l, "mlp.experts.gate_up_proj")));
  GS_RETURN_IF_ERROR(check_expert_matrix(w.down, E, hd, I, lname(l, "mlp.experts.down_proj")));
  GS_RETURN_IF_ERROR(
      vec_f32(w.gate_up_b, E * 2 * I, lname(l, "mlp.experts.gate_up_proj_bias")).status());
  GS_RETURN_IF_ERROR(vec_f32(w.down_b, E * hd, lname(l, "mlp.experts.down_proj_bias")).status());
  return Status::Ok();
}

}  // namespace

Result<PreparedModel> prepare_model(const ModelConfig& c, const ModelWeights& w) {
  if (c.hidden_size <= 0 || c.num_attention_heads <= 0 || c.num_key_value_heads <= 0 ||
      c.head_dim <= 0 || c.vocab_size <= 0 || c.num_local_experts <= 0 ||
      c.experts_per_token <= 0 || c.experts_per_token > c.num_local_experts ||
      c.num_attention_heads % c.num_key_value_heads != 0) {
    return InvalidArgument("config: inconsistent sizes (hidden/heads/kv heads/experts/top-k)");
  }
  if (static_cast<int64_t>(c.layer_types.size()) != c.num_hidden_layers ||
      static_cast<int64_t>(w.layers.size()) != c.num_hidden_layers) {
    return InvalidArgument("config: num_hidden_layers=" + std::to_string(c.num_hidden_layers) +
                           " but layer_types has " + std::to_string(c.layer_types.size()) +
                           " and weights have " + std::to_string(w.layers.size()) + " layers");
  }
  PreparedModel m;
  GS_ASSIGN_OR_RETURN(m.rope, make_rope_table(c));
  GS_ASSIGN_OR_RETURN(m.embed,
                      mat_view(w.embed, c.vocab_size, c.hidden_size, "model.embed_tokens.weight"));
  GS_ASSIGN_OR_RETURN(m.lm_head,
                      mat_view(w.lm_head, c.vocab_size, c.hidden_size, "lm_head.weight"));
  GS_ASSIGN_OR_RETURN(m.final_norm, vec_f32(w.final_norm, c.hidden_size, "model.norm.weight"));
  m.layers.resize(w.layers.size());
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    PreparedLayer& p = m.layers[static_cast<size_t>(l)];
    GS_RETURN_IF_ERROR(prepare_layer(c, w.layers[static_cast<size_t>(l)], l, p));
    p.sliding = c.layer_types[static_cast<size_t>(l)] == LayerType::kSlidingAttention;
    p.kind_index = p.sliding ? m.n_sliding++ : m.n_full++;
  }
  if (m.n_sliding > 0 && c.sliding_window <= 0) {
    return InvalidArgument("config: sliding_window must be > 0 with sliding_attention layers");
  }
  return m;
}

void KvPool::allocate() {
  const size_t n = static_cast<size_t>(num_blocks * layers * block_size * kv_heads * head_dim);
  k.assign(n, 0.0f);
  v.assign(n, 0.0f);
}

Status Dumper::dump(int64_t layer, const std::string& name, const float* data,
                    const std::vector<int64_t>& shape) const {
  if (!enabled()) return Status::Ok();
  char buf[32];
  std::string file = dir + "/s" + std::to_string(step) + ".";
  if (layer >= 0) {
    std::snprintf(buf, sizeof buf, "L%02lld.", static_cast<long long>(layer));
    file += buf;
  }
  file += name + ".npy";
  return write_npy_f32(file, data, shape).With("dump " + name);
}

namespace {

// Rotates q [T, H*D] and k [T, KV*D] by each token's position.
void rope_qk(const ForwardCtx& ctx, std::vector<float>& q, std::vector<float>& k) {
  const ModelConfig& c = *ctx.cfg;
  const int64_t D = c.head_dim, H = c.num_attention_heads, KV = c.num_key_value_heads;
  const int64_t T = static_cast<int64_t>(ctx.tokens.size());
  ctx.pool->parallel_for(T, [&](int64_t t0, int64_t t1) {
    std::vector<float> cs(static_cast<size_t>(D / 2)), sn(static_cast<size_t>(D / 2));
    for (int64_t t = t0; t < t1; ++t) {
      rope_cos_sin(ctx.model->rope, ctx.tokens[static_cast<size_t>(t)].pos, cs.data(), sn.data());
      for (int64_t h = 0; h < H; ++h) apply_rope(&q[(t * H + h) * D], cs.data(), sn.data(), D);
      for (int64_t h = 0; h < KV; ++h) apply_rope(&k[(t * KV + h) * D], cs.data(), sn.data(), D);
    }
  });
}

// Physical block of position `pos` for a layer kind (tables were validated by the runner).
int64_t block_of(const TokenSlot& ts, bool sliding, int64_t pos, int64_t bs) {
  const auto& table = sliding ? ts.chunk->blocks_sliding : ts.chunk->blocks_full;
  return table[static_cast<size_t>(pos / bs)];
}

// attn [T, H*D] = sink attention of each (token, head) over the cached keys it may see.
void attend(const ForwardCtx& ctx, const PreparedLayer& pl, const std::vector<float>& q,
            std::vector<float>& attn) {
  const ModelConfig& c = *ctx.cfg;
  const int64_t D = c.head_dim, H = c.num_attention_heads, KV = c.num_key_value_heads;
  const int64_t group = H / KV;
  KvPool& kv = pl.sliding ? *ctx.kv_sliding : *ctx.kv_full;
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(D)));
  const int64_t T = static_cast<int64_t>(ctx.tokens.size());
  ctx.pool->parallel_for(T * H, [&](int64_t i0, int64_t i1) {
    std::vector<const float*> keys, vals;
    std::vector<float> scratch;
    for (int64_t i = i0; i < i1; ++i) {
      const int64_t t = i / H, h = i % H, g = h / group;
      const TokenSlot& ts = ctx.tokens[static_cast<size_t>(t)];
      const int64_t lo = pl.sliding ? std::max<int64_t>(0, ts.pos - c.sliding_window + 1) : 0;
      const int64_t n = ts.pos - lo + 1;
      keys.resize(static_cast<size_t>(n));
      vals.resize(static_cast<size_t>(n));
      scratch.resize(static_cast<size_t>(n));
      for (int64_t j = 0; j < n; ++j) {
        const int64_t p = lo + j;
        const int64_t off = kv.offset(block_of(ts, pl.sliding, p, kv.block_size), pl.kind_index,
                                      p % kv.block_size) +
                            g * D;
        keys[static_cast<size_t>(j)] = kv.k.data() + off;
        vals[static_cast<size_t>(j)] = kv.v.data() + off;
      }
      sink_attention(&q[(t * H + h) * D], keys.data(), vals.data(), n, D, scale,
                     pl.sinks[static_cast<size_t>(h)], scratch.data(), &attn[(t * H + h) * D]);
    }
  });
}

void add_into(std::vector<float>& x, const std::vector<float>& y) {
  for (size_t i = 0; i < x.size(); ++i) x[i] += y[i];
}

void rmsnorm_rows(const std::vector<float>& x, const std::vector<float>& w, int64_t T, int64_t n,
                  float eps, std::vector<float>& out) {
  out.resize(static_cast<size_t>(T * n));
  for (int64_t t = 0; t < T; ++t) rmsnorm(&x[t * n], w.data(), n, eps, &out[t * n]);
}

}  // namespace

Status attention_block(const ForwardCtx& ctx, int64_t layer, std::vector<float>& x) {
  const ModelConfig& c = *ctx.cfg;
  const PreparedLayer& pl = ctx.model->layers[static_cast<size_t>(layer)];
  const int64_t T = static_cast<int64_t>(ctx.tokens.size()), hd = c.hidden_size;
  const int64_t D = c.head_dim, H = c.num_attention_heads, KV = c.num_key_value_heads;
  const Dumper& dd = *ctx.dumper;
  GS_RETURN_IF_ERROR(dd.dump(layer, "x_in", x.data(), {T, hd}));
  std::vector<float> h;  // [T, hidden]
  rmsnorm_rows(x, pl.attn_norm, T, hd, static_cast<float>(c.rms_norm_eps), h);
  GS_RETURN_IF_ERROR(dd.dump(layer, "attn_norm", h.data(), {T, hd}));
  std::vector<float> q(static_cast<size_t>(T * H * D)), k(static_cast<size_t>(T * KV * D)),
      v(static_cast<size_t>(T * KV * D));
  linear(*ctx.pool, pl.q, pl.q_b, h.data(), T, q.data());
  linear(*ctx.pool, pl.k, pl.k_b, h.data(), T, k.data());
  linear(*ctx.pool, pl.v, pl.v_b, h.data(), T, v.data());
  GS_RETURN_IF_ERROR(dd.dump(layer, "q", q.data(), {T, H, D}));
  GS_RETURN_IF_ERROR(dd.dump(layer, "k", k.data(), {T, KV, D}));
  GS_RETURN_IF_ERROR(dd.dump(layer, "v", v.data(), {T, KV, D}));
  rope_qk(ctx, q, k);
  GS_RETURN_IF_ERROR(dd.dump(layer, "q_rope", q.data(), {T, H, D}));
  GS_RETURN_IF_ERROR(dd.dump(layer, "k_rope", k.data(), {T, KV, D}));
  KvPool& kv = pl.sliding ? *ctx.kv_sliding : *ctx.kv_full;
  for (int64_t t = 0; t < T; ++t) {  // write this step's K/V before anyone attends
    const TokenSlot& ts = ctx.tokens[static_cast<size_t>(t)];
    const int64_t off = kv.offset(block_of(ts, pl.sliding, ts.pos, kv.block_size), pl.kind_index,
                                  ts.pos % kv.block_size);
    std::copy_n(&k[t * KV * D], KV * D, kv.k.begin() + off);
    std::copy_n(&v[t * KV * D], KV * D, kv.v.begin() + off);
    if (ctx.kv_bf16) {
      for (int64_t i = 0; i < KV * D; ++i) {
        kv.k[static_cast<size_t>(off + i)] = round_to_bf16(kv.k[static_cast<size_t>(off + i)]);
        kv.v[static_cast<size_t>(off + i)] = round_to_bf16(kv.v[static_cast<size_t>(off + i)]);
      }
    }
  }
  std::vector<float> attn(static_cast<size_t>(T * H * D));
  attend(ctx, pl, q, attn);
  GS_RETURN_IF_ERROR(dd.dump(layer, "attn_out", attn.data(), {T, H * D}));
  std::vector<float> o(static_cast<size_t>(T * hd));
  linear(*ctx.pool, pl.o, pl.o_b, attn.data(), T, o.data());
  GS_RETURN_IF_ERROR(dd.dump(layer, "o", o.data(), {T, hd}));
  add_into(x, o);
  return Status::Ok();
}

namespace {

// Router: top-k expert ids (by logit, ties to the lower id) and softmax weights over them.
void route(const std::vector<float>& logits, int64_t T, int64_t E, int64_t K,
           std::vector<int32_t>& ids, std::vector<float>& weights) {
  ids.resize(static_cast<size_t>(T * K));
  weights.resize(static_cast<size_t>(T * K));
  std::vector<int32_t> order(static_cast<size_t>(E));
  for (int64_t t = 0; t < T; ++t) {
    const float* lg = &logits[t * E];
    std::iota(order.begin(), order.end(), 0);
    std::partial_sort(order.begin(), order.begin() + K, order.end(), [&](int32_t a, int32_t b) {
      return lg[a] > lg[b] || (lg[a] == lg[b] && a < b);
    });
    const float mx = lg[order[0]];
    float sum = 0;
    for (int64_t j = 0; j < K; ++j) {
      ids[t * K + j] = order[j];
      weights[t * K + j] = std::exp(lg[order[j]] - mx);
      sum += weights[t * K + j];
    }
    for (int64_t j = 0; j < K; ++j) weights[t * K + j] /= sum;
  }
}

}  // namespace

Status moe_block(const ForwardCtx& ctx, int64_t layer, std::vector<float>& x) {
  const ModelConfig& c = *ctx.cfg;
  const PreparedLayer& pl = ctx.model->layers[static_cast<size_t>(layer)];
  const int64_t T = static_cast<int64_t>(ctx.tokens.size()), hd = c.hidden_size;
  const int64_t E = c.num_local_experts, K = c.experts_per_token, I = c.intermediate_size;
  const Dumper& dd = *ctx.dumper;
  std::vector<float> h;  // [T, hidden]
  rmsnorm_rows(x, pl.mlp_norm, T, hd, static_cast<float>(c.rms_norm_eps), h);
  GS_RETURN_IF_ERROR(dd.dump(layer, "mlp_norm", h.data(), {T, hd}));
  std::vector<float> logits(static_cast<size_t>(T * E));  // [T, E]
  linear(*ctx.pool, pl.router, pl.router_b, h.data(), T, logits.data());
  GS_RETURN_IF_ERROR(dd.dump(layer, "router_logits", logits.data(), {T, E}));
  std::vector<int32_t> ids;    // [T, K]
  std::vector<float> weights;  // [T, K]
  route(logits, T, E, K, ids, weights);
  if (dd.enabled()) {
    std::vector<float> idf(ids.begin(), ids.end());
    GS_RETURN_IF_ERROR(dd.dump(layer, "expert_ids", idf.data(), {T, K}));
    GS_RETURN_IF_ERROR(dd.dump(layer, "expert_weights", weights.data(), {T, K}));
  }
  // Group (token, slot) pairs by expert, ascending expert id; gather each expert's inputs.
  std::vector<std::vector<int64_t>> members(static_cast<size_t>(E));  // entries t*K + j
  for (int64_t i = 0; i < T * K; ++i) members[static_cast<size_t>(ids[i])].push_back(i);
  std::vector<int64_t> offs;  // row offset of each active batch in the gathered buffers
  std::vector<ExpertBatch> gu_b, dn_b;
  int64_t rows = 0;
  for (int64_t e = 0; e < E; ++e) {
    const int64_t n = static_cast<int64_t>(members[static_cast<size_t>(e)].size());
    if (n == 0) continue;
    offs.push_back(rows);
    gu_b.push_back({e, nullptr, n, nullptr});
    rows += n;
  }
  std::vector<float> xin(static_cast<size_t>(rows * hd)), gu(static_cast<size_t>(rows * 2 * I));
  std::vector<float> act(static_cast<size_t>(rows * I)), dn(static_cast<size_t>(rows * hd));
  for (size_t b = 0; b < gu_b.size(); ++b) {
    const auto& mem = members[static_cast<size_t>(gu_b[b].expert)];
    for (size_t r = 0; r < mem.size(); ++r) {
      std::copy_n(&h[(mem[r] / K) * hd], hd, &xin[(offs[b] + static_cast<int64_t>(r)) * hd]);
    }
    gu_b[b].x = &xin[offs[b] * hd];
    gu_b[b].y = &gu[offs[b] * 2 * I];
    dn_b.push_back({gu_b[b].expert, &act[offs[b] * I], gu_b[b].n, &dn[offs[b] * hd]});
  }
  expert_matmul(*ctx.pool, pl.w->gate_up, pl.w->gate_up_b, gu_b);
  const float limit = static_cast<float>(c.swiglu_limit);
  for (int64_t r = 0; r < rows; ++r) swiglu(&gu[r * 2 * I], I, limit, &act[r * I]);
  expert_matmul(*ctx.pool, pl.w->down, pl.w->down_b, dn_b);
  std::vector<float> moe(static_cast<size_t>(T * hd), 0.0f);  // [T, hidden]
  for (size_t b = 0; b < gu_b.size(); ++b) {
    const auto& mem = members[static_cast<size_t>(gu_b[b].expert)];
    for (size_t r = 0; r < mem.size(); ++r) {
      const float wgt = weights[static_cast<size_t>(mem[r])];
      const float* src = &dn[(offs[b] + static_cast<int64_t>(r)) * hd];
      float* dst = &moe[(mem[r] / K) * hd];
      for (int64_t i = 0; i < hd; ++i) dst[i] += wgt * src[i];
    }
  }
  GS_RETURN_IF_ERROR(dd.dump(layer, "moe_out", moe.data(), {T, hd}));
  add_into(x, moe);
  return Status::Ok();
}

}  // namespace gossamer::cpu

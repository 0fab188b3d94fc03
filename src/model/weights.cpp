// DType helpers, TensorRef accessors, and binding of gpt-oss checkpoint tensors (bind_weights,
// load_model).
#include "model/weights.h"

#include <cmath>
#include <cstring>

#include "common/numerics.h"
#include "common/thread_pool.h"
#include "model/binder.h"
#include "model/safetensors.h"
#include "model/weights_original.h"

namespace gossamer {

const char* dtype_name(DType d) {
  switch (d) {
    case DType::kBF16:
      return "BF16";
    case DType::kF16:
      return "F16";
    case DType::kF32:
      return "F32";
    case DType::kF64:
      return "F64";
    case DType::kU8:
      return "U8";
    case DType::kI8:
      return "I8";
    case DType::kI16:
      return "I16";
    case DType::kI32:
      return "I32";
    case DType::kI64:
      return "I64";
    case DType::kBool:
      return "BOOL";
    case DType::kF8E4M3:
      return "F8_E4M3";
    case DType::kF8E5M2:
      return "F8_E5M2";
  }
  return "?";
}

int64_t dtype_size(DType d) {
  switch (d) {
    case DType::kBF16:
    case DType::kF16:
    case DType::kI16:
      return 2;
    case DType::kF32:
    case DType::kI32:
      return 4;
    case DType::kF64:
    case DType::kI64:
      return 8;
    case DType::kU8:
    case DType::kI8:
    case DType::kBool:
    case DType::kF8E4M3:
    case DType::kF8E5M2:
      return 1;
  }
  return 0;
}

int64_t TensorRef::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

float f16_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const int exp = (h >> 10) & 0x1f;
  const uint32_t mant = h & 0x3ffu;
  float mag;
  if (exp == 0) {
    mag = std::ldexp(static_cast<float>(mant), -24);
  } else if (exp == 31) {
    mag = mant ? NAN : INFINITY;
  } else {
    mag = std::ldexp(static_cast<float>(mant | 0x400u), exp - 25);
  }
  uint32_t u;
  std::memcpy(&u, &mag, 4);
  u |= sign;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// Element i as float. Unaligned-safe (memcpy). Returns NaN for dtypes other than bf16/f16/f32
// and for out-of-range i (callers check shapes first; this never reads out of bounds).
float TensorRef::get(int64_t i) const {
  if (data == nullptr || i < 0 || i >= numel()) return NAN;
  const auto* p = static_cast<const uint8_t*>(data);
  switch (dtype) {
    case DType::kBF16: {
      uint16_t h;
      std::memcpy(&h, p + 2 * i, 2);
      return bf16_to_float(h);
    }
    case DType::kF16: {
      uint16_t h;
      std::memcpy(&h, p + 2 * i, 2);
      return f16_to_float(h);
    }
    case DType::kF32: {
      float f;
      std::memcpy(&f, p + 4 * i, 4);
      return f;
    }
    default:
      return NAN;
  }
}

namespace {

using model_bind::Binder;

// Which expert layout layer 0 uses: the tensors present decide; when both layouts are present
// the config's quantization_config breaks the tie.
ExpertFormat detect_expert_format(const ModelConfig& cfg, const Binder& b) {
  const std::string p = "model.layers.0.mlp.experts.";
  const bool mx = b.has(p + "gate_up_proj_blocks"), dense = b.has(p + "gate_up_proj");
  if (mx && dense) return cfg.expert_format;
  if (mx) return ExpertFormat::kMxfp4;
  if (dense) return ExpertFormat::kBf16;
  return cfg.expert_format;  // neither: the bind reports the config's expected names
}

Status bind_expert(const Binder& b, const std::string& base, ExpertFormat f, int64_t experts,
                   int64_t rows, int64_t cols, ExpertMatrix* m) {
  if (f == ExpertFormat::kMxfp4) {
    return b.mxfp4(base + "_blocks", base + "_scales", experts, rows, cols, m);
  }
  m->format = f;
  m->rows = rows;
  m->cols = cols;
  return b.flt(base, {experts, cols, rows}, &m->dense);
}

Status bind_attention(const ModelConfig& c, const Binder& b, const std::string& p,
                      LayerWeights* w) {
  const int64_t h = c.hidden_size, q = c.num_attention_heads * c.head_dim;
  const int64_t kv = c.num_key_value_heads * c.head_dim;
  GS_RETURN_IF_ERROR(b.flt(p + "q_proj.weight", {q, h}, &w->q_w));
  GS_RETURN_IF_ERROR(b.flt(p + "k_proj.weight", {kv, h}, &w->k_w));
  GS_RETURN_IF_ERROR(b.flt(p + "v_proj.weight", {kv, h}, &w->v_w));
  GS_RETURN_IF_ERROR(b.flt(p + "o_proj.weight", {h, q}, &w->o_w));
  // Biases are required when attention_bias is true. When false they are not bound even if
  // present: transformers builds the projections without bias and ignores such tensors.
  const struct {
    const char* name;
    int64_t n;
    TensorRef* out;
  } biases[] = {{"q_proj.bias", q, &w->q_b},
                {"k_proj.bias", kv, &w->k_b},
                {"v_proj.bias", kv, &w->v_b},
                {"o_proj.bias", h, &w->o_b}};
  for (const auto& bias : biases) {
    if (c.attention_bias) GS_RETURN_IF_ERROR(b.flt(p + bias.name, {bias.n}, bias.out));
  }
  return b.flt(p + "sinks", {c.num_attention_heads}, &w->sinks);
}

Status bind_layer(const ModelConfig& c, const Binder& b, int64_t i, ExpertFormat f,
                  LayerWeights* w) {
  const std::string p = "model.layers." + std::to_string(i) + ".";
  const int64_t h = c.hidden_size, inter = c.intermediate_size, e = c.num_local_experts;
  GS_RETURN_IF_ERROR(b.flt(p + "input_layernorm.weight", {h}, &w->attn_norm));
  GS_RETURN_IF_ERROR(bind_attention(c, b, p + "self_attn.", w));
  GS_RETURN_IF_ERROR(b.flt(p + "post_attention_layernorm.weight", {h}, &w->mlp_norm));
  GS_RETURN_IF_ERROR(b.flt(p + "mlp.router.weight", {e, h}, &w->router_w));
  GS_RETURN_IF_ERROR(b.flt(p + "mlp.router.bias", {e}, &w->router_b));
  const std::string x = p + "mlp.experts.";
  GS_RETURN_IF_ERROR(bind_expert(b, x + "gate_up_proj", f, e, 2 * inter, h, &w->gate_up));
  GS_RETURN_IF_ERROR(b.flt(x + "gate_up_proj_bias", {e, 2 * inter}, &w->gate_up_b));
  GS_RETURN_IF_ERROR(bind_expert(b, x + "down_proj", f, e, h, inter, &w->down));
  return b.flt(x + "down_proj_bias", {e, h}, &w->down_b);
}

}  // namespace

namespace model_bind {

Status check_extra_layers(const ModelConfig& c, const TensorStore& store,
                          const std::string& prefix) {
  for (const std::string& name : store.names()) {
    if (name.compare(0, prefix.size(), prefix) != 0) continue;
    int64_t idx = 0;
    size_t pos = prefix.size();
    bool digits = false;
    while (pos < name.size() && name[pos] >= '0' && name[pos] <= '9' && idx < (int64_t{1} << 40)) {
      idx = idx * 10 + (name[pos++] - '0');
      digits = true;
    }
    if (digits && idx >= c.num_hidden_layers) {
      return InvalidArgument(
          "tensor '" + name + "' in " + store.file_of(name) +
          " is beyond config num_hidden_layers = " + std::to_string(c.num_hidden_layers));
    }
  }
  return Status::Ok();
}

}  // namespace model_bind

Result<ModelWeights> bind_weights(const ModelConfig& cfg, const TensorStore& store) {
  GS_RETURN_IF_ERROR(cfg.validate());
  ThreadPool pool;  // the value scans of large tensors
  const Binder b(store, &pool);
  ModelWeights w;
  const int64_t v = cfg.vocab_size, h = cfg.hidden_size;
  if (model_bind::is_original_layout(store)) {  // openai/gpt-oss names (weights_original.cpp)
    GS_RETURN_IF_ERROR(model_bind::bind_original(cfg, b, &w));
    return w;
  }
  GS_RETURN_IF_ERROR(b.flt("model.embed_tokens.weight", {v, h}, &w.embed));
  const ExpertFormat f = detect_expert_format(cfg, b);
  w.layers.resize(static_cast<size_t>(cfg.num_hidden_layers));
  for (int64_t i = 0; i < cfg.num_hidden_layers; ++i) {
    GS_RETURN_IF_ERROR(bind_layer(cfg, b, i, f, &w.layers[static_cast<size_t>(i)]));
  }
  GS_RETURN_IF_ERROR(model_bind::check_extra_layers(cfg, store, "model.layers."));
  GS_RETURN_IF_ERROR(b.flt("model.norm.weight", {h}, &w.final_norm));
  if (cfg.tie_word_embeddings) {
    w.lm_head = w.embed;
  } else {
    GS_RETURN_IF_ERROR(b.flt("lm_head.weight", {v, h}, &w.lm_head));
  }
  return w;
}

Result<std::shared_ptr<LoadedModel>> load_model(const std::string& dir) {
  GS_ASSIGN_OR_RETURN(ModelConfig cfg, load_config(dir));
  GS_ASSIGN_OR_RETURN(std::unique_ptr<TensorStore> store, TensorStore::open_dir(dir));
  auto m = std::make_shared<LoadedModel>();
  GS_ASSIGN_OR_RETURN(m->weights, bind_weights(cfg, *store));
  // The tensors decide the expert layout (see docs/checkpoints.md); record what was bound.
  if (!m->weights.layers.empty()) cfg.expert_format = m->weights.layers[0].gate_up.format;
  m->config = std::move(cfg);
  m->store = std::move(store);
  m->dir = dir;
  m->layout = model_bind::is_original_layout(*m->store) ? "openai-original" : "huggingface";
  return m;
}

}  // namespace gossamer

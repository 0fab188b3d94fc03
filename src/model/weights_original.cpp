// Binding of OpenAI's own checkpoint layout (the `original/` directory of a gpt-oss snapshot,
// the names of openai/gpt-oss torch/model.py). The tensors hold the same bytes as the Hugging
// Face layout's, under other names, with Q, K and V fused:
//
// | original tensor                               | Hugging Face tensor (LayerWeights field)   |
// | --------------------------------------------- | ------------------------------------------ |
// | embedding.weight                              | model.embed_tokens.weight                  |
// | block.N.attn.norm.scale                       | input_layernorm.weight (attn_norm)         |
// | block.N.attn.qkv.weight / .bias [(H+2K)D, h]  | q_proj / k_proj / v_proj rows, in order    |
// | block.N.attn.sinks                            | self_attn.sinks                            |
// | block.N.attn.out.weight / .bias               | o_proj                                     |
// | block.N.mlp.norm.scale                        | post_attention_layernorm.weight            |
// | block.N.mlp.gate.weight / .bias               | mlp.router                                 |
// | block.N.mlp.mlp1_weight.blocks / .scales      | gate_up_proj_blocks / _scales (interleaved)|
// | block.N.mlp.mlp1_bias, mlp2_bias              | gate_up_proj_bias, down_proj_bias          |
// | block.N.mlp.mlp2_weight.blocks / .scales      | down_proj_blocks / _scales                 |
// | norm.scale, unembedding.weight                | model.norm.weight, lm_head.weight          |
//
// The fused QKV tensor is bound once and viewed as its three row ranges (no copy).
#include "model/weights_original.h"

namespace gossamer::model_bind {
namespace {

// Rows [r0, r0 + n) of a row-major matrix (or elements of a vector) as a view.
TensorRef rows_of(const TensorRef& t, int64_t r0, int64_t n) {
  TensorRef v = t;
  const int64_t row = t.shape.size() > 1 ? t.shape[1] : 1;
  v.data = static_cast<const uint8_t*>(t.data) + r0 * row * dtype_size(t.dtype);
  v.shape[0] = n;
  return v;
}

Status bind_original_attention(const ModelConfig& c, const Binder& b, const std::string& p,
                               LayerWeights* w) {
  const int64_t h = c.hidden_size, q = c.num_attention_heads * c.head_dim;
  const int64_t kv = c.num_key_value_heads * c.head_dim;
  TensorRef qkv, qkv_b;
  GS_RETURN_IF_ERROR(b.flt(p + "qkv.weight", {q + 2 * kv, h}, &qkv));
  GS_RETURN_IF_ERROR(b.flt(p + "qkv.bias", {q + 2 * kv}, &qkv_b));
  w->q_w = rows_of(qkv, 0, q), w->k_w = rows_of(qkv, q, kv), w->v_w = rows_of(qkv, q + kv, kv);
  w->q_b = rows_of(qkv_b, 0, q), w->k_b = rows_of(qkv_b, q, kv);
  w->v_b = rows_of(qkv_b, q + kv, kv);
  GS_RETURN_IF_ERROR(b.flt(p + "out.weight", {h, q}, &w->o_w));
  GS_RETURN_IF_ERROR(b.flt(p + "out.bias", {h}, &w->o_b));
  return b.flt(p + "sinks", {c.num_attention_heads}, &w->sinks);
}

Status bind_original_layer(const ModelConfig& c, const Binder& b, int64_t i, LayerWeights* w) {
  const std::string p = "block." + std::to_string(i) + ".";
  const int64_t h = c.hidden_size, inter = c.intermediate_size, e = c.num_local_experts;
  GS_RETURN_IF_ERROR(b.flt(p + "attn.norm.scale", {h}, &w->attn_norm));
  GS_RETURN_IF_ERROR(bind_original_attention(c, b, p + "attn.", w));
  GS_RETURN_IF_ERROR(b.flt(p + "mlp.norm.scale", {h}, &w->mlp_norm));
  GS_RETURN_IF_ERROR(b.flt(p + "mlp.gate.weight", {e, h}, &w->router_w));
  GS_RETURN_IF_ERROR(b.flt(p + "mlp.gate.bias", {e}, &w->router_b));
  const std::string x1 = p + "mlp.mlp1_weight", x2 = p + "mlp.mlp2_weight";
  GS_RETURN_IF_ERROR(b.mxfp4(x1 + ".blocks", x1 + ".scales", e, 2 * inter, h, &w->gate_up));
  GS_RETURN_IF_ERROR(b.flt(p + "mlp.mlp1_bias", {e, 2 * inter}, &w->gate_up_b));
  GS_RETURN_IF_ERROR(b.mxfp4(x2 + ".blocks", x2 + ".scales", e, h, inter, &w->down));
  return b.flt(p + "mlp.mlp2_bias", {e, h}, &w->down_b);
}

}  // namespace

bool is_original_layout(const TensorStore& store) {
  return !store.contains("model.embed_tokens.weight") && store.contains("embedding.weight");
}

Status bind_original(const ModelConfig& c, const Binder& b, ModelWeights* w) {
  if (c.expert_format != ExpertFormat::kMxfp4) {
    return InvalidArgument(b.store().describe() + " holds the original gpt-oss layout (MXFP4 " +
                           "experts), but its config.json declares dequantized experts (no " +
                           "quantization_config)");
  }
  const int64_t v = c.vocab_size, h = c.hidden_size;
  GS_RETURN_IF_ERROR(b.flt("embedding.weight", {v, h}, &w->embed));
  w->layers.resize(static_cast<size_t>(c.num_hidden_layers));
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    GS_RETURN_IF_ERROR(bind_original_layer(c, b, i, &w->layers[static_cast<size_t>(i)]));
  }
  GS_RETURN_IF_ERROR(check_extra_layers(c, b.store(), "block."));
  GS_RETURN_IF_ERROR(b.flt("norm.scale", {h}, &w->final_norm));
  return b.flt("unembedding.weight", {v, h}, &w->lm_head);
}

}  // namespace gossamer::model_bind

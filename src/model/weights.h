// Typed, shape-checked views of a gpt-oss checkpoint's tensors (no copies: they point into the
// mmapped safetensors files, which the TensorStore owns and must outlive the views).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "common/status.h"
#include "model/config.h"

namespace gossamer {

class TensorStore;  // model/safetensors.h

enum class DType { kBF16, kF16, kF32, kF64, kU8, kI8, kI16, kI32, kI64, kBool, kF8E4M3, kF8E5M2 };
const char* dtype_name(DType d);
int64_t dtype_size(DType d);
// IEEE binary16 -> float (exact: subnormals, inf, NaN).
float f16_to_float(uint16_t h);

// A tensor view: data points into an mmapped file. Row-major.
struct TensorRef {
  const void* data = nullptr;
  DType dtype = DType::kBF16;
  std::vector<int64_t> shape;
  int64_t numel() const;
  // Element i as float (bf16/f16/f32 only); for small vectors (norms, biases, sinks).
  float get(int64_t i) const;
  const uint16_t* bf16() const { return static_cast<const uint16_t*>(data); }
  const uint8_t* u8() const { return static_cast<const uint8_t*>(data); }
};

// MoE expert matrices. For a projection with `rows` outputs and `cols` inputs:
//  kMxfp4: blocks [E, rows, cols/32, 16] u8 (low nibble first), scales [E, rows, cols/32] u8 E8M0
//  kBf16:  dense  [E, cols, rows] bf16 (HF's dequantized layout: input dim first; F16 / F32
//          checkpoints bind too, with dense.dtype saying which)
// gate_up rows are interleaved: row 2j is gate j, row 2j+1 is up j.
struct ExpertMatrix {
  ExpertFormat format = ExpertFormat::kMxfp4;
  int64_t rows = 0, cols = 0;
  TensorRef blocks, scales;  // kMxfp4
  TensorRef dense;           // kBf16
};

struct LayerWeights {
  TensorRef attn_norm;           // [hidden]
  TensorRef q_w, q_b;            // [heads*head_dim, hidden], [heads*head_dim]
  TensorRef k_w, k_b;            // [kv_heads*head_dim, hidden], [kv_heads*head_dim]
  TensorRef v_w, v_b;            // [kv_heads*head_dim, hidden], [kv_heads*head_dim]
  TensorRef o_w, o_b;            // [hidden, heads*head_dim], [hidden]
  TensorRef sinks;               // [heads] (bf16 or f32)
  TensorRef mlp_norm;            // [hidden]
  TensorRef router_w, router_b;  // [experts, hidden], [experts]
  ExpertMatrix gate_up;          // rows 2*I, cols hidden
  TensorRef gate_up_b;           // [experts, 2*I]
  ExpertMatrix down;             // rows hidden, cols I
  TensorRef down_b;              // [experts, hidden]
};

struct ModelWeights {
  TensorRef embed;  // [vocab, hidden] bf16
  std::vector<LayerWeights> layers;
  TensorRef final_norm;  // [hidden]
  TensorRef lm_head;     // [vocab, hidden] bf16 (== embed when tie_word_embeddings)
};

// Looks up every tensor the config implies, checks dtype and shape, and returns views.
// Errors name the tensor, the file, the expected and the found dtype/shape.
Result<ModelWeights> bind_weights(const ModelConfig& cfg, const TensorStore& store);

// A loaded model: config + the store that owns the mmaps + the bound views.
struct LoadedModel {
  ModelConfig config;
  std::shared_ptr<const TensorStore> store;
  ModelWeights weights;
  std::string dir;
  // Tensor names: "huggingface" (model.layers.N...) or "openai-original" (block.N..., the
  // original/ directory of a snapshot).
  std::string layout;
};
// Loads DIR/config.json and DIR/*.safetensors (single file or sharded through
// model.safetensors.index.json) and binds the weights.
Result<std::shared_ptr<LoadedModel>> load_model(const std::string& dir);

}  // namespace gossamer

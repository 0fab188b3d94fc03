// Internal to src/model: OpenAI's own checkpoint layout (`embedding.weight`, `block.N.attn.qkv`,
// ..., the `original/` directory of a gpt-oss snapshot) bound into the same ModelWeights as the
// Hugging Face layout (weights_original.cpp has the name table).
#pragma once

#include <string>

#include "model/binder.h"

namespace gossamer::model_bind {

// The store holds the original names (embedding.weight) and not the Hugging Face ones.
bool is_original_layout(const TensorStore& store);
// Every tensor the config implies, under the original names (qkv viewed as q, k, v).
Status bind_original(const ModelConfig& c, const Binder& b, ModelWeights* w);
// A tensor `<prefix>N.` with N >= num_hidden_layers: the config does not match the weights.
Status check_extra_layers(const ModelConfig& c, const TensorStore& store,
                          const std::string& prefix);

}  // namespace gossamer::model_bind

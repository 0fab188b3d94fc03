// gpt-oss model configuration, parsed from a Hugging Face config.json.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"

namespace gossamer {

enum class LayerType { kSlidingAttention, kFullAttention };

// How the MoE expert weights are stored in the checkpoint.
enum class ExpertFormat {
  kMxfp4,  // *_blocks uint8 [E, rows, cols/32, 16] + *_scales uint8 E8M0 [E, rows, cols/32]
  kBf16,   // dequantized HF layout: gate_up_proj [E, hidden, 2*I], down_proj [E, I, hidden]
};

struct RopeScaling {
  std::string rope_type = "yarn";  // "yarn" or "none" (no scaling)
  double factor = 32.0;
  double beta_fast = 32.0;
  double beta_slow = 1.0;
  int64_t original_max_position_embeddings = 4096;
  bool truncate = false;
  // Scale of cos/sin: > 0 as given (yarn's attention_factor, or mscale / mscale_all_dim);
  // 0: derived from factor (0.1 ln(factor) + 1, 1 when factor <= 1).
  double attention_factor = 0;
};

struct ModelConfig {
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;  // per expert
  int64_t num_hidden_layers = 0;
  int64_t num_attention_heads = 0;
  int64_t num_key_value_heads = 0;
  int64_t head_dim = 0;
  int64_t num_local_experts = 0;
  int64_t experts_per_token = 0;
  int64_t sliding_window = 0;
  int64_t max_position_embeddings = 0;
  int64_t initial_context_length = 0;
  double rope_theta = 0;
  double rms_norm_eps = 0;
  double swiglu_limit = 0;
  RopeScaling rope_scaling;
  std::vector<LayerType> layer_types;  // size num_hidden_layers
  std::vector<int64_t> eos_token_ids;
  int64_t pad_token_id = -1;
  bool tie_word_embeddings = false;
  bool attention_bias = true;
  ExpertFormat expert_format = ExpertFormat::kMxfp4;  // from quantization_config

  // Checks every field for presence-derived sanity (positive sizes, divisibility: hidden and
  // intermediate by 32 for MXFP4, heads by kv heads, layer_types length...). The message names
  // the offending field.
  Status validate() const;
};

// Parses config.json text. `source` names the file in error messages.
Result<ModelConfig> parse_config_json(const std::string& text, const std::string& source);
// Reads and parses DIR/config.json (or a direct path to a .json file).
Result<ModelConfig> load_config(const std::string& path);
// Serialises to HF config.json text (used by `gossamer synth`).
std::string config_to_json(const ModelConfig& cfg);

// Presets for `gossamer synth`: "tiny", "20b", "120b". NotFound for other names.
Result<ModelConfig> preset_config(const std::string& name);

}  // namespace gossamer

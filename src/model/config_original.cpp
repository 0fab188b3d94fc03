// config.json of OpenAI's own checkpoint layout (the `original/` directory of a gpt-oss
// snapshot, read by openai/gpt-oss's torch/model.py as `ModelConfig(**config)`), translated into
// the Hugging Face fields that parse_fields() reads:
//
// | original field                | Hugging Face field                                         |
// | ----------------------------- | ---------------------------------------------------------- |
// | num_experts                   | num_local_experts                                          |
// | rope_scaling_factor (> 1)     | rope_scaling {rope_type yarn, factor, truncate false}      |
// | rope_ntk_beta / rope_ntk_alpha| rope_scaling.beta_fast / beta_slow (YaRN's low / high)     |
// | initial_context_length        | rope_scaling.original_max_position_embeddings; times the   |
// |                               | factor: max_position_embeddings                            |
//
// The other fields keep their names (num_hidden_layers, experts_per_token, vocab_size,
// hidden_size, intermediate_size, swiglu_limit, head_dim, num_attention_heads,
// num_key_value_heads, sliding_window, rope_theta). A field the file leaves out takes the
// reference dataclass's default (the gpt-oss-120b value), as torch/model.py does. What the
// original layout fixes: RMSNorm eps 1e-5, attention biases, a separate unembedding, sliding
// window on even layers (layer_types absent: the same alternation; sliding_window 0: every
// layer full), MXFP4 experts.
#include <algorithm>
#include <utility>

#include "model/config_json.h"

namespace gossamer::config_json {
namespace {

// torch/model.py ModelConfig's defaults.
const std::pair<const char*, double> kOriginalDefaults[] = {
    {"num_hidden_layers", 36},   {"num_experts", 128},
    {"experts_per_token", 4},    {"vocab_size", 201088},
    {"hidden_size", 2880},       {"intermediate_size", 2880},
    {"swiglu_limit", 7.0},       {"head_dim", 64},
    {"num_attention_heads", 64}, {"num_key_value_heads", 8},
    {"sliding_window", 128},     {"initial_context_length", 4096},
    {"rope_theta", 150000.0},    {"rope_scaling_factor", 32.0},
    {"rope_ntk_alpha", 1.0},     {"rope_ntk_beta", 32.0}};

// The original field `key` (its default when absent or null).
Result<json> field(const json& root, const char* key, double dflt) {
  if (!has(root, key)) return json(dflt);
  if (!root.at(key).is_number()) {
    return field_error(key, "must be a number, found " + type_of(root.at(key)));
  }
  return root.at(key);
}

}  // namespace

bool is_original_config(const json& root) {
  if (has(root, "model_type") || has(root, "architectures") || has(root, "num_local_experts")) {
    return false;
  }
  for (const char* k : {"num_experts", "rope_scaling_factor", "rope_ntk_alpha", "rope_ntk_beta"})
    if (root.contains(k)) return true;
  return false;
}

Result<json> original_to_hf(const json& root) {
  json o;
  for (const auto& [key, dflt] : kOriginalDefaults) {
    GS_ASSIGN_OR_RETURN(o[key], field(root, key, dflt));
  }
  GS_ASSIGN_OR_RETURN(const double factor,
                      get_double(o["rope_scaling_factor"], "rope_scaling_factor"));
  GS_ASSIGN_OR_RETURN(const int64_t ctx,
                      get_int(o["initial_context_length"], "initial_context_length"));
  if (ctx < 1) return field_error("initial_context_length", "must be > 0");
  // The context YaRN stretches it to (an int64 cast of a larger double would be undefined).
  const double stretched = static_cast<double>(ctx) * std::max(factor, 1.0);
  if (stretched > static_cast<double>(int64_t{1} << 31)) {
    return field_error("rope_scaling_factor",
                       "times initial_context_length exceeds 2^31 positions");
  }
  json hf = o;
  GS_ASSIGN_OR_RETURN(const int64_t window, get_int(o["sliding_window"], "sliding_window"));
  GS_ASSIGN_OR_RETURN(const int64_t layers, get_int(o["num_hidden_layers"], "num_hidden_layers"));
  if (window == 0 && layers > 0 && layers <= (int64_t{1} << 16)) {
    // torch/model.py gives the even layers sliding_window, and a window of 0 is no window: every
    // layer attends to the whole context.
    hf["layer_types"] = json::array();
    for (int64_t i = 0; i < layers; ++i) hf["layer_types"].push_back("full_attention");
  }
  for (const char* k : {"num_experts", "rope_scaling_factor", "rope_ntk_alpha", "rope_ntk_beta"})
    hf.erase(k);
  hf["num_local_experts"] = o["num_experts"];
  hf["rms_norm_eps"] = 1e-5;
  hf["attention_bias"] = true;
  hf["tie_word_embeddings"] = false;
  hf["quantization_config"] = {{"quant_method", "mxfp4"}};  // experts as blocks + scales
  if (factor > 1.0) {  // torch/model.py: YaRN only when the factor is above 1
    hf["rope_scaling"] = {{"rope_type", "yarn"},
                          {"factor", factor},
                          {"beta_fast", o["rope_ntk_beta"]},
                          {"beta_slow", o["rope_ntk_alpha"]},
                          {"original_max_position_embeddings", ctx},
                          {"truncate", false}};
    hf["max_position_embeddings"] = static_cast<int64_t>(stretched);
  } else {
    hf["rope_scaling"] = {{"rope_type", "default"}};
    hf["max_position_embeddings"] = ctx;
  }
  return hf;
}

}  // namespace gossamer::config_json

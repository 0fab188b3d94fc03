// Hugging Face gpt-oss config.json <-> ModelConfig, and ModelConfig::validate().
#include "model/config.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "common/file_util.h"
#include "common/json_depth.h"
#include "model/config_json.h"

namespace gossamer {
namespace {

using namespace config_json;  // NOLINT: the field readers shared with config_rope.cpp

// Upper bounds that keep every size product (e.g. vocab * hidden * bytes) far inside int64 and
// reject obviously corrupt values early.
constexpr int64_t kMaxDim = int64_t{1} << 24;    // vocab, hidden, intermediate, positions
constexpr int64_t kMaxCount = int64_t{1} << 16;  // layers, heads, experts
constexpr int64_t kMaxPositions = int64_t{1} << 31;
// GptOssConfig's defaults for fields a config.json may leave out (transformers 4.55+ and 5.x).
constexpr int64_t kDefaultHeadDim = 64, kDefaultKvHeads = 8, kDefaultTopK = 4;
constexpr int64_t kDefaultSlidingWindow = 128;
constexpr double kDefaultRmsNormEps = 1e-5;

Status require_int(const json& obj, const char* key, int64_t* out) {
  if (!has(obj, key)) return field_error(key, "is missing");
  GS_ASSIGN_OR_RETURN(*out, get_int(obj.at(key), key));
  return Status::Ok();
}

Status optional_int(const json& obj, const char* key, int64_t* out) {
  if (has(obj, key)) {
    GS_ASSIGN_OR_RETURN(*out, get_int(obj.at(key), key));
  }
  return Status::Ok();
}

Status optional_double(const json& obj, const char* key, double* out) {
  if (has(obj, key)) {
    GS_ASSIGN_OR_RETURN(*out, get_double(obj.at(key), key));
  }
  return Status::Ok();
}

Status optional_bool(const json& obj, const char* key, bool* out) {
  if (has(obj, key)) {
    GS_ASSIGN_OR_RETURN(*out, get_bool(obj.at(key), key));
  }
  return Status::Ok();
}

// gpt-oss's SwiGLU uses alpha = 1.702, which ModelConfig does not carry: reject other values.
Status check_swiglu_alpha(const json& root) {
  if (!has(root, "swiglu_alpha")) return Status::Ok();
  GS_ASSIGN_OR_RETURN(double alpha, get_double(root.at("swiglu_alpha"), "swiglu_alpha"));
  if (std::fabs(alpha - 1.702) > 1e-9) {
    return Unsupported("field 'swiglu_alpha' = " + std::to_string(alpha) +
                       " is not supported (gpt-oss uses 1.702)");
  }
  return Status::Ok();
}

// layer_types: absent => alternating sliding/full starting with sliding (HF's default).
Status parse_layer_types(const json& root, ModelConfig* cfg) {
  cfg->layer_types.clear();
  if (!has(root, "layer_types")) {
    if (cfg->num_hidden_layers <= 0 || cfg->num_hidden_layers > kMaxCount) return Status::Ok();
    for (int64_t i = 0; i < cfg->num_hidden_layers; ++i) {
      cfg->layer_types.push_back(i % 2 == 0 ? LayerType::kSlidingAttention
                                            : LayerType::kFullAttention);
    }
    return Status::Ok();
  }
  const json& v = root.at("layer_types");
  if (!v.is_array()) return field_error("layer_types", "must be an array, found " + type_of(v));
  for (size_t i = 0; i < v.size(); ++i) {
    const std::string path = "layer_types[" + std::to_string(i) + "]";
    if (!v[i].is_string()) return field_error(path, "must be a string");
    const std::string s = v[i].get<std::string>();
    if (s == "sliding_attention") {
      cfg->layer_types.push_back(LayerType::kSlidingAttention);
    } else if (s == "full_attention") {
      cfg->layer_types.push_back(LayerType::kFullAttention);
    } else {
      return field_error(path, "has unknown value '" + s +
                                   "' (expected \"sliding_attention\" or \"full_attention\")");
    }
  }
  return Status::Ok();
}

Status parse_experts_per_token(const json& root, ModelConfig* cfg) {
  const bool a = has(root, "experts_per_token"), b = has(root, "num_experts_per_tok");
  cfg->experts_per_token = kDefaultTopK;  // neither: GptOssConfig's num_experts_per_tok default
  if (!a && !b) return Status::Ok();
  int64_t va = 0, vb = 0;
  if (a) GS_RETURN_IF_ERROR(require_int(root, "experts_per_token", &va));
  if (b) GS_RETURN_IF_ERROR(require_int(root, "num_experts_per_tok", &vb));
  if (a && b && va != vb) {
    return field_error("experts_per_token", "(" + std::to_string(va) +
                                                ") disagrees with num_experts_per_tok (" +
                                                std::to_string(vb) + ")");
  }
  cfg->experts_per_token = a ? va : vb;
  return Status::Ok();
}

Status parse_token_ids(const json& root, ModelConfig* cfg) {
  cfg->eos_token_ids.clear();
  if (has(root, "eos_token_id")) {
    const json& v = root.at("eos_token_id");
    if (v.is_array()) {
      for (size_t i = 0; i < v.size(); ++i) {
        const std::string path = "eos_token_id[" + std::to_string(i) + "]";
        GS_ASSIGN_OR_RETURN(int64_t id, get_int(v[i], path));
        cfg->eos_token_ids.push_back(id);
      }
    } else {
      GS_ASSIGN_OR_RETURN(int64_t id, get_int(root.at("eos_token_id"), "eos_token_id"));
      cfg->eos_token_ids.push_back(id);
    }
  }
  return optional_int(root, "pad_token_id", &cfg->pad_token_id);
}

Status parse_quantization(const json& root, ModelConfig* cfg) {
  cfg->expert_format = ExpertFormat::kBf16;
  if (!has(root, "quantization_config")) return Status::Ok();
  const json& q = root.at("quantization_config");
  if (!q.is_object()) return field_error("quantization_config", "must be an object");
  if (!has(q, "quant_method") || !q.at("quant_method").is_string()) {
    return field_error("quantization_config.quant_method", "is missing or not a string");
  }
  const std::string m = q.at("quant_method").get<std::string>();
  if (m != "mxfp4") {
    return Unsupported("field 'quantization_config.quant_method' has unsupported value '" + m +
                       "' (only \"mxfp4\" is supported)");
  }
  cfg->expert_format = ExpertFormat::kMxfp4;
  return Status::Ok();
}

// Absent fields take GptOssConfig's defaults: head_dim 64 (hidden / heads only when written as
// null), num_key_value_heads 8 (num_attention_heads when null), sliding_window 128.
Status parse_shape(const json& root, ModelConfig* cfg) {
  GS_RETURN_IF_ERROR(require_int(root, "vocab_size", &cfg->vocab_size));
  GS_RETURN_IF_ERROR(require_int(root, "hidden_size", &cfg->hidden_size));
  GS_RETURN_IF_ERROR(require_int(root, "intermediate_size", &cfg->intermediate_size));
  GS_RETURN_IF_ERROR(require_int(root, "num_hidden_layers", &cfg->num_hidden_layers));
  GS_RETURN_IF_ERROR(require_int(root, "num_attention_heads", &cfg->num_attention_heads));
  cfg->num_key_value_heads =
      root.contains("num_key_value_heads") ? cfg->num_attention_heads : kDefaultKvHeads;
  GS_RETURN_IF_ERROR(optional_int(root, "num_key_value_heads", &cfg->num_key_value_heads));
  GS_RETURN_IF_ERROR(require_int(root, "num_local_experts", &cfg->num_local_experts));
  GS_RETURN_IF_ERROR(parse_experts_per_token(root, cfg));
  cfg->head_dim = kDefaultHeadDim;
  if (root.contains("head_dim") && cfg->num_attention_heads > 0) {
    cfg->head_dim = cfg->hidden_size / cfg->num_attention_heads;
  }
  GS_RETURN_IF_ERROR(optional_int(root, "head_dim", &cfg->head_dim));
  GS_RETURN_IF_ERROR(parse_layer_types(root, cfg));
  cfg->sliding_window = root.contains("sliding_window") ? 0 : kDefaultSlidingWindow;
  return optional_int(root, "sliding_window", &cfg->sliding_window);
}

Status parse_fields(const json& root, ModelConfig* cfg) {
  GS_RETURN_IF_ERROR(parse_shape(root, cfg));
  cfg->rms_norm_eps = kDefaultRmsNormEps;
  GS_RETURN_IF_ERROR(optional_double(root, "rms_norm_eps", &cfg->rms_norm_eps));
  cfg->swiglu_limit = 7.0;
  GS_RETURN_IF_ERROR(optional_double(root, "swiglu_limit", &cfg->swiglu_limit));
  cfg->max_position_embeddings = 131072;
  GS_RETURN_IF_ERROR(optional_int(root, "max_position_embeddings", &cfg->max_position_embeddings));
  GS_RETURN_IF_ERROR(parse_rope(root, cfg));
  GS_RETURN_IF_ERROR(check_swiglu_alpha(root));
  cfg->initial_context_length = 4096;
  GS_RETURN_IF_ERROR(optional_int(root, "initial_context_length", &cfg->initial_context_length));
  GS_RETURN_IF_ERROR(parse_token_ids(root, cfg));
  cfg->tie_word_embeddings = false;
  GS_RETURN_IF_ERROR(optional_bool(root, "tie_word_embeddings", &cfg->tie_word_embeddings));
  cfg->attention_bias = true;
  GS_RETURN_IF_ERROR(optional_bool(root, "attention_bias", &cfg->attention_bias));
  return parse_quantization(root, cfg);
}

Status check_range(const char* field, int64_t v, int64_t lo, int64_t hi) {
  if (v < lo || v > hi) {
    return field_error(field, "= " + std::to_string(v) + " is out of range [" + std::to_string(lo) +
                                  ", " + std::to_string(hi) + "]");
  }
  return Status::Ok();
}

}  // namespace

Status ModelConfig::validate() const {
  GS_RETURN_IF_ERROR(check_range("vocab_size", vocab_size, 1, kMaxDim));
  GS_RETURN_IF_ERROR(check_range("hidden_size", hidden_size, 1, kMaxDim));
  GS_RETURN_IF_ERROR(check_range("intermediate_size", intermediate_size, 1, kMaxDim));
  GS_RETURN_IF_ERROR(check_range("num_hidden_layers", num_hidden_layers, 1, kMaxCount));
  GS_RETURN_IF_ERROR(check_range("num_attention_heads", num_attention_heads, 1, kMaxCount));
  GS_RETURN_IF_ERROR(
      check_range("num_key_value_heads", num_key_value_heads, 1, num_attention_heads));
  if (num_attention_heads % num_key_value_heads != 0) {
    return field_error("num_attention_heads", "(" + std::to_string(num_attention_heads) +
                                                  ") is not a multiple of num_key_value_heads (" +
                                                  std::to_string(num_key_value_heads) + ")");
  }
  GS_RETURN_IF_ERROR(check_range("head_dim", head_dim, 1, kMaxCount));
  if (head_dim % 2 != 0) return field_error("head_dim", "must be even (rotary pairs)");
  GS_RETURN_IF_ERROR(check_range("num_local_experts", num_local_experts, 1, kMaxCount));
  GS_RETURN_IF_ERROR(check_range("experts_per_token", experts_per_token, 1, num_local_experts));
  if (expert_format == ExpertFormat::kMxfp4) {
    if (hidden_size % 32 != 0)
      return field_error("hidden_size", "must be a multiple of 32 for MXFP4");
    if (intermediate_size % 32 != 0) {
      return field_error("intermediate_size", "must be a multiple of 32 for MXFP4");
    }
  }
  if (static_cast<int64_t>(layer_types.size()) != num_hidden_layers) {
    return field_error("layer_types", "has " + std::to_string(layer_types.size()) +
                                          " entries, expected num_hidden_layers = " +
                                          std::to_string(num_hidden_layers));
  }
  for (LayerType t : layer_types) {
    if (t == LayerType::kSlidingAttention && sliding_window <= 0) {
      return field_error("sliding_window", "must be > 0 when a layer uses sliding_attention");
    }
  }
  GS_RETURN_IF_ERROR(check_range("sliding_window", sliding_window, 0, kMaxPositions));
  GS_RETURN_IF_ERROR(
      check_range("max_position_embeddings", max_position_embeddings, 1, kMaxPositions));
  GS_RETURN_IF_ERROR(
      check_range("initial_context_length", initial_context_length, 1, kMaxPositions));
  if (!(rms_norm_eps > 0) || !std::isfinite(rms_norm_eps)) {
    return field_error("rms_norm_eps", "must be > 0");
  }
  if (!(swiglu_limit > 0) || !std::isfinite(swiglu_limit)) {
    return field_error("swiglu_limit", "must be > 0");
  }
  GS_RETURN_IF_ERROR(validate_rope(*this));
  for (size_t i = 0; i < eos_token_ids.size(); ++i) {
    GS_RETURN_IF_ERROR(check_range(("eos_token_id[" + std::to_string(i) + "]").c_str(),
                                   eos_token_ids[i], 0, vocab_size - 1));
  }
  if (pad_token_id != -1) {
    GS_RETURN_IF_ERROR(check_range("pad_token_id", pad_token_id, 0, vocab_size - 1));
  }
  return Status::Ok();
}

Result<ModelConfig> parse_config_json(const std::string& text, const std::string& source) {
  json root;
  if (size_t nul = json_nul_byte(text); nul != std::string::npos) {
    return InvalidArgument(source + ": not valid JSON (a NUL byte at byte offset " +
                           std::to_string(nul) + ")");
  }
  try {
    root = json::parse(text);
  } catch (const json::parse_error& e) {  // e.byte: 1-based index of the offending byte
    return InvalidArgument(source + ": not valid JSON (near byte offset " +
                           std::to_string(e.byte > 0 ? e.byte - 1 : 0) + "): " + e.what());
  } catch (const json::exception& e) {
    return InvalidArgument(source + ": not valid JSON: " + e.what());
  }
  if (!root.is_object()) return InvalidArgument(source + ": top level is not a JSON object");
  ModelConfig cfg;
  if (is_original_config(root)) {  // openai/gpt-oss's layout: its fields mapped (config_original)
    Result<json> hf = original_to_hf(root);
    if (!hf.ok()) return hf.status().With(source);
    root = std::move(*hf);
  }
  Status s = parse_fields(root, &cfg);
  if (s.ok()) s = cfg.validate();
  if (!s.ok()) return s.With(source);
  return cfg;
}

Result<ModelConfig> load_config(const std::string& path) {
  std::error_code ec;
  std::filesystem::path p(path);
  if (std::filesystem::is_directory(p, ec)) p /= "config.json";
  Result<std::string> text = read_regular_file(p.string());  // a FIFO or directory: an error
  if (!text.ok() && text.status().code() == StatusCode::kNotFound) {
    return NotFound(p.string() + ": cannot open config file (it does not exist)");
  }
  if (!text.ok()) return text.status();
  return parse_config_json(*text, p.string());
}

std::string config_to_json(const ModelConfig& c) {
  json j;
  j["architectures"] = {"GptOssForCausalLM"};
  j["model_type"] = "gpt_oss";
  j["vocab_size"] = c.vocab_size;
  j["hidden_size"] = c.hidden_size;
  j["intermediate_size"] = c.intermediate_size;
  j["num_hidden_layers"] = c.num_hidden_layers;
  j["num_attention_heads"] = c.num_attention_heads;
  j["num_key_value_heads"] = c.num_key_value_heads;
  j["head_dim"] = c.head_dim;
  j["num_local_experts"] = c.num_local_experts;
  j["experts_per_token"] = c.experts_per_token;
  j["num_experts_per_tok"] = c.experts_per_token;
  j["sliding_window"] = c.sliding_window;
  j["max_position_embeddings"] = c.max_position_embeddings;
  j["initial_context_length"] = c.initial_context_length;
  j["rope_theta"] = c.rope_theta;
  j["rms_norm_eps"] = c.rms_norm_eps;
  j["swiglu_limit"] = c.swiglu_limit;
  j["hidden_act"] = "silu";
  if (c.rope_scaling.rope_type == "none") {
    j["rope_scaling"] = {{"rope_type", "default"}};  // null would mean the default yarn
  } else {
    const RopeScaling& r = c.rope_scaling;
    j["rope_scaling"] = {{"rope_type", r.rope_type},
                         {"factor", r.factor},
                         {"beta_fast", r.beta_fast},
                         {"beta_slow", r.beta_slow},
                         {"original_max_position_embeddings", r.original_max_position_embeddings},
                         {"truncate", r.truncate}};
    if (r.attention_factor > 0) j["rope_scaling"]["attention_factor"] = r.attention_factor;
  }
  json lt = json::array();
  for (LayerType t : c.layer_types) {
    lt.push_back(t == LayerType::kSlidingAttention ? "sliding_attention" : "full_attention");
  }
  j["layer_types"] = lt;
  if (c.eos_token_ids.size() == 1) {
    j["eos_token_id"] = c.eos_token_ids[0];
  } else if (!c.eos_token_ids.empty()) {
    j["eos_token_id"] = c.eos_token_ids;
  }
  if (c.pad_token_id >= 0) j["pad_token_id"] = c.pad_token_id;
  j["tie_word_embeddings"] = c.tie_word_embeddings;
  j["attention_bias"] = c.attention_bias;
  if (c.expert_format == ExpertFormat::kMxfp4) {
    j["quantization_config"] = {{"quant_method", "mxfp4"},
                                {"modules_to_not_convert",
                                 {"model.layers.*.self_attn", "model.layers.*.mlp.router",
                                  "model.embed_tokens", "lm_head"}}};
  }
  return j.dump(2) + "\n";
}

}  // namespace gossamer

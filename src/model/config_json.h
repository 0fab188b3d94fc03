// Internal to src/model: typed field readers for config.json (nlohmann::json), shared by
// config.cpp and config_rope.cpp. Every error names the field path.
#pragma once

#include <cmath>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "common/status.h"
#include "model/config.h"

namespace gossamer::config_json {

using json = nlohmann::json;

inline Status field_error(const std::string& field, const std::string& what) {
  return InvalidArgument("field '" + field + "' " + what);
}

inline std::string type_of(const json& v) {
  return v.is_null() ? "null" : v.type_name();
}

// Reads an integer field. JSON floats with an integral value (e.g. 4096.0) are accepted.
inline Result<int64_t> get_int(const json& v, const std::string& path) {
  if (v.is_number_integer()) {
    if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) {
      return field_error(path, "is too large");
    }
    return v.get<int64_t>();
  }
  if (v.is_number_float()) {
    const double d = v.get<double>();
    if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9.0e15) {
      return static_cast<int64_t>(d);
    }
    return field_error(path, "must be an integer, found " + v.dump());
  }
  return field_error(path, "must be an integer, found " + type_of(v));
}

inline Result<double> get_double(const json& v, const std::string& path) {
  if (!v.is_number()) return field_error(path, "must be a number, found " + type_of(v));
  const double d = v.get<double>();
  if (!std::isfinite(d)) return field_error(path, "must be finite");
  return d;
}

inline Result<bool> get_bool(const json& v, const std::string& path) {
  if (!v.is_boolean()) return field_error(path, "must be a boolean, found " + type_of(v));
  return v.get<bool>();
}

// Present and not null.
inline bool has(const json& obj, const char* key) {
  return obj.contains(key) && !obj.at(key).is_null();
}

// rope_theta, rope_scaling / rope_parameters into cfg->rope_theta and cfg->rope_scaling
// (config_rope.cpp). Needs cfg->max_position_embeddings already parsed.
Status parse_rope(const json& root, ModelConfig* cfg);
// Range checks of the rope fields (part of ModelConfig::validate()).
Status validate_rope(const ModelConfig& c);

// OpenAI's own layout (the `original/` directory of a snapshot): its config.json has
// `num_experts` / `rope_scaling_factor` / `rope_ntk_*` and no model_type (config_original.cpp).
bool is_original_config(const json& root);
// That config as the Hugging Face fields (defaults of torch/model.py's ModelConfig filled in).
Result<json> original_to_hf(const json& root);

}  // namespace gossamer::config_json

// rope_theta and the rotary scaling of config.json, resolved the way transformers 5's
// GptOssConfig resolves them (configuration_gpt_oss.py + modeling_rope_utils.py):
//
// - the rope dict is a non-empty `rope_scaling` object, else `rope_parameters` (when present and
//   not null), else GptOssConfig's default yarn (factor 32, betas 32/1, original 4096,
//   truncate false). So `rope_scaling: null` or `{}` means that default yarn, not "no scaling";
// - its type is `rope_type`, else the legacy `type`, else "default" (plain RoPE);
// - rope_theta: the dict's, else the top-level one, else 150000 (GptOssConfig.default_theta);
// - yarn: `factor` is required (null: max_position_embeddings / original); the original context
//   is the top-level `original_max_position_embeddings`, else the dict's, else
//   max_position_embeddings; beta_fast / beta_slow default to 32 / 1 when absent, null or 0;
//   `truncate` defaults to true; `attention_factor` (or mscale / mscale_all_dim) override the
//   cos/sin scale 0.1 ln(factor) + 1.
#include <cmath>

#include "model/config_json.h"

namespace gossamer::config_json {
namespace {

constexpr double kDefaultTheta = 150000.0;
constexpr int64_t kMaxPositions = int64_t{1} << 31;

const json& default_yarn() {
  static const json kYarn = {{"rope_type", "yarn"}, {"factor", 32.0},
                             {"beta_fast", 32.0},   {"beta_slow", 1.0},
                             {"truncate", false},   {"original_max_position_embeddings", 4096}};
  return kYarn;
}

// The dict transformers ends up with (a pointer into `root`, never a copy: copying a json value
// recurses, and a deeply nested config would overflow the stack), and the config key it came
// from (for error messages).
Result<std::pair<const json*, std::string>> rope_dict(const json& root) {
  if (root.contains("rope_scaling")) {
    const json& v = root.at("rope_scaling");
    if (!v.is_null() && !v.is_object()) {
      return field_error("rope_scaling", "must be an object or null, found " + type_of(v));
    }
    if (v.is_object() && !v.empty()) return std::pair{&v, std::string("rope_scaling")};
  }
  if (has(root, "rope_parameters")) {
    const json& p = root.at("rope_parameters");
    if (!p.is_object()) {
      return field_error("rope_parameters", "must be an object or null, found " + type_of(p));
    }
    return std::pair{&p, std::string("rope_parameters")};
  }
  return std::pair{&default_yarn(), std::string("rope_scaling")};
}

Status parse_theta(const json& root, const json& d, const std::string& key, ModelConfig* cfg) {
  cfg->rope_theta = kDefaultTheta;
  const bool top = has(root, "rope_theta");
  if (top) {
    GS_ASSIGN_OR_RETURN(cfg->rope_theta, get_double(root.at("rope_theta"), "rope_theta"));
  }
  if (has(d, "rope_theta")) {
    GS_ASSIGN_OR_RETURN(double theta, get_double(d.at("rope_theta"), key + ".rope_theta"));
    if (top && theta != cfg->rope_theta) {
      return field_error("rope_theta", "disagrees with " + key + ".rope_theta");
    }
    cfg->rope_theta = theta;
  }
  // Partial rotary embeddings are not part of gpt-oss (transformers' gpt-oss attention cannot run
  // them either): refuse rather than rotate the wrong dimensions.
  for (const json* obj : {&root, &d}) {
    if (!has(*obj, "partial_rotary_factor")) continue;
    GS_ASSIGN_OR_RETURN(double f,
                        get_double(obj->at("partial_rotary_factor"), "partial_rotary_factor"));
    if (f != 1.0) {
      return Unsupported("field 'partial_rotary_factor' = " + std::to_string(f) +
                         " is not supported (gpt-oss rotates the whole head)");
    }
  }
  return Status::Ok();
}

// `d.name` when present, not null and not 0, else `fallback` (transformers' `get(...) or x`).
Status number_or(const json& d, const char* name, const std::string& key, double fallback,
                 double* out) {
  *out = fallback;
  if (!has(d, name)) return Status::Ok();
  GS_ASSIGN_OR_RETURN(double v, get_double(d.at(name), key + "." + name));
  if (v != 0.0) *out = v;
  return Status::Ok();
}

double mscale(double factor, double m) {
  return factor <= 1.0 ? 1.0 : 0.1 * m * std::log(factor) + 1.0;
}

Status parse_yarn(const json& root, const json& d, const std::string& key, int64_t max_pos,
                  RopeScaling* rs) {
  rs->original_max_position_embeddings = max_pos;
  for (const auto& [obj, path] :
       {std::pair{&d, key + ".original_max_position_embeddings"},
        std::pair{&root, std::string("original_max_position_embeddings")}}) {
    if (has(*obj, "original_max_position_embeddings")) {
      GS_ASSIGN_OR_RETURN(rs->original_max_position_embeddings,
                          get_int(obj->at("original_max_position_embeddings"), path));
    }
  }
  if (!d.contains("factor")) return field_error(key + ".factor", "is missing (yarn needs it)");
  if (d.at("factor").is_null()) {
    if (rs->original_max_position_embeddings <= 0) {
      return field_error(key + ".original_max_position_embeddings", "must be > 0");
    }
    rs->factor =
        static_cast<double>(max_pos) / static_cast<double>(rs->original_max_position_embeddings);
  } else {
    GS_ASSIGN_OR_RETURN(rs->factor, get_double(d.at("factor"), key + ".factor"));
  }
  GS_RETURN_IF_ERROR(number_or(d, "beta_fast", key, 32.0, &rs->beta_fast));
  GS_RETURN_IF_ERROR(number_or(d, "beta_slow", key, 1.0, &rs->beta_slow));
  rs->truncate = true;  // `get("truncate", True)`: absent => true, null => false
  if (d.contains("truncate")) {
    const json& t = d.at("truncate");
    rs->truncate = false;
    if (!t.is_null()) {
      GS_ASSIGN_OR_RETURN(rs->truncate, get_bool(t, key + ".truncate"));
    }
  }
  rs->attention_factor = 0;
  if (has(d, "attention_factor")) {
    GS_ASSIGN_OR_RETURN(rs->attention_factor,
                        get_double(d.at("attention_factor"), key + ".attention_factor"));
    if (!(rs->attention_factor > 0)) return field_error(key + ".attention_factor", "must be > 0");
    return Status::Ok();
  }
  double ms = 0, ms_all = 0;
  GS_RETURN_IF_ERROR(number_or(d, "mscale", key, 0.0, &ms));
  GS_RETURN_IF_ERROR(number_or(d, "mscale_all_dim", key, 0.0, &ms_all));
  if (ms != 0 && ms_all != 0) {
    rs->attention_factor = mscale(rs->factor, ms) / mscale(rs->factor, ms_all);
  }
  return Status::Ok();
}

}  // namespace

Status parse_rope(const json& root, ModelConfig* cfg) {
  cfg->rope_scaling = RopeScaling{};
  GS_ASSIGN_OR_RETURN(auto dk, rope_dict(root));
  const json& d = *dk.first;
  const std::string& key = dk.second;
  for (const char* layer_type : {"sliding_attention", "full_attention"}) {
    if (d.contains(layer_type)) {  // transformers' gpt-oss cannot run this form either
      return Unsupported("field '" + key + "." + layer_type +
                         "': rope parameters per layer type are not supported");
    }
  }
  GS_RETURN_IF_ERROR(parse_theta(root, d, key, cfg));
  std::string type = "default";
  for (const char* k : {"rope_type", "type"}) {
    if (!has(d, k)) continue;
    if (!d.at(k).is_string()) return field_error(key + "." + k, "must be a string");
    type = d.at(k).get<std::string>();
    break;
  }
  if (type == "default" || type == "none") {
    cfg->rope_scaling.rope_type = "none";
    return Status::Ok();
  }
  if (type != "yarn") {
    return field_error(key + ".rope_type",
                       "has unsupported value '" + type + "' (expected \"yarn\" or \"default\")");
  }
  return parse_yarn(root, d, key, cfg->max_position_embeddings, &cfg->rope_scaling);
}

Status validate_rope(const ModelConfig& c) {
  // The rotary frequencies theta^(-2i/d) must fall with i (and yarn divides by ln theta).
  if (!(c.rope_theta > 1) || !std::isfinite(c.rope_theta)) {
    return field_error("rope_theta", "must be > 1, found " + std::to_string(c.rope_theta));
  }
  const RopeScaling& r = c.rope_scaling;
  if (r.rope_type == "none") return Status::Ok();
  if (r.rope_type != "yarn") {
    return field_error("rope_scaling.rope_type", "must be \"yarn\" or \"none\"");
  }
  if (!(r.factor > 0) || !std::isfinite(r.factor)) {
    return field_error("rope_scaling.factor", "must be > 0");
  }
  if (!(r.beta_fast > 0) || !(r.beta_slow > 0) || !std::isfinite(r.beta_fast) ||
      !std::isfinite(r.beta_slow)) {
    return field_error("rope_scaling.beta_fast", "and beta_slow must be > 0");
  }
  if (r.attention_factor < 0 || !std::isfinite(r.attention_factor)) {
    return field_error("rope_scaling.attention_factor", "must be > 0");
  }
  if (r.original_max_position_embeddings < 1 ||
      r.original_max_position_embeddings > kMaxPositions) {
    return field_error("rope_scaling.original_max_position_embeddings",
                       "= " + std::to_string(r.original_max_position_embeddings) +
                           " is out of range [1, " + std::to_string(kMaxPositions) + "]");
  }
  return Status::Ok();
}

}  // namespace gossamer::config_json

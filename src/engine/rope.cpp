#include "engine/rope.h"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace gossamer {
namespace {

// Dimension index (in [0, dim)) at which a frequency completes `rotations` turns over `max_pos`.
double correction_dim(double rotations, double dim, double base, double max_pos) {
  return dim * std::log(max_pos / (rotations * 2.0 * std::numbers::pi)) / (2.0 * std::log(base));
}

}  // namespace

Result<RopeTable> make_rope_table(const ModelConfig& cfg) {
  const int64_t d = cfg.head_dim;
  if (d <= 0 || d % 2 != 0) {
    return InvalidArgument("rope: head_dim must be positive and even, got " + std::to_string(d));
  }
  if (!(cfg.rope_theta > 1.0)) {
    return InvalidArgument("rope: rope_theta must be > 1, got " + std::to_string(cfg.rope_theta));
  }
  RopeTable t;
  t.head_dim = d;
  const int64_t half = d / 2;
  t.inv_freq.resize(static_cast<size_t>(half));
  std::vector<double> extra(static_cast<size_t>(half));
  for (int64_t i = 0; i < half; ++i) {
    extra[i] = 1.0 / std::pow(cfg.rope_theta, static_cast<double>(2 * i) / static_cast<double>(d));
  }
  const RopeScaling& rs = cfg.rope_scaling;
  if (rs.rope_type == "none" || rs.rope_type == "default" || rs.rope_type.empty()) {
    t.inv_freq = extra;
    return t;
  }
  if (rs.rope_type != "yarn") {
    return Unsupported("rope: rope_scaling.rope_type '" + rs.rope_type +
                       "' (supported: yarn, none)");
  }
  if (!(rs.factor > 0) || rs.original_max_position_embeddings <= 0 || !(rs.beta_fast > 0) ||
      !(rs.beta_slow > 0)) {
    return InvalidArgument(
        "rope: yarn needs factor, beta_fast, beta_slow, original_max_position_embeddings > 0");
  }
  const double dim = static_cast<double>(d);
  const double omax = static_cast<double>(rs.original_max_position_embeddings);
  double low = correction_dim(rs.beta_fast, dim, cfg.rope_theta, omax);
  double high = correction_dim(rs.beta_slow, dim, cfg.rope_theta, omax);
  if (rs.truncate) {
    low = std::floor(low);
    high = std::ceil(high);
  }
  low = std::max(low, 0.0);
  high = std::min(high, dim - 1);
  if (low == high) high += 0.001;  // avoid a zero-width ramp
  for (int64_t i = 0; i < half; ++i) {
    const double ramp = std::clamp((static_cast<double>(i) - low) / (high - low), 0.0, 1.0);
    const double extrapolation_weight = 1.0 - ramp;
    const double interp = extra[i] / rs.factor;
    t.inv_freq[i] = interp * (1.0 - extrapolation_weight) + extra[i] * extrapolation_weight;
  }
  t.attention_scaling = rs.attention_factor > 0 ? rs.attention_factor
                        : rs.factor <= 1.0      ? 1.0
                                                : 0.1 * std::log(rs.factor) + 1.0;
  return t;
}

void rope_cos_sin(const RopeTable& t, int64_t pos, float* cos_out, float* sin_out) {
  const int64_t half = t.head_dim / 2;
  for (int64_t i = 0; i < half; ++i) {
    const double a = static_cast<double>(pos) * t.inv_freq[i];
    cos_out[i] = static_cast<float>(std::cos(a) * t.attention_scaling);
    sin_out[i] = static_cast<float>(std::sin(a) * t.attention_scaling);
  }
}

void apply_rope(float* x, const float* cos_v, const float* sin_v, int64_t head_dim) {
  const int64_t h = head_dim / 2;
  for (int64_t i = 0; i < h; ++i) {
    const float a = x[i], b = x[i + h];
    x[i] = a * cos_v[i] - b * sin_v[i];
    x[i + h] = b * cos_v[i] + a * sin_v[i];
  }
}

}  // namespace gossamer

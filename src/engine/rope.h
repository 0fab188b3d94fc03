// Rotary position embedding for gpt-oss: YaRN-scaled inverse frequencies (as in Hugging Face's
// `_compute_yarn_parameters`) and the half-split (non-interleaved) rotation.
#pragma once

#include <cstdint>
#include <vector>

#include "common/status.h"
#include "model/config.h"

namespace gossamer {

struct RopeTable {
  int64_t head_dim = 0;
  std::vector<double> inv_freq;    // [head_dim / 2]
  double attention_scaling = 1.0;  // multiplies cos and sin (YaRN: rope_scaling.attention_factor
                                   // when set, else mscale 0.1 ln(factor) + 1)
};

// rope_type "yarn": inv_freq blends interpolated (theta^-2i/d / factor) and extrapolated
// (theta^-2i/d) frequencies with a linear ramp between the correction dims of beta_fast and
// beta_slow over original_max_position_embeddings (floored/ceiled when `truncate`).
// rope_type "none" (or "default"): plain theta^-2i/d, scaling 1.
Result<RopeTable> make_rope_table(const ModelConfig& cfg);

// cos/sin [head_dim / 2] for one position, already multiplied by attention_scaling.
void rope_cos_sin(const RopeTable& t, int64_t pos, float* cos_out, float* sin_out);

// Rotates one head vector x [head_dim] in place: with h = head_dim / 2 and i < h,
// (x[i], x[i+h]) <- (x[i] cos_i - x[i+h] sin_i, x[i+h] cos_i + x[i] sin_i).
void apply_rope(float* x, const float* cos_v, const float* sin_v, int64_t head_dim);

}  // namespace gossamer

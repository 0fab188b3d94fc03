// Shared by the qkv_rope tests: gpt-oss-like YaRN frequencies for QkvRopeParams.
#pragma once

#include <cmath>

#include "kernels/qkv_rope/params.h"

namespace gossamer::kern::testing {

// gpt-oss-like YaRN frequencies (theta 150000, factor 32, beta 32/1, original ctx 4096).
inline void fill_yarn(QkvRopeParams* p) {
  const double theta = 150000, factor = 32, d = kHeadDim;
  auto corr = [&](double rot) {
    return d * std::log(4096 / (rot * 2 * M_PI)) / (2 * std::log(theta));
  };
  const double lo = corr(32), hi = corr(1);
  for (int i = 0; i < kHeadDim / 2; ++i) {
    const double ex = std::pow(theta, -2.0 * i / d);
    const double ramp = std::fmin(std::fmax((i - lo) / (hi - lo), 0.0), 1.0);
    p->inv_freq[i] = ex / factor * ramp + ex * (1 - ramp);
  }
  p->rope_scale = static_cast<float>(0.1 * std::log(factor) + 1);
}

// Shape and KV-cache geometry of a test launch, with the YaRN frequencies above (pointers unset).
inline QkvRopeParams shaped_params(int batch, int hidden, int n_heads, int n_kv_heads,
                                   int block_size, int max_blocks, int num_blocks) {
  QkvRopeParams p;
  p.batch = batch;
  p.hidden = hidden;
  p.n_heads = n_heads;
  p.n_kv_heads = n_kv_heads;
  p.block_size = block_size;
  p.max_blocks = max_blocks;
  p.num_blocks = num_blocks;
  fill_yarn(&p);
  return p;
}

}  // namespace gossamer::kern::testing

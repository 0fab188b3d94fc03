// Flash-decoding split merge shared by attn_combine_f32 (kernels/attention) and
// flash_attn_combine_f32 (kernels/flash_attn): one (row, head) = `bh`, one output dim = `d` per
// thread. Split s left its running max and sum in part_ml[bh, s, 0..1] (log2 units) and its
// unnormalised output in part_o[bh, s, :]; the sink joins the softmax as one more column
// (exp2(sink * log2e)) whose value is dropped.
#pragma once

#include <cstddef>

namespace gossamer::kern {

template <int kD>
__device__ __forceinline__ void combine_splits_with_sink(const float* part_ml, const float* part_o,
                                                         float sink, int splits, int bh, int d,
                                                         float* out) {
  constexpr float kLog2eF = 1.4426950408889634f;
  const float* ml = part_ml + static_cast<size_t>(bh) * splits * 2;
  const float sink2 = sink * kLog2eF;
  float m = sink2;
  for (int s = 0; s < splits; ++s) m = fmaxf(m, ml[2 * s]);
  float den = exp2f(sink2 - m), o = 0.f;
  const float* po = part_o + static_cast<size_t>(bh) * splits * kD;
  for (int s = 0; s < splits; ++s) {
    const float w = exp2f(ml[2 * s] - m);
    den = fmaf(ml[2 * s + 1], w, den);
    o = fmaf(po[static_cast<size_t>(s) * kD + d], w, o);
  }
  out[static_cast<size_t>(bh) * kD + d] = o / den;
}

}  // namespace gossamer::kern

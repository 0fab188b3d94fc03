// Warp-level top-k + softmax over one row of router logits (shared by topk_softmax_f32 and the
// fused norm_router_topk kernel). Lane l holds logits l, l+32, ... (up to 8); k rounds of a warp
// arg-max (value, then lower index: torch.topk order) remove the winner; lane 0 writes the ids
// and the softmax over the k chosen logits.
#pragma once

#include <cfloat>
#include <cstdint>

#include "kernels/common/device.cuh"

namespace gossamer::kern {

inline constexpr int kTopkMaxPerLane = 8, kTopkMaxK = 8;

// l: [n_experts] logits (global or shared memory), n_experts <= 256, k <= 8.
// ids / weights: [k] outputs of this row.
__device__ __forceinline__ void warp_topk_softmax(const float* l, int n_experts, int k,
                                                  int32_t* ids, float* weights) {
  const int lane = threadIdx.x & 31;
  float v[kTopkMaxPerLane];
#pragma unroll
  for (int j = 0; j < kTopkMaxPerLane; ++j) {
    const int e = lane + 32 * j;
    v[j] = e < n_experts ? l[e] : -FLT_MAX;
  }
  float top_v[kTopkMaxK];
  int top_i[kTopkMaxK];
  for (int r = 0; r < k; ++r) {
    float bv = -FLT_MAX;
    int bi = 0x7fffffff;
#pragma unroll
    for (int j = 0; j < kTopkMaxPerLane; ++j) {
      const int e = lane + 32 * j;
      if (e < n_experts && (v[j] > bv || (v[j] == bv && e < bi))) bv = v[j], bi = e;
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
      const float ov = __shfl_xor_sync(0xffffffffu, bv, o);
      const int oi = __shfl_xor_sync(0xffffffffu, bi, o);
      if (ov > bv || (ov == bv && oi < bi)) bv = ov, bi = oi;
    }
#pragma unroll
    for (int j = 0; j < kTopkMaxPerLane; ++j)
      if (lane + 32 * j == bi) v[j] = -FLT_MAX;  // removed from later rounds
    top_v[r] = bv;
    top_i[r] = bi;
  }
  if (lane != 0) return;
  float den = 0.f;
  for (int r = 0; r < k; ++r) den += __expf(top_v[r] - top_v[0]);
  for (int r = 0; r < k; ++r) {
    ids[r] = top_i[r];
    weights[r] = __expf(top_v[r] - top_v[0]) / den;
  }
}

}  // namespace gossamer::kern

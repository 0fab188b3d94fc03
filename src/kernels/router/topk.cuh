// Warp-level top-k + softmax over one row of router logits (shared by topk_softmax_f32 and the
// fused norm_router_topk kernels). Lane l holds logits l, l+32, ... (up to 8); k rounds pick
// the largest value, ties to the lower index (torch.topk order); lane 0 writes the ids (sorted
// descending) and the softmax over the k chosen logits.
#pragma once

#include <cstdint>

#include "kernels/common/device.cuh"

namespace gossamer::kern {

inline constexpr int kTopkMaxPerLane = 8, kTopkMaxK = 8;

// The key of a logit: its orderable bits with -0 taken as +0 (they compare equal) and NaN as 0
// (below every number: chosen only when fewer than k numbers remain).
__device__ __forceinline__ uint32_t topk_key(float v) {
  return v != v ? 0u : float_order_bits(v == 0.f ? 0.f : v);
}

// Lane l takes the logits of experts l + 32 j (j < NPL, n_experts <= 32 NPL) and sorts them
// (key descending, index ascending); each of the k rounds is then two warp reductions
// (__reduce_max_sync of the keys of the lanes' heads, __reduce_min_sync of the index among the
// lanes holding that key) after which the winning lane drops its head. (Session 10: the
// shuffle-butterfly version over all values took ~1.5 us of the router's tail on the H100, this
// one a few hundred ns.)
template <int NPL>
__device__ __forceinline__ void warp_topk_softmax_n(const float* l, int n_experts, int k,
                                                    int32_t* ids, float* weights) {
  const int lane = threadIdx.x & 31;
  uint32_t key[NPL], idx[NPL];
#pragma unroll
  for (int j = 0; j < NPL; ++j) {
    const int e = lane + 32 * j;
    key[j] = e < n_experts ? topk_key(l[e]) : 0u;
    idx[j] = e < n_experts ? static_cast<uint32_t>(e) : 0xffffffffu;
  }
#pragma unroll
  for (int a = 0; a < NPL; ++a) {
#pragma unroll
    for (int j = NPL - 1; j > a; --j) {
      const bool swap = key[j] > key[j - 1] || (key[j] == key[j - 1] && idx[j] < idx[j - 1]);
      const uint32_t tk = swap ? key[j] : key[j - 1], ti = swap ? idx[j] : idx[j - 1];
      key[j] = swap ? key[j - 1] : key[j], idx[j] = swap ? idx[j - 1] : idx[j];
      key[j - 1] = tk, idx[j - 1] = ti;
    }
  }
  float top_v[kTopkMaxK];  // indexed by unrolled constants only: registers, no local memory
  int top_i[kTopkMaxK];
#pragma unroll
  for (int r = 0; r < kTopkMaxK; ++r) {
    if (r >= k) break;
    const uint32_t m = __reduce_max_sync(0xffffffffu, key[0]);
    const uint32_t wi = __reduce_min_sync(0xffffffffu, key[0] == m ? idx[0] : 0xffffffffu);
    if (idx[0] == wi) {  // this lane's head won: drop it
#pragma unroll
      for (int j = 0; j + 1 < NPL; ++j) key[j] = key[j + 1], idx[j] = idx[j + 1];
      key[NPL - 1] = 0u, idx[NPL - 1] = 0xffffffffu;
    }
    top_v[r] = float_from_order_bits(m);
    top_i[r] = static_cast<int>(wi);
  }
  if (lane != 0) return;
  float den = 0.f;
#pragma unroll
  for (int r = 0; r < kTopkMaxK; ++r)
    if (r < k) den += __expf(top_v[r] - top_v[0]);
#pragma unroll
  for (int r = 0; r < kTopkMaxK; ++r) {
    if (r < k) {
      ids[r] = top_i[r];
      weights[r] = __expf(top_v[r] - top_v[0]) / den;
    }
  }
}

// l: [n_experts] logits (global or shared memory), n_experts <= 256, k <= 8.
// ids / weights: [k] outputs of this row (written by lane 0).
__device__ __forceinline__ void warp_topk_softmax(const float* l, int n_experts, int k,
                                                  int32_t* ids, float* weights) {
  if (n_experts <= 128) {
    warp_topk_softmax_n<4>(l, n_experts, k, ids, weights);
  } else {
    warp_topk_softmax_n<kTopkMaxPerLane>(l, n_experts, k, ids, weights);
  }
}

}  // namespace gossamer::kern

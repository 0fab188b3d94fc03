// Pieces shared by the two fused norm + router + top-k kernels (norm_router.cu: cluster of 8,
// norm_router_wide.cu: cluster of ceil(E / (8 RPW))), both 256 threads per block. Internal to
// src/kernels/router.
#pragma once

#include <cooperative_groups.h>

#include "kernels/common/device.cuh"
#include "kernels/common/gemv_core.cuh"
#include "kernels/router/params.h"
#include "kernels/router/topk.cuh"

namespace gossamer::kern::router_detail {

inline constexpr int kBlockThreads = 256;

// This block's 1/csize slice of xn (float4 chunks rank, rank + csize, ... of each of the nb rows
// from b0): xn = (x * inv_rms) * gain, the rmsnorm kernel's fp32 operations. x: [nb, hidden].
template <int BT>
__device__ __forceinline__ void write_xn_slice(const NormRouterParams& p, const float* x, int b0,
                                               int nb, const float (&inv)[BT], int rank,
                                               int csize) {
  const int n4 = p.hidden / 4;
  const uint2* g = reinterpret_cast<const uint2*>(p.norm_w);
  for (int b = 0; b < nb; ++b) {
    const float4* xr = reinterpret_cast<const float4*>(x + static_cast<size_t>(b) * p.hidden);
    float4* yr = reinterpret_cast<float4*>(p.xn + static_cast<size_t>(b0 + b) * p.hidden);
    for (int i = rank * kBlockThreads + threadIdx.x; i < n4; i += csize * kBlockThreads) {
      yr[i] = scale4_bf16(__ldg(xr + i), inv[b], __ldg(g + i));
    }
  }
}

// The router bias of this warp's rows e0 .. e0 + n_rows - 1 (<= RPW; 0 without a bias), read by
// lane 0 before pdl_wait (a weight: pdl.h rule 1). Read after the GEMV it was one dependent DRAM
// round trip (the bias is evicted by every step's weight stream) right before the logits store.
template <int RPW>
__device__ __forceinline__ void load_router_bias(const NormRouterParams& p, int e0, int n_rows,
                                                 float (&bias)[RPW]) {
  const int lane = threadIdx.x & 31;
#pragma unroll
  for (int r = 0; r < RPW; ++r) bias[r] = lane == 0 && p.bias && r < n_rows ? p.bias[e0 + r] : 0.f;
}

// After the GEMV: waits on the split cluster barrier (arrived before pdl_wait), then lane 0 of
// each warp stores its first n_rows (<= RPW) logits rows e0, e0 + 1, ... (+ bias from
// load_router_bias: the same fp32 add as gemv_bf16w_f32a, so the bits equal the unfused path)
// for the nb batch rows into the leader block's logit_s through the cluster (DSMEM), and to
// p.logits when given; after cluster.sync() warp b of the leader runs the top-k softmax of batch
// row b0 + b.
template <int BT, int RPW, int MaxE>
__device__ __forceinline__ void cluster_logits_topk(const NormRouterParams& p,
                                                    cooperative_groups::cluster_group& cluster,
                                                    float (&logit_s)[BT][MaxE],
                                                    const float (&acc)[RPW][BT],
                                                    const float (&bias)[RPW], int e0, int n_rows,
                                                    int b0, int nb) {
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  asm volatile("barrier.cluster.wait.aligned;" ::: "memory");
  if (lane == 0) {
    float* leader = cluster.map_shared_rank(&logit_s[0][0], 0);
#pragma unroll
    for (int r = 0; r < RPW; ++r) {
      if (r >= n_rows) continue;
      const int e = e0 + r;
#pragma unroll
      for (int b = 0; b < BT; ++b) {
        if (b >= nb) continue;
        const float v = acc[r][b] + bias[r];
        leader[b * MaxE + e] = v;
        if (p.logits) p.logits[static_cast<size_t>(b0 + b) * p.n_experts + e] = v;
      }
    }
  }
  cluster.sync();  // all logits of the tile are in the leader's shared memory
  if (cluster.block_rank() != 0 || warp >= nb) return;
  const size_t o = static_cast<size_t>(b0 + warp) * p.k;
  warp_topk_softmax(&logit_s[warp][0], p.n_experts, p.k, p.ids + o, p.weights + o);
}

}  // namespace gossamer::kern::router_detail

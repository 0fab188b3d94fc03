// The merges of attn_decode_mma_bf16kv_f32q (decode_mma.cu): its 4 warps' softmax states
// through shared memory, and the last CTA's merge of a (row, kv head)'s split partials with the
// sink. Device code only; included by decode_mma.cu.
#pragma once

#include <cfloat>
#include <cstdint>

#include "kernels/attention/params.h"

namespace gossamer::kern::attn_merge {

constexpr int kD = 64, kWarps = 4;
constexpr int kOStride = kD + 4;  // merge scratch row stride (floats)

// The last CTA of a (row, kv head): merges the ns partials of query head h, dims d8 .. d8 + 7,
// with the sink (sk: sinks[h] * log2 e; one pass, running max). Partials come from other SMs:
// read through L2.
__device__ __forceinline__ void merge_partials(const AttnParams& p, int b, int h, int d8, int ns,
                                               float sk) {
  const size_t prow0 = (static_cast<size_t>(b) * p.n_heads + h) * p.splits;
  float m = sk, den = 1.f, o[8] = {};
#pragma unroll 4
  for (int s = 0; s < ns; ++s) {
    const float2 ml = __ldcg(reinterpret_cast<const float2*>(p.part_ml + (prow0 + s) * 2));
    const float4* src = reinterpret_cast<const float4*>(p.part_o + (prow0 + s) * kD + d8);
    const float4 x0 = __ldcg(src), x1 = __ldcg(src + 1);
    const float mn = fmaxf(m, ml.x), a = exp2f(m - mn), wt = exp2f(ml.x - mn);
    den = fmaf(den, a, ml.y * wt);
    const float xs[8] = {x0.x, x0.y, x0.z, x0.w, x1.x, x1.y, x1.z, x1.w};
#pragma unroll
    for (int i = 0; i < 8; ++i) o[i] = fmaf(o[i], a, xs[i] * wt);
    m = mn;
  }
  float4* dst =
      reinterpret_cast<float4*>(p.out + (static_cast<size_t>(b) * p.n_heads + h) * kD + d8);
  const float inv = 1.f / den;
  dst[0] = make_float4(o[0] * inv, o[1] * inv, o[2] * inv, o[3] * inv);
  dst[1] = make_float4(o[4] * inv, o[5] * inv, o[6] * inv, o[7] * inv);
}

// Merges the 4 warps' (m, l, o) of query row `row` (head h), dims d8 .. d8 + 7, from the
// shared-memory scratch; writes `out` (ns == 1, sink sk = sinks[h] * log2 e folded in) or this
// split's partial.
__device__ __forceinline__ void merge_warps(const AttnParams& p, const float* sm_o, int b, int h,
                                            int row, int d8, int z, int ns, float sk) {
  const float* sm_m = sm_o + kWarps * 16 * kOStride;  // [4 x 16]
  const float* sm_l = sm_m + kWarps * 16;             // [4 x 16]
  float mm = -INFINITY;
#pragma unroll
  for (int k = 0; k < kWarps; ++k) mm = fmaxf(mm, sm_m[k * 16 + row]);
  float l = 0.f, o[8] = {};
#pragma unroll
  for (int k = 0; k < kWarps; ++k) {
    const float mk = sm_m[k * 16 + row];
    const float wt = mk == -INFINITY ? 0.f : exp2f(mk - mm);
    l = fmaf(sm_l[k * 16 + row], wt, l);
    const float* src = sm_o + (k * 16 + row) * kOStride + d8;
#pragma unroll
    for (int i = 0; i < 8; ++i) o[i] = fmaf(src[i], wt, o[i]);
  }
  if (ns == 1) {  // sink folded in: final output
    const float mx = fmaxf(mm, sk);
    const float wt = mm == -INFINITY ? 0.f : exp2f(mm - mx);
    const float fac = wt / fmaf(l, wt, exp2f(sk - mx));
    float4* dst =
        reinterpret_cast<float4*>(p.out + (static_cast<size_t>(b) * p.n_heads + h) * kD + d8);
    dst[0] = make_float4(o[0] * fac, o[1] * fac, o[2] * fac, o[3] * fac);
    dst[1] = make_float4(o[4] * fac, o[5] * fac, o[6] * fac, o[7] * fac);
  } else {
    const size_t prow = (static_cast<size_t>(b) * p.n_heads + h) * p.splits + z;
    float4* dst = reinterpret_cast<float4*>(p.part_o + prow * kD + d8);
    dst[0] = make_float4(o[0], o[1], o[2], o[3]);
    dst[1] = make_float4(o[4], o[5], o[6], o[7]);
    if (d8 == 0) {
      p.part_ml[prow * 2] = mm == -INFINITY ? -FLT_MAX : mm;
      p.part_ml[prow * 2 + 1] = l;
    }
  }
}

// Last-CTA-done merge (the grid-sync pattern): the barrier orders the CTA's partial writes
// before thread 0's device-scope fence + ticket; the ns-th CTA fences again and merges.
__device__ __forceinline__ void last_cta_merge(const AttnParams& p, int b, int kh, int h,
                                               bool merges, int d8, int ns, float sk, int& s_last) {
  __syncthreads();
  int32_t* ticket = p.tickets + static_cast<size_t>(b) * p.n_kv_heads + kh;
  if (threadIdx.x == 0) {
    __threadfence();
    s_last = atomicAdd(ticket, 1) == ns - 1;
    if (s_last) __threadfence();
  }
  __syncthreads();
  if (!s_last) return;
  if (merges) merge_partials(p, b, h, d8, ns, sk);
  if (threadIdx.x == 0) *ticket = 0;  // every CTA of this (row, kv head) has taken its ticket
}

}  // namespace gossamer::kern::attn_merge

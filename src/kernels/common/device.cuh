// Device helpers shared by the kernels: bf16 / MXFP4 decoding, warp reductions, 16-byte loads.
#pragma once

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace gossamer::kern {

__device__ __forceinline__ float bf16_lo(uint32_t w) {
  return __uint_as_float(w << 16);
}
__device__ __forceinline__ float bf16_hi(uint32_t w) {
  return __uint_as_float(w & 0xffff0000u);
}

// Round-to-nearest-even float -> bf16 bits (NaN kept NaN), matching common/numerics.h.
__device__ __forceinline__ uint16_t f32_to_bf16(float f) {
  uint32_t u = __float_as_uint(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

// Two floats -> bf16x2 bits (a in the low half), each as f32_to_bf16.
__device__ __forceinline__ uint32_t bf16x2_rne(float a, float b) {
  return f32_to_bf16(a) | (static_cast<uint32_t>(f32_to_bf16(b)) << 16);
}
// x - bf16_rne(x): the lo half of the split bf16 hi + lo representation of x.
__device__ __forceinline__ float bf16_rest(float x) {
  return x - __uint_as_float(static_cast<uint32_t>(f32_to_bf16(x)) << 16);
}
// Four floats as 4 bf16 to *hi and (split mode) their residuals as 4 bf16 to *lo; either may be
// null.
__device__ __forceinline__ void store_bf16x4(const float4& v, uint2* hi, uint2* lo) {
  if (hi) *hi = make_uint2(bf16x2_rne(v.x, v.y), bf16x2_rne(v.z, v.w));
  if (lo) {
    *lo = make_uint2(bf16x2_rne(bf16_rest(v.x), bf16_rest(v.y)),
                     bf16x2_rne(bf16_rest(v.z), bf16_rest(v.w)));
  }
}

// Orderable bits of a float: a larger value gives a larger unsigned key (-0 below +0; NaN not
// ordered). Used by the argmax keys (gemv_core.cuh) and the router top-k (router/topk.cuh).
__device__ __forceinline__ uint32_t float_order_bits(float v) {
  const uint32_t u = __float_as_uint(v);
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}
__device__ __forceinline__ float float_from_order_bits(uint32_t key) {
  return __uint_as_float((key & 0x80000000u) ? (key & 0x7fffffffu) : ~key);
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// 16-byte streaming load of weights (read once per step: do not keep in L1).
__device__ __forceinline__ uint4 ld_stream16(const void* p) {
  return __ldcs(reinterpret_cast<const uint4*>(p));
}

// E8M0 scale byte times 1/2 (mxfp4_dot32_cvt below yields 2 x the dot product): 2^(e - 128).
__device__ __forceinline__ float e8m0_half(uint32_t e) {
  return e >= 2 ? __uint_as_float((e - 1) << 23) : (e == 1 ? 5.877471754e-39f : 2.938735877e-39f);
}

// MXFP4 (E2M1) decode through half2 conversions (F2F; a prmt-LUT decode without conversions was
// measured slower and removed in session 4, docs/moe-decode.md). For a word w
// (elements 0..7: byte k low nibble = element 2k), e2m1_pair(w, s), s in {0,4,8,12}, returns
// {elem(s/4), elem(s/4 + 4)} times 2^-14 (3 magnitude bits at half bits 9..11, sign at bit 15:
// exact for every E2M1 value including the subnormal 0.5).
__device__ __forceinline__ float2 e2m1_pair(uint32_t w, int s) {
  const uint32_t v = w >> s;
  const uint32_t bits = ((v & 0x00070007u) << 9) | ((v & 0x00080008u) << 12);
  return __half22float2(*reinterpret_cast<const __half2*>(&bits));
}

// Dot product of one 16-byte MXFP4 block (32 values, low nibble first) with 32 fp32 activations
// x[0..31], times 2 (multiply by e8m0_half(scale)): the 2^-14 of e2m1_pair is undone by 2^15.
__device__ __forceinline__ float mxfp4_dot32_cvt(uint4 q, const float4* x) {
  float acc = 0.f;
  const uint32_t w[4] = {q.x, q.y, q.z, q.w};
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const float4 lo = x[2 * j], hi = x[2 * j + 1];
    float2 p = e2m1_pair(w[j], 0);
    acc = fmaf(p.x, lo.x, fmaf(p.y, hi.x, acc));
    p = e2m1_pair(w[j], 4);
    acc = fmaf(p.x, lo.y, fmaf(p.y, hi.y, acc));
    p = e2m1_pair(w[j], 8);
    acc = fmaf(p.x, lo.z, fmaf(p.y, hi.z, acc));
    p = e2m1_pair(w[j], 12);
    acc = fmaf(p.x, lo.w, fmaf(p.y, hi.w, acc));
  }
  return acc * 32768.0f;
}

}  // namespace gossamer::kern

// Device helpers shared by the kernels: bf16 / MXFP4 decoding, warp reductions, 16-byte loads.
#pragma once

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace gossamer::kern {

__device__ __forceinline__ float bf16_lo(uint32_t w) { return __uint_as_float(w << 16); }
__device__ __forceinline__ float bf16_hi(uint32_t w) { return __uint_as_float(w & 0xffff0000u); }

// Round-to-nearest-even float -> bf16 bits (NaN kept NaN), matching common/numerics.h.
__device__ __forceinline__ uint16_t f32_to_bf16(float f) {
  uint32_t u = __float_as_uint(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
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

// MXFP4 (E2M1) decode, 2 values per instruction group. For a 32-bit word holding bytes b0..b3
// (each: low nibble = even element, high nibble = odd element, i.e. elements 0..7 of the word),
// e2m1_pair(w, s) for s in {0,4,8,12} returns the half2 {elem(s/4), elem(s/4 + 4)} scaled by
// 2^-14: the nibble's 3 magnitude bits are placed at half bits 9..11 (exponent low bits + top
// mantissa bit) and its sign at bit 15, which makes every E2M1 value (normal and the 0.5
// subnormal) exactly 2^-14 times its true value. Callers fold 2^14 into the block scale.
__device__ __forceinline__ float2 e2m1_pair(uint32_t w, int s) {
  const uint32_t v = w >> s;
  const uint32_t bits = ((v & 0x00070007u) << 9) | ((v & 0x00080008u) << 12);
  return __half22float2(*reinterpret_cast<const __half2*>(&bits));
}

// E8M0 scale byte times 2^14 (see e2m1_pair). Scale bytes >= 241 (values >= 2^114) do not occur
// in gpt-oss and would overflow; 0 (2^-127) maps to a subnormal as in the reference.
__device__ __forceinline__ float e8m0_x16384(uint32_t e) {
  return e == 0 ? 5.877471754e-39f * 16384.0f : __uint_as_float(e << 23) * 16384.0f;
}

// Dot product of one 16-byte MXFP4 block (32 values) with 32 fp32 activations x[0..31]
// (unscaled: multiply by e8m0_x16384(scale)).
__device__ __forceinline__ float mxfp4_dot32(uint4 q, const float4* x) {
  float acc = 0.f;
  const uint32_t w[4] = {q.x, q.y, q.z, q.w};
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const float4 lo = x[2 * j], hi = x[2 * j + 1];  // elements 8j..8j+3, 8j+4..8j+7
    float2 p = e2m1_pair(w[j], 0);
    acc = fmaf(p.x, lo.x, acc);
    acc = fmaf(p.y, hi.x, acc);
    p = e2m1_pair(w[j], 4);
    acc = fmaf(p.x, lo.y, acc);
    acc = fmaf(p.y, hi.y, acc);
    p = e2m1_pair(w[j], 8);
    acc = fmaf(p.x, lo.z, acc);
    acc = fmaf(p.y, hi.z, acc);
    p = e2m1_pair(w[j], 12);
    acc = fmaf(p.x, lo.w, acc);
    acc = fmaf(p.y, hi.w, acc);
  }
  return acc;
}

}  // namespace gossamer::kern

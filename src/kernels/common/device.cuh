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

// MXFP4 (E2M1) decode without type conversions (F2F/I2F issue at 1/8 of the FMA rate on
// Hopper and made the old half2 decode ALU-bound). Per 4 codes (16 bits of a word):
//   pos / neg = byte LUTs (prmt) of t = 2v + 12 for the magnitude code (c & 7), one table per
//   sign; a prmt in sign-replicate mode turns each code's sign bit into a byte mask; one lop3
//   selects. Each byte t then becomes the float 2^23 + t by placing it under the exponent byte
//   0x4B (one prmt), and a float subtract of 2^23 + 12 leaves exactly 2v. So per value: ~2
//   integer + 2 float instructions, all full-rate. Callers multiply by e8m0_half(scale).
__device__ __forceinline__ uint32_t prmt(uint32_t a, uint32_t b, uint32_t sel) {
  uint32_t r;
  asm("prmt.b32 %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(sel));
  return r;
}

// Four bytes t_i = 2 v(code_i) + 12 for the codes in the low 16 bits of `codes` (code i in
// bits 4i..4i+3, sign in bit 3).
__device__ __forceinline__ uint32_t e2m1_t4(uint32_t codes) {
  constexpr uint32_t kPosLo = 0x0F0E0D0Cu, kPosHi = 0x18141210u;  // +0 +.5 +1 +1.5 | +2 +3 +4 +6
  constexpr uint32_t kNegLo = 0x090A0B0Cu, kNegHi = 0x00040608u;  // -0 -.5 -1 -1.5 | -2 -3 -4 -6
  const uint32_t mag = codes & 0x7777u;
  const uint32_t pos = prmt(kPosLo, kPosHi, mag), neg = prmt(kNegLo, kNegHi, mag);
  const uint32_t mask = prmt(0x80808080u, 0x80808080u, codes);  // 0xff if negative, else 0x80
  return (pos & ~mask) | (neg & mask);  // LUT bytes < 0x80: bit 7 of the mask is irrelevant
}

// 2 v(code) for byte k of t4 (exact small integer as float).
template <int K>
__device__ __forceinline__ float e2m1_byte(uint32_t t4) {
  return __uint_as_float(prmt(t4, 0x4B00u, 0x5440u | K)) - 8388620.0f;  // (2^23 + t) - (2^23 + 12)
}

// E8M0 scale byte times 1/2 (the decode above yields 2v): 2^(e - 128).
__device__ __forceinline__ float e8m0_half(uint32_t e) {
  return e >= 2 ? __uint_as_float((e - 1) << 23) : (e == 1 ? 5.877471754e-39f : 2.938735877e-39f);
}

// Dot product of one 16-byte MXFP4 block (32 values, low nibble first) with 32 fp32 activations
// x[0..31], times 2 (multiply by e8m0_half(scale)).
__device__ __forceinline__ float mxfp4_dot32(uint4 q, const float4* x) {
  float acc = 0.f;
  const uint32_t w[4] = {q.x, q.y, q.z, q.w};
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const float4 lo = x[2 * j], hi = x[2 * j + 1];  // elements 8j..8j+3, 8j+4..8j+7
    const uint32_t ta = e2m1_t4(w[j]), tb = e2m1_t4(w[j] >> 16);
    acc = fmaf(e2m1_byte<0>(ta), lo.x, acc);
    acc = fmaf(e2m1_byte<1>(ta), lo.y, acc);
    acc = fmaf(e2m1_byte<2>(ta), lo.z, acc);
    acc = fmaf(e2m1_byte<3>(ta), lo.w, acc);
    acc = fmaf(e2m1_byte<0>(tb), hi.x, acc);
    acc = fmaf(e2m1_byte<1>(tb), hi.y, acc);
    acc = fmaf(e2m1_byte<2>(tb), hi.z, acc);
    acc = fmaf(e2m1_byte<3>(tb), hi.w, acc);
  }
  return acc;
}

// Alternative decode through half2 conversions (F2F), for comparison in moe_bench. For a word w
// (elements 0..7: byte k low nibble = element 2k), e2m1_pair(w, s), s in {0,4,8,12}, returns
// {elem(s/4), elem(s/4 + 4)} times 2^-14 (3 magnitude bits at half bits 9..11, sign at bit 15:
// exact for every E2M1 value including the subnormal 0.5).
__device__ __forceinline__ float2 e2m1_pair(uint32_t w, int s) {
  const uint32_t v = w >> s;
  const uint32_t bits = ((v & 0x00070007u) << 9) | ((v & 0x00080008u) << 12);
  return __half22float2(*reinterpret_cast<const __half2*>(&bits));
}

// Same contract as mxfp4_dot32 (result times 2): the 2^-14 of e2m1_pair is undone by 2^15.
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

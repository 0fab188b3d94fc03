// Bit-level MXFP4 -> bf16 decode of the tensor-core MoE kernels (tc.cuh), host and device, so
// that the exactness claims can be checked exhaustively on the host (moe_test.cpp).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace gossamer::kern::moe_tc {

// The decoded weights carry an extra factor 2^-kX (undone on the fp32 dot product); the
// decode is exact for scale bytes in [kScaleLo, kScaleHi].
inline constexpr int kX = 32, kScaleLo = kX + 2, kScaleHi = kX + 128;

// The 4 bf16x2 P_J = (element J, element J + 4) * 2^-126 of word w (elements 0..7 = nibbles,
// low first; bit placement, exact): magnitude -> bits 6..8, sign -> bit 15 of each half. Each
// P_J masks its two nibbles (for J >= 2 from w >> 8, which brings nibbles 2, 3 / 6, 7 to the
// bottom of each half), copies them to two places with one multiply (v << 6 | v << 12 for a
// nibble at bit 0, v << 2 | v << 8 at bit 4: the copies do not overlap, so no carries) and
// keeps the wanted bits: 9 integer-pipe ops and 4 multiplies per word.
__host__ __device__ inline void e2m1_bf16x2(uint32_t w, uint32_t (&P)[4]) {
  constexpr uint32_t kKeep = 0x81C081C0u;  // magnitude bits 6..8 and the sign bit of each half
  const uint32_t w2 = w >> 8;
  P[0] = ((w & 0x000F000Fu) * 0x1040u) & kKeep;
  P[1] = ((w & 0x00F000F0u) * 0x0104u) & kKeep;
  P[2] = ((w2 & 0x000F000Fu) * 0x1040u) & kKeep;
  P[3] = ((w2 & 0x00F000F0u) * 0x0104u) & kKeep;
}

// bf16x2 (both halves) 2^(sc - 1 - kX): times P_J gives E2M1 * 2^(sc - 127 - kX). Only
// meaningful when scale_in_fast_range(sc).
__host__ __device__ inline uint32_t scale_mult_bf16x2(uint32_t sc) {
  return ((sc + (127 - 1 - kX)) << 7) * 0x10001u;
}

__host__ __device__ inline bool scale_in_fast_range(uint32_t sc) {
  return sc - kScaleLo <= static_cast<uint32_t>(kScaleHi - kScaleLo);
}

}  // namespace gossamer::kern::moe_tc

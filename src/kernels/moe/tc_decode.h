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
// low first; bit placement, exact): magnitude -> bits 6..8, sign -> bit 15 of each half. P0 and
// P1 copy the masked nibble to two places with one multiply (v << 6 | v << 12, no overlap) and
// keep the wanted bits; 13 integer ops per word.
__host__ __device__ inline void e2m1_bf16x2(uint32_t w, uint32_t (&P)[4]) {
  constexpr uint32_t kMag = 0x01C001C0u, kSign = 0x80008000u;
  P[0] = ((w & 0x000F000Fu) * 0x1040u) & (kMag | kSign);
  P[1] = ((w & 0x00F000F0u) * 0x0104u) & (kMag | kSign);
  P[2] = ((w >> 2) & kMag) | ((w << 4) & kSign);
  P[3] = ((w >> 6) & kMag) | (w & kSign);
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

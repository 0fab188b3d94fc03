// Bit-level helpers of the moe_prefill GEMMs, usable on the host (tested there) and device.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace gossamer::kern::moe_prefill {

// P_I = (element I, element I + 4) of a word of 8 E2M1 codes (code n in bits 4n..4n+3), as
// bf16x2 of value x 2^-126 (bit placement: magnitude bits to 6..8, sign to 15; the code 0.5
// becomes the subnormal 2^-127). Exact for every code.
template <int I>
__host__ __device__ constexpr uint32_t e2m1_bf16x2(uint32_t w) {
  constexpr int kMag = 6 - 4 * I, kSgn = 12 - 4 * I;
  const uint32_t mag = kMag >= 0 ? (w << kMag) : (w >> -kMag);
  return (mag & 0x01C001C0u) | ((w << kSgn) & 0x80008000u);
}
// Position of element e (0..31) of an MX block in the wgmma activation order (wgmma.cu).
__host__ __device__ constexpr int perm32(int e) {
  return 16 * ((e % 4) / 2) + 8 * (e % 2) + 2 * (e / 8) + (e % 8) / 4;
}
// Position of element e (0..7) of a group of 8 in the mma.sync activation order (gemm.cu).
__host__ __device__ constexpr int perm8(int e) {
  return e < 4 ? 2 * e : 2 * (e - 4) + 1;
}

}  // namespace gossamer::kern::moe_prefill

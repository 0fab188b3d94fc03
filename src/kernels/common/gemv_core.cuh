// Warp-level bf16-weight GEMV core shared by gemv/ and qkv_rope/.
// One warp computes RPW weight rows against BT activation rows: lane l walks the 16-byte
// chunks l, l+32, ... of each weight row (8 bf16 = 16 B per load, coalesced across the warp),
// keeps acc[RPW][BT] in registers and finishes with a butterfly warp sum (every lane holds the
// totals). Activations are fp32 read through the read-only cache (each chunk: 2 float4).
#pragma once

#include "kernels/common/device.cuh"

namespace gossamer::kern {

__device__ __forceinline__ float dot8_bf16(uint4 w, float4 a, float4 b) {
  float s = bf16_lo(w.x) * a.x;
  s = fmaf(bf16_hi(w.x), a.y, s);
  s = fmaf(bf16_lo(w.y), a.z, s);
  s = fmaf(bf16_hi(w.y), a.w, s);
  s = fmaf(bf16_lo(w.z), b.x, s);
  s = fmaf(bf16_hi(w.z), b.y, s);
  s = fmaf(bf16_lo(w.w), b.z, s);
  s = fmaf(bf16_hi(w.w), b.w, s);
  return s;
}

// w_rows[r]: start of weight row r ([cols] bf16, 16-byte aligned); x: [nb, cols] f32 with
// nb <= BT valid rows; cols % 8 == 0.
template <int BT, int RPW>
__device__ __forceinline__ void warp_gemv_bf16(const uint16_t* const (&w_rows)[RPW], int cols,
                                               const float* __restrict__ x, int nb,
                                               float (&acc)[RPW][BT]) {
  const int lane = threadIdx.x & 31;
#pragma unroll
  for (int r = 0; r < RPW; ++r)
#pragma unroll
    for (int b = 0; b < BT; ++b) acc[r][b] = 0.f;
  const int nch = cols / 8;
#pragma unroll 2
  for (int k = lane; k < nch; k += 32) {
    uint4 wv[RPW];
#pragma unroll
    for (int r = 0; r < RPW; ++r) wv[r] = ld_stream16(w_rows[r] + 8 * k);
#pragma unroll
    for (int b = 0; b < BT; ++b) {
      if (b < nb) {
        const float4* xp =
            reinterpret_cast<const float4*>(x + static_cast<size_t>(b) * cols + 8 * k);
        const float4 x0 = __ldg(xp), x1 = __ldg(xp + 1);
#pragma unroll
        for (int r = 0; r < RPW; ++r) acc[r][b] += dot8_bf16(wv[r], x0, x1);
      }
    }
  }
#pragma unroll
  for (int r = 0; r < RPW; ++r)
#pragma unroll
    for (int b = 0; b < BT; ++b) acc[r][b] = warp_sum(acc[r][b]);
}

// Orderable 64-bit argmax key: larger value wins, ties go to the lower index. 0 is below every
// real value (so a zeroed key is a valid "empty" state); NaN values must not be packed.
__device__ __forceinline__ unsigned long long argmax_key(float v, int idx) {
  uint32_t u = __float_as_uint(v);
  u = (u & 0x80000000u) ? ~u : (u | 0x80000000u);
  return (static_cast<unsigned long long>(u) << 32) | (0xffffffffu - static_cast<uint32_t>(idx));
}
__device__ __forceinline__ int argmax_key_index(unsigned long long k) {
  return static_cast<int>(0xffffffffu - static_cast<uint32_t>(k & 0xffffffffu));
}

}  // namespace gossamer::kern

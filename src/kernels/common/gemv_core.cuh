// Warp-level bf16-weight GEMV core shared by gemv/ and qkv_rope/.
// One warp computes RPW weight rows against BT activation rows: lane l walks the 16-byte
// chunks l, l+32, ... of each weight row (8 bf16 = 16 B per load, coalesced across the warp),
// keeps acc[RPW][BT] in registers and finishes with a butterfly warp sum (every lane holds the
// totals). Activations are fp32 read through the read-only cache (each chunk: 2 float4).
#pragma once

#include "kernels/common/device.cuh"
#include "kernels/common/pdl.cuh"

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

// (x * s) * g for 4 activations, their row's 1/rms s and 4 bf16 gains: an RMSNorm folded into
// its consumer, in the same order of fp32 operations as the rmsnorm kernel (bit-identical inputs).
__device__ __forceinline__ float4 scale4_bf16(float4 a, float s, uint2 g) {
  return make_float4(a.x * s * bf16_lo(g.x), a.y * s * bf16_hi(g.x), a.z * s * bf16_lo(g.y),
                     a.w * s * bf16_hi(g.y));
}

// The same for 8 activations (a, b) and 8 gains.
__device__ __forceinline__ void scale8_bf16(float4& a, float4& b, float s, uint4 g) {
  a = scale4_bf16(a, s, make_uint2(g.x, g.y));
  b = scale4_bf16(b, s, make_uint2(g.z, g.w));
}

// w_rows[r]: start of weight row r ([cols] bf16, 16-byte aligned); x: [nb, cols] f32 with
// nb <= BT valid rows; cols % 8 == 0. NORM: fused RMSNorm, x[b, c] is used as
// (x[b, c] * inv_rms[b]) * gain[c] (gain: [cols] bf16, inv_rms: [BT] from block_inv_rms).
// UNROLL: chunks per lane in flight (the summation order does not depend on it).
template <int BT, int RPW, bool NORM = false, int UNROLL = 2>
__device__ __forceinline__ void warp_gemv_bf16(const uint16_t* const (&w_rows)[RPW], int cols,
                                               const float* __restrict__ x, int nb,
                                               float (&acc)[RPW][BT],
                                               const uint16_t* __restrict__ gain = nullptr,
                                               const float* inv_rms = nullptr) {
  const int lane = threadIdx.x & 31;
#pragma unroll
  for (int r = 0; r < RPW; ++r)
#pragma unroll
    for (int b = 0; b < BT; ++b) acc[r][b] = 0.f;
  const int nch = cols / 8;
#pragma unroll UNROLL
  for (int k = lane; k < nch; k += 32) {
    uint4 wv[RPW];
#pragma unroll
    for (int r = 0; r < RPW; ++r) wv[r] = ld_stream16(w_rows[r] + 8 * k);
    uint4 g{};
    if constexpr (NORM) g = __ldg(reinterpret_cast<const uint4*>(gain) + k);
#pragma unroll
    for (int b = 0; b < BT; ++b) {
      if (b < nb) {
        const float4* xp =
            reinterpret_cast<const float4*>(x + static_cast<size_t>(b) * cols + 8 * k);
        float4 x0 = __ldg(xp), x1 = __ldg(xp + 1);
        if constexpr (NORM) scale8_bf16(x0, x1, inv_rms[b], g);
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

// L2 prefetch of the RPW weight rows this warp will read (one hint per 32-byte sector, spread
// over the lanes): issued before pdl_wait() so the weights stream in while the previous kernel
// of the chain is still running. Weights only: no activation may be touched before the wait.
template <int RPW>
__device__ __forceinline__ void warp_prefetch_rows(const uint16_t* const (&w_rows)[RPW], int cols) {
  const int lane = threadIdx.x & 31;
  const int nsec = (cols + 15) / 16;  // 32-byte sectors per row (the last may be partial)
#pragma unroll
  for (int r = 0; r < RPW; ++r)
    for (int k = lane; k < nsec; k += 32) prefetch_l2(w_rows[r] + 16 * k);
}

// The two halves of an RMSNorm prologue's block reduction, around a barrier that the caller may
// share with other work: warp_ss_to_red puts each warp's butterfly sum of its threads' ss[b] into
// red[warp][b] (lane 0 stores); after the barrier, inv_from_red adds warps 0..WARPS-1 in order:
// inv[b] = 1 / sqrt(sum / hidden + eps).
template <int BT>
__device__ __forceinline__ void warp_ss_to_red(float (&ss)[BT], float (*red)[BT]) {
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
#pragma unroll
  for (int b = 0; b < BT; ++b) {
    ss[b] = warp_sum(ss[b]);
    if (lane == 0) red[warp][b] = ss[b];
  }
}
template <int BT, int WARPS>
__device__ __forceinline__ void inv_from_red(const float (*red)[BT], int hidden, float eps,
                                             float (&inv)[BT]) {
#pragma unroll
  for (int b = 0; b < BT; ++b) {
    float t = 0.f;
#pragma unroll
    for (int w = 0; w < WARPS; ++w) t += red[w][b];
    inv[b] = rsqrtf(t / static_cast<float>(hidden) + eps);
  }
}

// Both halves with the barrier: BAR = 0: __syncthreads() (every thread of the block calls it);
// BAR > 0: the named barrier BAR over WARPS x 32 threads (only those call it).
template <int BT, int WARPS, int BAR = 0>
__device__ __forceinline__ void block_ss_to_inv(float (&ss)[BT], int hidden, float eps,
                                                float (&inv)[BT]) {
  __shared__ float red[WARPS][BT];
  warp_ss_to_red<BT>(ss, red);
  if constexpr (BAR == 0) {
    __syncthreads();
  } else {
    asm volatile("bar.sync %0, %1;" ::"n"(BAR), "n"(WARPS * 32) : "memory");
  }
  inv_from_red<BT, WARPS>(red, hidden, eps, inv);
}

// RMSNorm prologue: inv[b] = 1 / sqrt(mean(x[b, :]^2) + eps) for the nb <= BT rows of x
// ([nb, hidden] f32, hidden % 4 == 0), over warps 0..WARPS-1 of the block. Thread t sums float4
// t, t + 32 WARPS, ... in that order; the loads of up to kPer of them are issued before their
// adds (one memory round trip per kPer instead of one per float4: the x of a decode step was
// just written by other SMs and comes from L2; H100 qkv_rope probe, docs/decode-budget.md).
// BAR = 0 contains __syncthreads() (every thread of the block calls it), BAR > 0 the named
// barrier BAR over WARPS x 32 threads (only those call it; e.g. the consumer warps of a
// producer/consumer block).
template <int BT, int WARPS, int BAR = 0>
__device__ __forceinline__ void block_inv_rms(const float* x, int hidden, int nb, float eps,
                                              float (&inv)[BT]) {
  const int n4 = hidden / 4;
  float ss[BT];
#pragma unroll
  for (int b = 0; b < BT; ++b) ss[b] = 0.f;
  constexpr int kPer = BT >= 4 ? 1 : 4 / BT, kStride = WARPS * 32;
  for (int i0 = threadIdx.x; i0 < n4; i0 += kPer * kStride) {
    float4 v[kPer][BT];
#pragma unroll
    for (int u = 0; u < kPer; ++u) {
      const int i = i0 + u * kStride;
#pragma unroll
      for (int b = 0; b < BT; ++b) {
        v[u][b] =
            b < nb && i < n4
                ? __ldg(reinterpret_cast<const float4*>(x + static_cast<size_t>(b) * hidden) + i)
                : make_float4(0.f, 0.f, 0.f, 0.f);
      }
    }
#pragma unroll
    for (int u = 0; u < kPer; ++u) {
#pragma unroll
      for (int b = 0; b < BT; ++b) {
        if (b < nb && i0 + u * kStride < n4) {
          const float4 q = v[u][b];
          ss[b] += q.x * q.x + q.y * q.y + q.z * q.z + q.w * q.w;
        }
      }
    }
  }
  block_ss_to_inv<BT, WARPS, BAR>(ss, hidden, eps, inv);
}

// Orderable 64-bit argmax key: larger value wins, ties go to the lower index. 0 is below every
// real value (so a zeroed key is a valid "empty" state); NaN values must not be packed.
__device__ __forceinline__ unsigned long long argmax_key(float v, int idx) {
  return (static_cast<unsigned long long>(float_order_bits(v)) << 32) |
         (0xffffffffu - static_cast<uint32_t>(idx));
}
__device__ __forceinline__ int argmax_key_index(unsigned long long k) {
  return static_cast<int>(0xffffffffu - static_cast<uint32_t>(k & 0xffffffffu));
}

// The sum of squares of one 8-float chunk (a = floats 0..3, b = 4..7) added to ss: the one
// order of the deferred RMSNorm of qkv_rope (qkv_rope/bulk.cu sums while staging x by chunk,
// qkv_rope/kernel.cu through block_inv_rms_chunks), so that both kernels get the same 1/rms.
__device__ __forceinline__ void add_sum_sq8(float& ss, const float4& a, const float4& b) {
  ss += a.x * a.x + a.y * a.y + a.z * a.z + a.w * a.w;
  ss += b.x * b.x + b.y * b.y + b.z * b.z + b.w * b.w;
}

// block_inv_rms in chunk order: thread t sums the 8-float chunks t, t + 32 WARPS, ... of each
// of the nb <= BT rows (add_sum_sq8), then the warp butterfly and the warps in order (hidden %
// 8 == 0; every thread of the block calls it: __syncthreads()).
template <int BT, int WARPS>
__device__ __forceinline__ void block_inv_rms_chunks(const float* x, int hidden, int nb, float eps,
                                                     float (&inv)[BT]) {
  const int nch = hidden / 8;
  float ss[BT];
#pragma unroll
  for (int b = 0; b < BT; ++b) ss[b] = 0.f;
  for (int k = threadIdx.x; k < nch; k += WARPS * 32) {
    float4 v[BT][2];
#pragma unroll
    for (int b = 0; b < BT; ++b) {
      const float4* src =
          reinterpret_cast<const float4*>(x + static_cast<size_t>(b) * hidden) + 2 * k;
      v[b][0] = b < nb ? __ldg(src) : make_float4(0.f, 0.f, 0.f, 0.f);
      v[b][1] = b < nb ? __ldg(src + 1) : make_float4(0.f, 0.f, 0.f, 0.f);
    }
#pragma unroll
    for (int b = 0; b < BT; ++b)
      if (b < nb) add_sum_sq8(ss[b], v[b][0], v[b][1]);
  }
  block_ss_to_inv<BT, WARPS>(ss, hidden, eps, inv);
}

}  // namespace gossamer::kern

// fp32 activations on bf16 tensor cores (mma.sync.m16n8k16, fp32 accumulate): an activation is
// split into three bf16 terms hi + lo + lo2 (24 bits of significand, as fp32), each multiplied
// with the same bf16 weights, and the three products added in fp32. Used by the GEMVs whose
// weights are the A operand and whose activations are B: gemv_mma_bf16w_f32a (kernels/gemv) and
// qkv_rope_mma_bf16w_f32a (kernels/qkv_rope), which also share the warp's K loop (mma_k_loop:
// the weights of 4 steps in flight) and the fixed-order sum of the three terms (fold_splits).
//
// The K order inside an mma is free as long as A and B agree. Per 32 columns k0, lane (g, t) =
// (lane / 4, lane % 4) holds 16 bytes of each of its weight rows (columns k0 + 8t .. 8t + 7);
// mma 1 takes columns 8t .. 8t + 3 of every lane, mma 2 the columns 8t + 4 .. 8t + 7:
// a1 = {row g 8t..8t+3 as two pairs, row g + 8 likewise} interleaved as the A fragment wants,
// B pairs x[s][0] / x[s][1] (mma 1) and x[s][2] / x[s][3] (mma 2) from activation row g.
// D (lane g, t) = rows g, g + 8 x activation columns 2t, 2t + 1.
#pragma once

#include <cstdint>

#include "kernels/common/device.cuh"   // ld_stream16
#include "kernels/flash_attn/mma.cuh"  // mma_bf16, pack_bf16

namespace gossamer::kern {

inline constexpr int kMmaSplits = 3;

// Splits the pair (a, b) into three bf16x2 terms; a, b become the remainders.
__device__ __forceinline__ void split3(float a, float b, uint32_t (&out)[kMmaSplits]) {
#pragma unroll
  for (int s = 0; s < kMmaSplits; ++s) {
    out[s] = pack_bf16(a, b);
    a -= __uint_as_float(out[s] << 16);
    b -= __uint_as_float(out[s] & 0xffff0000u);
  }
}

// The three bf16 terms of 8 consecutive activations (columns 8t .. 8t + 7 of a step), as B
// pairs: x[s][0] / x[s][1] (columns 8t .. 8t + 3: mma 1) and x[s][2] / x[s][3] (mma 2).
__device__ __forceinline__ void split_x8(const float4& xa, const float4& xb,
                                         uint32_t (&x)[kMmaSplits][4]) {
  uint32_t x01[kMmaSplits], x23[kMmaSplits], x45[kMmaSplits], x67[kMmaSplits];
  split3(xa.x, xa.y, x01);
  split3(xa.z, xa.w, x23);
  split3(xb.x, xb.y, x45);
  split3(xb.z, xb.w, x67);
#pragma unroll
  for (int s = 0; s < kMmaSplits; ++s)
    x[s][0] = x01[s], x[s][1] = x23[s], x[s][2] = x45[s], x[s][3] = x67[s];
}

// One 32-column step of a 16-row tile: weights wa (row g), wb (row g + 8) against the split
// activations x; acc[s] += the tile's products with term s. Accumulators restart every 32
// columns (the tensor core's fp32 accumulation truncates) and are added in fp32.
__device__ __forceinline__ void mma_step32(const uint4& wa, const uint4& wb,
                                           const uint32_t (&x)[kMmaSplits][4],
                                           float (&acc)[kMmaSplits][4]) {
  const uint32_t a1[4] = {wa.x, wb.x, wa.y, wb.y}, a2[4] = {wa.z, wb.z, wa.w, wb.w};
#pragma unroll
  for (int s = 0; s < kMmaSplits; ++s) {
    float d[4] = {0.f, 0.f, 0.f, 0.f};
    mma_bf16(d, a1, x[s][0], x[s][1]);
    mma_bf16(d, a2, x[s][2], x[s][3]);
#pragma unroll
    for (int i = 0; i < 4; ++i) acc[s][i] += d[i];
  }
}

// The three terms' partials of accumulator element i, added in a fixed order.
__device__ __forceinline__ float fold_splits(const float (&acc)[kMmaSplits][4], int i) {
  return (acc[0][i] + acc[1][i]) + acc[2][i];
}

// The K loop of a warp that owns the 32-column steps part, part + kSplit, ... of `steps`: lane
// row r's 16 bytes of a step at wr[r] + its column. The weights of kUnroll steps are requested
// (in step, then row order) before the first of them is consumed, then the remainder one step
// at a time; step(w, k) consumes one step's kR chunks (w[r] for row r) at column k.
template <int kSplit, int kUnroll, int kR, class Step>
__device__ __forceinline__ void mma_k_loop(const uint16_t* const (&wr)[kR], int part, int steps,
                                           Step&& step) {
  const int n_steps = (steps - part + kSplit - 1) / kSplit;
  auto col = [&](int i) { return 32 * (part + kSplit * i); };
  int i = 0;
  for (; i + kUnroll <= n_steps; i += kUnroll) {
    uint4 w[kUnroll][kR];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u)
#pragma unroll
      for (int r = 0; r < kR; ++r) w[u][r] = ld_stream16(wr[r] + col(i + u));
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) step(w[u], col(i + u));
  }
  for (; i < n_steps; ++i) {
    uint4 w[kR];
#pragma unroll
    for (int r = 0; r < kR; ++r) w[r] = ld_stream16(wr[r] + col(i));
    step(w, col(i));
  }
}

}  // namespace gossamer::kern

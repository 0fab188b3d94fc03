// Tensor-core MXFP4 decode of the streaming MoE kernels (bulk.cu, bulk_core.cuh: pipe 6).
// Internal to src/kernels/moe. (Written for the register-direct pipes 4 / 5 of session 2, removed
// in session 4; docs/moe-decode.md.)
//
// One warp computes 8 weight rows x one activation vector with mma.sync.m16n8k16 (bf16 in, f32
// accumulate), the weights being the A operand (m16 x k16) and the activations B (k16 x n8):
//  - lane (g = lane / 4, t = lane % 4) owns weight row g and MX blocks t, t + 4, ... (16 bytes
//    each, 32 E2M1 values) plus the block's E8M0 scale byte;
//  - word p (elements 8p..8p+7) of a block gives 4 bf16x2 P_j = (e_{8p+j}, e_{8p+j+4}) placed by
//    bit moves (magnitude -> bits 6..8, sign -> bit 15: value * 2^-126, the E2M1 0.5 becoming a
//    bf16 subnormal), then one bf16x2 multiply by 2^(s-1-kX) folds the block scale exactly;
//  - ONE mma per word: A row g takes (P0, P1) ("chunk 0": elements j = 0, 1, 4, 5), A row g+8
//    takes (P2, P3) (chunk 1: j = 2, 3, 6, 7) of the same weight row; B column n < 3 holds split
//    n of chunk 0's activations, column 3 + n split n of chunk 1's, so D[g][n] (n < 3) and
//    D[g+8][3 + n] (n < 3) are the six wanted partial dots (the cross terms and columns 6, 7 are
//    ignored). Weights as A fill all 256 of an mma's products, half the mma count of weights as
//    B (session 11);
//  - B: the activations split into three bf16 terms (hi = bf16(x), lo = bf16(x - hi),
//    lo2 = bf16(x - hi - lo): 24 bits, as f32), staged once per block in smem by tc_stage() as
//    units {W0, W1, W2, W3} (W_j = (x_{8p+j}, x_{8p+j+4})): one LDS.64 of the unit's first half
//    (chunk 0) or second half (chunk 1) is a lane's B pair;
//  - accumulators restart at every MX block (chains of 4 mma) and are added in fp32; the six
//    split terms are summed at the end and scaled by 2^kX.
// Exactness: a decoded weight (A) E2M1 * 2^(s-127-kX) is a normal bf16 (exact) for scale bytes
// s in [kScaleLo, kScaleHi] = [34, 160]. A warp that meets any scale byte outside that range
// recomputes its 8 rows with the exact fp32 path (mxfp4_dot32_cvt, bulk_core.cuh exact_rows),
// so every scale byte gives the fp32 result; only the speed differs.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

#include "kernels/common/device.cuh"
#include "kernels/moe/tc_decode.h"

namespace gossamer::kern::moe_tc {

inline constexpr int kSplits = 3;

__host__ __device__ constexpr int pad4(int nb) {
  return (nb + 3) & ~3;
}
// Smem units (16 B) of the staged activations for nv vectors of nb MX blocks:
// unit(s, v, c, p) = s * split_units + (v * nbp + c) * 4 + p; the +1 (an odd unit stride) spreads
// the 24 distinct 8-byte B pairs of one warp-wide LDS.64 (3 splits x 2 halves x 4 blocks) over
// the banks so that it takes the minimum of 2 wavefronts.
__host__ __device__ constexpr int split_units(int nv, int nb) {
  return nv * pad4(nb) * 4 + 1;
}
__host__ __device__ constexpr int stage_bytes(int nv, int nb) {
  return kSplits * split_units(nv, nb) * 16;
}

__device__ __forceinline__ uint4 ldg_na16(const void* ptr) {
  uint4 r;
  asm("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];"
      : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)
      : "l"(ptr));
  return r;
}
__device__ __forceinline__ uint32_t pack_bf16x2(float lo, float hi) {
  const __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&h);
}
__device__ __forceinline__ float bf16_low(uint32_t w) {
  return __uint_as_float(w << 16);
}
__device__ __forceinline__ float bf16_high(uint32_t w) {
  return __uint_as_float(w & 0xffff0000u);
}

// Stages nv vectors of n = 32 nb floats (x + v * n) as bf16 hi / lo / lo2 B words: unit p of
// block c holds the words W_j = (x[32c+8p+j], x[32c+8p+j+4]) in the order W0, W1, W2, W3 (the
// first half is the B pair {b0, b1} of chunk 0, the second half that of chunk 1); blocks
// nb..nbp-1 are zero.
// Threads tid = 0..nthr-1 take part (default: the whole block).
__device__ __forceinline__ void tc_stage(uint4* dst, const float* __restrict__ x, int nv, int nb,
                                         int tid = -1, int nthr = 0) {
  const int nbp = pad4(nb), su = split_units(nv, nb), n_units = nv * nbp * 4;
  if (tid < 0) tid = threadIdx.x, nthr = blockDim.x;
  for (int i = tid; i < n_units; i += nthr) {
    const int p = i & 3, vc = i >> 2, v = vc / nbp, c = vc - v * nbp;
    float e[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
    if (c < nb) {
      const float4* src =
          reinterpret_cast<const float4*>(x + (static_cast<size_t>(v) * nb + c) * 32);
      const float4 a = src[2 * p], b = src[2 * p + 1];
      e[0] = a.x, e[1] = a.y, e[2] = a.z, e[3] = a.w, e[4] = b.x, e[5] = b.y, e[6] = b.z,
      e[7] = b.w;
    }
    uint32_t w[kSplits][4];
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      float r0 = e[j], r1 = e[j + 4];
#pragma unroll
      for (int s = 0; s < kSplits; ++s) {
        w[s][j] = pack_bf16x2(r0, r1);
        r0 -= bf16_low(w[s][j]);
        r1 -= bf16_high(w[s][j]);
      }
    }
#pragma unroll
    for (int s = 0; s < kSplits; ++s)
      dst[s * su + i] = make_uint4(w[s][0], w[s][1], w[s][2], w[s][3]);
  }
}

__device__ __forceinline__ uint32_t mul_bf16x2(uint32_t a, uint32_t b) {
  uint32_t d;
  asm("mul.rn.bf16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
  return d;
}

// d = A B + c for the A fragment (a0..a3) and the B pair b.
__device__ __forceinline__ void mma_bf16(float (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2,
                                         uint32_t a3, const uint2& b, const float (&c)[4]) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%10,%11,%12,%13};\n"
      : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b.x), "r"(b.y), "f"(c[0]), "f"(c[1]), "f"(c[2]),
        "f"(c[3]));
}

// The B pair of lane (g, t) in a staged unit: column g < 3 is split g of chunk 0 (first half),
// 3 <= g < 6 split g - 3 of chunk 1 (second half); columns 6, 7 (ignored) read split 0's.
// Pointer to the lane's half of block c0 + t (units of 8 bytes; a block is 4 units of 16 bytes).
__device__ __forceinline__ const uint2* tc_b_lane(const uint4* xv, int su, int c0, int lane) {
  const int g = lane >> 2, t = lane & 3;
  const int split = g < kSplits ? g : (g < 2 * kSplits ? g - kSplits : 0);
  const int half = g >= kSplits && g < 2 * kSplits ? 1 : 0;
  return reinterpret_cast<const uint2*>(xv + split * su + (c0 + t) * 4) + half;
}

// One MX block (q, scale byte sc) of this lane against its B pairs at `b` (unit p at b[2 p]):
// per word p one mma; D (lane g, t) = {D[g][2t], D[g][2t+1], D[g+8][2t], D[g+8][2t+1]}. The
// accumulators restart at every block (short chains: the tensor core's fp32 accumulation
// truncates) and are added into acc in fp32.
__device__ __forceinline__ void tc_block(const uint4& q, uint32_t sc, const uint2* b,
                                         float (&acc)[4], uint32_t& bad) {
  bad |= static_cast<uint32_t>(!scale_in_fast_range(sc));
  const uint32_t m = scale_mult_bf16x2(sc);
  const uint32_t w[4] = {q.x, q.y, q.z, q.w};
  float d[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
  for (int p = 0; p < 4; ++p) {
    const uint2 bv = b[2 * p];
    uint32_t P[4];
    e2m1_bf16x2(w[p], P);
    mma_bf16(d, mul_bf16x2(P[0], m), mul_bf16x2(P[2], m), mul_bf16x2(P[1], m), mul_bf16x2(P[3], m),
             bv, d);
  }
#pragma unroll
  for (int i = 0; i < 4; ++i) acc[i] += d[i];
}

}  // namespace gossamer::kern::moe_tc

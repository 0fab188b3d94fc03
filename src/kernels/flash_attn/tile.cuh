// Per-thread tile operations of flash_attn_paged_bf16kv_f32q (kernel.cu), shared by its
// mma.sync and wgmma variants: the fragments a thread holds, the K/V ring fill, the mma.sync
// tile products (Q K^T with ldmatrix, P V with ldmatrix.trans), the online softmax, the Q load
// and the row output. Included by kernel.cu only.
#pragma once

#include <cuda_bf16.h>

#include <cfloat>
#include <cstdint>

#include "kernels/flash_attn/mma.cuh"
#include "kernels/flash_attn/params.h"

namespace gossamer::kern::flash {

constexpr int kD = 64, kBc = 64, kMaxTq = 256, kFar = 1 << 30;
constexpr int kTileBytes = kBc * kD * 2;                // one K (or V) tile, bf16
constexpr int kStaticSmem = 4 * kMaxTq * 4 + 64 + 256;  // s_seq, s_pos, s_lo, s_lead, s_bar, s_ones
constexpr float kLog2e = 1.4426950408889634f;
constexpr uint32_t kOnes = 0x3f803f80u;  // bf16x2 (1, 1): B fragment of the row-sum MMA

// 2^x on the MUFU alone (ftz: no denormal fix-up instructions; -inf -> 0).
__device__ __forceinline__ float ex2_ftz(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

// Per-thread view of its two query rows (g and g + 8 of the warp's 16) within one segment.
struct Rows {
  int lo[2], pos[2];  // attended key range; inactive rows: [-kFar, kFar] (never masked)
  bool act[2];        // row belongs to the current segment
};

// FAST (default): exp2 via ex2.approx.ftz, O rescaled only when a row max of the warp grew
// (alpha is exactly 1 otherwise), row sums from one extra MMA of P with a ones B fragment (la:
// every column holds the full row sum of the bf16 P that also multiplies V). !FAST: exp2f with
// denormal handling, O rescaled every tile, sums by FADD + quad shuffles (the session-2 softmax).
template <int W, bool PRECISE>
struct Frags {
  uint32_t qh[4][4];                // Q A-fragments per k-step (16 head dims)
  uint32_t ql[PRECISE ? 4 : 1][4];  // bf16 residual of Q (precise mode)
  float o[8][4];                    // O accumulators: 8 n-blocks of 8 dims
  float m[2], l[2];                 // running max (raw score units), partial row sums (!FAST)
  float la[4];                      // row-sum MMA accumulator (FAST): rows g (0, 1), g + 8 (2, 3)
};

// The ring fill of key tile kt is split in two steps so that the MB loop can issue the block-table
// reads one tile ahead (their L2 latency was the kernel's top stall, docs/attention.md):
// tile_blocks reads the physical blocks of this thread's chunks, load_tile copies them. Chunk idx
// = tid + j W 32 (j < kChunks<W>) of the tile's 64 keys x 8 16-byte chunks; 8 consecutive threads
// take 8 keys of one chunk in the wgmma (WG) layout (one 128-B core-matrix row block per 8 lanes).
template <int W>
inline constexpr int kChunks = (kBc * 8 + W * 32 - 1) / (W * 32);

template <bool WG>
__device__ __forceinline__ int chunk_row(int idx) {
  return WG ? 8 * (idx >> 6) + (idx & 7) : idx >> 3;
}
template <bool WG>
__device__ __forceinline__ int chunk_ch(int idx) {
  return WG ? (idx >> 3) & 7 : idx & 7;
}

// blk[j]: physical block of chunk j's key, -1 when the key is outside [kmin, kmax] or the table.
template <int W, bool WG>
__device__ __forceinline__ void tile_blocks(const FlashAttnParams& p, const int32_t* table, int kt,
                                            int kmin, int kmax, int (&blk)[kChunks<W>]) {
#pragma unroll
  for (int j = 0; j < kChunks<W>; ++j) {
    const int idx = threadIdx.x + j * W * 32;
    const int key = kt * kBc + chunk_row<WG>(idx);
    const int bi = p.block_size == 16 ? key >> 4 : key / p.block_size;
    const bool ok = idx < kBc * 8 && key >= kmin && key <= kmax && bi < p.max_blocks;
    blk[j] = ok ? table[bi] : -1;
  }
}

// Copies K and V of key tile kt into ring slot `base` (smem address), blocks from tile_blocks:
// the XOR-swizzled layout of the ldmatrix path or (WG) the wgmma core-matrix layout (wgmma.cuh).
template <int W, bool WG = false>
__device__ __forceinline__ void load_tile(const FlashAttnParams& p, int kh, int kt,
                                          const int (&blk)[kChunks<W>], uint32_t base) {
#pragma unroll
  for (int j = 0; j < kChunks<W>; ++j) {
    const int idx = threadIdx.x + j * W * 32;
    if (idx >= kBc * 8) break;
    const int row = chunk_row<WG>(idx), ch = chunk_ch<WG>(idx);
    const int key = kt * kBc + row;
    const int bi = p.block_size == 16 ? key >> 4 : key / p.block_size;
    const uint32_t dst = WG ? base + ((row >> 3) * 8 + ch) * 128 + (row & 7) * 16
                            : base + (row * 8 + (ch ^ (row & 7))) * 16;
    cp_async_kv_chunk_at(p, kh, key, bi, blk[j], blk[j] >= 0, ch, dst, kTileBytes);
  }
}
template <int W, bool WG = false>
__device__ __forceinline__ void load_tile(const FlashAttnParams& p, const int32_t* table, int kh,
                                          int kt, int kmin, int kmax, uint32_t base) {
  int blk[kChunks<W>];
  tile_blocks<W, WG>(p, table, kt, kmin, kmax, blk);
  load_tile<W, WG>(p, kh, kt, blk, base);
}

// Lane address offsets into a 128-B-aligned swizzled tile (key k, chunk c at k * 128 +
// ((c ^ (k & 7)) << 4)): with the tile base aligned, (base + lane offset) ^ (chunk bits << 4)
// + row block * 1024 is the swizzled address, one LOP per ldmatrix at most.
// K (QK^T, B operand): row (nb + (mi >> 1)) * 8 + l7, chunk 2 ks + (mi & 1).
__device__ __forceinline__ uint32_t k_lane_off() {
  const int lane = threadIdx.x & 31, mi = lane >> 3, l7 = lane & 7;
  return ((mi >> 1) * 8 + l7) * 128 + (((mi & 1) ^ l7) << 4);
}
// V (PV, B operand via .trans): row 16 j + (mi & 1) * 8 + l7, chunk nb + (mi >> 1).
__device__ __forceinline__ uint32_t v_lane_off() {
  const int lane = threadIdx.x & 31, mi = lane >> 3, l7 = lane & 7;
  return ((mi & 1) * 8 + l7) * 128 + (((mi >> 1) ^ l7) << 4);
}

// s[16 x 64 keys] = Q K^T for the K tile at smem address kb (128-B aligned).
template <int W, bool PRECISE>
__device__ __forceinline__ void qk_tile(const Frags<W, PRECISE>& f, uint32_t kb, float (&s)[8][4]) {
  const uint32_t kl = kb + k_lane_off();
#pragma unroll
  for (int nb = 0; nb < 8; ++nb) s[nb][0] = s[nb][1] = s[nb][2] = s[nb][3] = 0.f;
#pragma unroll
  for (int ks = 0; ks < 4; ++ks) {
#pragma unroll
    for (int nb = 0; nb < 8; nb += 2) {
      uint32_t b[4];
      const uint32_t a = kl ^ (ks << 5);
      if (nb == 0) ldsm_x4_at<0>(a, b);
      if (nb == 2) ldsm_x4_at<2048>(a, b);
      if (nb == 4) ldsm_x4_at<4096>(a, b);
      if (nb == 6) ldsm_x4_at<6144>(a, b);
      mma_bf16(s[nb], f.qh[ks], b[0], b[1]);
      mma_bf16(s[nb + 1], f.qh[ks], b[2], b[3]);
      if constexpr (PRECISE) {
        mma_bf16(s[nb], f.ql[ks], b[0], b[1]);
        mma_bf16(s[nb + 1], f.ql[ks], b[2], b[3]);
      }
    }
  }
}

// FAST softmax, first half: given the tile's row maxima mx (raw units; mb = mx * c or 0 for
// -inf), turns s into exp2 probabilities and advances the running max. Returns whether a row
// max of the warp grew (then alpha = exp2((m_old - m_new) c) must rescale O and the sums:
// rescale_o; alpha is exactly 1 for unchanged rows). Split so that the wgmma loop can defer the
// rescale until the previous tile's P V has completed.
template <int W, bool PRECISE>
__device__ __forceinline__ bool fast_scores(Frags<W, PRECISE>& f, float c, const float (&mx)[2],
                                            const float (&mb)[2], float (&s)[8][4],
                                            float (&alpha)[2]) {
  const bool grew = __any_sync(0xffffffffu, mx[0] != f.m[0] || mx[1] != f.m[1]);
  if (grew) {
#pragma unroll
    for (int e = 0; e < 2; ++e) alpha[e] = ex2_ftz(f.m[e] * c - mb[e]);  // 0 from -inf
  }
  f.m[0] = mx[0];
  f.m[1] = mx[1];
#pragma unroll
  for (int nb = 0; nb < 8; ++nb)
#pragma unroll
    for (int e = 0; e < 4; ++e) s[nb][e] = ex2_ftz(fmaf(s[nb][e], c, -mb[e >> 1]));
  return grew;
}
template <int W, bool PRECISE>
__device__ __forceinline__ void rescale_o(Frags<W, PRECISE>& f, const float (&alpha)[2]) {
#pragma unroll
  for (int e = 0; e < 2; ++e) {
    f.la[2 * e] *= alpha[e];
    f.la[2 * e + 1] *= alpha[e];
#pragma unroll
    for (int nb = 0; nb < 8; ++nb) f.o[nb][2 * e] *= alpha[e], f.o[nb][2 * e + 1] *= alpha[e];
  }
}

// Masks s against the rows' key ranges (when the tile crosses one) and returns the new row maxima
// mx (raw units, running max included) and mb = mx * c (0 for -inf).
template <int W, bool PRECISE>
__device__ __forceinline__ void tile_max(const Frags<W, PRECISE>& f, const Rows& r, int kt, float c,
                                         float (&s)[8][4], float (&mx)[2], float (&mb)[2]) {
  const int t4 = threadIdx.x & 3, kb = kt * kBc;
  bool need = false;
#pragma unroll
  for (int e = 0; e < 2; ++e) need |= kb < r.lo[e] || kb + kBc - 1 > r.pos[e];
  if (__any_sync(0xffffffffu, need)) {
#pragma unroll
    for (int nb = 0; nb < 8; ++nb)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int key = kb + nb * 8 + 2 * t4 + (e & 1);
        if (key < r.lo[e >> 1] || key > r.pos[e >> 1]) s[nb][e] = -INFINITY;
      }
  }
  // Pairwise tree (depth 4 instead of a chain of 16 dependent FMNMX; max is exact in any order).
#pragma unroll
  for (int e = 0; e < 2; ++e) {
    float t[8];
#pragma unroll
    for (int nb = 0; nb < 8; ++nb) t[nb] = fmaxf(s[nb][2 * e], s[nb][2 * e + 1]);
#pragma unroll
    for (int w = 4; w >= 1; w >>= 1)
#pragma unroll
      for (int i = 0; i < w; ++i) t[i] = fmaxf(t[i], t[i + w]);
    mx[e] = fmaxf(f.m[e], t[0]);
  }
#pragma unroll
  for (int e = 0; e < 2; ++e) {
    mx[e] = fmaxf(mx[e], __shfl_xor_sync(0xffffffffu, mx[e], 1));
    mx[e] = fmaxf(mx[e], __shfl_xor_sync(0xffffffffu, mx[e], 2));
    mb[e] = mx[e] == -INFINITY ? 0.f : mx[e] * c;
  }
}

// Masks s, updates the running max and sums, rescales O and turns s into probabilities (exp2
// units: scores * c, c = scale * log2e).
template <int W, bool PRECISE, bool FAST>
__device__ __forceinline__ void softmax_tile(Frags<W, PRECISE>& f, const Rows& r, int kt, float c,
                                             float (&s)[8][4]) {
  float mx[2], mb[2];
  tile_max(f, r, kt, c, s, mx, mb);
  if constexpr (FAST) {
    float alpha[2];
    if (fast_scores(f, c, mx, mb, s, alpha)) rescale_o(f, alpha);
  } else {
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      const float alpha = exp2f(f.m[e] * c - mb[e]);  // m = -inf -> 0 (o and l are 0 then)
      f.m[e] = mx[e];
      f.l[e] *= alpha;
#pragma unroll
      for (int nb = 0; nb < 8; ++nb) f.o[nb][2 * e] *= alpha, f.o[nb][2 * e + 1] *= alpha;
    }
#pragma unroll
    for (int nb = 0; nb < 8; ++nb)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        s[nb][e] = exp2f(fmaf(s[nb][e], c, -mb[e >> 1]));
        f.l[e >> 1] += s[nb][e];
      }
  }
}

// O += P V for the V tile at smem address vb (P from the S accumulators).
template <int W, bool PRECISE, bool FAST>
__device__ __forceinline__ void pv_tile(Frags<W, PRECISE>& f, uint32_t vb, const float (&s)[8][4]) {
  const uint32_t vl = vb + v_lane_off();
#pragma unroll
  for (int j = 0; j < 4; ++j) {  // k-step: keys 16j .. 16j + 15
    uint32_t a[4], al[4];
    pack_p_frag(s[2 * j], s[2 * j + 1], a);
    if constexpr (PRECISE) pack_p_resid(s[2 * j], s[2 * j + 1], a, al);
    if constexpr (FAST) {  // row sums of this k-step's P: P[16 x 16] x ones[16 x 8]
      mma_bf16(f.la, a, kOnes, kOnes);
      if constexpr (PRECISE) mma_bf16(f.la, al, kOnes, kOnes);
    }
#pragma unroll
    for (int nb = 0; nb < 8; nb += 2) {
      uint32_t b[4];
      const uint32_t va = vl ^ (nb << 4);
      if (j == 0) ldsm_x4_t_at<0>(va, b);
      if (j == 1) ldsm_x4_t_at<2048>(va, b);
      if (j == 2) ldsm_x4_t_at<4096>(va, b);
      if (j == 3) ldsm_x4_t_at<6144>(va, b);
      mma_bf16(f.o[nb], a, b[0], b[1]);
      mma_bf16(f.o[nb + 1], a, b[2], b[3]);
      if constexpr (PRECISE) {
        mma_bf16(f.o[nb], al, b[0], b[1]);
        mma_bf16(f.o[nb + 1], al, b[2], b[3]);
      }
    }
  }
}

// Query row e (0: g, 1: g + 8) of this thread within the CTA's 16 W rows.
__device__ __forceinline__ int cta_row(int e) {
  return (threadIdx.x >> 5) * 16 + ((threadIdx.x & 31) >> 2) + 8 * e;
}

// Writes this thread's rows of the segment: normalised with the sink (splits == 1) or as
// unnormalised partials (o, m in log2 units, l) for the combine kernel. Token and head are
// recomputed here (not kept live through the tile loop: register pressure).
template <int W, bool PRECISE, bool FAST>
__device__ __forceinline__ void write_rows(const FlashAttnParams& p, Frags<W, PRECISE>& f,
                                           const Rows& r, int tok0, float c) {
  const int G = p.n_heads / p.n_kv_heads;
  int tok[2], h[2];
#pragma unroll
  for (int e = 0; e < 2; ++e)
    tok[e] = tok0 + cta_row(e) / G, h[e] = blockIdx.y * G + cta_row(e) % G;
  const int t4 = threadIdx.x & 3, split = blockIdx.z;
#pragma unroll
  for (int e = 0; e < 2; ++e) {
    if constexpr (FAST) {
      f.l[e] = f.la[2 * e];  // already the full row sum in every lane of the quad
    } else {
      f.l[e] += __shfl_xor_sync(0xffffffffu, f.l[e], 1);
      f.l[e] += __shfl_xor_sync(0xffffffffu, f.l[e], 2);
    }
    if (!r.act[e]) continue;
    const float ml2 = f.m[e] == -INFINITY ? -INFINITY : f.m[e] * c;
    const size_t row = static_cast<size_t>(tok[e]) * p.n_heads + h[e];
    if (p.splits == 1) {
      const float sk = p.sinks[h[e]] * kLog2e, mm = fmaxf(ml2, sk);
      const float w = exp2f(ml2 - mm), den = fmaf(f.l[e], w, exp2f(sk - mm)), fac = w / den;
      float* dst = p.out + row * kD + 2 * t4;
#pragma unroll
      for (int nb = 0; nb < 8; ++nb)
        *reinterpret_cast<float2*>(dst + nb * 8) =
            make_float2(f.o[nb][2 * e] * fac, f.o[nb][2 * e + 1] * fac);
    } else {
      const size_t prow = row * p.splits + split;
      float* dst = p.part_o + prow * kD + 2 * t4;
#pragma unroll
      for (int nb = 0; nb < 8; ++nb)
        *reinterpret_cast<float2*>(dst + nb * 8) = make_float2(f.o[nb][2 * e], f.o[nb][2 * e + 1]);
      if (t4 == 0) {
        p.part_ml[prow * 2] = ml2 == -INFINITY ? -FLT_MAX : ml2;
        p.part_ml[prow * 2 + 1] = f.l[e];
      }
    }
  }
}

// Loads this thread's Q rows (f32 -> bf16 A fragments; zeros for padding rows).
template <int W, bool PRECISE>
__device__ __forceinline__ void load_q(const FlashAttnParams& p, Frags<W, PRECISE>& f,
                                       const int (&tok)[2], const int (&h)[2],
                                       const bool (&ok)[2]) {
  const int t4 = threadIdx.x & 3;
#pragma unroll
  for (int ks = 0; ks < 4; ++ks)
#pragma unroll
    for (int half = 0; half < 2; ++half)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        float2 x = make_float2(0.f, 0.f);
        if (ok[e]) {
          x = *reinterpret_cast<const float2*>(
              p.q + (static_cast<size_t>(tok[e]) * p.n_heads + h[e]) * kD + ks * 16 + half * 8 +
              2 * t4);
        }
        f.qh[ks][2 * half + e] = pack_bf16(x.x, x.y);
        if constexpr (PRECISE)
          f.ql[ks][2 * half + e] = pack_resid(x.x, x.y, f.qh[ks][2 * half + e]);
      }
}

}  // namespace gossamer::kern::flash

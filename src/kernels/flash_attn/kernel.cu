// flash_attn_paged_bf16kv_f32q<W, S, PRECISE>: grid (query tiles, kvh, splits), W warps.
// A CTA owns one kv head and a tile of `tq` consecutive tokens; its query rows are
// token x head-in-group (row r -> token r / G, head kh * G + r % G), 16 rows per warp (rows past
// the tile are padding). Keys go in tiles of 64 (4 paged blocks of 16 when block_size = 16),
// K and V copied with cp.async (zero-filled outside the segment's key range) into an S-stage
// ring of XOR-swizzled smem tiles [64 keys][8 x 16 B] (chunk c of key k at c ^ (k & 7)).
// Per tile and warp: S[16 x 64] = Q K^T (4 k-steps x 8 n-blocks of m16n8k16, B via ldmatrix),
// masked only when the tile crosses a row's [lo, pos], online softmax in f32 with exp2 of
// log2e-prescaled scores (one FFMA per element), then O[16 x 64] += P V (P re-used from the S
// accumulators as A fragments, V via ldmatrix.trans). Tokens of several sequences in one tile
// are handled as segments (one pass over the keys per distinct sequence). The context of each
// segment is cut into `splits` equal runs of tiles (computed on the device from pos): with
// splits > 1 the CTAs write unnormalised partials and flash_attn_combine_f32 merges them with
// the sink; with splits == 1 the sink is folded in directly.
// WG variants (8..10, sm_90a): the same CTA, ring and softmax with the tile MMAs on wgmma, one
// warpgroup per 64 query rows (wgmma.cuh: core-matrix smem layout instead of the XOR swizzle).
#include <cuda_bf16.h>

#include <cfloat>

#include "kernels/common/cuda_check.h"
#include "kernels/common/device.cuh"
#include "kernels/common/pdl.cuh"
#include "kernels/common/pdl.h"
#include "kernels/common/split_combine.cuh"
#include "kernels/flash_attn/mma.cuh"
#include "kernels/flash_attn/params.h"
#include "kernels/flash_attn/wgmma.cuh"

namespace gossamer::kern {
namespace {

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

// Copies key tile kt (keys kt*64 ..) of K and V into ring slot `base` (smem address): the
// XOR-swizzled layout of the ldmatrix path, or (WG) the wgmma core-matrix layout (wgmma.cuh), with
// 8 consecutive threads on 8 keys of one chunk (one 128-B core-matrix row block per 8 lanes).
template <int W, bool WG = false>
__device__ __forceinline__ void load_tile(const FlashAttnParams& p, const int32_t* table, int kh,
                                          int kt, int kmin, int kmax, uint32_t base) {
  const int tid = threadIdx.x;
#pragma unroll
  for (int idx = tid; idx < kBc * 8; idx += W * 32) {
    const int row = WG ? 8 * (idx >> 6) + (idx & 7) : idx >> 3;
    const int ch = WG ? (idx >> 3) & 7 : idx & 7;
    const int key = kt * kBc + row;
    const int bi = p.block_size == 16 ? key >> 4 : key / p.block_size;
    const bool ok = key >= kmin && key <= kmax && bi < p.max_blocks;
    const int blk = ok ? table[bi] : 0;
    const uint32_t dst = WG ? base + ((row >> 3) * 8 + ch) * 128 + (row & 7) * 16
                            : base + (row * 8 + (ch ^ (row & 7))) * 16;
    cp_async_kv_chunk_at(p, kh, key, bi, blk, ok, ch, dst, kTileBytes);
  }
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
  mx[0] = f.m[0];
  mx[1] = f.m[1];
#pragma unroll
  for (int nb = 0; nb < 8; ++nb) {
    mx[0] = fmaxf(mx[0], fmaxf(s[nb][0], s[nb][1]));
    mx[1] = fmaxf(mx[1], fmaxf(s[nb][2], s[nb][3]));
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
    a[0] = pack_bf16(s[2 * j][0], s[2 * j][1]);
    a[1] = pack_bf16(s[2 * j][2], s[2 * j][3]);
    a[2] = pack_bf16(s[2 * j + 1][0], s[2 * j + 1][1]);
    a[3] = pack_bf16(s[2 * j + 1][2], s[2 * j + 1][3]);
    if constexpr (PRECISE) {
      al[0] = pack_resid(s[2 * j][0], s[2 * j][1], a[0]);
      al[1] = pack_resid(s[2 * j][2], s[2 * j][3], a[1]);
      al[2] = pack_resid(s[2 * j + 1][0], s[2 * j + 1][1], a[2]);
      al[3] = pack_resid(s[2 * j + 1][2], s[2 * j + 1][3], a[3]);
    }
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

// One segment's key tiles through the mbarrier ring (MB variants). full[slot] completes when
// every thread's copies of a fill have landed (cp.async.mbarrier.arrive.noinc), empty[slot] when
// every thread has read the slot. Copies run S - 2 tiles ahead (a fill waits for the slot's
// previous tile to be read by all), so warps may drift a tile apart and the softmax of some warps
// overlaps the MMAs of others. Slots and phases follow a running tile count g over the segments
// (slot g % S, phase g / S), starting at gbase.
// WG: the tiles on wgmma (one warpgroup = 64 query rows; wgmma.cuh). FA3 order per tile i:
// issue Q K^T(i + 1) and P V(i), wait for the first, run the softmax of tile i + 1 while P V(i)
// is still on the tensor pipe, then wait for it, rescale O (deferred) and pack P(i + 1).
template <int W, int S, bool PRECISE, bool FAST, bool WG>
__device__ __forceinline__ void segment_mb(const FlashAttnParams& p, Frags<W, PRECISE>& f,
                                           const Rows& r, const int32_t* table, int kh, int kmin,
                                           int kmax, int tbeg, int nt, float c, uint32_t ring0,
                                           uint32_t fbar, uint32_t gbase, uint32_t ones) {
  const uint32_t ebar = fbar + 8 * S;
  auto kbase = [&](int i) { return ring0 + ((gbase + i) % S) * 2 * kTileBytes; };
  auto fill = [&](int i) {  // tile i of the segment -> slot of running tile g
    const uint32_t g = gbase + i, slot = g % S;
    if (g >= S) mbar_wait(ebar + 8 * slot, (g / S - 1) & 1);
    load_tile<W, WG>(p, table, kh, tbeg + i, kmin, kmax, ring0 + slot * 2 * kTileBytes);
    mbar_cp_arrive(fbar + 8 * slot);
  };
  auto wait_full = [&](int i) { mbar_wait(fbar + 8 * ((gbase + i) % S), ((gbase + i) / S) & 1); };
  auto release = [&](int i) { mbar_arrive(ebar + 8 * ((gbase + i) % S)); };
  for (int i = 0; i < min(S - 2, nt); ++i) fill(i);
  if constexpr (WG) {
    static_assert(!PRECISE && FAST && W % 4 == 0 && S >= 3, "wgmma: bf16, fast softmax, S >= 3");
    float s[8][4];
    uint32_t a[4][4];
    // The tiles reach smem through cp.async (generic proxy) and are read by wgmma (async proxy):
    // each reader fences after the full barrier (fence.proxy.async) before its first wgmma.
    if (nt > 0) {
      wait_full(0);
      wg::fence_async_smem();
      wg::qk(f, kbase(0), s);
      wg::wait<0>();
      wg::fence_regs(s);
      softmax_tile<W, PRECISE, FAST>(f, r, tbeg, c, s);
      wg::pack_p(s, a);
    }
    for (int i = 0; i < nt; ++i) {
      if (i + S - 2 < nt) fill(i + S - 2);
      const bool more = i + 1 < nt;
      // The last tile issues a dummy Q K^T on its own K (still held) so that every iteration
      // has the same wgmma groups (ptxas tracks wait_group counts only on straight-line code).
      if (more) wait_full(i + 1), wg::fence_async_smem();
      wg::qk(f, kbase(more ? i + 1 : i), s);
      wg::pv(f, kbase(i) + kTileBytes, ones, a);
      wg::wait<1>();  // Q K^T(i + 1) done; P V(i) may still run
      wg::fence_regs(s);
      float alpha[2];
      bool grew = false;
      if (more) {
        float mx[2], mb[2];
        tile_max(f, r, tbeg + i + 1, c, s, mx, mb);
        grew = fast_scores(f, c, mx, mb, s, alpha);
      }
      wg::wait<0>();  // P V(i) done: O, the sums and P free; slot i read
      wg::pin_o(f);
      wg::fence_regs(a);
      release(i);
      if (more) {
        if (grew) rescale_o(f, alpha);
        wg::pack_p(s, a);
      }
    }
  } else {
    for (int i = 0; i < nt; ++i) {
      if (i + S - 2 < nt) fill(i + S - 2);
      wait_full(i);
      float s[8][4];
      qk_tile(f, kbase(i), s);
      softmax_tile<W, PRECISE, FAST>(f, r, tbeg + i, c, s);
      pv_tile<W, PRECISE, FAST>(f, kbase(i) + kTileBytes, s);
      release(i);
    }
  }
}

// MB: the ring is synchronised by mbarriers instead of a CTA barrier per tile (segment_mb);
// WG (MB only): the tiles on wgmma.
template <int W, int S, bool PRECISE, int MINB, bool FAST, bool MB, bool WG>
__global__ void __launch_bounds__(W * 32, MINB)
    flash_attn_paged_bf16kv_f32q(FlashAttnParams p, int tq) {
  extern __shared__ __align__(128) uint8_t ring[];  // [S][K | V][64 keys][8 swizzled 16-B chunks]
  __shared__ int s_seq[kMaxTq], s_pos[kMaxTq], s_lo[kMaxTq], s_lead[kMaxTq];
  __shared__ __align__(8) uint64_t s_bar[2 * S];           // MB: full[S], empty[S]
  __shared__ __align__(128) uint32_t s_ones[WG ? 64 : 1];  // WG: [16 keys][8] bf16 ones (B)
  const int tid = threadIdx.x, lane = tid & 31, G = p.n_heads / p.n_kv_heads, kh = blockIdx.y;
  const uint32_t fbar = static_cast<uint32_t>(__cvta_generic_to_shared(s_bar)), ebar = fbar + 8 * S;
  if (MB && tid == 0)
    for (int i = 0; i < S; ++i) mbar_init(fbar + 8 * i, W * 32), mbar_init(ebar + 8 * i, W * 32);
  const int tok0 = (gridDim.x - 1 - blockIdx.x) * tq;  // late (long-context) tiles first
  const int ntok = min(tq, p.tokens - tok0);
  for (int i = tid; i < ntok; i += W * 32) {
    const int ps = p.pos[tok0 + i];
    s_seq[i] = p.row_seq ? p.row_seq[tok0 + i] : tok0 + i;
    s_pos[i] = ps;
    s_lo[i] = p.window > 0 ? max(0, ps - p.window + 1) : 0;
  }
  if constexpr (WG) {
    for (int i = tid; i < 64; i += W * 32) s_ones[i] = kOnes;
    wg::fence_async_smem();
  }
  const uint32_t ones = static_cast<uint32_t>(__cvta_generic_to_shared(s_ones));
  __syncthreads();
  for (int i = tid; i < ntok; i += W * 32) {
    int lead = 1;
    for (int j = 0; j < i && lead; ++j) lead = s_seq[j] != s_seq[i];
    s_lead[i] = lead;
  }
  // PDL: pos / row_seq / tables are step inputs (no kernel of the step writes them); q and the
  // K/V rows of this step come from qkv_rope, so everything below runs after the wait.
  pdl_wait();
  pdl_trigger();
  __syncthreads();
  int rt[2], tok[2], h[2];
  bool ok[2];
#pragma unroll
  for (int e = 0; e < 2; ++e) {
    const int r = cta_row(e);
    rt[e] = r / G;
    ok[e] = rt[e] < ntok;
    tok[e] = tok0 + rt[e];
    h[e] = kh * G + r % G;
  }
  Frags<W, PRECISE> f;
  load_q(p, f, tok, h, ok);
  const float c = p.scale * kLog2e;
  // 128-B aligned ring start (the swizzled ldmatrix addressing relies on it; 128 B spare).
  const uint32_t ring0 = (static_cast<uint32_t>(__cvta_generic_to_shared(ring)) + 127u) & ~127u;
  uint32_t gbase = 0;  // MB: running tile count
  for (int ld = 0; ld < ntok; ++ld) {
    if (!s_lead[ld]) continue;
    const int seq = s_seq[ld];
    int kmin = kFar, kmax = -kFar;
    for (int i = lane; i < ntok; i += 32)
      if (s_seq[i] == seq) kmin = min(kmin, s_lo[i]), kmax = max(kmax, s_pos[i]);
    kmin = __reduce_min_sync(0xffffffffu, kmin);
    kmax = __reduce_max_sync(0xffffffffu, kmax);
    Rows r;
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      r.act[e] = ok[e] && s_seq[rt[e]] == seq;
      r.lo[e] = r.act[e] ? s_lo[rt[e]] : -kFar;
      r.pos[e] = r.act[e] ? s_pos[rt[e]] : kFar;
      f.m[e] = -INFINITY;
      f.l[e] = 0.f;
      f.la[2 * e] = f.la[2 * e + 1] = 0.f;
    }
#pragma unroll
    for (int nb = 0; nb < 8; ++nb) f.o[nb][0] = f.o[nb][1] = f.o[nb][2] = f.o[nb][3] = 0.f;
    const int tb0 = max(kmin, 0) / kBc, n = kmax >= max(kmin, 0) ? kmax / kBc - tb0 + 1 : 0;
    const int chunk = (n + p.splits - 1) / p.splits;
    const int tbeg = tb0 + blockIdx.z * chunk, nt = max(0, min(tb0 + n, tbeg + chunk) - tbeg);
    const int32_t* table = p.block_table + static_cast<size_t>(seq) * p.max_blocks;
    auto tile = [&](int i, uint32_t kb) {
      float s[8][4];
      qk_tile(f, kb, s);
      softmax_tile<W, PRECISE, FAST>(f, r, tbeg + i, c, s);
      pv_tile<W, PRECISE, FAST>(f, kb + kTileBytes, s);
    };
    if constexpr (MB) {
      segment_mb<W, S, PRECISE, FAST, WG>(p, f, r, table, kh, kmin, kmax, tbeg, nt, c, ring0, fbar,
                                          gbase, ones);
      gbase += nt;
      write_rows<W, PRECISE, FAST>(p, f, r, tok0, c);
    } else {
#pragma unroll
      for (int i = 0; i < S - 1; ++i) {
        if (i < nt) load_tile<W>(p, table, kh, tbeg + i, kmin, kmax, ring0 + i * 2 * kTileBytes);
        cp_commit();
      }
      for (int i = 0; i < nt; ++i) {
        cp_wait<S - 2>();
        __syncthreads();
        const int nx = i + S - 1;
        if (nx < nt)
          load_tile<W>(p, table, kh, tbeg + nx, kmin, kmax, ring0 + (nx % S) * 2 * kTileBytes);
        cp_commit();
        tile(i, ring0 + (i % S) * 2 * kTileBytes);
      }
      write_rows<W, PRECISE, FAST>(p, f, r, tok0, c);
      cp_wait<0>();
      __syncthreads();  // the ring is reused by the next segment
    }
  }
}

// Merges the splits of each (token, head) with the sink: grid tokens * nh, 64 threads.
__global__ void __launch_bounds__(kD) flash_attn_combine_f32(FlashAttnParams p) {
  const int bh = blockIdx.x, d = threadIdx.x;
  pdl_wait();  // partials come from the split kernel
  pdl_trigger();
  combine_splits_with_sink<kD>(p.part_ml, p.part_o, p.sinks[bh % p.n_heads], p.splits, bh, d,
                               p.out);
}

template <int W, int S, bool PRECISE, int MINB, bool MB, bool WG>
Status launch_cfg(const FlashAttnParams& p, int tq, cudaStream_t st) {
  auto fn = MB ? flash_attn_paged_bf16kv_f32q<W, S, PRECISE, MINB, true, MB, WG>
            : p.legacy_softmax
                ? flash_attn_paged_bf16kv_f32q<W, S, PRECISE, MINB, false, false, false>
                : flash_attn_paged_bf16kv_f32q<W, S, PRECISE, MINB, true, false, false>;
  constexpr int smem = S * 2 * kTileBytes + 128;   // + alignment slack
  if constexpr (smem + kStaticSmem > 48 * 1024) {  // opt-in above the default 48 KB
    GS_CUDA_RETURN(cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  }
  const dim3 grid((p.tokens + tq - 1) / tq, p.n_kv_heads, p.splits);
  return launch_pdl(p.pdl, "flash_attn_paged_bf16kv_f32q", fn, grid, dim3(W * 32), smem, st, p, tq);
}

// Ring depth 2..4 (5: mbarrier variants only; wgmma variants run 2 as 3).
template <int W, int MINB, bool PRECISE, bool MB = false, bool WG = false>
Status launch_stages(const FlashAttnParams& p, int tq, int stages, cudaStream_t st) {
  if constexpr (MB) {
    if (stages == 5) return launch_cfg<W, 5, PRECISE, MINB, MB, WG>(p, tq, st);
  }
  if constexpr (!WG) {  // the wgmma loop waits for tile 0 before its first fill: S >= 3
    if (stages == 2) return launch_cfg<W, 2, PRECISE, MINB, MB, WG>(p, tq, st);
  }
  if (stages <= 3) return launch_cfg<W, 3, PRECISE, MINB, MB, WG>(p, tq, st);
  return launch_cfg<W, 4, PRECISE, MINB, MB, WG>(p, tq, st);
}

// CTA shape of a variant: warps (16 query rows each), min CTAs per SM (register cap), tokens.
template <bool PRECISE>
Status launch_variant(const FlashAttnParams& p, int variant, int stages, cudaStream_t st) {
  const int G = p.n_heads / p.n_kv_heads;
  switch (variant) {
    case 1:
      return launch_stages<1, 4, PRECISE>(p, 1, stages > 0 ? stages : 2, st);
    case 3:
      return launch_stages<4, 2, PRECISE>(p, 64 / G, stages > 0 ? stages : 2, st);
    case 4:
      return launch_stages<8, 1, PRECISE>(p, 128 / G, stages > 0 ? stages : 2, st);
    case 5:
      return launch_stages<16, 1, PRECISE>(p, 256 / G, stages > 0 ? stages : 3, st);
    case 6:  // as 2 with the mbarrier ring (legacy_softmax ignored)
      return launch_stages<8, 2, PRECISE, true>(p, 128 / G, stages > 0 ? stages : 4, st);
    case 7:  // as 5 with the mbarrier ring
      return launch_stages<16, 1, PRECISE, true>(p, 256 / G, stages > 0 ? stages : 4, st);
    case 8:   // as 7 on wgmma (bf16 only: validate())
    case 9:   // wgmma, 12 warps (3 warpgroups, 192 rows), up to 168 registers
    case 10:  // wgmma, 8 warps (2 warpgroups, 128 rows), up to 255 registers
      if constexpr (!PRECISE) {
        const int s = stages > 0 ? stages : 4;
        if (variant == 8) return launch_stages<16, 1, false, true, true>(p, 256 / G, s, st);
        if (variant == 9) return launch_stages<12, 1, false, true, true>(p, 192 / G, s, st);
        return launch_stages<8, 1, false, true, true>(p, 128 / G, s, st);
      }
      return InvalidArgument("flash_attn: variants 8..10 (wgmma) are bf16 only");
    default:
      return launch_stages<8, 2, PRECISE>(p, 128 / G, stages > 0 ? stages : 3, st);
  }
}

}  // namespace

Status launch_flash_attn(const FlashAttnParams& p, cudaStream_t st) {
  GS_RETURN_IF_ERROR(p.validate());
  // Auto (measured on the H100, docs/attention.md): narrow for decode-sized chunks; in bf16 the
  // mbarrier ring, for full attention over >= 512 tokens 256 rows (2x K/V reuse) on wgmma, else
  // 128 rows on mma.sync (sliding windows: more CTAs); precise mode keeps the CTA-barrier ring.
  const int variant = p.variant != 0                       ? p.variant
                      : p.tokens <= 16                     ? 1
                      : p.precise                          ? 2
                      : (p.window == 0 && p.tokens >= 512) ? 8
                                                           : 6;
  const Status st_k = p.precise ? launch_variant<true>(p, variant, p.stages, st)
                                : launch_variant<false>(p, variant, p.stages, st);
  GS_RETURN_IF_ERROR(st_k);
  if (p.splits == 1) return Status::Ok();
  return launch_pdl(p.pdl, "flash_attn_combine_f32", flash_attn_combine_f32,
                    dim3(p.tokens * p.n_heads), dim3(kD), 0, st, p);
}

}  // namespace gossamer::kern

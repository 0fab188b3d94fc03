// attn_decode_mma_bf16kv_f32q<S, PRECISE>: the one-kernel decode attention (AttnParams with
// `tickets`). Grid (batch, kvh, zmax), 4 warps. A CTA owns one query row (one token), one kv
// head with its G <= 16 query heads (MMA rows g < G of 16) and one split of the row's key tiles.
//
// Split count on the device (the launch lives in a CUDA graph while positions advance): the
// row's n key tiles of 64 are cut into ns = min(zmax, ceil(n / split_tiles)) runs; CTAs with
// z >= ns exit after the PDL wait. Inside a CTA the 4 warps share one S-stage cp.async ring of
// 64-key K/V tiles (XOR-swizzled, as kernels/flash_attn) and each warp takes 16 keys of every
// tile (QK: 2 n-blocks, PV: 1 k-step), with its own online softmax. At the end the warps merge
// through shared memory; with ns == 1 the sink is folded in and `out` is written; otherwise the
// CTA writes its partial (o, m, l), and the last CTA of the (row, kv head) to take a ticket
// merges all ns partials with the sink and re-zeroes the ticket. So there is no combine kernel,
// and short contexts (ns = 1) write no partials at all.
// PDL (common/pdl.h rule 1): at batch 1 the only K/V row this step writes is the one at pos, so
// the prologue tiles are copied before pdl_wait without that row, which is copied after it
// (session 11: +0.5% / +0.7% tg128 for 120b / 20b, docs/attention.md).
#include <algorithm>
#include <cfloat>

#include "kernels/attention/decode_merge.cuh"
#include "kernels/attention/decode_mma.h"
#include "kernels/common/cuda_check.h"
#include "kernels/common/pdl.cuh"
#include "kernels/common/pdl.h"
#include "kernels/flash_attn/mma.cuh"

namespace gossamer::kern {
namespace {

using attn_merge::kD;
using attn_merge::kOStride;  // merge scratch row stride (floats)
using attn_merge::kWarps;
using attn_merge::last_cta_merge;
using attn_merge::merge_warps;
constexpr int kBc = 64, kThreads = kWarps * 32;
constexpr int kTileBytes = kBc * kD * 2;  // one K (or V) tile of 64 keys, bf16
constexpr int kTab = 256;                 // block-table entries staged in smem per CTA
constexpr float kLog2e = 1.4426950408889634f;
static_assert(kWarps * 16 == kBc, "each warp takes 16 keys of a tile");
static_assert(kWarps * 16 * (kOStride + 2) * 4 <= 4 * kTileBytes,
              "merge scratch fits a 2-stage ring");

// Which rows of a tile load_tile copies: all (key < 0), all but `key`, or only `key`. A row
// left out gets no copy at all (not a zero fill that could land after its real copy).
struct KeyFilter {
  int key = -1;
  bool only = false;
};

// Copies key tile kt (keys kt * 64 ..) of K and V into ring slot `base` (zero fill outside
// [lo, pos] and for invalid table entries), the rows that `f` lets through.
// `tab`: the CTA's staged block-table entries from block b_first on (null: read `table`).
__device__ __forceinline__ void load_tile(const AttnParams& p, const int32_t* table, const int* tab,
                                          int b_first, int kh, int kt, int lo, int pos,
                                          uint32_t base, KeyFilter f = {}) {
  const int tid = threadIdx.x, ch = tid & 7;
#pragma unroll
  for (int row = tid >> 3; row < kBc; row += kThreads / 8) {
    const int key = kt * kBc + row;
    if (f.key >= 0 && (key == f.key) != f.only) continue;
    const int bi = p.block_size == 16 ? key >> 4 : key / p.block_size;
    const bool ok = key >= lo && key <= pos && bi < p.max_blocks;
    const int blk = ok ? (tab ? tab[bi - b_first] : table[bi]) : 0;
    cp_async_kv_chunk(p, kh, key, bi, blk, ok, row, ch, base, kTileBytes);
  }
}

// Per-warp state: Q fragments (hi, and lo residual when PRECISE), O[16 x 64], running max
// (raw score units) and partial sums of its two rows g, g + 8.
template <bool PRECISE>
struct WarpState {
  uint32_t qh[4][4];
  uint32_t ql[PRECISE ? 4 : 1][4];
  float o[8][4];
  float m[2], l[2];
};

template <bool PRECISE>
__device__ __forceinline__ void load_q(const AttnParams& p, int b, int kh, int G,
                                       WarpState<PRECISE>& w) {
  const int lane = threadIdx.x & 31, g = lane >> 2, t4 = lane & 3;
#pragma unroll
  for (int ks = 0; ks < 4; ++ks)
#pragma unroll
    for (int half = 0; half < 2; ++half)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int r = g + 8 * e;
        float2 x = make_float2(0.f, 0.f);
        if (r < G) {
          x = *reinterpret_cast<const float2*>(
              p.q + (static_cast<size_t>(b) * p.n_heads + kh * G + r) * kD + ks * 16 + half * 8 +
              2 * t4);
        }
        w.qh[ks][2 * half + e] = pack_bf16(x.x, x.y);
        if constexpr (PRECISE)
          w.ql[ks][2 * half + e] = pack_resid(x.x, x.y, w.qh[ks][2 * half + e]);
      }
}

// This warp's 16 keys (kt * 64 + 16 * warp ..) of the ring slot at `kb`: S = Q K^T, masking,
// online softmax (c = scale * log2e), O += P V.
template <bool PRECISE>
__device__ __forceinline__ void warp_tile(WarpState<PRECISE>& w, uint32_t kb, int kt, int lo,
                                          int pos, float c) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, mi = lane >> 3, t4 = lane & 3;
  float s[2][4] = {}, sl[2][4] = {};  // hi and lo products in separate MMA chains
#pragma unroll
  for (int ks = 0; ks < 4; ++ks) {
    const int row = (2 * warp + (mi >> 1)) * 8 + (lane & 7), chunk = ks * 2 + (mi & 1);
    uint32_t bf[4];
    ldsm_x4(kb + (row * 8 + (chunk ^ (lane & 7))) * 16, bf);
    mma_bf16(s[0], w.qh[ks], bf[0], bf[1]);
    mma_bf16(s[1], w.qh[ks], bf[2], bf[3]);
    if constexpr (PRECISE) {
      mma_bf16(sl[0], w.ql[ks], bf[0], bf[1]);
      mma_bf16(sl[1], w.ql[ks], bf[2], bf[3]);
    }
  }
  if constexpr (PRECISE) {
#pragma unroll
    for (int j = 0; j < 2; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) s[j][e] += sl[j][e];
  }
  const int k0 = kt * kBc + 16 * warp;
  if (k0 < lo || k0 + 15 > pos) {  // warp-uniform: one token per CTA
#pragma unroll
    for (int j = 0; j < 2; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int key = k0 + 8 * j + 2 * t4 + (e & 1);
        if (key < lo || key > pos) s[j][e] = -INFINITY;
      }
  }
#pragma unroll
  for (int e = 0; e < 2; ++e) {
    float mx = fmaxf(
        w.m[e], fmaxf(fmaxf(s[0][2 * e], s[0][2 * e + 1]), fmaxf(s[1][2 * e], s[1][2 * e + 1])));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
    const float mb = mx == -INFINITY ? 0.f : mx * c;
    const float alpha = exp2f(w.m[e] * c - mb);  // m = -inf -> 0 (o and l are 0 then)
    w.m[e] = mx;
    w.l[e] *= alpha;
#pragma unroll
    for (int nb = 0; nb < 8; ++nb) w.o[nb][2 * e] *= alpha, w.o[nb][2 * e + 1] *= alpha;
#pragma unroll
    for (int j = 0; j < 2; ++j)
#pragma unroll
      for (int x = 0; x < 2; ++x) {
        float& v = s[j][2 * e + x];
        v = exp2f(fmaf(v, c, -mb));
        w.l[e] += v;
      }
  }
  uint32_t a[4], al[4];
  pack_p_frag(s[0], s[1], a);
  if constexpr (PRECISE) pack_p_resid(s[0], s[1], a, al);
  const uint32_t vb = kb + kTileBytes;
#pragma unroll
  for (int nb = 0; nb < 8; nb += 2) {
    const int row = 16 * warp + (mi & 1) * 8 + (lane & 7), chunk = nb + (mi >> 1);
    uint32_t bf[4];
    ldsm_x4_t(vb + (row * 8 + (chunk ^ (lane & 7))) * 16, bf);
    mma_bf16(w.o[nb], a, bf[0], bf[1]);
    mma_bf16(w.o[nb + 1], a, bf[2], bf[3]);
    if constexpr (PRECISE) {
      mma_bf16(w.o[nb], al, bf[0], bf[1]);
      mma_bf16(w.o[nb + 1], al, bf[2], bf[3]);
    }
  }
}

// Writes the warp's rows into the merge scratch: m (log2 units or -inf), l, o.
template <bool PRECISE>
__device__ __forceinline__ void stash_warp(WarpState<PRECISE>& w, float c, float* sm_m, float* sm_l,
                                           float* sm_o) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, t4 = lane & 3;
#pragma unroll
  for (int e = 0; e < 2; ++e) {
    w.l[e] += __shfl_xor_sync(0xffffffffu, w.l[e], 1);
    w.l[e] += __shfl_xor_sync(0xffffffffu, w.l[e], 2);
    const int r = warp * 16 + g + 8 * e;
    if (t4 == 0) {
      sm_m[r] = w.m[e] == -INFINITY ? -INFINITY : w.m[e] * c;
      sm_l[r] = w.l[e];
    }
#pragma unroll
    for (int nb = 0; nb < 8; ++nb)
      *reinterpret_cast<float2*>(sm_o + r * kOStride + nb * 8 + 2 * t4) =
          make_float2(w.o[nb][2 * e], w.o[nb][2 * e + 1]);
  }
}

// The CTA's nt key tiles through the S-stage cp.async ring (tiles 0 .. S - 2 already issued),
// from a reset softmax state.
template <int S, bool PRECISE>
__device__ __forceinline__ void ring_tiles(WarpState<PRECISE>& w, const AttnParams& p,
                                           const int32_t* table, const int* tab, int b_first,
                                           int kh, int tbeg, int nt, int lo, int pos,
                                           uint32_t ring0, float c) {
  w.m[0] = w.m[1] = -INFINITY;
  w.l[0] = w.l[1] = 0.f;
#pragma unroll
  for (int nb = 0; nb < 8; ++nb) w.o[nb][0] = w.o[nb][1] = w.o[nb][2] = w.o[nb][3] = 0.f;
  for (int i = 0; i < nt; ++i) {
    cp_wait<S - 2>();
    __syncthreads();
    const int nx = i + S - 1;
    if (nx < nt)
      load_tile(p, table, tab, b_first, kh, tbeg + nx, lo, pos, ring0 + (nx % S) * 2 * kTileBytes);
    cp_commit();
    warp_tile(w, ring0 + (i % S) * 2 * kTileBytes, tbeg + i, lo, pos, c);
  }
}

template <int S, bool PRECISE>
__global__ void __launch_bounds__(kThreads) attn_decode_mma_bf16kv_f32q(AttnParams p) {
  extern __shared__ __align__(128) uint8_t ring[];  // [S][K | V][64 keys][8 swizzled 16-B chunks]
  __shared__ int s_last, s_tab[kTab];
  const int b = blockIdx.x, kh = blockIdx.y, z = blockIdx.z, tid = threadIdx.x;
  const int G = p.n_heads / p.n_kv_heads;
  // pos / row_seq / tables are step inputs (no kernel of the step writes them): the split and
  // the staging of this CTA's block-table entries happen before the wait (off the tile loop's
  // critical path: a table read per tile would be one more dependent global load per tile).
  const int pos = p.pos[b];
  const int32_t* table =
      p.block_table + static_cast<size_t>(p.row_seq ? p.row_seq[b] : b) * p.max_blocks;
  const DecodeSplit sp = decode_split(pos, p.window, static_cast<int>(gridDim.z), p.split_tiles);
  const int tbeg = sp.tb0 + z * sp.chunk, nt = max(0, min(sp.chunk, sp.n - z * sp.chunk));
  const int b_first = max(tbeg * kBc, sp.lo) / p.block_size;
  const int nblk = nt > 0 ? min((tbeg + nt) * kBc - 1, pos) / p.block_size - b_first + 1 : 0;
  for (int i = tid; i < nblk && nblk <= kTab; i += kThreads)
    s_tab[i] = b_first + i < p.max_blocks ? table[b_first + i] : -1;
  __syncthreads();
  const int* tab = nblk <= kTab ? s_tab : nullptr;
  const uint32_t ring0 = static_cast<uint32_t>(__cvta_generic_to_shared(ring));
  // Batch 1: every key but pos was written by an earlier step, so the prologue tiles are copied
  // before the wait without this step's row, which follows after it (larger batches may hold
  // several rows of one sequence, all written by this step's qkv_rope: prologue after the wait).
  const bool early = p.batch == 1 && z < sp.ns;
  auto prologue = [&](KeyFilter f) {  // tiles 0 .. S - 2 into slots 0 .. S - 2
#pragma unroll
    for (int i = 0; i < S - 1; ++i) {
      if (i < nt)
        load_tile(p, table, tab, b_first, kh, tbeg + i, sp.lo, pos, ring0 + i * 2 * kTileBytes, f);
      cp_commit();
    }
  };
  if (early) prologue({pos, false});
  // The sink of this thread's merge row (a weight: before the wait; read at the merge it was a
  // dependent DRAM load right before the output store).
  const int row = tid >> 3, d8 = (tid & 7) * 8, h = kh * G + row;
  const float sk = row < G ? p.sinks[h] * kLog2e : 0.f;
  pdl_wait();  // q and this step's K/V rows come from qkv_rope
  pdl_trigger();
  if (z >= sp.ns) return;
  const int pos_slot = pos / kBc - tbeg;  // ring slot of pos's tile if it is a prologue tile
  bool row_pending = false;
  if (!early) {
    prologue({});
  } else if (pos_slot >= 0 && pos_slot < S - 1 && pos_slot < nt) {  // this step's row, then all
    load_tile(p, table, tab, b_first, kh, tbeg + pos_slot, sp.lo, pos,
              ring0 + pos_slot * 2 * kTileBytes, {pos, true});
    cp_commit();
    row_pending = true;
  }
  WarpState<PRECISE> w;
  load_q(p, b, kh, G, w);  // its L2 round trip overlaps the row's copy
  if (row_pending) cp_wait<0>();
  const float c = p.scale * kLog2e;
  ring_tiles<S>(w, p, table, tab, b_first, kh, tbeg, nt, sp.lo, pos, ring0, c);
  cp_wait<0>();
  __syncthreads();                               // the ring becomes the merge scratch
  float* sm_o = reinterpret_cast<float*>(ring);  // [4 warps x 16 rows][kOStride]
  float* sm_m = sm_o + kWarps * 16 * kOStride;   // [4 x 16]
  float* sm_l = sm_m + kWarps * 16;              // [4 x 16]
  stash_warp(w, c, sm_m, sm_l, sm_o);
  __syncthreads();
  if (row < G) merge_warps(p, sm_o, b, h, row, d8, z, sp.ns, sk);
  if (sp.ns > 1) last_cta_merge(p, b, kh, h, row < G, d8, sp.ns, sk, s_last);
}

template <int S, bool PRECISE>
Status launch_cfg(const AttnParams& p, int zmax, cudaStream_t st) {
  auto fn = attn_decode_mma_bf16kv_f32q<S, PRECISE>;
  constexpr int smem = S * 2 * kTileBytes;
  if constexpr (smem + 2048 > 48 * 1024) {  // opt-in above the default 48 KB (static smem too)
    GS_CUDA_RETURN(cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  }
  // One wave: at most as many CTAs as fit on the device at once (a second partial wave of long
  // splits costs more than the fewer, longer splits).
  int dev = 0, sms = 0, per_sm = 0;
  GS_CUDA_RETURN(cudaGetDevice(&dev));
  GS_CUDA_RETURN(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  GS_CUDA_RETURN(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, fn, kThreads, smem));
  const int rows = p.batch * p.n_kv_heads;
  zmax = std::max(1, std::min(zmax, sms * std::max(per_sm, 1) / rows));
  return launch_pdl(p.pdl, "attn_decode_mma_bf16kv_f32q", fn, dim3(p.batch, p.n_kv_heads, zmax),
                    dim3(kThreads), smem, st, p);
}

template <bool PRECISE>
Status launch_stages(const AttnParams& p, int zmax, cudaStream_t st) {
  switch (p.stages) {
    case 2:
      return launch_cfg<2, PRECISE>(p, zmax, st);
    case 4:
      return launch_cfg<4, PRECISE>(p, zmax, st);
    default:
      return launch_cfg<3, PRECISE>(p, zmax, st);
  }
}

}  // namespace

int decode_mma_max_splits(const AttnParams& p) {
  const int per = p.split_tiles > 0 ? p.split_tiles : kDecodeMinSplitTiles;
  const int64_t keys = static_cast<int64_t>(p.max_blocks) * p.block_size;
  const int64_t span = p.window > 0 ? std::min<int64_t>(keys, p.window) : keys;
  const int64_t tiles = (span + kBc - 1) / kBc + 1;  // a window may straddle one more tile
  return static_cast<int>(
      std::max<int64_t>(1, std::min<int64_t>(p.splits, (tiles + per - 1) / per)));
}

Status launch_attention_decode_mma(const AttnParams& p, cudaStream_t st) {
  if (!p.tickets) return InvalidArgument("attention: the one-kernel decode needs tickets");
  if (p.batch > 65535) return InvalidArgument("attention: one-kernel decode batch > 65535");
  const int zmax = decode_mma_max_splits(p);
  return p.kernel == 1 ? launch_stages<true>(p, zmax, st) : launch_stages<false>(p, zmax, st);
}

}  // namespace gossamer::kern

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
#include "kernels/flash_attn/tile.cuh"
#include "kernels/flash_attn/wgmma.cuh"

namespace gossamer::kern {
namespace {

using namespace flash;  // tile.cuh

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
  // Fill of tile i into the slot of running tile g; its block-table reads (tile_blocks) were
  // issued one iteration earlier into blk, so their latency overlaps the previous tile's work.
  int blk[kChunks<W>];
  auto lookup = [&](int i) { tile_blocks<W, WG>(p, table, tbeg + i, kmin, kmax, blk); };
  auto fill = [&](int i) {
    const uint32_t g = gbase + i, slot = g % S;
    if (g >= S) mbar_wait(ebar + 8 * slot, (g / S - 1) & 1);
    load_tile<W, WG>(p, kh, tbeg + i, blk, ring0 + slot * 2 * kTileBytes);
    mbar_cp_arrive(fbar + 8 * slot);
    if (i + 1 < nt) lookup(i + 1);
  };
  auto wait_full = [&](int i) { mbar_wait(fbar + 8 * ((gbase + i) % S), ((gbase + i) / S) & 1); };
  auto release = [&](int i) { mbar_arrive(ebar + 8 * ((gbase + i) % S)); };
  if (nt > 0) lookup(0);
  for (int i = 0; i < min(S - 2, nt); ++i) fill(i);
  if constexpr (WG) {
    static_assert(!PRECISE && FAST && W % 4 == 0 && S >= 3, "wgmma: bf16, fast softmax, S >= 3");
    float s[8][4];
    uint32_t a[4][4];
    // Slot descriptors: slot 0's, moved by (2 kTileBytes >> 4) per slot (wgmma.cuh).
    constexpr uint32_t kSlotStep = 2 * kTileBytes >> 4;
    const uint64_t dk0 = wg::k_desc(ring0), dv0 = wg::v_desc(ring0 + kTileBytes);
    const uint64_t dones = wg::desc(ones, 128, 1024);
    auto dk = [&](int i) { return dk0 + ((gbase + i) % S) * kSlotStep; };
    auto dv = [&](int i) { return dv0 + ((gbase + i) % S) * kSlotStep; };
    // The tiles reach smem through cp.async (generic proxy) and are read by wgmma (async proxy):
    // each reader fences after the full barrier (fence.proxy.async) before its first wgmma.
    if (nt > 0) {
      wait_full(0);
      wg::fence_async_smem();
      wg::qk(f, dk(0), s);
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
      wg::qk(f, dk(more ? i + 1 : i), s);
      wg::pv(f, dv(i), dones, a);
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

// One segment's key tiles through the cp.async ring (S stages, a CTA barrier per tile).
template <int W, int S, bool PRECISE, bool FAST>
__device__ __forceinline__ void segment_cp(const FlashAttnParams& p, Frags<W, PRECISE>& f,
                                           const Rows& r, const int32_t* table, int kh, int kmin,
                                           int kmax, int tbeg, int nt, float c, uint32_t ring0) {
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
    const uint32_t kb = ring0 + (i % S) * 2 * kTileBytes;
    float s[8][4];
    qk_tile(f, kb, s);
    softmax_tile<W, PRECISE, FAST>(f, r, tbeg + i, c, s);
    pv_tile<W, PRECISE, FAST>(f, kb + kTileBytes, s);
  }
}

// A segment's rows (this thread's two query rows that belong to sequence seq, their key
// ranges) and the running softmax state reset.
template <int W, bool PRECISE>
__device__ __forceinline__ void begin_segment(Frags<W, PRECISE>& f, Rows& r, int seq,
                                              const bool (&ok)[2], const int (&rt)[2],
                                              const int* s_seq, const int* s_lo, const int* s_pos) {
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
    begin_segment(f, r, seq, ok, rt, s_seq, s_lo, s_pos);
    const int tb0 = max(kmin, 0) / kBc, n = kmax >= max(kmin, 0) ? kmax / kBc - tb0 + 1 : 0;
    const int chunk = (n + p.splits - 1) / p.splits;
    const int tbeg = tb0 + blockIdx.z * chunk, nt = max(0, min(tb0 + n, tbeg + chunk) - tbeg);
    const int32_t* table = p.block_table + static_cast<size_t>(seq) * p.max_blocks;
    if constexpr (MB) {
      segment_mb<W, S, PRECISE, FAST, WG>(p, f, r, table, kh, kmin, kmax, tbeg, nt, c, ring0, fbar,
                                          gbase, ones);
      gbase += nt;
      write_rows<W, PRECISE, FAST>(p, f, r, tok0, c);
    } else {
      segment_cp<W, S, PRECISE, FAST>(p, f, r, table, kh, kmin, kmax, tbeg, nt, c, ring0);
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

const char* flash_attn_auto_rule() {  // keep in step with the rule in launch_flash_attn
  return "auto: narrow variant 1 for <= 16 rows, bf16 wgmma variant 8 for full attention over "
         ">= 512 rows, else mma.sync variant 6 (precise: 2)";
}

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

// Causal flash attention (FlashAttention-2 style, mma.sync m16n8k16 bf16 -> f32) over the paged
// bf16 KV cache, for a chunk of `tokens` query rows of one or more sequences whose K/V (and all
// earlier positions) are already in the cache. Same semantics as the decode kernel
// (kernels/attention/params.h): token i of sequence row_seq[i] at position pos[i] attends to keys
// [lo, pos[i]], lo = max(0, pos[i] - window + 1) (window 0: lo = 0), softmax over
// [scores..., sink_h] with the sink's column dropped, scores = scale * q . k.
// GQA: the G = nh / kvh query heads of a kv head are packed into the M dimension of the MMA
// (query row = token x head-in-group), so each K/V tile is loaded once per group.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "common/status.h"

namespace gossamer::kern {

// Largest FlashAttnParams::variant (the table below).
inline constexpr int kFlashAttnMaxVariant = 10;

struct FlashAttnParams {
  const float* q = nullptr;              // [tokens, nh, 64] f32 (rotated)
  const uint16_t* k_cache = nullptr;     // [num_blocks, kvh, block_size, 64] bf16
  const uint16_t* v_cache = nullptr;     // same
  const int32_t* block_table = nullptr;  // [seqs, max_blocks]
  const int32_t* row_seq = nullptr;      // [tokens] table row of each token; null: identity
  const int32_t* pos = nullptr;          // [tokens]
  const float* sinks = nullptr;          // [nh] f32
  float* out = nullptr;                  // [tokens, nh * 64] f32
  float* part_o = nullptr;   // [tokens, nh, splits, 64] f32 scratch, only used when splits > 1
  float* part_ml = nullptr;  // [tokens, nh, splits, 2] f32 scratch (max, sum) in log2 units
  int tokens = 0, n_heads = 0, n_kv_heads = 0;
  int block_size = 16, max_blocks = 0, num_blocks = 0;
  int window = 0;  // sliding window in tokens, 0 = full attention
  int splits = 1;  // context splits per query tile (split-K + combine kernel when > 1)
  float scale = 0.125f;
  // CTA shape. 0 auto (narrow when tokens <= 16; precise: wide; bf16: 8 for full attention over
  // >= 512 tokens, else 6);
  // 1 narrow: one warp, one token per tile (decode: G of the 16 MMA rows used);
  // 2 wide: 8 warps, 128 query rows = 128 / G tokens per tile, <= 128 registers (2 CTAs/SM);
  // 3 wide4: 4 warps, 64 rows = 64 / G tokens; 4 wide8: as 2 with up to 255 registers (1 CTA/SM);
  // 5 wide16: 16 warps, 256 rows = 256 / G tokens (twice the K/V tile reuse), 1 CTA/SM;
  // 6 / 7: as 2 / 5 with an mbarrier-synchronised ring (no CTA barrier per key tile: warps drift
  // up to a tile apart; copies S - 2 tiles ahead);
  // 8: as 7 with the tiles on wgmma (sm_90a, bf16 only; FA3-style overlap of P V with the next
  // tile's softmax); 9 / 10: wgmma with 12 / 8 warps (192 / 128 rows, <= 168 / 255 registers).
  int variant = 0;
  int stages = 0;  // cp.async ring depth 2..5 (K + V tile = 16 KB per stage); 0: default
                   // (narrow 2, wide 3, wide4/wide8 2, wide16 3, 6-10 4); 5 is used by the
                   // mbarrier variants (others run 4), the wgmma ones run 2 as 3.
  // q and P split into bf16 hi + lo halves (2x the MMAs): ~1e-6 relative error instead of the
  // ~3e-3 of plain bf16 inputs. Used by the decode path, where the MMAs are free.
  bool precise = false;
  bool pdl = false;  // programmatic dependent launch (common/pdl.h)
  // Bench/test A/B only: the session-2 softmax (exp2f with denormal fix-ups, O rescaled every
  // tile, row sums by FADD) instead of ex2.ftz + lazy rescale + row sums by a ones MMA.
  bool legacy_softmax = false;
  Status validate() const;
};

// Kernel flash_attn_paged_bf16kv_f32q<warps, stages, precise> (grid: query tiles x kvh x
// splits) + flash_attn_combine_f32 when splits > 1. No host sync, no allocation.
Status launch_flash_attn(const FlashAttnParams& p, cudaStream_t stream);

// The variant == 0 rule of launch_flash_attn in words (kernel-path reports).
const char* flash_attn_auto_rule();

// Number of (query, key) pairs attended by `tokens` consecutive positions p0..p0+tokens-1 of one
// sequence (for honest FLOP counts: 4 * 64 * nh * pairs).
double flash_attn_pairs(int64_t p0, int64_t tokens, int64_t window);

}  // namespace gossamer::kern

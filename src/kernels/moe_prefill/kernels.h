// Internal launchers of the moe_prefill kernels (route.cu, gemm.cu).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "common/status.h"

namespace gossamer::kern::moe_prefill {

// One grouped GEMM over the expert tiles: out = A[rows of the tile] x W[e]^T, W [E, N, K]
// MXFP4. Gate-up (kGateUp): A = xb [T, K] gathered by token (= pair / k), epilogue bias +
// SwiGLU -> act [pairs, N/2] bf16 in sorted order. Down: A = act [pairs, K] sorted rows,
// epilogue (+ bias) x weights[pair] -> y [pairs, N] f32 at the pair's row.
struct GemmArgs {
  const uint8_t* blocks = nullptr;   // [E, N, K/32, 16]
  const uint8_t* scales = nullptr;   // [E, N, K/32]
  const float* bias = nullptr;       // [E, N]
  const uint16_t* a = nullptr;       // bf16 rows of K (in the variant's k order, bits.h)
  const int32_t* perm = nullptr;     // [pairs] sorted row -> pair
  const int32_t* offsets = nullptr;  // [E + 1]
  const int32_t* ntiles = nullptr;   // [1]
  const int2* tiles = nullptr;       // [max_tiles] (expert, first sorted row)
  uint16_t* act = nullptr;           // gate-up output [pairs, N/2] bf16
  float* y = nullptr;                // down output [pairs, N] f32
  const float* weights = nullptr;    // [pairs] routing weights (down)
  int N = 0, K = 0, k = 0, max_tiles = 0;
  int variant = 1;  // tile configuration 0 .. kVariants - 1 (resolved: not -1)
  // Transposed variants (7..): grid x = column blocks of N, y = tiles (true), or the reverse.
  bool cols_first = true;
  float alpha = 1.702f, limit = 7.0f;
};

// Tile configurations. mma.sync with the tokens as operand A (gemm.cu): warps along n (BN = 32 x
// warps), tile rows BM (m16 fragments x 16), MX blocks per K stage (KBS), ring stages, blocks/SM:
//   v   warps  BM  KBS  stages  /SM
//   0   4      64  2    4       3
//   1   4      64  2    3       4
//   2   8      64  2    3       2
//   3   8      64  2    4       2
//   6   4      32  4    3       3
//   4: wgmma (wgmma.cu): transposed product, decoded weights as the register operand,
//      6-slot ring, 2/SM, BM 64   5: the same with a 4-slot ring, 3/SM
// Transposed mma.sync (tgemm.cu): weights as operand A (m16), tokens as B (n8), 4 warps, each
// 16 MT weight rows (BN = 64 MT), BM tokens:
//   v   BM  KBS  stages  /SM  MT
//   7   32  4    3       3    2
//   8   64  2    3       3    2     default for kSmallMaxRows < rows per expert <= kMidMaxRows
//   9   32  2    4       4    2
//   10  32  4    3       4    1     default for <= kSmallMaxRows rows per expert
//   11  64  2    3       4    1
//   12  96  2    4       2    2     default for > kMidMaxRows rows per expert
// -1 (default) picks by the mean rows per expert (pick_variant). Measured alternatives that lost
// everywhere (BM 128, BM 32 with KBS 2, BM 64 with KBS 4; session 4 second pass: BM 96 with 8
// warps x MT 1 or MT 3, variant 8 with a 4-slot ring, BM 64 with 8 warps x MT 1):
// docs/moe-prefill.md.
inline constexpr int kVariants = 13;
inline constexpr int kWgmmaVariant = 4;   // variants 4 and 5 are wgmma
inline constexpr int kTransVariant = 7;   // variants 7 .. 12 are transposed mma.sync
inline constexpr int kSmallVariant = 10;  // few rows per expert (weight streaming)
inline constexpr int kMidVariant = 8;     // 64-token tiles
inline constexpr int kLargeVariant = 12;  // 96-token tiles: one tile for most experts at 64 rows
inline constexpr int kSmallMaxRows = 24;  // mean rows per expert up to which kSmallVariant is used
inline constexpr int kMidMaxRows = 48;    // ... up to which kMidVariant is used
inline constexpr int kVariantBM[kVariants] = {64, 64, 64, 64, 64, 64, 32, 32, 64, 32, 32, 64, 96};

inline bool is_wgmma_variant(int v) {
  return v == kWgmmaVariant || v == kWgmmaVariant + 1;
}
// The default for `pairs` (token, expert) pairs over n_experts experts.
inline int pick_variant(long long pairs, int n_experts) {
  if (pairs <= static_cast<long long>(kSmallMaxRows) * n_experts) return kSmallVariant;
  return pairs <= static_cast<long long>(kMidMaxRows) * n_experts ? kMidVariant : kLargeVariant;
}
// Token rows per tile of variant v (0 .. kVariants - 1): the tile list of the route kernel uses it.
inline int variant_bm(int v) {
  return kVariantBM[v];
}

// Host checks shared by the GEMM launchers (gemm.cu, tgemm.cu, wgmma.cu): `bm`, the
// configuration's tile height, must be the one the route kernel sized the tile list with
// (variant_bm), and `smem`, the dynamic shared memory the K extent needs, at most 227 KB.
Status check_gemm_launch(const GemmArgs& g, int bm, size_t smem, const char* name);

// Both dispatch on g.variant (variants 4 and 5 forward to the wgmma launchers below). The
// activations (xb and act) must be stored in the variant's k order: perm8 groups for the
// mma.sync variants, perm32 blocks for the wgmma variants (bits.h).
Status launch_gemm_gate_up(const GemmArgs& g, cudaStream_t s);
Status launch_gemm_down(const GemmArgs& g, cudaStream_t s);
Status launch_wgmma_gate_up(const GemmArgs& g, cudaStream_t s);
Status launch_wgmma_down(const GemmArgs& g, cudaStream_t s);
Status launch_tgemm_gate_up(const GemmArgs& g, cudaStream_t s);
Status launch_tgemm_down(const GemmArgs& g, cudaStream_t s);

}  // namespace gossamer::kern::moe_prefill

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
  int variant = -1;  // tile configuration, see kVariants; -1: kDefaultVariant
  float alpha = 1.702f, limit = 7.0f;
};

// Tile configurations (gemm.cu): warps along n (BN = 32 x warps), ring stages, min blocks/SM.
//   0: 4 warps, 4 stages, 3/SM   1: 4 warps, 3 stages, 4/SM
//   2: 8 warps, 3 stages, 2/SM   3: 8 warps, 4 stages, 2/SM
//   4: wgmma (wgmma.cu): transposed product, decoded weights as the register operand,
//      6-slot ring, 2/SM   5: the same with a 4-slot ring, 3/SM
//   The wgmma variants are EXPERIMENTAL: not verified on a GPU in their current form (their
//   test is DISABLED_, see docs/moe-prefill.md); 0..3 are tested.
inline constexpr int kVariants = 6;
inline constexpr int kWgmmaVariant = 4;    // first wgmma variant; all >= 4 are wgmma
inline constexpr int kTestedVariants = 4;  // 0..3
inline constexpr int kDefaultVariant = 1;  // fastest measured (docs/moe-prefill.md)

// Both dispatch on g.variant (variants >= 4 forward to the wgmma launchers below). The
// activations (xb and act) must be stored in the variant's k order: perm8 groups for 0..3,
// perm32 blocks for the wgmma variants (bits.h).
Status launch_gemm_gate_up(const GemmArgs& g, cudaStream_t s);
Status launch_gemm_down(const GemmArgs& g, cudaStream_t s);
Status launch_wgmma_gate_up(const GemmArgs& g, cudaStream_t s);
Status launch_wgmma_down(const GemmArgs& g, cudaStream_t s);

inline int resolve_variant(int v) {
  return v < 0 ? kDefaultVariant : v;
}
inline bool is_wgmma_variant(int v) {
  return resolve_variant(v) >= kWgmmaVariant;
}

}  // namespace gossamer::kern::moe_prefill

// MoE prefill: all T tokens' routed experts as grouped GEMMs on tensor cores (MXFP4 weights).
// Same math as the decode kernels of src/kernels/moe (see its params.h), for every token t and
// routed slot j < k, e = ids[t, j]:
//   gu = W_gu[e] x[t] + b_gu[e]              W_gu[e]: [2I, H] MXFP4 (rows interleaved gate/up)
//   act[i] = (clamp(gu[2i+1], -L, L) + 1) * g * sigmoid(alpha g),  g = min(gu[2i], L)
//   resid[t] += sum_j w[t, j] * (W_dn[e] act + b_dn[e])    W_dn[e]: [H, I] MXFP4
// MXFP4 layout (gpt-oss): blocks [E, rows, cols/32, 16] u8 (low nibble = even element), scales
// [E, rows, cols/32] u8 E8M0.
//
// launch_moe_prefill enqueues (no host synchronisation, no allocation: CUDA-graph capturable):
//  1. moe_prefill_route: one block; per-expert counts, exclusive scan -> offsets, scatter of the
//     (token, slot) pairs into expert-sorted order, the (expert, tile) list (tile rows per
//     variant);
//  2. moe_prefill_x_bf16: x [T, H] f32 -> bf16 (k order permuted for the GEMM variant, gemm.cu);
//  3. moe_prefill_tgemm<gate_up>: grouped GEMM (mma.sync bf16 with the decoded weights as operand
//     A and the tokens as B; MXFP4 decoded to bf16 in regs from raw 4-bit tiles staged by
//     cp.async), epilogue bias + clamped SwiGLU -> act bf16 (sorted); other variants:
//     moe_prefill_gemm (tokens as A) and moe_prefill_wgmma;
//  4. moe_prefill_tgemm<down>: grouped GEMM, epilogue (+ bias) x routing weight -> y [T*k, H]
//     f32 rows indexed by the original pair t*k + j (un-permuted);
//  5. moe_prefill_combine: resid[t] += sum_{j < k} y[t*k + j] in slot order (deterministic: no
//     atomics; the result does not depend on the order of pairs inside an expert).
// Numerics: activations (x and act) are rounded to bf16, weights are exact (E2M1 x 2^(s-127) is
// a bf16 value for scale bytes s <= 128, i.e. block scales <= 2; larger scales overflow),
// products and sums in fp32. Ids outside [0, n_experts) are ignored (that pair adds nothing).
// Details, measurements and the GEMM variants: docs/moe-prefill.md.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "common/status.h"

namespace gossamer::kern {

struct MoePrefillParams {
  const uint8_t* gu_blocks = nullptr;  // [E, 2I, H/32, 16], 16-byte aligned
  const uint8_t* gu_scales = nullptr;  // [E, 2I, H/32]
  const float* gu_bias = nullptr;      // [E, 2I] f32
  const uint8_t* dn_blocks = nullptr;  // [E, H, I/32, 16], 16-byte aligned
  const uint8_t* dn_scales = nullptr;  // [E, H, I/32]
  const float* dn_bias = nullptr;      // [E, H] f32
  const float* x = nullptr;            // [T, H] f32 normed activations, 16-byte aligned
  const int32_t* ids = nullptr;        // [T, k] expert ids
  const float* weights = nullptr;      // [T, k] routing weights
  float* resid = nullptr;              // [T, H] f32, accumulated into, 16-byte aligned
  void* workspace = nullptr;           // 256-byte aligned, >= moe_prefill_workspace_bytes(T, ..)
  size_t workspace_bytes = 0;
  int tokens = 0, k = 0, hidden = 0, inter = 0, n_experts = 0;
  float alpha = 1.702f, limit = 7.0f;
  // GEMM variant (tests / bench): -1 default (by rows per expert), 0..11 (kernels.h).
  int gemm_variant = -1;
  Status validate() const;
};

// Device scratch needed for up to max_tokens tokens (0 if the shape is invalid).
size_t moe_prefill_workspace_bytes(int max_tokens, int k, int hidden, int inter, int n_experts);

// Enqueues the five kernels above on `stream`. Returns validate()'s error without launching, or
// the launch error (cudaGetLastError) naming the kernel.
Status launch_moe_prefill(const MoePrefillParams& p, cudaStream_t stream);

// fp64 reference on host copies of the same buffers, for the tokens listed in `tokens_to_check`
// only: returns [tokens_to_check.size(), H] = resid0[t] + sum_j w (W_dn act + b_dn) with act
// computed from the f32 x in fp64 (no bf16 rounding).
struct MoePrefillHost {
  const std::vector<uint8_t>*gu_blocks, *gu_scales, *dn_blocks, *dn_scales;
  const std::vector<float>*gu_bias, *dn_bias, *x, *weights, *resid0;
  const std::vector<int32_t>* ids;
};
std::vector<double> moe_prefill_ref(const MoePrefillHost& h, const MoePrefillParams& shape,
                                    const std::vector<int>& tokens_to_check);

}  // namespace gossamer::kern

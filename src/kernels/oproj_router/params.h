// Batch-1 decode: the O-projection with its residual add, followed by the MoE block's RMSNorm,
// router GEMV and top-k softmax, in one kernel (oproj_router_bulk_bf16w_f32a, kernel.cu):
//   x[h]      += sum_c wo[h, c] * attn[c] + bo[h]                  (residual stream, in place)
//   xn[h]      = x[h] / sqrt(mean(x^2) + eps) * norm_w[h]           (for the MoE kernels)
//   logits[e]  = sum_h wr[e, h] * xn[h] + br[e];  ids / weights = top-k softmax (router/params.h)
// It replaces gemv_bulk_bf16w_f32a + norm_router_topk_wide in the decode step: one kernel
// boundary less per layer, and the router's GEMV is spread over the O-projection's blocks
// (each block owns whole rows h of x, so it adds its rows' share of every logit; the last block
// to finish sums the shares in block order and runs the top-k). Not bit-identical to the
// unfused kernels (the logit sums run in another order); checked against fp64 (oproj_router_test).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

#include "common/status.h"

namespace gossamer::kern {

inline constexpr int kOprojRouterMaxExperts = 128, kOprojRouterMaxK = 8;
inline constexpr int kOprojRouterMaxCols = 16384;  // attention width (n_heads * head_dim)

struct OprojRouterParams {
  const uint16_t* wo = nullptr;      // [hidden, qdim] bf16, 16-byte aligned
  const float* bo = nullptr;         // [hidden] f32 or null
  const float* attn = nullptr;       // [qdim] f32 attention output, 16-byte aligned
  float* x = nullptr;                // [hidden] f32 residual stream, updated in place
  const uint16_t* norm_w = nullptr;  // [hidden] bf16 RMSNorm gain (MoE block)
  const uint16_t* wr = nullptr;      // [n_experts, hidden] bf16 router weight
  const float* br = nullptr;         // [n_experts] f32 or null
  float* xn = nullptr;               // [hidden] f32 out, 16-byte aligned
  float* logits = nullptr;           // [n_experts] f32 out, or null
  int32_t* ids = nullptr;            // [k] out
  float* weights = nullptr;          // [k] out
  // Scratch: [grid][pad4(n_experts + 1)] f32 (oproj_router_scratch_floats), 16-byte aligned,
  // and one counter word that
  // is 0 before the first launch (cudaMemset once); the last block of every launch resets it.
  float* part = nullptr;
  uint32_t* ticket = nullptr;
  int hidden = 0, qdim = 0, n_experts = 0, k = 0;
  float eps = 1e-5f;
  bool pdl = false;    // programmatic dependent launch (common/pdl.h)
  int ring_bytes = 0;  // weight ring per block (0: kGemvBulkRingBytes), at least two rows
  Status validate() const;
};

// The grid (one block per SM, at most `hidden`) and the scratch floats it needs.
Result<int> oproj_router_grid(int hidden);
size_t oproj_router_scratch_floats(int grid, int n_experts);

// sm_90 and shapes within the limits above (validate() passes).
bool oproj_router_supported(const OprojRouterParams& p);
Status launch_oproj_router(const OprojRouterParams& p, cudaStream_t stream);

// fp64 reference: x_out [hidden], xn [hidden], logits [n_experts] (bias vectors may be empty).
void oproj_router_ref(const std::vector<uint16_t>& wo, const std::vector<float>& bo,
                      const std::vector<float>& attn, const std::vector<float>& x,
                      const std::vector<uint16_t>& norm_w, const std::vector<uint16_t>& wr,
                      const std::vector<float>& br, int hidden, int qdim, int n_experts, float eps,
                      std::vector<double>* x_out, std::vector<double>* xn,
                      std::vector<double>* logits);

}  // namespace gossamer::kern

// MoE routing after the router GEMV (gemv/ with bias): per row, the top-k experts by logit
// (ties -> lower index, sorted descending, as torch.topk) and the softmax over the chosen k.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

#include "common/status.h"

namespace gossamer::kern {

struct TopkParams {
  const float* logits = nullptr;  // [batch, n_experts] f32
  int32_t* ids = nullptr;         // [batch, k]
  float* weights = nullptr;       // [batch, k]
  int batch = 0, n_experts = 0, k = 0;
  bool pdl = false;  // programmatic dependent launch (common/pdl.h)
  Status validate() const;
};

// Kernel topk_softmax_f32: one warp per row.
Status launch_topk_softmax(const TopkParams& p, cudaStream_t stream);

// Reference: ids and weights (fp64) per row.
void topk_softmax_ref(const std::vector<float>& logits, int batch, int n_experts, int k,
                      std::vector<int32_t>* ids, std::vector<double>* weights);

// Fused MoE routing for decode: RMSNorm of the residual rows, router GEMV (+bias) and top-k
// softmax in one kernel (norm_router_topk_<BT>): replaces rmsnorm + gemv + topk_softmax.
//   xn[b, :] = x[b, :] / sqrt(mean(x[b, :]^2) + eps) * norm_w      (written for the MoE kernels)
//   logits[b, e] = sum_c w[e, c] * xn[b, c] + bias[e];  ids/weights as TopkParams.
// One cluster of blocks per tile of <= 8 batch rows: each block recomputes the rows' 1/rms,
// writes its slice of xn, computes its share of the logits into the leader block's shared memory
// (DSMEM); the leader does the top-k. Needs sm_90. Two implementations (`variant`):
//   norm_router_topk_wide (default for hidden <= 3072): one router row per warp, the warp's
//     weights loaded into registers before pdl_wait(), clusters of ceil(E / 8) <= 16 blocks;
//   norm_router_topk (cluster of 8 blocks, 2 rows per warp, weights read after the wait).
// norm_router_topk is bit-identical to rmsnorm + gemv_bf16w_f32a (+ topk_softmax_f32); the wide
// kernel applies 1/rms to its dot products (logits within ~2e-7, xn bit-identical).
struct NormRouterParams {
  const float* x = nullptr;          // [batch, hidden] f32 residual stream (not normed)
  const uint16_t* norm_w = nullptr;  // [hidden] bf16 RMSNorm gain
  const uint16_t* w = nullptr;       // [n_experts, hidden] bf16 router weight, 16-byte aligned
  const float* bias = nullptr;       // [n_experts] f32 or null
  float* xn = nullptr;               // [batch, hidden] f32 normed activations out, or null
  float* logits = nullptr;           // [batch, n_experts] f32 out, or null (not needed by decode)
  int32_t* ids = nullptr;            // [batch, k]
  float* weights = nullptr;          // [batch, k]
  int batch = 0, hidden = 0, n_experts = 0, k = 0;
  float eps = 1e-5f;
  bool pdl = false;  // programmatic dependent launch (common/pdl.h)
  // 0: auto (wide with 1 row per warp when hidden <= 3072, else cluster-8); 1: cluster-8
  // norm_router_topk; 2: wide, 1 row per warp; 3: wide, 2 rows per warp (clusters of E / 16).
  int variant = 0;
  Status validate() const;
};

// The kernel launch_norm_router_topk runs for these parameters (bench / kernel_path text).
const char* norm_router_variant(const NormRouterParams& p);

Status launch_norm_router_topk(const NormRouterParams& p, cudaStream_t stream);

// Whether the decode path uses norm_router_topk for this expert count (docs/decode-overhead.md:
// the register-resident variant is faster than rmsnorm + gemv + topk_softmax for 32 and 128).
inline bool use_norm_router(int n_experts) {
  return n_experts % 8 == 0 && n_experts >= 8 && n_experts <= 128;
}

// fp64 reference: xn [batch, hidden] and logits [batch, n_experts].
void norm_router_ref(const std::vector<float>& x, const std::vector<uint16_t>& norm_w,
                     const std::vector<uint16_t>& w, const std::vector<float>& bias, int batch,
                     int hidden, int n_experts, float eps, std::vector<double>* xn,
                     std::vector<double>* logits);

}  // namespace gossamer::kern

// Decode: O-projection GEMV (+ bias + residual add) fused with the MoE RMSNorm, the router GEMV
// and the top-k softmax: one kernel boundary less per layer than gemv + norm_router_topk
// (docs/decode-overhead.md, section 4).
//   x[b, r]      += sum_c wo[r, c] * attn[b, c] + bo[r]             (as launch_gemv, accumulate)
//   xn[b, :]      = x[b, :] / sqrt(mean(x[b, :]^2) + eps) * norm_w  (the final x)
//   logits[b, e]  = sum_c router_w[e, c] * xn[b, c] + router_b[e]
//   ids / weights = top-k softmax of logits[b, :]                   (as launch_topk_softmax)
// Kernel oproj_router<BT>: the gemv_bf16w_f32a grid (16 O rows per 256-thread block) plus, per
// block, ceil(E / grid) router rows that are copied into shared memory before pdl_wait(). After
// the O rows are written, a grid-wide barrier (counters in `sync`), then every block computes
// 1/rms of the final rows, writes its slice of xn and its router rows' logits; the last block to
// finish runs the top-k. All blocks must be co-resident: oproj_router_supported() checks it with
// the occupancy API (callers fall back to gemv + norm_router_topk otherwise). Every output is
// bit-identical to launch_gemv + launch_norm_router_topk (same fp32 operations in the same order).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "common/status.h"

namespace gossamer::kern {

struct OprojRouterParams {
  const uint16_t* wo = nullptr;        // [hidden, qd] bf16 O-projection weight, 16-byte aligned
  const float* bo = nullptr;           // [hidden] f32 or null
  const float* attn = nullptr;         // [batch, qd] f32 attention output, 16-byte aligned
  float* x = nullptr;                  // [batch, hidden] f32 residual stream, accumulated into
  const uint16_t* norm_w = nullptr;    // [hidden] bf16 MoE RMSNorm gain, 16-byte aligned
  const uint16_t* router_w = nullptr;  // [n_experts, hidden] bf16, 16-byte aligned
  const float* router_b = nullptr;     // [n_experts] f32 or null
  float* xn = nullptr;                 // [batch, hidden] f32 normed rows out
  float* logits = nullptr;             // [batch, n_experts] f32 out (also the top-k's input)
  int32_t* ids = nullptr;              // [batch, k] out
  float* weights = nullptr;            // [batch, k] out
  // [kOprojRouterSyncWords] device counters: zero before the first launch, left zero by every
  // launch (also inside a replayed CUDA graph). One buffer per stream: launches must not overlap.
  unsigned* sync = nullptr;
  int batch = 0, hidden = 0, qd = 0, n_experts = 0, k = 0;
  float eps = 1e-5f;
  bool pdl = false;  // programmatic dependent launch (common/pdl.h)
  Status validate() const;
};

inline constexpr int kOprojRouterSyncWords = 4;
inline constexpr int kOprojRouterMaxBatch = 4;

// Shape limits (validate()) and co-residency of the whole grid on the current device. False:
// use launch_gemv + launch_norm_router_topk instead.
Result<bool> oproj_router_supported(const OprojRouterParams& p);

// Fails (InvalidArgument) when oproj_router_supported() is false: never launches a grid that
// could deadlock in its barrier.
Status launch_oproj_router(const OprojRouterParams& p, cudaStream_t stream);

}  // namespace gossamer::kern

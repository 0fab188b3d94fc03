// Pieces shared by the decode forward (forward.cpp) and the prefill forward
// (prefill_forward.cpp): the NVTX range guard, the model dimensions, the decode attention
// parameters and the decode MoE expert kernels. CUDA-aware; this folder's .cpp files only.
#pragma once

#include <nvtx3/nvToolsExt.h>

#include "engine/cuda/runner_impl.h"
#include "kernels/attention/params.h"

namespace gossamer::cudarun {

// NVTX range guard (host-side annotation; visible in eager runs and around graph launches).
struct Range {
  explicit Range(const char* name) { nvtxRangePushA(name); }
  ~Range() { nvtxRangePop(); }
  Range(const Range&) = delete;
  Range& operator=(const Range&) = delete;
};

struct Dims {
  int H, nh, kvh, E, K, I, V, QD, QKV;
  float eps;
  bool pdl;  // programmatic dependent launch for the kernels that support it (common/pdl.h)
  explicit Dims(const ModelConfig& c, bool pdl_on = false)
      : H(static_cast<int>(c.hidden_size)),
        nh(static_cast<int>(c.num_attention_heads)),
        kvh(static_cast<int>(c.num_key_value_heads)),
        E(static_cast<int>(c.num_local_experts)),
        K(static_cast<int>(c.experts_per_token)),
        I(static_cast<int>(c.intermediate_size)),
        V(static_cast<int>(c.vocab_size)),
        QD(nh * 64),
        QKV((nh + 2 * kvh) * 64),
        eps(static_cast<float>(c.rms_norm_eps)),
        pdl(pdl_on) {}
};

// Split-K decode attention over `rows` query rows (q in ws.q, output ws.attn); the per-layer
// fields (cache, tables, sinks, window, splits) are set by the caller.
kern::AttnParams decode_attn_params(const CudaModelRunner::Impl& m, int rows, const Dims& d);

// The decode MoE expert kernels (gate_up + SwiGLU, down + weighted sum + residual) for the token
// rows [r0, r0 + n), whose expert ids / weights are already in ws.ids / ws.rw. grouped: the
// expert-grouped kernels (pipe 9, n <= 64, needs ws.moe_part) instead of the per-row ones.
Status enqueue_moe_experts(const CudaModelRunner::Impl& m, const DevLayer& L, int r0, int n,
                           const Dims& d, bool grouped = false);

// lm_head: logits rows above this count use cuBLASLt (split bf16) instead of the GEMV.
constexpr int kGemvMaxRows = 8;
bool lm_head_uses_gemm(const CudaModelRunner::Impl& m, int logit_rows);

// Final norm + lm_head (+ argmax keys) + greedy tokens for the forward's `logit_rows` logits
// rows (lm_head.cpp); feedback: the tokens become the next step's inputs, positions advance.
Status enqueue_lm_head(const CudaModelRunner::Impl& m, int logit_rows, bool feedback,
                       const Dims& d);

}  // namespace gossamer::cudarun

// MoE expert GEMVs over MXFP4 weights that read only the routed experts.
//  gate_up (+ clamped SwiGLU), per row b and routed slot j < k, e = ids[b, j]:
//    gu = W_gu[e] x[b] + b_gu[e]          W_gu[e]: [2I, H] MXFP4 (rows interleaved gate/up)
//    act[b, j, i] = (clamp(gu[2i+1], -L, L) + 1) * g * sigmoid(alpha g),  g = min(gu[2i], L)
//  down (+ routing-weighted sum + bias + residual add):
//    resid[b] += sum_j w[b, j] * (W_dn[e] act[b, j] + b_dn[e])   W_dn[e]: [H, I] MXFP4
// MXFP4 layout (gpt-oss): blocks [E, rows, cols/32, 16] u8 (low nibble = even element),
// scales [E, rows, cols/32] u8 E8M0.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

#include "common/status.h"

namespace gossamer::kern {

struct MoeGateUpParams {
  const uint8_t* blocks = nullptr;  // [E, 2I, H/32, 16]
  const uint8_t* scales = nullptr;  // [E, 2I, H/32]
  const float* bias = nullptr;      // [E, 2I] f32
  const float* x = nullptr;         // [batch, H] f32 (normed)
  const int32_t* ids = nullptr;     // [batch, k]
  float* act = nullptr;             // [batch, k, I] f32
  int batch = 0, k = 0, hidden = 0, inter = 0, n_experts = 0;
  float alpha = 1.702f, limit = 7.0f;
  // Kernel variant (docs/moe-decode.md): 6 = streaming kernels (bulk.cu, default: weights by
  // 1-D TMA bulk copies of whole 8-row groups into a ~200 KB shared-memory ring per SM,
  // tensor-core decode from shared memory); 0 = register-staged kernels (kernel.cu), the
  // fallback. Pipe 6 needs sm_90, H/32 and I/32 even, 16-byte aligned weights and batch <= 64;
  // otherwise gate_up runs pipe 0 (and down pipe 2, then 0: MoeDownParams::pipe). The
  // experimental pipes 1, 3, 4, 5, 7, 8 (and gate_up pipe 2) were removed in session 4;
  // validate() rejects them. 9 = expert-grouped streaming kernel (grouped.cu, session 19: each
  // routed expert streamed once per step for all its rows, for decode batches >= 2; sm_90,
  // batch * k <= 256, k <= 8, E <= 256), falling back to 6.
  int pipe = 6;
  // Programmatic dependent launch (pdl.h), honoured by pipe 6 only (the other pipes, and the
  // fallbacks, are launched without the attribute). gate_up waits (pdl_wait) before reading ids,
  // which the router (the kernel just before it) writes; before the wait it only initialises its
  // mbarriers.
  bool pdl = false;
  Status validate() const;
};

struct MoeDownParams {
  const uint8_t* blocks = nullptr;  // [E, H, I/32, 16]
  const uint8_t* scales = nullptr;  // [E, H, I/32]
  const float* bias = nullptr;      // [E, H] f32
  const float* act = nullptr;       // [batch, k, I] f32
  const int32_t* ids = nullptr;     // [batch, k]
  const float* weights = nullptr;   // [batch, k]
  float* resid = nullptr;           // [batch, H] f32, accumulated into
  int batch = 0, k = 0, hidden = 0, inter = 0, n_experts = 0;
  // 6 = streaming kernel (bulk.cu, default), 2 = cp.async ring, one-wave grid, 12 warps
  // (pipe.cu), 0 = register-staged kernel (kernel.cu), 9 = expert-grouped streaming kernel
  // (grouped.cu; needs `part`) followed by moe_combine_f32. Where a pipe does not apply it falls
  // back: 9 -> 6 -> 2 -> 0. Other values (removed experiments) are rejected by validate().
  int pipe = 6;
  // PDL (pipe 6 only). down reads ids and weights and issues its weight copies BEFORE
  // pdl_wait: the exception to rule 1 of pdl.h derived in docs/decode-overhead.md. down runs
  // right after gate_up, and down can only start early once every gate_up block has executed
  // pdl_trigger, which gate_up does right after its own pdl_wait, i.e. after the router (the
  // kernel before gate_up, writer of ids and weights) has completed; if gate_up runs without
  // PDL, stream order gives the same. So ids / weights are final when down starts; act (written
  // by gate_up) is read only after down's pdl_wait, and resid is written only after it.
  // Requires that the kernel launched right before down is a gate_up for the same ids (or a
  // kernel that triggers only after the router completed).
  bool pdl = false;
  float* part = nullptr;  // [batch, k, H] f32 workspace of pipe 9 (else unused)
  Status validate() const;
};

// Whether pipe 9 would run its own (expert-grouped) kernels for these params on the current
// device instead of falling back to pipe 6 (the runner's kernel_path, tests).
bool moe_gate_up_grouped_supported(const MoeGateUpParams& p);
bool moe_down_grouped_supported(const MoeDownParams& p);

// Kernels moe_gate_up_swiglu_mxfp4w_f32a and moe_down_mxfp4w_f32a.
Status launch_moe_gate_up(const MoeGateUpParams& p, cudaStream_t stream);
Status launch_moe_down(const MoeDownParams& p, cudaStream_t stream);

// fp64 references (host copies of the same buffers). kappa (optional) receives, per activation,
// its first-order sensitivity to fp32 rounding: |d act / d g| (sum |w x| + |b|) of the gate row
// plus the same for the up row, plus 8 |act| for the SwiGLU's own evaluation. A kernel that
// computes in fp32 (any summation order) errs by a small multiple of 2^-24 kappa.
std::vector<double> moe_gate_up_ref(const std::vector<uint8_t>& blocks,
                                    const std::vector<uint8_t>& scales,
                                    const std::vector<float>& bias, const std::vector<float>& x,
                                    const std::vector<int32_t>& ids, const MoeGateUpParams& shape,
                                    std::vector<double>* kappa = nullptr);
std::vector<double> moe_down_ref(const std::vector<uint8_t>& blocks,
                                 const std::vector<uint8_t>& scales, const std::vector<float>& bias,
                                 const std::vector<float>& act, const std::vector<int32_t>& ids,
                                 const std::vector<float>& weights,
                                 const std::vector<float>& resid0, const MoeDownParams& shape);

}  // namespace gossamer::kern

// Pipelined (cp.async ring, one-wave grid) MoE kernels: internal to src/kernels/moe.
#pragma once

#include "kernels/moe/params.h"

namespace gossamer::kern {

// Launch the pipelined kernels (variant p.pipe: 1, 2 or 3, see MoeGateUpParams::pipe). Return a
// StatusCode::kUnsupported status without launching when the shapes or pointer alignment do not
// suit them (the caller then uses the kernels of kernel.cu).
Status launch_moe_gate_up_pipe(const MoeGateUpParams& p, cudaStream_t s);
Status launch_moe_down_pipe(const MoeDownParams& p, cudaStream_t s);

// Tensor-core variant (p.pipe == 3, mma.cu): same contract and fallback rule.
Status launch_moe_gate_up_mma(const MoeGateUpParams& p, cudaStream_t s);
Status launch_moe_down_mma(const MoeDownParams& p, cudaStream_t s);

// Tensor-core register-direct variant (p.pipe 4 or 5, tc.cu): same contract and fallback rule.
Status launch_moe_gate_up_tc(const MoeGateUpParams& p, cudaStream_t s);
Status launch_moe_down_tc(const MoeDownParams& p, cudaStream_t s);

}  // namespace gossamer::kern

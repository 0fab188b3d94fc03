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

// Streaming bulk-copy variants (p.pipe 6 / 7, bulk.cu): same contract and fallback rule; honour
// p.pdl. *_supported: whether pipe 6 / 7 would run its own kernel (not fall back) for these
// params on the current device (tests use it to make sure the variant is really exercised).
Status launch_moe_gate_up_bulk(const MoeGateUpParams& p, cudaStream_t s);
Status launch_moe_down_bulk(const MoeDownParams& p, cudaStream_t s);
bool moe_gate_up_bulk_supported(const MoeGateUpParams& p);
bool moe_down_bulk_supported(const MoeDownParams& p);

// Streaming variant with multi-group copies and a shared work queue (p.pipe 8, stream.cu): same
// contract, fallback rule and PDL handling as pipe 6.
Status launch_moe_gate_up_stream(const MoeGateUpParams& p, cudaStream_t s);
Status launch_moe_down_stream(const MoeDownParams& p, cudaStream_t s);
bool moe_gate_up_stream_supported(const MoeGateUpParams& p);
bool moe_down_stream_supported(const MoeDownParams& p);

// Bench probe (bulk_probe.cu): `blocks` blocks each stream per_block contiguous bytes of src
// through a ring of ring_bytes with bulk copies of `chunk` bytes (no compute).
Status launch_moe_bulk_probe(const uint8_t* src, size_t per_block, int blocks, int chunk,
                             int ring_bytes, cudaStream_t s);

}  // namespace gossamer::kern

// Launchers of the MoE kernel variants behind launch_moe_gate_up / launch_moe_down (kernel.cu):
// internal to src/kernels/moe.
#pragma once

#include "kernels/moe/params.h"

namespace gossamer::kern {

// Pipelined down kernel (pipe 2, pipe.cu: cp.async ring, one-wave grid, 12 warps). Returns a
// StatusCode::kUnsupported status without launching when the shapes or pointer alignment do not
// suit it (the caller then uses the down kernel of kernel.cu, pipe 0).
Status launch_moe_down_pipe(const MoeDownParams& p, cudaStream_t s);

// Streaming bulk-copy kernels (pipe 6, bulk.cu): same contract and fallback rule; honour
// p.pdl. *_supported: whether pipe 6 would run its own kernel (not fall back) for these
// params on the current device (tests use it to make sure the variant is really exercised).
Status launch_moe_gate_up_bulk(const MoeGateUpParams& p, cudaStream_t s);
Status launch_moe_down_bulk(const MoeDownParams& p, cudaStream_t s);
bool moe_gate_up_bulk_supported(const MoeGateUpParams& p);
bool moe_down_bulk_supported(const MoeDownParams& p);

// Expert-grouped streaming kernels (pipe 9, grouped.cu): each routed expert once per launch for
// all its rows; down also launches moe_combine_f32 (needs p.part). Same fallback rule (an
// Unsupported status without launching); honour p.pdl. (*_grouped_supported: params.h.)
Status launch_moe_gate_up_grouped(const MoeGateUpParams& p, cudaStream_t s);
Status launch_moe_down_grouped(const MoeDownParams& p, cudaStream_t s);

// Bench probe (bulk_probe.cu): `blocks` blocks each stream per_block contiguous bytes of src
// through a ring of ring_bytes with bulk copies of `chunk` bytes (no compute).
// As launch_moe_bulk_probe through cp.async (the LSU path) by 256 threads per block.
Status launch_moe_lsu_probe(const uint8_t* src, size_t per_block, int blocks, int chunk,
                            int ring_bytes, cudaStream_t s);
Status launch_moe_bulk_probe(const uint8_t* src, size_t per_block, int blocks, int chunk,
                             int ring_bytes, cudaStream_t s);

}  // namespace gossamer::kern

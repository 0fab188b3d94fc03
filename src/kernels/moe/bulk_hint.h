// L2 eviction hint on the expert-weight bulk copies of the streaming MoE kernels (pipe 6).
// Host-only header (the l2_prefetch probe bench and bulk_hint_test include it); defined in
// bulk.cu. kEvictFirst: every cp.async.bulk of expert weights carries an L2::evict_first cache
// policy, so the 53 MB / layer of streamed experts (read once per step) evict each other before
// anything that is read again. The engine's launches (launch_moe_gate_up / launch_moe_down,
// pipe 6) use kEvictFirst since session 15.
#pragma once

#include <cuda_runtime.h>

#include "common/status.h"

namespace gossamer::kern {

struct MoeGateUpParams;
struct MoeDownParams;

enum class MoeL2Hint { kNone, kEvictFirst };

// As launch_moe_gate_up / launch_moe_down for p.pipe 6 (bulk.cu), with the hint. Returns an
// Unsupported status without launching when the bulk kernels do not take these params (no
// fallback here: the caller chooses).
Status launch_moe_gate_up_bulk_hint(const MoeGateUpParams& p, MoeL2Hint hint, cudaStream_t s);
Status launch_moe_down_bulk_hint(const MoeDownParams& p, MoeL2Hint hint, cudaStream_t s);

}  // namespace gossamer::kern

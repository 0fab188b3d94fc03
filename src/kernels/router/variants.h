// norm_router_topk implementations behind launch_norm_router_topk (NormRouterParams::variant).
#pragma once

#include <cuda_runtime.h>

#include "common/status.h"
#include "kernels/router/params.h"

namespace gossamer::kern {

// Largest hidden size of the register-resident variant (12 16-byte chunks per lane and row).
inline constexpr int kWideMaxHidden = 3072;

// norm_router_topk<BT> (norm_router.cu): clusters of 8 blocks, 2 rows per warp, weights read
// after the wait (L2 prefetch before it). Any hidden.
Status launch_norm_router_cluster8(const NormRouterParams& p, cudaStream_t stream);
// norm_router_topk_wide<BT, RPW> (norm_router_wide.cu): weights in registers before the wait,
// clusters of ceil(E / (8 * rows_per_warp)) <= 16 blocks; rows_per_warp 1 or 2.
Status launch_norm_router_wide(const NormRouterParams& p, int rows_per_warp, cudaStream_t stream);

}  // namespace gossamer::kern

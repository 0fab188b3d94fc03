// Host-side launch helpers of the streaming MoE kernels (params.pipe 6, bulk.cu). Internal to
// src/kernels/moe. The bulk-copy and mbarrier device helpers are in common/bulk_copy.cuh (also
// used by gemv/ and qkv_rope/).
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "common/status.h"
#include "kernels/common/bulk_copy.cuh"
#include "kernels/common/cuda_check.h"
#include "kernels/common/pdl.h"

namespace gossamer::kern::moe_bulk {

using namespace bulk_copy;  // NOLINT: the device helpers moved to common/bulk_copy.cuh

// Blocks per batch row: about one block per SM over the whole grid, at most one per unit.
inline Result<int> blocks_per_row(int batch, int units) {
  GS_ASSIGN_OR_RETURN(const int sms, sm_count());
  return std::max(1, std::min(units, sms / batch));
}

// Launches a streaming kernel fn(p, L): grid (blocks_per_row, batch), `warps` consumer warps +
// the producer warp, L.smem bytes of dynamic shared memory, PDL when p.pdl.
template <class Params, class Layout, class Kernel>
Status launch_streaming(const Params& p, const Layout& L, Kernel* fn, int warps, const char* name,
                        cudaStream_t s) {
  GS_ASSIGN_OR_RETURN(const int gx, blocks_per_row(p.batch, L.units));
  GS_CUDA_RETURN(cudaFuncSetAttribute(reinterpret_cast<const void*>(fn),
                                      cudaFuncAttributeMaxDynamicSharedMemorySize, L.smem));
  return launch_pdl(p.pdl, name, fn, dim3(gx, p.batch), dim3((warps + 1) * 32),
                    static_cast<size_t>(L.smem), s, p, L);
}

}  // namespace gossamer::kern::moe_bulk

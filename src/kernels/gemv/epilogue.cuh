// The output of one GEMV element, shared by gemv_bf16w_f32a (kernel.cu) and gemv_mma_bf16w_f32a
// (mma.cu): y[b0 + b, row] (+)= v (v includes the bias), and the block's argmax candidate of batch
// row b in best[b] (shared memory; the block publishes best[] with publish_argmax).
// Internal to src/kernels/gemv.
#pragma once

#include "kernels/common/gemv_core.cuh"
#include "kernels/gemv/params.h"

namespace gossamer::kern::gemv_epi {

__device__ __forceinline__ void store(const GemvParams& p, int row, int b0, int b, float v,
                                      unsigned long long* best) {
  if (p.y) {
    float* dst = p.y + static_cast<size_t>(b0 + b) * p.ldy + row;
    *dst = p.accumulate ? *dst + v : v;
  }
  if (p.argmax && !isnan(v)) atomicMax(&best[b], argmax_key(v, row));
}

// After every store of the block: one 64-bit atomicMax per batch row (every thread calls it).
__device__ __forceinline__ void publish_argmax(const GemvParams& p, int b0, int nb,
                                               const unsigned long long* best) {
  if (!p.argmax) return;
  __syncthreads();
  if (static_cast<int>(threadIdx.x) < nb) atomicMax(p.argmax + b0 + threadIdx.x, best[threadIdx.x]);
}

}  // namespace gossamer::kern::gemv_epi

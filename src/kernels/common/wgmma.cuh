// Warpgroup MMA (sm_90a wgmma.mma_async) primitives shared by the kernels that use it
// (kernels/moe_prefill/wgmma.cu, kernels/flash_attn/wgmma.cuh): shared-memory matrix descriptors
// for the no-swizzle core-matrix layout, fence / commit / wait, the generic-to-async proxy fence
// and register pins. The MMA instructions themselves (shapes, operand sources) live with their
// users.
#pragma once

#include <cstdint>

namespace gossamer::kern::wg {

// Shared-memory matrix descriptor: start address, leading / stride byte offsets, no swizzle.
__device__ __forceinline__ uint64_t desc(uint32_t smem_addr, uint32_t lbo, uint32_t sbo) {
  return static_cast<uint64_t>((smem_addr >> 4) & 0x3FFFu) |
         (static_cast<uint64_t>((lbo >> 4) & 0x3FFFu) << 16) |
         (static_cast<uint64_t>((sbo >> 4) & 0x3FFFu) << 32);
}
__device__ __forceinline__ void fence() {
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void commit() {
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}
template <int N>
__device__ __forceinline__ void wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
// Generic-proxy writes (cp.async, st.shared) made visible to the async proxy (wgmma reads).
__device__ __forceinline__ void fence_async_smem() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

// Register pins, called right after the wait that retires a wgmma: the compiler may neither read
// its accumulators earlier nor reuse its A-fragment registers for other values before (wgmma
// reads and writes them asynchronously).
template <int N>
__device__ __forceinline__ void fence_regs(float (&d)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+f"(d[i])::"memory");
}
template <int N, int M>
__device__ __forceinline__ void fence_regs(float (&d)[N][M]) {
#pragma unroll
  for (int i = 0; i < N; ++i)
#pragma unroll
    for (int j = 0; j < M; ++j) asm volatile("" : "+f"(d[i][j])::"memory");
}
template <int N, int M>
__device__ __forceinline__ void fence_regs(uint32_t (&a)[N][M]) {
#pragma unroll
  for (int i = 0; i < N; ++i)
#pragma unroll
    for (int j = 0; j < M; ++j) asm volatile("" : "+r"(a[i][j])::"memory");
}

}  // namespace gossamer::kern::wg

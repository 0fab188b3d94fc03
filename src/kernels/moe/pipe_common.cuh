// Helpers shared by the MoE kernels (pipe.cu: cp.async wrappers and the one-wave grid sizing;
// bulk.cu: alignment and the fallback status). Internal to src/kernels/moe.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "common/status.h"
#include "kernels/common/cuda_check.h"

namespace gossamer::kern::moe_pipe {

__device__ __forceinline__ void cp_async16(void* dst, const void* src) {
  const auto s = static_cast<uint32_t>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(s), "l"(src));
}
__device__ __forceinline__ void cp_async4(void* dst, const void* src) {
  const auto s = static_cast<uint32_t>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"(s), "l"(src));
}
__device__ __forceinline__ void cp_commit() {
  asm volatile("cp.async.commit_group;\n" ::);
}
template <int N>
__device__ __forceinline__ void cp_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

// Largest grid (per batch row) that is resident in one wave, given the occupancy of `fn`.
inline Result<int> resident_blocks(const void* fn, int threads, size_t smem) {
  int dev = 0, sms = 0, per_sm = 0;
  GS_CUDA_RETURN(cudaGetDevice(&dev));
  GS_CUDA_RETURN(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  GS_CUDA_RETURN(cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                      static_cast<int>(smem)));
  GS_CUDA_RETURN(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, fn, threads, smem));
  if (per_sm < 1) return InvalidArgument("moe pipe: kernel does not fit on an SM");
  return sms * per_sm;
}

inline constexpr size_t kMaxSmem = 227 * 1024;
// Returned when the shapes or pointers do not suit the pipelined kernels (caller falls back).
inline Status NoPipe() {
  return Unsupported("moe pipe: shapes/pointers unsupported");
}

inline bool aligned(const void* ptr, uintptr_t a) {
  return reinterpret_cast<uintptr_t>(ptr) % a == 0;
}

}  // namespace gossamer::kern::moe_pipe

// Hopper bulk-copy (1-D TMA), mbarrier and named-barrier helpers shared by the streaming decode
// kernels (moe/bulk.cu, gemv/bulk.cu, qkv_rope/bulk.cu). sm_90+ only: on older targets the
// bodies compile to nothing and the launchers never pick the kernels that use them
// (device_is_sm90).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "common/status.h"
#include "kernels/common/cuda_check.h"

namespace gossamer::kern::bulk_copy {

// Multiprocessors of the current device (the streaming kernels run about one block per SM).
inline Result<int> sm_count() {
  int dev = 0, sms = 0;
  GS_CUDA_RETURN(cudaGetDevice(&dev));
  GS_CUDA_RETURN(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  return sms;
}

// Dynamic shared memory at which a block takes more than half of a multiprocessor's shared
// memory (the per-block reservation included), so that two blocks of the kernel never share an
// SM. The streaming kernels sized for one block per SM (gemv_bulk, qkv_rope_bulk) request at
// least this much: with fewer registers (qkv_rope_bulk at 88, gemv_bulk at 3 rows at 88) two of
// their blocks could land on one SM while other SMs were still busy, and that SM then streamed
// twice the rows. Session 21, H100, in one call: tg128 at batch 1 120b 404.8 / 404.3 -> 409.9 /
// 410.2 t/s, 20b 566.7 / 566.3 -> 574.1 / 573.8 (qkv_rope_bulk); tg64 at batch 3 120b 631.8 /
// 631.2 -> 659.2 / 658.9, 20b 920.7 / 916.7 -> 962.3 / 958.1 (gemv_bulk).
// About 113 KB on sm_90: the neighbouring kernels' blocks still fit beside one.
inline Result<int> one_block_per_sm_smem() {
  int dev = 0, per_sm = 0, reserved = 0;
  GS_CUDA_RETURN(cudaGetDevice(&dev));
  GS_CUDA_RETURN(cudaDeviceGetAttribute(&per_sm, cudaDevAttrMaxSharedMemoryPerMultiprocessor, dev));
  GS_CUDA_RETURN(cudaDeviceGetAttribute(&reserved, cudaDevAttrReservedSharedMemoryPerBlock, dev));
  return per_sm / 2 - reserved + 128;
}

// The launch of a kernel sized for one block per SM: its dynamic shared memory is at least
// one_block_per_sm_smem() (set as the kernel's limit here).
template <class Kernel>
struct OneBlockLaunch {
  Kernel kernel;
  int grid, smem;
};

template <class Kernel>
inline Result<OneBlockLaunch<Kernel>> one_block_launch(Kernel kernel, int grid, int layout_smem) {
  GS_ASSIGN_OR_RETURN(const int exclusive, one_block_per_sm_smem());
  const OneBlockLaunch<Kernel> l{kernel, grid, layout_smem > exclusive ? layout_smem : exclusive};
  GS_CUDA_RETURN(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, l.smem));
  return l;
}

// Blocks of l's kernel with `threads` threads that fit on one SM (tests: 1).
template <class Kernel>
inline Result<int> blocks_per_sm(const OneBlockLaunch<Kernel>& l, int threads) {
  int n = 0;
  GS_CUDA_RETURN(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, l.kernel, threads, l.smem));
  return n;
}

// True when the current device is sm_90 or newer (bulk copies, mbarrier transaction counts).
inline bool device_is_sm90() {
  int dev = 0, major = 0;
  if (cudaGetDevice(&dev) != cudaSuccess) return false;
  if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess) {
    return false;
  }
  return major >= 9;
}

__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// mbarrier with `count` expected arrivals per phase.
__device__ __forceinline__ void mbar_init(uint64_t* bar, uint32_t count) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_addr(bar)), "r"(count)
               : "memory");
#endif
}

// Makes the initialised barriers visible to the async proxy (the bulk copies) and other threads.
__device__ __forceinline__ void mbar_init_fence() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
#endif
}

// One arrival that also adds `bytes` to the phase's expected transaction count.
__device__ __forceinline__ void mbar_arrive_expect_tx(uint64_t* bar, uint32_t bytes) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_addr(bar)),
               "r"(bytes)
               : "memory");
#endif
}

// Plain arrival (release semantics: this thread's earlier shared-memory reads are ordered
// before the phase completes).
__device__ __forceinline__ void mbar_arrive(uint64_t* bar) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(smem_addr(bar)) : "memory");
#endif
}

// `count` arrivals at once (release semantics as mbar_arrive).
__device__ __forceinline__ void mbar_arrive_count(uint64_t* bar, uint32_t count) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0], %1;" ::"r"(smem_addr(bar)), "r"(count)
               : "memory");
#endif
}

__device__ __forceinline__ bool mbar_try_wait(uint64_t* bar, uint32_t parity) {
  uint32_t done = 0;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile(
      "{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
      " selp.u32 %0, 1, 0, p;\n}\n"
      : "=r"(done)
      : "r"(smem_addr(bar)), "r"(parity)
      : "memory");
#endif
  return done != 0;
}

// Waits until the phase with the given parity has completed (acquire semantics). Watchdog: a
// wait of more than ~2^35 cycles (~17 s; only a bug can cause it) traps, so that a broken
// pipeline becomes a launch error instead of a hang.
__device__ __forceinline__ void mbar_wait(uint64_t* bar, uint32_t parity) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  if (mbar_try_wait(bar, parity)) return;
  const long long t0 = clock64();
  while (!mbar_try_wait(bar, parity)) {
    if (clock64() - t0 > (1ll << 35)) __trap();
  }
#endif
}

// Bulk copy of `bytes` (multiple of 16; both addresses 16-byte aligned) from global memory into
// this CTA's shared memory; completion is counted as transaction bytes on `bar`.
__device__ __forceinline__ void bulk_g2s(void* dst, const void* src, uint32_t bytes,
                                         uint64_t* bar) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::
          "r"(smem_addr(dst)),
      "l"(src), "r"(bytes), "r"(smem_addr(bar))
      : "memory");
#endif
}

// L2::evict_first cache policy for bulk_g2s_hint (whole access fraction).
__device__ __forceinline__ uint64_t evict_first_policy() {
  uint64_t pol = 0;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(pol));
#endif
  return pol;
}

// bulk_g2s with an L2 cache policy (createpolicy) on the global reads.
__device__ __forceinline__ void bulk_g2s_hint(void* dst, const void* src, uint32_t bytes,
                                              uint64_t* bar, uint64_t policy) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint"
      " [%0], [%1], %2, [%3], %4;" ::"r"(smem_addr(dst)),
      "l"(src), "r"(bytes), "r"(smem_addr(bar)), "l"(policy)
      : "memory");
#endif
}

// Named barrier `id` (1..15) over `threads` threads (a multiple of 32).
__device__ __forceinline__ void named_sync(int id, int threads) {
  asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(threads) : "memory");
}

}  // namespace gossamer::kern::bulk_copy

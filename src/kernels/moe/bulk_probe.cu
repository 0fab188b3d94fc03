// Bulk-copy (1-D TMA) streaming probe for moe_bench: how fast can one block per SM stream a
// contiguous region through a shared-memory ring with cp.async.bulk, as a function of the copy
// size and the source alignment (no compute: the consumer warp only waits and releases).
#include <algorithm>
#include <string>

#include "kernels/common/cuda_check.h"
#include "kernels/moe/bulk.cuh"
#include "kernels/moe/pipe.h"

namespace gossamer::kern {
namespace {

using namespace moe_bulk;  // NOLINT

// Block b streams bytes [b * per_block, (b + 1) * per_block) of src in copies of `chunk` bytes
// through `stages` ring slots. Warp 0 lane 0 produces, warp 1 lane 0 consumes.
__global__ void __launch_bounds__(64, 1)
    moe_bulk_probe(const uint8_t* src, size_t per_block, int chunk, int stages) {
  extern __shared__ __align__(128) uint8_t smem[];
  auto* full = reinterpret_cast<uint64_t*>(smem + static_cast<size_t>(stages) * chunk);
  uint64_t* empty = full + stages;
  if (threadIdx.x == 0) {
    for (int s = 0; s < stages; ++s) mbar_init(full + s, 1), mbar_init(empty + s, 1);
    mbar_init_fence();
  }
  __syncthreads();
  const int n = static_cast<int>(per_block / chunk);
  const uint8_t* base = src + blockIdx.x * per_block;
  if (threadIdx.x == 0) {
    for (int i = 0; i < n; ++i) {
      const int s = i % stages, use = i / stages;
      if (use > 0) mbar_wait(empty + s, (use - 1) & 1);
      mbar_arrive_expect_tx(full + s, chunk);
      bulk_g2s(smem + static_cast<size_t>(s) * chunk, base + static_cast<size_t>(i) * chunk, chunk,
               full + s);
    }
  } else if (threadIdx.x == 32) {
    for (int i = 0; i < n; ++i) {
      const int s = i % stages;
      mbar_wait(full + s, (i / stages) & 1);
      mbar_arrive(empty + s);
    }
  }
}

// The same stream through the LSU path instead of the TMA unit: every thread (kLsuThreads)
// copies 16-byte pieces t, t + kLsuThreads, ... of each chunk with cp.async (LDGSTS) and arrives
// on the slot's full barrier when its copies land (cp.async.mbarrier.arrive.noinc); the threads
// wait for chunk i's slot and refill it with chunk i + stages (nothing reads the data).
constexpr int kLsuThreads = 256;

__global__ void __launch_bounds__(kLsuThreads, 1)
    moe_lsu_probe(const uint8_t* src, size_t per_block, int chunk, int stages) {
  extern __shared__ __align__(128) uint8_t smem[];
  auto* full = reinterpret_cast<uint64_t*>(smem + static_cast<size_t>(stages) * chunk);
  if (threadIdx.x == 0) {
    for (int s = 0; s < stages; ++s) mbar_init(full + s, kLsuThreads);
    mbar_init_fence();
  }
  __syncthreads();
  const int n = static_cast<int>(per_block / chunk), pieces = chunk / 16;
  const uint8_t* base = src + blockIdx.x * per_block;
  auto fill = [&](int i) {
    const int s = i % stages;
    const uint8_t* from = base + static_cast<size_t>(i) * chunk;
    const uint32_t to = smem_addr(smem + static_cast<size_t>(s) * chunk);
    for (int k = threadIdx.x; k < pieces; k += kLsuThreads) {
      asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(to + 16 * k),
                   "l"(from + 16 * k)
                   : "memory");
    }
    asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];" ::"r"(smem_addr(full + s))
                 : "memory");
  };
  for (int i = 0; i < min(stages, n); ++i) fill(i);
  for (int i = 0; i < n; ++i) {
    mbar_wait(full + i % stages, (i / stages) & 1);
    if (i + stages < n) fill(i + stages);
  }
}

}  // namespace

namespace {

// Both probes: the argument check and the ring's stage count; smem = the stages plus
// `bars_per_stage` mbarriers each, set as the kernel's dynamic shared memory.
Result<int> probe_stages(const char* name, const void* kernel, const uint8_t* src, size_t per_block,
                         int chunk, int ring_bytes, int bars_per_stage, size_t* smem) {
  if (chunk <= 0 || chunk % 16 != 0 || per_block % chunk != 0 ||
      reinterpret_cast<uintptr_t>(src) % 16 != 0) {
    return InvalidArgument(std::string(name) +
                           ": chunk must be a positive multiple of 16 dividing "
                           "per_block, src 16-byte aligned");
  }
  const int stages = std::max(1, std::min(400, ring_bytes / chunk));
  *smem = static_cast<size_t>(stages) * chunk + static_cast<size_t>(bars_per_stage) * stages * 8;
  GS_CUDA_RETURN(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                      static_cast<int>(*smem)));
  return stages;
}

}  // namespace

Status launch_moe_lsu_probe(const uint8_t* src, size_t per_block, int blocks, int chunk,
                            int ring_bytes, cudaStream_t s) {
  size_t smem = 0;
  GS_ASSIGN_OR_RETURN(const int stages,
                      probe_stages("moe_lsu_probe", reinterpret_cast<const void*>(moe_lsu_probe),
                                   src, per_block, chunk, ring_bytes, 1, &smem));
  moe_lsu_probe<<<blocks, kLsuThreads, smem, s>>>(src, per_block, chunk, stages);
  return launch_status("moe_lsu_probe");
}

Status launch_moe_bulk_probe(const uint8_t* src, size_t per_block, int blocks, int chunk,
                             int ring_bytes, cudaStream_t s) {
  size_t smem = 0;
  GS_ASSIGN_OR_RETURN(const int stages,
                      probe_stages("moe_bulk_probe", reinterpret_cast<const void*>(moe_bulk_probe),
                                   src, per_block, chunk, ring_bytes, 2, &smem));
  moe_bulk_probe<<<blocks, 64, smem, s>>>(src, per_block, chunk, stages);
  return launch_status("moe_bulk_probe");
}

}  // namespace gossamer::kern

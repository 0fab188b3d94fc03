// l2_prefetch / l2_touch / l2_demote (params.h). Grid-stride loops, 128 threads per block, one
// block per SM by default. Byte ranges of any alignment: every address issued lies inside
// [ptr, ptr + bytes) (a sector or line hint then covers the whole 32 / 128-byte unit around it).
//  kBulk: l2pf::bulk_range (prefetch.cuh): the 16-byte aligned middle in 4 KB pieces, the
//         unaligned head and tail by sector hints.
//  kSector / kLoad / touch: sector i of the range at max(ptr, align_down(ptr, 32) + 32 i).
#include <algorithm>

#include "kernels/common/cuda_check.h"
#include "kernels/common/pdl.cuh"
#include "kernels/common/pdl.h"
#include "kernels/l2_prefetch/params.h"
#include "kernels/l2_prefetch/prefetch.cuh"

namespace gossamer::kern {
namespace {

using namespace l2pf;  // NOLINT: this folder's helpers

constexpr int kThreads = 128;

__device__ __forceinline__ void load_hint(const uint8_t* a, uint64_t pol) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("{\n .reg .b16 t;\n ld.global.L2::cache_hint.u8 t, [%0], %1;\n}" ::"l"(a), "l"(pol)
               : "memory");
#endif
}

__device__ __forceinline__ size_t gtid() {
  return static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ __forceinline__ size_t gstride() {
  return static_cast<size_t>(gridDim.x) * blockDim.x;
}

// Address of sector i of [p, e) (see the file comment).
__device__ __forceinline__ const uint8_t* sector_addr(const uint8_t* p, size_t i) {
  const uintptr_t s0 = reinterpret_cast<uintptr_t>(p) & ~uintptr_t{31};
  return reinterpret_cast<const uint8_t*>(
      std::max(reinterpret_cast<uintptr_t>(p), s0 + 32 * static_cast<uintptr_t>(i)));
}
__device__ __forceinline__ size_t sector_count(const uint8_t* p, size_t bytes) {
  const uintptr_t b = reinterpret_cast<uintptr_t>(p), e = b + bytes;
  return ((e + 31) / 32) - b / 32;
}

__global__ void __launch_bounds__(kThreads)
    l2_prefetch(const uint8_t* p, size_t bytes, L2Method method, L2Priority pr) {
  pdl_trigger();  // PDL launch: the next kernel may start (its pdl_wait still waits for ours)
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
  if (method == L2Method::kBulk) method = L2Method::kSector;
#endif
  if (method == L2Method::kBulk) {
    bulk_range(p, bytes, pr, gtid(), gstride());
  } else {
    const uint64_t pol = make_policy(pr);
    const size_t n = sector_count(p, bytes);
    for (size_t i = gtid(); i < n; i += gstride()) {
      if (method == L2Method::kLoad) {
        load_hint(sector_addr(p, i), pol);
      } else {
        sector_hint(sector_addr(p, i), pr == L2Priority::kLast);
      }
    }
  }
  pdl_wait();  // completes only after the previous kernel: keeps a PDL chain transitive
}

__global__ void __launch_bounds__(kThreads) l2_touch(const uint8_t* p, size_t bytes) {
  const size_t n = sector_count(p, bytes);
  for (size_t i = gtid(); i < n; i += gstride()) {
    asm volatile("{\n .reg .b16 t;\n ld.global.cg.u8 t, [%0];\n}" ::"l"(sector_addr(p, i))
                 : "memory");
  }
}

__global__ void __launch_bounds__(kThreads) l2_demote(const uint8_t* p, size_t bytes) {
  const uintptr_t l0 = reinterpret_cast<uintptr_t>(p) & ~uintptr_t{127};
  const size_t n = (reinterpret_cast<uintptr_t>(p) + bytes - l0 + 127) / 128;
  for (size_t i = gtid(); i < n; i += gstride()) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("applypriority.global.L2::evict_normal [%0], 128;" ::"l"(l0 + 128 * i) : "memory");
#endif
  }
}

__global__ void l2_spin(uint32_t ns) {
  const long long t0 = clock64();
  // clock64 counts SM cycles (~1.7-2 GHz): 2 cycles per ns is a safe upper bound.
  while (clock64() - t0 < 2ll * ns) __nanosleep(100);
}

Result<int> default_blocks(int blocks) {
  if (blocks > 0) return blocks;
  int dev = 0, sms = 0;
  GS_CUDA_RETURN(cudaGetDevice(&dev));
  GS_CUDA_RETURN(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  return std::max(1, sms);
}

}  // namespace

Status launch_l2_prefetch(const L2PrefetchParams& p, cudaStream_t s) {
  GS_RETURN_IF_ERROR(p.validate());
  if (p.bytes == 0) return Status::Ok();
  GS_ASSIGN_OR_RETURN(const int blocks, default_blocks(p.blocks));
  return launch_pdl(p.pdl, "l2_prefetch", l2_prefetch, dim3(blocks), dim3(kThreads), 0, s,
                    static_cast<const uint8_t*>(p.ptr), p.bytes, p.method, p.priority);
}

Status launch_l2_touch(const void* ptr, size_t bytes, cudaStream_t s) {
  if (bytes == 0) return Status::Ok();
  if (ptr == nullptr) return InvalidArgument("l2_touch: ptr is null");
  GS_ASSIGN_OR_RETURN(const int blocks, default_blocks(0));
  return launch_pdl(false, "l2_touch", l2_touch, dim3(4 * blocks), dim3(kThreads), 0, s,
                    static_cast<const uint8_t*>(ptr), bytes);
}

Status launch_l2_demote(const void* ptr, size_t bytes, cudaStream_t s) {
  if (bytes == 0) return Status::Ok();
  if (ptr == nullptr) return InvalidArgument("l2_demote: ptr is null");
  GS_ASSIGN_OR_RETURN(const int blocks, default_blocks(0));
  return launch_pdl(false, "l2_demote", l2_demote, dim3(blocks), dim3(kThreads), 0, s,
                    static_cast<const uint8_t*>(ptr), bytes);
}

Status launch_l2_spin(uint32_t ns, cudaStream_t s) {
  return launch_pdl(false, "l2_spin", l2_spin, dim3(1), dim3(32), 0, s, ns);
}

}  // namespace gossamer::kern

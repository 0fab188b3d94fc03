// Device-side L2 prefetch helpers (params.h describes the methods) of the l2_prefetch kernel, for
// any kernel that wants to prefetch a later kernel's weights before its pdl_wait (the router did
// in the session-4 experiment, docs/decode-overhead.md section 3). Hints only: they read nothing
// into registers and write nothing, so they are allowed before pdl_wait (pdl.h rule 1) on weights.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "kernels/l2_prefetch/params.h"

namespace gossamer::kern::l2pf {

inline constexpr uint32_t kPiece = 4096;  // bytes per bulk prefetch

__device__ __forceinline__ uint64_t make_policy(L2Priority pr) {
  uint64_t pol = 0;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  if (pr == L2Priority::kLast) {
    asm volatile("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(pol));
  } else if (pr == L2Priority::kFirst) {
    asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(pol));
  } else {
    asm volatile("createpolicy.fractional.L2::evict_normal.b64 %0, 1.0;" : "=l"(pol));
  }
#endif
  return pol;
}

// prefetch.global.L2 of the 32-byte sector holding `a`.
__device__ __forceinline__ void sector_hint(const void* a, bool last) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  if (last) {
    asm volatile("prefetch.global.L2::evict_last [%0];" ::"l"(a));
  } else {
    asm volatile("prefetch.global.L2::evict_normal [%0];" ::"l"(a));
  }
#endif
}

// cp.async.bulk.prefetch.L2 of [a, a + bytes) (a and bytes multiples of 16) with a policy.
__device__ __forceinline__ void bulk_hint(uintptr_t a, uint32_t bytes, uint64_t pol) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("cp.async.bulk.prefetch.L2.global.L2::cache_hint [%0], %1, %2;" ::"l"(a), "r"(bytes),
               "l"(pol)
               : "memory");
#endif
}

// Bulk prefetch of [p, p + bytes) with priority `pr`, shared by `n` threads (this one is number
// `t`): the 16-byte aligned middle in kPiece pieces, the unaligned head / tail (< 16 bytes each)
// by sector hints from threads 0 and 1. Every address lies inside the range. sm_90 only
// (elsewhere: nothing).
__device__ __forceinline__ void bulk_range(const void* p, size_t bytes, L2Priority pr, size_t t,
                                           size_t n) {
  const uintptr_t b = reinterpret_cast<uintptr_t>(p), e = b + bytes;
  const uintptr_t a = (b + 15) & ~uintptr_t{15}, z = e & ~uintptr_t{15};
  if (a < z) {
    const uint64_t pol = make_policy(pr);
    const size_t pieces = (z - a + kPiece - 1) / kPiece;
    for (size_t i = t; i < pieces; i += n) {
      const uintptr_t s = a + i * kPiece;
      bulk_hint(s, static_cast<uint32_t>(z - s < kPiece ? z - s : kPiece), pol);
    }
  }
  const bool last = pr == L2Priority::kLast;
  if (t == 0 && b < (a < e ? a : e)) sector_hint(p, last);
  if (t == 1 % n && z < e && z >= a) sector_hint(reinterpret_cast<const void*>(z), last);
}

}  // namespace gossamer::kern::l2pf

// Programmatic dependent launch (PDL): device side. Read the rule in pdl.h first.
#pragma once

#include <cuda_runtime.h>

namespace gossamer::kern {

// Blocks until the previous kernel on the stream has completed and its memory is visible
// (griddepcontrol.wait). A no-op when this kernel was launched without the PDL attribute.
__device__ __forceinline__ void pdl_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

// Allows the next kernel on the stream (if launched with the attribute) to be scheduled once all
// blocks of this one have triggered or exited (griddepcontrol.launch_dependents). Publishes no
// data: the dependent still has to pdl_wait().
__device__ __forceinline__ void pdl_trigger() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// L2 prefetch hint for one global address (weights read after pdl_wait()).
__device__ __forceinline__ void prefetch_l2(const void* p) {
  asm volatile("prefetch.global.L2 [%0];" ::"l"(p));
}

}  // namespace gossamer::kern

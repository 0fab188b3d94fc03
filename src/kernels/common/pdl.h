// Programmatic dependent launch (PDL, Hopper sm_90+): host side.
//
// A kernel launched with launch_pdl(true, ...) may start while the previous kernel on the stream
// is still running (once every block of that kernel has executed pdl_trigger() or exited). The
// rule for every kernel that is launched this way (see pdl.cuh for the device helpers):
//   1. Before pdl_wait(), a block may only read data that no earlier kernel of the step writes
//      (weights, biases, norm gains, its own index math, L2 prefetches of the weights). It must
//      NOT write global memory: an earlier kernel may still be reading it.
//   2. Every block executes pdl_wait() exactly once, before its first read of an activation (or
//      any buffer an earlier kernel writes) and before its first global write; no early return
//      before the wait. pdl_wait() returns when the previous kernel has completed and its writes
//      are visible, so the chain stays transitive (kernel n+1 waits for n, which waited for n-1).
//   3. pdl_trigger() only lets the NEXT kernel be scheduled early; it never publishes data.
// Kernels that do not follow the rule (the old kernels/moe pipes 0-5) must be launched without the
// attribute; a kernel launched with the attribute after such a kernel is still correct (its
// pdl_wait waits for that kernel's completion). Without the attribute pdl_wait()/pdl_trigger() are
// no-ops. Works inside stream capture: the graph gets programmatic edges (CUDA >= 12.3).
#pragma once

#include <cuda_runtime.h>

#include <utility>

#include "kernels/common/cuda_check.h"

namespace gossamer::kern {

// Launches kernel<<<grid, block, smem, stream>>>(args...), with the programmatic stream
// serialization attribute when `pdl` is set. `name` names the kernel in the error Status.
template <class... KArgs, class... Args>
Status launch_pdl(bool pdl, const char* name, void (*kernel)(KArgs...), dim3 grid, dim3 block,
                  size_t smem, cudaStream_t stream, Args&&... args) {
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = pdl ? attr : nullptr;
  cfg.numAttrs = pdl ? 1 : 0;
  return cuda_status(cudaLaunchKernelEx(&cfg, kernel, std::forward<Args>(args)...), name);
}

}  // namespace gossamer::kern

// argmax_f32: grid (ceil(vocab / 4096), batch), 256 threads; each thread scans 16 logits with a
// stride of 256, the block reduces keys in smem, one 64-bit atomicMax per block.
// greedy_finalize_i32: one thread per row.
#include "kernels/common/cuda_check.h"
#include "kernels/common/gemv_core.cuh"
#include "kernels/sample/params.h"

namespace gossamer::kern {
namespace {

constexpr int kThreads = 256, kPerThread = 16, kSpan = kThreads * kPerThread;

__global__ void __launch_bounds__(kThreads) argmax_f32(ArgmaxParams p) {
  __shared__ unsigned long long best;
  if (threadIdx.x == 0) best = 0ull;
  __syncthreads();
  const int b = blockIdx.y;
  const float* l = p.logits + static_cast<size_t>(b) * p.ld;
  unsigned long long mine = 0ull;
  const int v0 = blockIdx.x * kSpan + threadIdx.x;
#pragma unroll 4
  for (int i = 0; i < kPerThread; ++i) {
    const int v = v0 + i * kThreads;
    if (v < p.vocab) {
      const float x = l[v];
      if (!isnan(x)) mine = max(mine, argmax_key(x, v));
    }
  }
  atomicMax(&best, mine);
  __syncthreads();
  if (threadIdx.x == 0) atomicMax(p.keys + b, best);
}

__global__ void greedy_finalize_i32(GreedyFinalizeParams p) {
  const int b = blockIdx.x * blockDim.x + threadIdx.x;
  if (b >= p.batch) return;
  const int tok = argmax_key_index(p.keys[b]);
  p.keys[b] = 0ull;
  p.tokens[b] = tok;
  if (p.next_tokens) p.next_tokens[b] = tok;
  if (p.pos) p.pos[b] += 1;
}

}  // namespace

Status launch_argmax(const ArgmaxParams& p, cudaStream_t s) {
  GS_RETURN_IF_ERROR(p.validate());
  argmax_f32<<<dim3((p.vocab + kSpan - 1) / kSpan, p.batch), kThreads, 0, s>>>(p);
  return launch_status("argmax_f32");
}

Status launch_greedy_finalize(const GreedyFinalizeParams& p, cudaStream_t s) {
  GS_RETURN_IF_ERROR(p.validate());
  greedy_finalize_i32<<<(p.batch + 127) / 128, 128, 0, s>>>(p);
  return launch_status("greedy_finalize_i32");
}

}  // namespace gossamer::kern

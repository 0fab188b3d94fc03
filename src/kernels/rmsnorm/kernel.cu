// rmsnorm_f32a_bf16w: one 256-thread block per row; each thread strides over float4 chunks,
// block-reduces the sum of squares (warp shuffles + 8-entry smem), then scales.
#include "kernels/common/cuda_check.h"
#include "kernels/common/device.cuh"
#include "kernels/common/pdl.cuh"
#include "kernels/common/pdl.h"
#include "kernels/rmsnorm/params.h"

namespace gossamer::kern {
namespace {

constexpr int kThreads = 256;
static_assert(kThreads % 32 == 0 && kThreads <= 1024, "block must be whole warps");

__global__ void __launch_bounds__(kThreads) rmsnorm_f32a_bf16w(RmsNormParams p) {
  const int row = blockIdx.x;
  pdl_wait();  // x and rows_index come from earlier kernels / the step's upload
  pdl_trigger();
  const int src = p.rows_index ? p.rows_index[row] : row;
  const float4* x = reinterpret_cast<const float4*>(p.x + static_cast<size_t>(src) * p.dim);
  const uint2* w = reinterpret_cast<const uint2*>(p.w);  // 4 bf16 per uint2
  float4* y = reinterpret_cast<float4*>(p.y + static_cast<size_t>(row) * p.dim);
  const int n4 = p.dim / 4;
  float ss = 0.f;
  for (int i = threadIdx.x; i < n4; i += kThreads) {
    const float4 v = x[i];
    ss += v.x * v.x + v.y * v.y + v.z * v.z + v.w * v.w;
  }
  __shared__ float part[kThreads / 32];
  ss = warp_sum(ss);
  if ((threadIdx.x & 31) == 0) part[threadIdx.x >> 5] = ss;
  __syncthreads();
  float tot = 0.f;
#pragma unroll
  for (int i = 0; i < kThreads / 32; ++i) tot += part[i];
  const float inv = rsqrtf(tot / static_cast<float>(p.dim) + p.eps);
  for (int i = threadIdx.x; i < n4; i += kThreads) {
    const float4 v = x[i];
    const uint2 ww = w[i];
    y[i] = make_float4(v.x * inv * bf16_lo(ww.x), v.y * inv * bf16_hi(ww.x),
                       v.z * inv * bf16_lo(ww.y), v.w * inv * bf16_hi(ww.y));
  }
}

}  // namespace

Status launch_rmsnorm(const RmsNormParams& p, cudaStream_t stream) {
  GS_RETURN_IF_ERROR(p.validate());
  return launch_pdl(p.pdl, "rmsnorm_f32a_bf16w", rmsnorm_f32a_bf16w, dim3(p.rows), dim3(kThreads),
                    0, stream, p);
}

}  // namespace gossamer::kern

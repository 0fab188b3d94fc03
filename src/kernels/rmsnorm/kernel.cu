// rmsnorm_f32a_bf16w: one 256-thread block per row; each thread strides over float4 chunks (kept
// in registers for dim <= 4096, else read twice), block-reduces the sum of squares (warp shuffles +
// 8-entry smem), then scales and stores f32 and/or bf16 (hi, and lo = bf16(y - hi) in split mode)
// copies of the same float4.
#include "kernels/common/cuda_check.h"
#include "kernels/common/device.cuh"
#include "kernels/common/pdl.cuh"
#include "kernels/common/pdl.h"
#include "kernels/rmsnorm/params.h"

namespace gossamer::kern {
namespace {

constexpr int kThreads = 256;

static_assert(kThreads % 32 == 0 && kThreads <= 1024, "block must be whole warps");

constexpr int kRegF4 = 4;  // rows of <= kThreads * kRegF4 float4 (dim <= 4096) stay in registers

__device__ __forceinline__ float sumsq(const float4& v) {
  return v.x * v.x + v.y * v.y + v.z * v.z + v.w * v.w;
}

// Scales float4 i of the row and stores it as f32 and/or bf16 (hi, lo).
__device__ __forceinline__ void emit(const RmsNormParams& p, size_t o, int i, const float4& v,
                                     float inv) {
  const uint2 ww = reinterpret_cast<const uint2*>(p.w)[i];  // 4 bf16
  const float4 r = make_float4(v.x * inv * bf16_lo(ww.x), v.y * inv * bf16_hi(ww.x),
                               v.z * inv * bf16_lo(ww.y), v.w * inv * bf16_hi(ww.y));
  if (p.y) reinterpret_cast<float4*>(p.y + o)[i] = r;
  store_bf16x4(r, p.yb ? reinterpret_cast<uint2*>(p.yb + o) + i : nullptr,
               p.yb_lo ? reinterpret_cast<uint2*>(p.yb_lo + o) + i : nullptr);
}

// Thread t owns float4 t, t + 256, ... of the row; it sums their squares in that order either way
// (registers or re-read), so both paths give the same bits.
__global__ void __launch_bounds__(kThreads) rmsnorm_f32a_bf16w(RmsNormParams p) {
  const int row = blockIdx.x;
  pdl_wait();  // x and rows_index come from earlier kernels / the step's upload
  pdl_trigger();
  const int src = p.rows_index ? p.rows_index[row] : row;
  const float4* x = reinterpret_cast<const float4*>(p.x + static_cast<size_t>(src) * p.dim);
  const size_t o = static_cast<size_t>(row) * p.dim;
  const int n4 = p.dim / 4;
  const bool in_regs = n4 <= kThreads * kRegF4;
  float4 v[kRegF4];
  float ss = 0.f;
  if (in_regs) {
#pragma unroll
    for (int j = 0; j < kRegF4; ++j) {
      const int i = threadIdx.x + j * kThreads;
      v[j] = i < n4 ? x[i] : make_float4(0.f, 0.f, 0.f, 0.f);
    }
#pragma unroll
    for (int j = 0; j < kRegF4; ++j)
      if (threadIdx.x + j * kThreads < n4) ss += sumsq(v[j]);
  } else {
    for (int i = threadIdx.x; i < n4; i += kThreads) ss += sumsq(x[i]);
  }
  __shared__ float part[kThreads / 32];
  ss = warp_sum(ss);
  if ((threadIdx.x & 31) == 0) part[threadIdx.x >> 5] = ss;
  __syncthreads();
  float tot = 0.f;
#pragma unroll
  for (int i = 0; i < kThreads / 32; ++i) tot += part[i];
  const float inv = rsqrtf(tot / static_cast<float>(p.dim) + p.eps);
  if (in_regs) {
#pragma unroll
    for (int j = 0; j < kRegF4; ++j) {
      const int i = threadIdx.x + j * kThreads;
      if (i < n4) emit(p, o, i, v[j], inv);
    }
  } else {
    for (int i = threadIdx.x; i < n4; i += kThreads) emit(p, o, i, x[i], inv);
  }
}

}  // namespace

Status launch_rmsnorm(const RmsNormParams& p, cudaStream_t stream) {
  GS_RETURN_IF_ERROR(p.validate());
  return launch_pdl(p.pdl, "rmsnorm_f32a_bf16w", rmsnorm_f32a_bf16w, dim3(p.rows), dim3(kThreads),
                    0, stream, p);
}

}  // namespace gossamer::kern

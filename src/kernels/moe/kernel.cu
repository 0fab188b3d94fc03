// MoE MXFP4 expert GEMVs. Both kernels: 256 threads = 8 warps; activations staged in shared
// memory as groups of 32 floats padded to 36 (so the float4 reads of 8 lanes working on 8
// consecutive MX blocks hit distinct banks); lane l walks MX blocks l, l+32, ... of its warp's
// rows with one 16-byte load per block (32 E2M1 values) + its E8M0 scale byte, decodes in
// registers (device.cuh: e2m1_pair) and accumulates in fp32; butterfly warp sums at the end.
//
// moe_gate_up_swiglu_mxfp4w_f32a: grid (ceil(I/16), batch*k). A warp owns 2 SwiGLU outputs =
//   4 consecutive rows (gate, up, gate, up) of expert ids[b, j]; x[b] in smem ([H/32][36]).
// moe_down_mxfp4w_f32a: grid (ceil(H/16), batch). A warp owns 2 output rows and loops over the
//   k routed experts of row b (act[b, 0..k) in smem, [k][I/32][36]), so the routing-weighted
//   sum, the biases and the residual add happen in registers with a single store per row.
#include <cfloat>

#include "kernels/common/cuda_check.h"
#include "kernels/common/device.cuh"
#include "kernels/moe/params.h"

namespace gossamer::kern {
namespace {

constexpr int kWarps = 8, kThreads = kWarps * 32, kPad = 36;
constexpr int kGuUnitsPerWarp = 2, kGuRows = 2 * kGuUnitsPerWarp;   // gate_up rows per warp
constexpr int kDnRows = 2;                                          // down rows per warp
static_assert(kPad % 4 == 0 && (kPad / 4) % 2 == 1, "odd float4 stride: conflict-free reads");

// Stages n floats from src into dst as [n/32][kPad] groups.
__device__ __forceinline__ void stage_padded(float* dst, const float* src, int n) {
  for (int i = threadIdx.x; i < n; i += kThreads) dst[(i >> 5) * kPad + (i & 31)] = src[i];
}

__global__ void __launch_bounds__(kThreads) moe_gate_up_swiglu_mxfp4w_f32a(MoeGateUpParams p) {
  extern __shared__ float4 smem4[];
  float* xs = reinterpret_cast<float*>(smem4);
  const int pair = blockIdx.y, b = pair / p.k;
  const int e = p.ids[pair];
  const int I = p.inter, nb = p.hidden / 32;
  stage_padded(xs, p.x + static_cast<size_t>(b) * p.hidden, p.hidden);
  __syncthreads();
  if (e < 0 || e >= p.n_experts) return;  // routing ids come from topk_softmax (always valid)
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int j0 = (blockIdx.x * kWarps + warp) * kGuUnitsPerWarp;
  if (j0 >= I) return;
  size_t rows[kGuRows];
#pragma unroll
  for (int r = 0; r < kGuRows; ++r) {
    rows[r] = static_cast<size_t>(e) * 2 * I + min(2 * j0 + r, 2 * I - 1);
  }
  float acc[kGuRows] = {};
  for (int c = lane; c < nb; c += 32) {
    uint4 q[kGuRows];
    uint32_t sc[kGuRows];
#pragma unroll
    for (int r = 0; r < kGuRows; ++r) {
      q[r] = ld_stream16(p.blocks + (rows[r] * nb + c) * 16);
      sc[r] = __ldcs(p.scales + rows[r] * nb + c);
    }
    const float4* xv = smem4 + c * (kPad / 4);
#pragma unroll
    for (int r = 0; r < kGuRows; ++r) acc[r] = fmaf(mxfp4_dot32(q[r], xv), e8m0_x16384(sc[r]), acc[r]);
  }
#pragma unroll
  for (int r = 0; r < kGuRows; ++r) acc[r] = warp_sum(acc[r]);
  if (lane >= kGuUnitsPerWarp) return;
  const int j = j0 + lane;
  if (j >= I) return;
  const float* bias = p.bias + static_cast<size_t>(e) * 2 * I;
  float g = (lane == 0 ? acc[0] : acc[2]) + bias[2 * j];
  float u = (lane == 0 ? acc[1] : acc[3]) + bias[2 * j + 1];
  g = fminf(g, p.limit);
  u = fmaxf(fminf(u, p.limit), -p.limit);
  p.act[static_cast<size_t>(pair) * I + j] = (u + 1.f) * g / (1.f + __expf(-p.alpha * g));
}

__global__ void __launch_bounds__(kThreads) moe_down_mxfp4w_f32a(MoeDownParams p) {
  extern __shared__ float4 smem4[];
  float* as = reinterpret_cast<float*>(smem4);
  const int b = blockIdx.y, I = p.inter, H = p.hidden, nb = I / 32;
  stage_padded(as, p.act + static_cast<size_t>(b) * p.k * I, p.k * I);
  __syncthreads();
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int r0 = (blockIdx.x * kWarps + warp) * kDnRows;
  if (r0 >= H) return;
  float acc[kDnRows] = {}, bias_sum[kDnRows] = {};
  for (int j = 0; j < p.k; ++j) {
    const int e = p.ids[static_cast<size_t>(b) * p.k + j];
    if (e < 0 || e >= p.n_experts) continue;
    const float wj = p.weights[static_cast<size_t>(b) * p.k + j];
    size_t rows[kDnRows];
#pragma unroll
    for (int r = 0; r < kDnRows; ++r) {
      rows[r] = static_cast<size_t>(e) * H + min(r0 + r, H - 1);
      bias_sum[r] = fmaf(wj, p.bias[rows[r]], bias_sum[r]);
    }
    const float4* av = smem4 + static_cast<size_t>(j) * nb * (kPad / 4);
    for (int c = lane; c < nb; c += 32) {
      uint4 q[kDnRows];
      uint32_t sc[kDnRows];
#pragma unroll
      for (int r = 0; r < kDnRows; ++r) {
        q[r] = ld_stream16(p.blocks + (rows[r] * nb + c) * 16);
        sc[r] = __ldcs(p.scales + rows[r] * nb + c);
      }
#pragma unroll
      for (int r = 0; r < kDnRows; ++r) {
        acc[r] = fmaf(mxfp4_dot32(q[r], av + c * (kPad / 4)), wj * e8m0_x16384(sc[r]), acc[r]);
      }
    }
  }
#pragma unroll
  for (int r = 0; r < kDnRows; ++r) acc[r] = warp_sum(acc[r]);
  if (lane < kDnRows && r0 + lane < H) {
    float* dst = p.resid + static_cast<size_t>(b) * H + r0 + lane;
    *dst += (lane == 0 ? acc[0] + bias_sum[0] : acc[1] + bias_sum[1]);
  }
}

Status set_smem(const void* fn, size_t bytes) {
  if (bytes > 48 * 1024) {
    GS_CUDA_RETURN(cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                        static_cast<int>(bytes)));
  }
  return Status::Ok();
}

}  // namespace

Status launch_moe_gate_up(const MoeGateUpParams& p, cudaStream_t s) {
  GS_RETURN_IF_ERROR(p.validate());
  const size_t smem = static_cast<size_t>(p.hidden / 32) * kPad * sizeof(float);
  GS_RETURN_IF_ERROR(set_smem(reinterpret_cast<const void*>(moe_gate_up_swiglu_mxfp4w_f32a), smem));
  const int units_per_block = kWarps * kGuUnitsPerWarp;
  dim3 grid((p.inter + units_per_block - 1) / units_per_block, p.batch * p.k);
  moe_gate_up_swiglu_mxfp4w_f32a<<<grid, kThreads, smem, s>>>(p);
  return launch_status("moe_gate_up_swiglu_mxfp4w_f32a");
}

Status launch_moe_down(const MoeDownParams& p, cudaStream_t s) {
  GS_RETURN_IF_ERROR(p.validate());
  const size_t smem = static_cast<size_t>(p.k) * (p.inter / 32) * kPad * sizeof(float);
  if (smem > 227 * 1024) return InvalidArgument("moe_down: k * intermediate too large for smem");
  GS_RETURN_IF_ERROR(set_smem(reinterpret_cast<const void*>(moe_down_mxfp4w_f32a), smem));
  dim3 grid((p.hidden + kWarps * kDnRows - 1) / (kWarps * kDnRows), p.batch);
  moe_down_mxfp4w_f32a<<<grid, kThreads, smem, s>>>(p);
  return launch_status("moe_down_mxfp4w_f32a");
}

}  // namespace gossamer::kern

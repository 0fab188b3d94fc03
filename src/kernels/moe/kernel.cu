// MoE MXFP4 expert GEMVs. Both kernels: 256 threads = 8 warps; activations staged in shared
// memory as groups of 32 floats padded to 36 (so the float4 reads of 8 lanes working on 8
// consecutive MX blocks hit distinct banks); lane l walks MX blocks l, l+32, ... of its warp's
// rows with one 16-byte load per block (32 E2M1 values) + its E8M0 scale byte, decodes in
// registers (device.cuh: e2m1_pair, half2 conversions) and accumulates in fp32; butterfly warp
// sums at the end. These are the fallbacks of the streaming kernels (bulk.cu, pipe 6): gate_up
// pipe 0 always, down only where pipe 2 (pipe.cu) does not apply either (params.h).
//
// moe_gate_up_swiglu_mxfp4w_f32a: grid (ceil(I/16), batch*k). A warp owns 2 SwiGLU outputs =
//   4 consecutive rows (gate, up, gate, up) of expert ids[b, j]; x[b] in smem ([H/32][36]).
// moe_down_mxfp4w_f32a: grid (ceil(H/8), batch). A warp owns 1 output row and loops over the
//   k routed experts of row b (act[b, 0..k) in smem, [k][I/32][36]), so the routing-weighted
//   sum, the biases and the residual add happen in registers with a single store per row.
// Loads are software-pipelined in stages of 3 MX blocks per lane (all rows of the warp): the
// first stage is issued before the activations are staged into smem; later stages are issued
// one step ahead of the FMAs that consume the current one.
#include <cfloat>

#include "kernels/common/cuda_check.h"
#include "kernels/common/device.cuh"
#include "kernels/moe/params.h"
#include "kernels/moe/pipe.h"

namespace gossamer::kern {
namespace {

constexpr int kWarps = 8, kThreads = kWarps * 32, kPad = 36;
constexpr int kGuUnitsPerWarp = 2, kGuRows = 2 * kGuUnitsPerWarp;  // gate_up rows per warp
constexpr int kDnRows = 1;                                         // down rows per warp
constexpr int kIters = 3;  // MX blocks per lane per stage: 3 x 32 lanes = 96 >= 2880 / 32
static_assert(kPad % 4 == 0 && (kPad / 4) % 2 == 1, "odd float4 stride: conflict-free reads");

// Stages n floats (n % 32 == 0) from src into dst as [n/32][kPad] groups: float4 copies, up to
// kStageUnroll loads per thread issued before any store (one L2 round trip, not n/256).
template <int kStageUnroll>
__device__ __forceinline__ void stage_padded(float4* dst, const float* src, int n) {
  const float4* s4 = reinterpret_cast<const float4*>(src);
  const int n4 = n / 4;
  for (int base = 0; base < n4; base += kThreads * kStageUnroll) {
    float4 v[kStageUnroll];
#pragma unroll
    for (int u = 0; u < kStageUnroll; ++u) {
      const int i = base + u * kThreads + threadIdx.x;
      if (i < n4) v[u] = s4[i];
    }
#pragma unroll
    for (int u = 0; u < kStageUnroll; ++u) {
      const int i = base + u * kThreads + threadIdx.x;
      if (i < n4) dst[(i >> 3) * (kPad / 4) + (i & 7)] = v[u];
    }
  }
}

// One pipeline stage: the 16-byte MX blocks c0 + lane + 32 i (i < kIters) of R weight rows and
// their scales, held in registers so that all loads of a stage are in flight together.
template <int R>
struct Stage {
  uint4 q[kIters][R];
  uint32_t s[kIters][R];
};

template <int R>
__device__ __forceinline__ void load_stage(Stage<R>& st, const uint8_t* __restrict__ blocks,
                                           const uint8_t* __restrict__ scales,
                                           const size_t (&rows)[R], int nb, int c0, int lane) {
#pragma unroll
  for (int i = 0; i < kIters; ++i) {
    const int c = c0 + lane + 32 * i;
    if (c < nb) {
#pragma unroll
      for (int r = 0; r < R; ++r) {
        st.q[i][r] = ld_stream16(blocks + (rows[r] * nb + c) * 16);
        st.s[i][r] = __ldcs(scales + rows[r] * nb + c);
      }
    }
  }
}

// acc[r] += mult * sum over the stage's blocks of (MX block . activations).
template <int R>
__device__ __forceinline__ void compute_stage(const Stage<R>& st, const float4* xs, int nb, int c0,
                                              int lane, float mult, float (&acc)[R]) {
#pragma unroll
  for (int i = 0; i < kIters; ++i) {
    const int c = c0 + lane + 32 * i;
    if (c < nb) {
      const float4* xv = xs + c * (kPad / 4);
#pragma unroll
      for (int r = 0; r < R; ++r) {
        const float d = mxfp4_dot32_cvt(st.q[i][r], xv);
        acc[r] = fmaf(d, mult * e8m0_half(st.s[i][r]), acc[r]);
      }
    }
  }
}

__global__ void __launch_bounds__(kThreads) moe_gate_up_swiglu_mxfp4w_f32a(MoeGateUpParams p) {
  extern __shared__ float4 smem4[];
  const int pair = blockIdx.y, b = pair / p.k;
  const int e = p.ids[pair];
  const int I = p.inter, nb = p.hidden / 32;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int j0 = (blockIdx.x * kWarps + warp) * kGuUnitsPerWarp;
  const bool valid = e >= 0 && e < p.n_experts;  // ids come from topk_softmax (always valid)
  size_t rows[kGuRows];
#pragma unroll
  for (int r = 0; r < kGuRows; ++r) {
    rows[r] = static_cast<size_t>(valid ? e : 0) * 2 * I + min(2 * j0 + r, 2 * I - 1);
  }
  // The first stage's weight loads are issued before the activations are staged.
  Stage<kGuRows> cur;
  if (valid && j0 < I) load_stage(cur, p.blocks, p.scales, rows, nb, 0, lane);
  stage_padded<3>(smem4, p.x + static_cast<size_t>(b) * p.hidden, p.hidden);
  __syncthreads();
  if (!valid || j0 >= I) return;
  float acc[kGuRows] = {};
  // One stage covers hidden <= 3072 (gpt-oss: 2880); wider models reload (not overlapped).
  for (int c0 = 0; c0 < nb; c0 += 32 * kIters) {
    if (c0 > 0) load_stage(cur, p.blocks, p.scales, rows, nb, c0, lane);
    compute_stage<kGuRows>(cur, smem4, nb, c0, lane, 1.f, acc);
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
  const int b = blockIdx.y, I = p.inter, H = p.hidden, nb = I / 32;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int r0 = (blockIdx.x * kWarps + warp) * kDnRows;
  const int stages_per_expert = (nb + 32 * kIters - 1) / (32 * kIters);
  const int T = p.k * stages_per_expert;  // pipeline over (expert, stage)
  const int32_t* ids = p.ids + static_cast<size_t>(b) * p.k;
  auto rows_of = [&](int t, size_t(&rows)[kDnRows]) {
    const int e = min(max(ids[t / stages_per_expert], 0), p.n_experts - 1);
#pragma unroll
    for (int r = 0; r < kDnRows; ++r) rows[r] = static_cast<size_t>(e) * H + min(r0 + r, H - 1);
  };
  Stage<kDnRows> cur;
  size_t rows[kDnRows];
  rows_of(0, rows);
  if (r0 < H) load_stage(cur, p.blocks, p.scales, rows, nb, 0, lane);
  stage_padded<12>(smem4, p.act + static_cast<size_t>(b) * p.k * I, p.k * I);
  __syncthreads();
  if (r0 >= H) return;
  float acc[kDnRows] = {};
  for (int t = 0; t < T; ++t) {
    Stage<kDnRows> nxt;
    if (t + 1 < T) {
      size_t nrows[kDnRows];
      rows_of(t + 1, nrows);
      load_stage(nxt, p.blocks, p.scales, nrows, nb, ((t + 1) % stages_per_expert) * 32 * kIters,
                 lane);
    }
    const int j = t / stages_per_expert;
    const float wj = p.weights[static_cast<size_t>(b) * p.k + j];
    compute_stage<kDnRows>(cur, smem4 + static_cast<size_t>(j) * nb * (kPad / 4), nb,
                           (t % stages_per_expert) * 32 * kIters, lane, wj, acc);
    cur = nxt;
  }
#pragma unroll
  for (int r = 0; r < kDnRows; ++r) acc[r] = warp_sum(acc[r]);
  if (lane < kDnRows && r0 + lane < H) {
    float bias_sum = 0.f;
    for (int j = 0; j < p.k; ++j) {
      const int e = min(max(ids[j], 0), p.n_experts - 1);
      bias_sum = fmaf(p.weights[static_cast<size_t>(b) * p.k + j],
                      p.bias[static_cast<size_t>(e) * H + r0 + lane], bias_sum);
    }
    float v = 0.f;
#pragma unroll
    for (int r = 0; r < kDnRows; ++r) v = r == lane ? acc[r] : v;
    p.resid[static_cast<size_t>(b) * H + r0 + lane] += v + bias_sum;
  }
}

Status set_smem(const void* fn, size_t bytes) {
  if (bytes > 48 * 1024) {
    GS_CUDA_RETURN(cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                        static_cast<int>(bytes)));
  }
  return Status::Ok();
}

Status launch_gate_up(const MoeGateUpParams& p, cudaStream_t s) {
  const size_t smem = static_cast<size_t>(p.hidden / 32) * kPad * sizeof(float);
  GS_RETURN_IF_ERROR(set_smem(reinterpret_cast<const void*>(moe_gate_up_swiglu_mxfp4w_f32a), smem));
  const int units_per_block = kWarps * kGuUnitsPerWarp;
  dim3 grid((p.inter + units_per_block - 1) / units_per_block, p.batch * p.k);
  moe_gate_up_swiglu_mxfp4w_f32a<<<grid, kThreads, smem, s>>>(p);
  return launch_status("moe_gate_up_swiglu_mxfp4w_f32a");
}

Status launch_down(const MoeDownParams& p, cudaStream_t s) {
  const size_t smem = static_cast<size_t>(p.k) * (p.inter / 32) * kPad * sizeof(float);
  if (smem > 227 * 1024) return InvalidArgument("moe_down: k * intermediate too large for smem");
  GS_RETURN_IF_ERROR(set_smem(reinterpret_cast<const void*>(moe_down_mxfp4w_f32a), smem));
  dim3 grid((p.hidden + kWarps * kDnRows - 1) / (kWarps * kDnRows), p.batch);
  moe_down_mxfp4w_f32a<<<grid, kThreads, smem, s>>>(p);
  return launch_status("moe_down_mxfp4w_f32a");
}

}  // namespace

Status launch_moe_gate_up(const MoeGateUpParams& p, cudaStream_t s) {
  GS_RETURN_IF_ERROR(p.validate());
  if (p.pipe == 9) {  // expert-grouped; where it does not apply, pipe 6, then 0
    Status st = launch_moe_gate_up_grouped(p, s);
    if (st.code() != StatusCode::kUnsupported) return st;
  }
  if (p.pipe == 6 || p.pipe == 9) {  // streaming kernels; where they do not apply, pipe 0
    Status st = launch_moe_gate_up_bulk(p, s);
    if (st.code() != StatusCode::kUnsupported) return st;
  }
  return launch_gate_up(p, s);
}

Status launch_moe_down(const MoeDownParams& p, cudaStream_t s) {
  GS_RETURN_IF_ERROR(p.validate());
  if (p.pipe == 9) {  // expert-grouped; where it does not apply, pipe 6, 2, then 0
    Status st = launch_moe_down_grouped(p, s);
    if (st.code() != StatusCode::kUnsupported) return st;
  }
  if (p.pipe == 6 || p.pipe == 9) {  // streaming kernels; where they do not apply, pipe 2, then 0
    Status st = launch_moe_down_bulk(p, s);
    if (st.code() != StatusCode::kUnsupported) return st;
  }
  if (p.pipe != 0) {
    Status st = launch_moe_down_pipe(p, s);
    if (st.code() != StatusCode::kUnsupported) return st;
  }
  return launch_down(p, s);
}

}  // namespace gossamer::kern

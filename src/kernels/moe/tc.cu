// Tensor-core MoE MXFP4 expert GEMVs with weights decoded straight into mma fragments
// (params.pipe 4: 4 MX blocks in flight per lane, 24 warps per SM; pipe 5: 8 (gate_up, 16 warps
// per SM) / 6 (down) blocks in flight). Same contracts as kernel.cu; the
// per-warp core (loads, bf16 decode, scale fold, mma, exact fallback) is in tc.cuh.
// Status (docs/moe-decode.md): correct on every test, ~3 instructions per weight value instead
// of ~6.7, but not faster than the fp32 kernels on the H200 (bound by global-load latency, not
// by instructions), so not the default.
//
// moe_gate_up (grid (ceil(I/4 / 8), batch*k), 8 warps): warp = 8 consecutive rows of expert
//   ids[pair] (4 SwiGLU outputs, gate/up interleaved) over all of H; x[b] staged in smem once
//   per block; lanes 0..3 finish bias + clamped SwiGLU of output 4*group + t.
// moe_down (grid (ceil(H/8 / G), batch), 24 warps): block = G row groups of 8; its tasks
//   (row group, routed slot j, K slice q) go round-robin to the warps, act[b, 0..k) staged in
//   smem; the partial dots land in smem [G*8][k*KS] and one thread per row adds
//   sum_j w_j (sum_q part + bias_j) to the residual in a fixed order (deterministic, no atomics).
#include <algorithm>

#include "kernels/common/cuda_check.h"
#include "kernels/moe/pipe.h"
#include "kernels/moe/pipe_common.cuh"
#include "kernels/moe/tc.cuh"

namespace gossamer::kern {
namespace {

using namespace moe_tc;  // NOLINT: internal helpers

constexpr int kWarps = 8, kThreads = kWarps * 32;         // gate_up blocks
constexpr int kDnWarps = 24, kDnThreads = kDnWarps * 32;  // down blocks (one per SM)

template <int kU, int kMinBlocks>
__global__ void __launch_bounds__(kThreads, kMinBlocks)
    moe_gate_up_swiglu_mxfp4w_f32a(MoeGateUpParams p) {
  extern __shared__ uint4 xs[];  // stage_bytes(1, nb)
  const int pair = blockIdx.y, b = pair / p.k, e = p.ids[pair];
  const int I = p.inter, nb = p.hidden / 32, groups = I / 4;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int group = blockIdx.x * kWarps + warp;
  const bool active = e >= 0 && e < p.n_experts && group < groups;
  TcRows8<kU> rows;
  if (active) {
    rows.init(p.blocks, p.scales, static_cast<size_t>(e) * 2 * I + group * 8 + (lane >> 2), nb, 0,
              nb, lane);
    rows.prefetch();
  }
  const float* x = p.x + static_cast<size_t>(b) * p.hidden;
  tc_stage(xs, x, 1, nb);
  __syncthreads();
  if (!active) return;
  const float2 gu = rows.run(xs, split_units(1, nb), x, lane);
  if (lane < 4) {
    const int i = group * 4 + lane;  // SwiGLU output: rows 2i (gate), 2i+1 (up)
    const float* bias = p.bias + static_cast<size_t>(e) * 2 * I;
    const float g = fminf(gu.x + bias[2 * i], p.limit);
    const float up = fmaxf(fminf(gu.y + bias[2 * i + 1], p.limit), -p.limit);
    p.act[static_cast<size_t>(pair) * I + i] = (up + 1.f) * g / (1.f + __expf(-p.alpha * g));
  }
}

// G row groups per block, KS K-slices per (row group, slot).
template <int kU>
__global__ void __launch_bounds__(kDnThreads, 1)
    moe_down_mxfp4w_f32a(MoeDownParams p, int G, int KS) {
  extern __shared__ uint4 xs[];  // stage_bytes(k, nb), then part [G*8][k*KS] floats
  const int b = blockIdx.y, I = p.inter, H = p.hidden, nb = I / 32, k = p.k;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int g0 = blockIdx.x * G, n_groups = min(G, H / 8 - g0), n_tasks = n_groups * k * KS;
  const int slice = pad4((nb + KS - 1) / KS), su = split_units(k, nb);
  float* part = reinterpret_cast<float*>(xs + kSplits * su);
  const int32_t* ids = p.ids + static_cast<size_t>(b) * k;
  const float* act = p.act + static_cast<size_t>(b) * k * I;
  TcRows8<kU> rows;
  auto begin = [&](int t) {  // t -> (row group t / (k KS), slot (t / KS) % k, slice t % KS)
    const int j = (t / KS) % k, q = t % KS;
    const int e = min(max(ids[j], 0), p.n_experts - 1);
    const size_t row = static_cast<size_t>(e) * H + (g0 + t / (k * KS)) * 8 + (lane >> 2);
    rows.init(p.blocks, p.scales, row, nb, q * slice, min(nb, (q + 1) * slice), lane);
    rows.prefetch();
  };
  if (warp < n_tasks) begin(warp);
  tc_stage(xs, act, k, nb);
  __syncthreads();
  for (int t = warp; t < n_tasks; t += kDnWarps) {
    if (t != warp) begin(t);
    const int j = (t / KS) % k;
    const float2 v = rows.run(xs + j * pad4(nb) * 4, su, act + static_cast<size_t>(j) * I, lane);
    if (lane < 4) {
      const int r = (t / (k * KS)) * 8 + 2 * lane, col = t % (k * KS);
      part[r * k * KS + col] = v.x;
      part[(r + 1) * k * KS + col] = v.y;
    }
  }
  __syncthreads();
  for (int r = threadIdx.x; r < n_groups * 8; r += blockDim.x) {
    const int row = g0 * 8 + r;
    float v = 0.f;
    for (int j = 0; j < k; ++j) {
      const int e = min(max(ids[j], 0), p.n_experts - 1);
      float dot = 0.f;
      for (int q = 0; q < KS; ++q) dot += part[r * k * KS + j * KS + q];
      v = fmaf(p.weights[static_cast<size_t>(b) * k + j],
               dot + p.bias[static_cast<size_t>(e) * H + row], v);
    }
    p.resid[static_cast<size_t>(b) * H + row] += v;
  }
}

Status set_max_smem(const void* fn, size_t smem) {
  GS_CUDA_RETURN(cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                      static_cast<int>(smem)));
  return Status::Ok();
}

template <int kU, int kMinBlocks>
Status gate_up_impl(const MoeGateUpParams& p, cudaStream_t s) {
  const int nb = p.hidden / 32;
  const size_t smem = stage_bytes(1, nb);
  if (smem > moe_pipe::kMaxSmem || !moe_pipe::aligned(p.blocks, 16)) return moe_pipe::NoPipe();
  auto* fn = moe_gate_up_swiglu_mxfp4w_f32a<kU, kMinBlocks>;
  GS_RETURN_IF_ERROR(set_max_smem(reinterpret_cast<const void*>(fn), smem));
  const dim3 grid((p.inter / 4 + kWarps - 1) / kWarps, p.batch * p.k);
  fn<<<grid, kThreads, smem, s>>>(p);
  return launch_status("moe_gate_up_swiglu_mxfp4w_f32a (tc)");
}

template <int kU>
Status down_impl(const MoeDownParams& p, cudaStream_t s) {
  const int nb = p.inter / 32;
  // Tasks (row group, slot, K slice): KS = 8 / k slices when k < 8, G row groups per block so
  // that a block has about one task per warp (gpt-oss k = 4: KS = 2, G = 3, 120 blocks at
  // batch 1). Few large blocks: each block stages all k activation vectors once.
  const int KS = std::max(1, 8 / p.k), G = std::max(1, kDnWarps / (p.k * KS));
  const size_t smem = stage_bytes(p.k, nb) + static_cast<size_t>(G) * 8 * p.k * KS * 4;
  if (smem > moe_pipe::kMaxSmem || !moe_pipe::aligned(p.blocks, 16)) return moe_pipe::NoPipe();
  auto* fn = moe_down_mxfp4w_f32a<kU>;
  GS_RETURN_IF_ERROR(set_max_smem(reinterpret_cast<const void*>(fn), smem));
  const dim3 grid((p.hidden / 8 + G - 1) / G, p.batch);
  fn<<<grid, kDnThreads, smem, s>>>(p, G, KS);
  return launch_status("moe_down_mxfp4w_f32a (tc)");
}

}  // namespace

Status launch_moe_gate_up_tc(const MoeGateUpParams& p, cudaStream_t s) {
  // pipe 4: 24 warps / SM (<= 80 registers), 4 blocks in flight per lane; pipe 5: 16 warps, 8.
  return p.pipe == 5 ? gate_up_impl<8, 2>(p, s) : gate_up_impl<4, 3>(p, s);
}

Status launch_moe_down_tc(const MoeDownParams& p, cudaStream_t s) {
  return p.pipe == 5 ? down_impl<6>(p, s) : down_impl<4>(p, s);
}

}  // namespace gossamer::kern

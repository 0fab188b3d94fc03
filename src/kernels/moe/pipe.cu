// Pipelined MoE MXFP4 down GEMV (params.pipe 2: the fallback of the streaming down kernel where
// pipe 6 does not apply, e.g. batch > 64 or before sm_90; docs/perf-notes-early.md). Same contract
// as kernel.cu's down kernel; differences:
//  - a persistent-style grid sized from the occupancy API so that every block is resident in ONE
//    wave, and each of the kWarps warps loops over its tasks;
//  - a task = 4 consecutive weight rows of one expert (4 * nb 16-byte MX blocks and 4 * nb scale
//    bytes, contiguous in memory), copied with cp.async into a per-warp ring of kDepth slots in
//    shared memory: the copies of the next kDepth-1 tasks stay in flight while the warp decodes
//    the current one (bytes in flight no longer limited by registers);
//  - lane l decodes MX blocks l, l+32, ... of the 4 rows from smem (conflict-free 16-byte reads)
//    against the activations staged in smem ([n/32][36] floats, as in kernel.cu).
// moe_down (grid (blocks, batch)): a block owns G row groups of H; its G*k tasks (row group,
//   routed slot j) go round-robin to its warps; per-(row, j) partial dots land in smem and one
//   thread per row adds sum_j w_j (dot_j + bias_j) to the residual in a fixed order
//   (deterministic).
#include <algorithm>

#include "kernels/common/cuda_check.h"
#include "kernels/common/device.cuh"
#include "kernels/moe/pipe.h"
#include "kernels/moe/pipe_common.cuh"

namespace gossamer::kern {
namespace {

using namespace moe_pipe;  // NOLINT: internal helpers

constexpr int kPad = 36, kRows = 4;     // kRows: rows per task (4 keeps scale copies 4B-aligned)
constexpr int kWarps = 12, kDepth = 2;  // warps per block, ring slots per warp

// Bytes of one ring slot: [4 nb][16] weights then 4 nb scale bytes (padded to 16).
__host__ __device__ constexpr int slot_bytes(int nb) {
  return kRows * nb * 16 + ((kRows * nb + 15) & ~15);
}

// Issues the cp.async copies of rows row0..row0+3 (row0 % 4 == 0) into `slot`.
__device__ __forceinline__ void issue_task(uint8_t* slot, const uint8_t* __restrict__ blocks,
                                           const uint8_t* __restrict__ scales, size_t row0, int nb,
                                           int lane) {
  const int n = kRows * nb;
  const uint8_t* gw = blocks + row0 * nb * 16;
  for (int q = lane; q < n; q += 32) cp_async16(slot + q * 16, gw + q * 16);
  const uint8_t* gs = scales + row0 * nb;
  uint8_t* ss = slot + n * 16;
  for (int q = lane; q < n / 4; q += 32) cp_async4(ss + q * 4, gs + q * 4);
}

// acc[r] += (row r of the slot) . x, x staged as [nb][kPad] floats.
__device__ __forceinline__ void compute_task(const uint8_t* slot, const float4* xs, int nb,
                                             int lane, float (&acc)[kRows]) {
  const uint4* w = reinterpret_cast<const uint4*>(slot);
  const uint8_t* sc = slot + kRows * nb * 16;
  for (int c = lane; c < nb; c += 32) {
    const float4* xv = xs + c * (kPad / 4);
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      const uint4 q = w[r * nb + c];
      const float d = mxfp4_dot32_cvt(q, xv);
      acc[r] = fmaf(d, e8m0_half(sc[r * nb + c]), acc[r]);
    }
  }
}

// Stages n floats (n % 32 == 0) as [n/32][kPad] groups.
__device__ __forceinline__ void stage_x(float4* dst, const float* src, int n) {
  const float4* s4 = reinterpret_cast<const float4*>(src);
  for (int i = threadIdx.x; i < n / 4; i += blockDim.x)
    dst[(i >> 3) * (kPad / 4) + (i & 7)] = s4[i];
}

// G = row groups per block (kernel argument).
__global__ void __launch_bounds__(kWarps * 32) moe_down_mxfp4w_f32a(MoeDownParams p, int G) {
  extern __shared__ __align__(16) uint8_t smem[];
  const int b = blockIdx.y, I = p.inter, H = p.hidden, nb = I / 32, k = p.k;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int sb = slot_bytes(nb), g0 = blockIdx.x * G;
  const int n_tasks = min(G, H / kRows - g0) * k;  // (row group, slot j), j fastest
  float4* xs = reinterpret_cast<float4*>(smem);    // [k][nb][kPad]
  float* part = reinterpret_cast<float*>(smem + k * nb * kPad * 4);  // [G*4][k]
  uint8_t* ring = smem + k * nb * kPad * 4 + ((G * kRows * k * 4 + 15) & ~15) + warp * kDepth * sb;
  const int32_t* ids = p.ids + static_cast<size_t>(b) * k;
  auto row0_of = [&](int t) {
    const int e = min(max(ids[t % k], 0), p.n_experts - 1);
    return static_cast<size_t>(e) * H + (g0 + t / k) * kRows;
  };
  int t = warp;
#pragma unroll
  for (int s = 0; s < kDepth; ++s) {
    const int ts = t + s * kWarps;
    if (ts < n_tasks) issue_task(ring + s * sb, p.blocks, p.scales, row0_of(ts), nb, lane);
    cp_commit();
  }
  stage_x(xs, p.act + static_cast<size_t>(b) * k * I, k * I);
  __syncthreads();
  for (int i = 0; t < n_tasks; ++i, t += kWarps) {
    cp_wait<kDepth - 1>();
    __syncwarp();
    uint8_t* slot = ring + (i % kDepth) * sb;
    float acc[kRows] = {};
    const int j = t % k;
    compute_task(slot, xs + static_cast<size_t>(j) * nb * (kPad / 4), nb, lane, acc);
    __syncwarp();
    const int tn = t + kDepth * kWarps;
    if (tn < n_tasks) issue_task(slot, p.blocks, p.scales, row0_of(tn), nb, lane);
    cp_commit();
#pragma unroll
    for (int r = 0; r < kRows; ++r) acc[r] = warp_sum(acc[r]);
    if (lane < kRows) {
      float v = 0.f;
#pragma unroll
      for (int r = 0; r < kRows; ++r) v = r == lane ? acc[r] : v;
      part[((t / k) * kRows + lane) * k + j] = v;
    }
  }
  cp_wait<0>();
  __syncthreads();
  const int n_rows = n_tasks / k * kRows;
  for (int r = threadIdx.x; r < n_rows; r += blockDim.x) {
    const int row = g0 * kRows + r;
    float v = 0.f;
    for (int jj = 0; jj < k; ++jj) {
      const int e = min(max(ids[jj], 0), p.n_experts - 1);
      v = fmaf(p.weights[static_cast<size_t>(b) * k + jj],
               part[r * k + jj] + p.bias[static_cast<size_t>(e) * H + row], v);
    }
    p.resid[static_cast<size_t>(b) * H + row] += v;
  }
}

}  // namespace

Status launch_moe_down_pipe(const MoeDownParams& p, cudaStream_t s) {
  const int nb = p.inter / 32, groups = p.hidden / kRows;
  auto* fn = moe_down_mxfp4w_f32a;
  auto smem_of = [&](int G) {
    return static_cast<size_t>(p.k) * nb * kPad * 4 + ((G * kRows * p.k * 4 + 15) & ~15) +
           static_cast<size_t>(kWarps) * kDepth * slot_bytes(nb);
  };
  if (smem_of(64) > kMaxSmem || !aligned(p.blocks, 16) || !aligned(p.scales, 4)) {
    return NoPipe();
  }
  // Occupancy with a provisional G (the partial-sum buffer is small), then G from the grid.
  GS_ASSIGN_OR_RETURN(int max_blocks,
                      resident_blocks(reinterpret_cast<const void*>(fn), kWarps * 32, smem_of(64)));
  const int per_row = std::max(1, max_blocks / p.batch);
  int G = (groups + per_row - 1) / per_row;
  while ((G * p.k) % kWarps != 0 && G < std::min(groups, 64)) ++G;  // equal tasks per warp
  G = std::min(G, 64);
  const int blocks = (groups + G - 1) / G;
  fn<<<dim3(blocks, p.batch), kWarps * 32, smem_of(64), s>>>(p, G);
  return launch_status("moe_down_mxfp4w_f32a (pipe)");
}

}  // namespace gossamer::kern

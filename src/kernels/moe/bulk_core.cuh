// Shared-memory row-group decode of the streaming MoE kernels (bulk.cu, pipe 6): the tensor-core
// dot products of one 8-row group staged in shared memory, the exact fp32 fallback, the problem
// view (Job) and down's team epilogue. Internal to src/kernels/moe.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/moe/bulk.cuh"
#include "kernels/moe/params.h"
#include "kernels/moe/tc.cuh"

namespace gossamer::kern::moe_bulk {

using namespace moe_tc;  // NOLINT: internal helpers

// First MX block of part h of nb blocks split `ways` ways (a multiple of 4, or nb): the K split
// of warps sharing a row group.
__device__ __forceinline__ int part_begin(int nb, int h, int ways) {
  return h >= ways ? nb : (nb * h / ways) & ~3;
}

// This block's even share [x, y) of n_units units (one block per SM, contiguous ranges).
__device__ __forceinline__ int2 block_range(int n_units) {
  const auto u = static_cast<long long>(n_units);
  return make_int2(static_cast<int>(u * blockIdx.x / gridDim.x),
                   static_cast<int>(u * (blockIdx.x + 1) / gridDim.x));
}

// Fills `stage` with the 8-row group at row0: weights [8][nb][16] (8 nb 16 bytes), then scales
// [8][nb], two bulk copies completing on `full` (with the L2 policy when `hint`).
__device__ __forceinline__ void issue_row_group(const uint8_t* blocks, const uint8_t* scales,
                                                size_t row0, int nb, uint8_t* stage, uint64_t* full,
                                                bool hint, uint64_t policy) {
  const uint32_t wbytes = 128u * nb, sc_bytes = 8u * nb;
  mbar_arrive_expect_tx(full, wbytes + sc_bytes);
  if (hint) {
    bulk_g2s_hint(stage, blocks + row0 * nb * 16, wbytes, full, policy);
    bulk_g2s_hint(stage + wbytes, scales + row0 * nb, sc_bytes, full, policy);
    return;
  }
  bulk_g2s(stage, blocks + row0 * nb * 16, wbytes, full);
  bulk_g2s(stage + wbytes, scales + row0 * nb, sc_bytes, full);
}

// Operands of the last, partial step s of a row group's K loop (lane column t, nc blocks in the
// range): lanes past the range take zero weights and the scale byte 127 (2^0).
__device__ __forceinline__ void partial_step(const uint8_t* w, const uint8_t* sc, int s, int t,
                                             int nc, uint4& q, uint32_t& sb) {
  q = make_uint4(0, 0, 0, 0);
  sb = 127;
  if (t + 4 * s < nc) {
    q = *reinterpret_cast<const uint4*>(w + s * 64);
    sb = sc[4 * s];
  }
}

// The 8 rows of a row group (weights `wg` [8][nb][16], scales `sg` [8][nb], both in shared
// memory) against the staged vector `xv` (split stride su): acc / bad as in tc_block. Lane (g, t)
// takes blocks t + 4 s of row g (row stride 16 nb bytes: the LDS.128 of rows 2m, 2m+1 overlap in
// half their banks) and its B pairs from tc_b_lane.
// Blocks [c0, c1) only (default: all), the K range of this warp when warps share a group
// (bulk.cu gate_up). c0 must be a multiple of 4: the last, partial step reads the staged
// activations of blocks up to pad4(c1) - 1, which exist (zero past nb) only from such a start.
__device__ __forceinline__ void run_group(const uint8_t* wg, const uint8_t* sg, const uint4* xv,
                                          int su, int nb, int lane, float (&acc)[4], uint32_t& bad,
                                          int c0 = 0, int c1 = -1) {
  const int g = lane >> 2, t = lane & 3, nc = (c1 < 0 ? nb : c1) - c0;
  const uint8_t* w = wg + (g * nb + c0 + t) * 16;
  const uint8_t* sc = sg + g * nb + c0 + t;
  const uint2* bp = tc_b_lane(xv, su, c0, lane);
  const int full_steps = nc >> 2;
#pragma unroll 2
  for (int s = 0; s < full_steps; ++s) {
    const uint4 q = *reinterpret_cast<const uint4*>(w + s * 64);
    tc_block(q, sc[4 * s], bp + s * 32, acc, bad);
  }
  if (full_steps * 4 < nc) {
    uint4 q;
    uint32_t sb;
    partial_step(w, sc, full_steps, t, nc, q, sb);
    tc_block(q, sb, bp + full_steps * 32, acc, bad);
  }
}

// The six split terms of each row summed (tc.cuh: row g's are D[g][0..2] on lanes 4g (d0, d1)
// and 4g+1 (d0), D[g+8][3..5] on lanes 4g+1 (d3) and 4g+2 (d2, d3)), times 2^kX; returned on
// lanes 0..3 as rows 2t, 2t+1.
__device__ __forceinline__ float2 split_rows(const float (&acc)[4], int lane) {
  const int t = lane & 3;
  float r = t == 0 ? acc[1] + acc[0] : t == 1 ? acc[0] + acc[3] : t == 2 ? acc[3] + acc[2] : 0.f;
  r += __shfl_xor_sync(0xffffffffu, r, 1);
  r += __shfl_xor_sync(0xffffffffu, r, 2);
  const float r0 = __shfl_sync(0xffffffffu, r, 8 * t), r1 = __shfl_sync(0xffffffffu, r, 8 * t + 4);
  return make_float2(r0 * 4294967296.f, r1 * 4294967296.f);  // 2^kX
}

// A warp's part of a shared row group, for the member that sums the parts: its 8 dots
// (split_rows) at part[0..7] and, at part[8], 1 when any lane met a scale byte outside the
// tensor-core range (the sum then takes the exact path). gate_up's warp pairs and down's teams.
__device__ __forceinline__ void store_part(float* part, const float (&acc)[4], uint32_t bad,
                                           int lane) {
  const float2 v = split_rows(acc, lane);
  const bool any_bad = __any_sync(0xffffffffu, bad);
  if (lane < 4) part[2 * lane] = v.x, part[2 * lane + 1] = v.y;
  if (lane == 0) part[8] = any_bad ? 1.f : 0.f;
}

// The exact fp32 dots of the warp's 8 rows from global memory (the vector xf in fp32), on lanes
// 0..3 as rows 2t, 2t+1: the fallback for scale bytes outside the tensor-core range.
__device__ __forceinline__ float2 exact_rows(const uint8_t* blocks, const uint8_t* scales,
                                             size_t row0, int nb, const float* xf, int lane) {
  const int g = lane >> 2, t = lane & 3;
  const uint8_t* wrow = blocks + (row0 + g) * nb * 16;
  const uint8_t* srow = scales + (row0 + g) * nb;
  float f = 0.f;
  for (int c = t; c < nb; c += 4) {
    const float dot = mxfp4_dot32_cvt(ldg_na16(wrow + static_cast<size_t>(c) * 16),
                                      reinterpret_cast<const float4*>(xf + c * 32));
    f = fmaf(dot, e8m0_half(srow[c]), f);
  }
  f += __shfl_xor_sync(0xffffffffu, f, 1);
  f += __shfl_xor_sync(0xffffffffu, f, 2);
  return make_float2(__shfl_sync(0xffffffffu, f, 8 * t), __shfl_sync(0xffffffffu, f, 8 * t + 4));
}

// The inputs of one down unit as the kernel put them in shared memory before the GEMV (bias_u
// [k][8]: bias_j of the unit's rows, resid_u [8]: its residual rows, w [k]: routing weights).
struct DownStaged {
  const float *bias_u, *resid_u, *w;
};

// Problem view shared by the streaming kernels (device side).
struct Job {
  const uint8_t* blocks;  // [E, rows, nb, 16]
  const uint8_t* scales;  // [E, rows, nb]
  const int32_t* ids;     // [batch, k]
  int k, n_experts, rows_per_expert, groups_per_slot;
  bool down;
  // First weight row of unit u (in this block's batch row b), member j.
  __device__ __forceinline__ size_t row0(int b, int u, int j) const {
    const int slot = down ? j : u / groups_per_slot, group = down ? u : u % groups_per_slot;
    const int e = min(max(ids[b * k + slot], 0), n_experts - 1);  // ids come from top-k (valid)
    return static_cast<size_t>(e) * rows_per_expert + static_cast<size_t>(group) * 8;
  }
};

// down epilogue of row group u for token b (member 0 of the team, all 32 lanes): the kShare
// parts of each routed slot j (pt [team][8 dots + bad flag], written before the team barrier)
// added in order h = 0, 1, ... (or slot j's rows recomputed by the exact fp32 path when a part
// met a scale byte outside the tensor-core range), then lanes 0..7 add
// sum_j w_j (dot_j + bias_j[row]) to the residual in slot order: deterministic, no atomics.
// staged: the unit's inputs in shared memory, or null (read from global memory); act: this
// token's [k][I] activations (exact path).
template <int kShare>
__device__ __forceinline__ void down_team_sum_parts(const MoeDownParams& p, const Job& J,
                                                    const float* pt, int b, int u, const float* act,
                                                    int nb, int lane, const DownStaged* staged) {
  const int row = u * 8 + lane;
  float sum = 0.f;
  for (int jj = 0; jj < p.k; ++jj) {
    float dot = 0.f;
    bool bad = false;
#pragma unroll
    for (int hh = 0; hh < kShare; ++hh) {
      const float* q = pt + (jj * kShare + hh) * 9;
      if (lane < 8) dot += q[lane];
      bad |= q[8] != 0.f;
    }
    if (bad) {  // warp-uniform: every lane read the same flags
      const float2 ex = exact_rows(p.blocks, p.scales, J.row0(b, u, jj), nb,
                                   act + static_cast<size_t>(jj) * p.inter, lane);
      const float e0 = __shfl_sync(0xffffffffu, ex.x, (lane & 7) >> 1);
      const float e1 = __shfl_sync(0xffffffffu, ex.y, (lane & 7) >> 1);
      dot = lane & 1 ? e1 : e0;
    }
    if (lane >= 8) continue;
    float w, bias;
    if (staged) {
      w = staged->w[jj], bias = staged->bias_u[jj * 8 + lane];
    } else {
      const int e = min(max(p.ids[b * p.k + jj], 0), p.n_experts - 1);
      w = p.weights[b * p.k + jj], bias = p.bias[static_cast<size_t>(e) * p.hidden + row];
    }
    sum = fmaf(w, dot + bias, sum);
  }
  if (lane < 8) {
    float* dst = p.resid + static_cast<size_t>(b) * p.hidden + row;
    *dst = (staged ? staged->resid_u[lane] : *dst) + sum;
  }
}

}  // namespace gossamer::kern::moe_bulk

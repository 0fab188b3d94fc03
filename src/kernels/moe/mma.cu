// Tensor-core MoE MXFP4 expert GEMVs (params.pipe == 3). Same contracts and the same cp.async
// ring / one-wave grid as pipe.cu, but the dot products run on mma.sync.m16n8k16 (f16 in, f32
// accumulate) so that no per-value conversion or FMA is issued:
//  - B (k16 x n8) = 8 weight rows: lane (g = lane/4, q = lane%4) decodes word q (elements
//    8q..8q+7) of the row's MX block c into 4 half2 P_i = (e_{8q+i}, e_{8q+i+4}) * 2^-14 (exact,
//    bit placement only); MMA 1 takes P_0, P_1 and MMA 2 takes P_2, P_3 (a permutation of k that
//    the activations follow);
//  - A (m16 x k16) = the activations split into x_hi = f16(x) (row m = 0) and
//    x_lo = f16(x - x_hi) (row m = 1), other rows zero; staged once per block in smem as
//    [split][n/8] uint4 of 4 half2 in the same (i, i+4) pairing;
//  - per block c a fresh accumulator, then acc[row] += D * e8m0 scale (the scale is per row and
//    block); D rows m = 0, 1 are summed by shuffles at the end of a task.
// Precision: x is represented to ~22 bits (|x| < 65504 required; gpt-oss down inputs are
// bounded by (limit + 1) * limit = 56), products and sums in fp32.
#include <cuda_fp16.h>

#include <algorithm>

#include "kernels/common/device.cuh"
#include "kernels/moe/pipe.h"
#include "kernels/moe/pipe_common.cuh"

namespace gossamer::kern {
namespace {

using namespace moe_pipe;  // NOLINT: internal helpers

constexpr int kR = 8;  // weight rows per task (the mma n dimension)

// Row stride of a slot: 16 nb bytes, padded by 16 when nb is even (conflict-free LDS.32 of 8
// rows x 4 words).
__host__ __device__ constexpr int row_stride(int nb) {
  return nb * 16 + (nb % 2 == 0 ? 16 : 0);
}
__host__ __device__ constexpr int mslot_bytes(int nb) {
  return kR * row_stride(nb) + ((kR * nb + 15) & ~15);
}

__device__ __forceinline__ void issue_task8(uint8_t* slot, const uint8_t* __restrict__ blocks,
                                            const uint8_t* __restrict__ scales, size_t row0, int nb,
                                            int lane) {
  const int n = kR * nb, rs = row_stride(nb);
  const uint8_t* gw = blocks + row0 * nb * 16;
  for (int q = lane; q < n; q += 32) {
    const int r = q / nb, c = q - r * nb;
    cp_async16(slot + r * rs + c * 16, gw + static_cast<size_t>(q) * 16);
  }
  const uint8_t* gs = scales + row0 * nb;  // row0 % 8 == 0: 4-byte aligned
  uint8_t* ss = slot + kR * rs;
  for (int q = lane; q < n / 4; q += 32) cp_async4(ss + q * 4, gs + q * 4);
}

// Stages n floats (n % 32 == 0) as two f16 splits: dst[s * n/8 + u] = 4 half2 (x[8u+i],
// x[8u+i+4]), i < 4, of split s (0: hi, 1: lo).
__device__ __forceinline__ void stage_split(uint4* dst, const float* __restrict__ x, int n) {
  const int units = n / 8;
  for (int u = threadIdx.x; u < units; u += blockDim.x) {
    const float4 a = reinterpret_cast<const float4*>(x)[2 * u];
    const float4 b = reinterpret_cast<const float4*>(x)[2 * u + 1];
    const float v[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
    uint32_t hi[4], lo[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const __half2 h = __floats2half2_rn(v[i], v[i + 4]);
      const float2 hf = __half22float2(h);
      const __half2 l = __floats2half2_rn(v[i] - hf.x, v[i + 4] - hf.y);
      hi[i] = *reinterpret_cast<const uint32_t*>(&h);
      lo[i] = *reinterpret_cast<const uint32_t*>(&l);
    }
    dst[u] = make_uint4(hi[0], hi[1], hi[2], hi[3]);
    dst[units + u] = make_uint4(lo[0], lo[1], lo[2], lo[3]);
  }
}

// P_i of a word: half2 (element i, element i + 4) * 2^-14, exact for every E2M1 code.
template <int I>
__device__ __forceinline__ uint32_t e2m1_h2(uint32_t w) {
  const uint32_t mag = I < 3 ? (w << (9 - 4 * I)) : (w >> 3);
  const uint32_t sgn = I < 3 ? (w << (12 - 4 * I)) : w;
  return (mag & 0x0E000E00u) | (sgn & 0x80008000u);
}

__device__ __forceinline__ void mma16816(float (&d)[4], uint32_t a0, uint32_t a2, uint32_t b0,
                                         uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a0), "r"(0u), "r"(a2), "r"(0u), "r"(b0), "r"(b1));
}

// acc[0/1] += split-(lane/4) partial dots of rows 2q, 2q+1 of the slot (times 2^-15: callers
// scale by 32768 after the shuffle sum). xsp: split array of this expert's activations.
__device__ __forceinline__ void compute_task8(const uint8_t* slot, const uint4* xsp, int units,
                                              int nb, int lane, float (&acc)[2]) {
  const int g = lane >> 2, q = lane & 3, rs = row_stride(nb);
  const uint32_t* wrow = reinterpret_cast<const uint32_t*>(slot + g * rs) + q;
  const uint8_t* sc = slot + kR * rs;
  const uint4* xa = xsp + (g < 2 ? g : 0) * units + q;
  const bool has_x = g < 2;
#pragma unroll 4
  for (int c = 0; c < nb; ++c) {
    const uint32_t w = wrow[c * 4];
    uint4 xv = xa[c * 4];
    if (!has_x) xv = make_uint4(0, 0, 0, 0);
    float d[4] = {0.f, 0.f, 0.f, 0.f};
    mma16816(d, xv.x, xv.y, e2m1_h2<0>(w), e2m1_h2<1>(w));
    mma16816(d, xv.z, xv.w, e2m1_h2<2>(w), e2m1_h2<3>(w));
    acc[0] = fmaf(d[0], e8m0_half(sc[(2 * q) * nb + c]), acc[0]);
    acc[1] = fmaf(d[1], e8m0_half(sc[(2 * q + 1) * nb + c]), acc[1]);
  }
}

__device__ __forceinline__ float sum_splits(float v) {
  v += __shfl_xor_sync(0xffffffffu, v, 4);
  v += __shfl_xor_sync(0xffffffffu, v, 8);
  v += __shfl_xor_sync(0xffffffffu, v, 16);
  return v * 32768.f;
}

constexpr int kGuWarps = 8, kDnWarps = 6, kDepth = 2;

__global__ void __launch_bounds__(kGuWarps * 32) moe_gate_up_swiglu_mxfp4w_f32a(MoeGateUpParams p) {
  extern __shared__ __align__(16) uint8_t smem[];
  const int b = blockIdx.y, nb = p.hidden / 32, I = p.inter, groups = I / 4;  // 8 rows = 4 units
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int n_tasks = p.k * groups, W = gridDim.x * kGuWarps, sb = mslot_bytes(nb);
  uint4* xs = reinterpret_cast<uint4*>(smem);  // [2][nb * 4]
  uint8_t* ring = smem + nb * 128 + warp * kDepth * sb;
  const int32_t* ids = p.ids + static_cast<size_t>(b) * p.k;
  auto row0_of = [&](int t) {
    const int e = min(max(ids[t / groups], 0), p.n_experts - 1);
    return static_cast<size_t>(e) * 2 * I + (t % groups) * kR;
  };
  int t = blockIdx.x * kGuWarps + warp;
#pragma unroll
  for (int s = 0; s < kDepth; ++s) {
    const int ts = t + s * W;
    if (ts < n_tasks) issue_task8(ring + s * sb, p.blocks, p.scales, row0_of(ts), nb, lane);
    cp_commit();
  }
  stage_split(xs, p.x + static_cast<size_t>(b) * p.hidden, p.hidden);
  __syncthreads();
  for (int i = 0; t < n_tasks; ++i, t += W) {
    cp_wait<kDepth - 1>();
    __syncwarp();
    uint8_t* slot = ring + (i % kDepth) * sb;
    float acc[2] = {0.f, 0.f};
    compute_task8(slot, xs, nb * 4, nb, lane, acc);
    __syncwarp();
    const int tn = t + kDepth * W;
    if (tn < n_tasks) issue_task8(slot, p.blocks, p.scales, row0_of(tn), nb, lane);
    cp_commit();
    float g = sum_splits(acc[0]), up = sum_splits(acc[1]);
    const int j = t / groups, e = ids[j];
    if (lane < 4 && e >= 0 && e < p.n_experts) {
      const int u = (t % groups) * 4 + lane;  // SwiGLU output: rows 2u (gate), 2u+1 (up)
      const float* bias = p.bias + static_cast<size_t>(e) * 2 * I;
      g = fminf(g + bias[2 * u], p.limit);
      up = fmaxf(fminf(up + bias[2 * u + 1], p.limit), -p.limit);
      p.act[(static_cast<size_t>(b) * p.k + j) * I + u] =
          (up + 1.f) * g / (1.f + __expf(-p.alpha * g));
    }
  }
  cp_wait<0>();
}

__global__ void __launch_bounds__(kDnWarps * 32) moe_down_mxfp4w_f32a(MoeDownParams p, int G) {
  extern __shared__ __align__(16) uint8_t smem[];
  const int b = blockIdx.y, I = p.inter, H = p.hidden, nb = I / 32, k = p.k;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int sb = mslot_bytes(nb), g0 = blockIdx.x * G;
  const int n_tasks = min(G, H / kR - g0) * k;  // (row group of 8, slot j), j fastest
  uint4* xs = reinterpret_cast<uint4*>(smem);   // [2][k * nb * 4]
  float* part = reinterpret_cast<float*>(smem + k * nb * 128);  // [G * 8][k]
  uint8_t* ring = smem + k * nb * 128 + ((G * kR * k * 4 + 15) & ~15) + warp * kDepth * sb;
  const int32_t* ids = p.ids + static_cast<size_t>(b) * k;
  auto row0_of = [&](int t) {
    const int e = min(max(ids[t % k], 0), p.n_experts - 1);
    return static_cast<size_t>(e) * H + (g0 + t / k) * kR;
  };
  int t = warp;
#pragma unroll
  for (int s = 0; s < kDepth; ++s) {
    const int ts = t + s * kDnWarps;
    if (ts < n_tasks) issue_task8(ring + s * sb, p.blocks, p.scales, row0_of(ts), nb, lane);
    cp_commit();
  }
  stage_split(xs, p.act + static_cast<size_t>(b) * k * I, k * I);
  __syncthreads();
  for (int i = 0; t < n_tasks; ++i, t += kDnWarps) {
    cp_wait<kDepth - 1>();
    __syncwarp();
    uint8_t* slot = ring + (i % kDepth) * sb;
    float acc[2] = {0.f, 0.f};
    const int j = t % k;
    compute_task8(slot, xs + j * nb * 4, k * nb * 4, nb, lane, acc);
    __syncwarp();
    const int tn = t + kDepth * kDnWarps;
    if (tn < n_tasks) issue_task8(slot, p.blocks, p.scales, row0_of(tn), nb, lane);
    cp_commit();
    const float v0 = sum_splits(acc[0]), v1 = sum_splits(acc[1]);
    if (lane < 4) {
      part[((t / k) * kR + 2 * lane) * k + j] = v0;
      part[((t / k) * kR + 2 * lane + 1) * k + j] = v1;
    }
  }
  cp_wait<0>();
  __syncthreads();
  const int n_rows = n_tasks / k * kR;
  for (int r = threadIdx.x; r < n_rows; r += blockDim.x) {
    const int row = g0 * kR + r;
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

Status launch_moe_gate_up_mma(const MoeGateUpParams& p, cudaStream_t s) {
  const int nb = p.hidden / 32;
  const size_t smem =
      static_cast<size_t>(nb) * 128 + static_cast<size_t>(kGuWarps) * kDepth * mslot_bytes(nb);
  if (smem > kMaxSmem || !aligned(p.blocks, 16) || !aligned(p.scales, 4)) return NoPipe();
  const void* fn = reinterpret_cast<const void*>(moe_gate_up_swiglu_mxfp4w_f32a);
  GS_ASSIGN_OR_RETURN(int max_blocks, resident_blocks(fn, kGuWarps * 32, smem));
  const int n_tasks = p.k * (p.inter / 4);
  const int per_row = std::max(1, max_blocks / p.batch) * kGuWarps;
  const int per_warp = (n_tasks + per_row - 1) / per_row;
  const int blocks = (n_tasks + per_warp * kGuWarps - 1) / (per_warp * kGuWarps);
  moe_gate_up_swiglu_mxfp4w_f32a<<<dim3(blocks, p.batch), kGuWarps * 32, smem, s>>>(p);
  return launch_status("moe_gate_up_swiglu_mxfp4w_f32a (mma)");
}

Status launch_moe_down_mma(const MoeDownParams& p, cudaStream_t s) {
  const int nb = p.inter / 32, groups = p.hidden / kR;
  const size_t smem = static_cast<size_t>(p.k) * nb * 128 + 64 * kR * p.k * 4 +
                      static_cast<size_t>(kDnWarps) * kDepth * mslot_bytes(nb);
  if (smem > kMaxSmem || !aligned(p.blocks, 16) || !aligned(p.scales, 4)) return NoPipe();
  const void* fn = reinterpret_cast<const void*>(moe_down_mxfp4w_f32a);
  GS_ASSIGN_OR_RETURN(int max_blocks, resident_blocks(fn, kDnWarps * 32, smem));
  const int per_row = std::max(1, max_blocks / p.batch);
  int G = (groups + per_row - 1) / per_row;
  while ((G * p.k) % kDnWarps != 0 && G < std::min(groups, 64)) ++G;  // equal tasks per warp
  G = std::min(G, 64);
  const int blocks = (groups + G - 1) / G;
  moe_down_mxfp4w_f32a<<<dim3(blocks, p.batch), kDnWarps * 32, smem, s>>>(p, G);
  return launch_status("moe_down_mxfp4w_f32a (mma)");
}

}  // namespace gossamer::kern

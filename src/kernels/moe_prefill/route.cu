// Routing permutation (expert counts, scan, scatter, tile list), x -> bf16, the deterministic
// combine into the residual, and launch_moe_prefill, which enqueues the whole MoE prefill.
#include <cuda_bf16.h>

#include "kernels/common/cuda_check.h"
#include "kernels/moe_prefill/common.cuh"
#include "kernels/moe_prefill/kernels.h"
#include "kernels/moe_prefill/layout.h"
#include "kernels/moe_prefill/params.h"

namespace gossamer::kern {
namespace {

constexpr int kRouteThreads = 1024;

// One block. smem: cnt[E], cur[E], toff[E]. ids outside [0, E) are dropped.
//   offsets [E + 1], ntiles [1], tiles [max_tiles] (expert, first sorted row) of bm rows,
//   perm [pairs].
__global__ void __launch_bounds__(kRouteThreads)
    moe_prefill_route(const int32_t* __restrict__ ids, int pairs, int E, int bm,
                      int32_t* __restrict__ offsets, int32_t* __restrict__ ntiles,
                      int2* __restrict__ tiles, int32_t* __restrict__ perm) {
  extern __shared__ int32_t sm[];
  int32_t *cnt = sm, *cur = sm + E, *toff = sm + 2 * E;
  for (int e = threadIdx.x; e < E; e += blockDim.x) cnt[e] = 0;
  __syncthreads();
  for (int p = threadIdx.x; p < pairs; p += blockDim.x) {
    const int id = ids[p];
    if (id >= 0 && id < E) atomicAdd(&cnt[id], 1);
  }
  __syncthreads();
  if (threadIdx.x < 32) {  // warp 0: exclusive scans of rows and of tiles per expert
    const int lane = threadIdx.x;
    int rows = 0, ntile = 0;
    for (int base = 0; base < E; base += 32) {
      const int e = base + lane;
      const int c = e < E ? cnt[e] : 0, tc = (c + bm - 1) / bm;
      int ic = c, it = tc;
      for (int o = 1; o < 32; o <<= 1) {
        const int vc = __shfl_up_sync(0xffffffffu, ic, o), vt = __shfl_up_sync(0xffffffffu, it, o);
        if (lane >= o) ic += vc, it += vt;
      }
      if (e < E) {
        cur[e] = rows + ic - c;
        toff[e] = ntile + it - tc;
        offsets[e] = rows + ic - c;
      }
      rows += __shfl_sync(0xffffffffu, ic, 31);
      ntile += __shfl_sync(0xffffffffu, it, 31);
    }
    if (lane == 0) offsets[E] = rows, *ntiles = ntile;
  }
  __syncthreads();
  for (int e = threadIdx.x; e < E; e += blockDim.x) {
    for (int i = 0; i * bm < cnt[e]; ++i) tiles[toff[e] + i] = make_int2(e, cur[e] + i * bm);
  }
  __syncthreads();
  for (int p = threadIdx.x; p < pairs; p += blockDim.x) {
    const int id = ids[p];
    if (id >= 0 && id < E) perm[atomicAdd(&cur[id], 1)] = p;
  }
}

// x [n8 groups of 8] f32 -> bf16, each group stored as (e0,e4, e1,e5, e2,e6, e3,e7): the k
// order the MMA fragments of gemm.cu expect (perm8).
__global__ void moe_prefill_x_bf16(const float4* __restrict__ x, uint4* __restrict__ xb,
                                   size_t groups) {
  const size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x;
  if (i >= groups) return;
  const float4 a = x[2 * i], b = x[2 * i + 1];
  auto pack = [](float lo, float hi) {
    const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<const uint32_t*>(&v);
  };
  xb[i] = make_uint4(pack(a.x, b.x), pack(a.y, b.y), pack(a.z, b.z), pack(a.w, b.w));
}

// x [MX blocks of 32] f32 -> bf16 in the wgmma k order (perm32), one block per thread.
__global__ void moe_prefill_x_bf16_p32(const float* __restrict__ x, uint16_t* __restrict__ xb,
                                       size_t blocks) {
  const size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x;
  if (i >= blocks) return;
  const float4* src = reinterpret_cast<const float4*>(x + 32 * i);
  uint16_t out[32];
#pragma unroll
  for (int v = 0; v < 8; ++v) {
    const float4 f = src[v];
    const float e[4] = {f.x, f.y, f.z, f.w};
#pragma unroll
    for (int u = 0; u < 4; ++u) {
      const __nv_bfloat16 h = __float2bfloat16_rn(e[u]);
      out[moe_prefill::perm32(4 * v + u)] = *reinterpret_cast<const uint16_t*>(&h);
    }
  }
  uint4* dst = reinterpret_cast<uint4*>(xb + 32 * i);
#pragma unroll
  for (int v = 0; v < 4; ++v) {
    dst[v] = make_uint4(out[8 * v] | (uint32_t{out[8 * v + 1]} << 16),
                        out[8 * v + 2] | (uint32_t{out[8 * v + 3]} << 16),
                        out[8 * v + 4] | (uint32_t{out[8 * v + 5]} << 16),
                        out[8 * v + 6] | (uint32_t{out[8 * v + 7]} << 16));
  }
}

// resid[t, :] += sum_{j < k, ids valid} y[t*k + j, :], in slot order. float4 per thread.
__global__ void moe_prefill_combine(const float4* __restrict__ y, const int32_t* __restrict__ ids,
                                    float4* __restrict__ resid, int tokens, int k, int h4, int E) {
  const size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x;
  if (i >= static_cast<size_t>(tokens) * h4) return;
  const size_t t = i / h4, c = i % h4;
  float4 r = resid[i];
  for (int j = 0; j < k; ++j) {
    const int id = ids[t * k + j];
    if (id < 0 || id >= E) continue;
    const float4 v = y[(t * k + j) * h4 + c];
    r.x += v.x, r.y += v.y, r.z += v.z, r.w += v.w;
  }
  resid[i] = r;
}

unsigned blocks_for(size_t n, int threads) {
  return static_cast<unsigned>((n + threads - 1) / threads);
}

}  // namespace

Status launch_moe_prefill(const MoePrefillParams& p, cudaStream_t stream) {
  GS_RETURN_IF_ERROR(p.validate());
  using namespace moe_prefill;  // NOLINT: internal helpers
  const Layout l = make_layout(p.tokens, p.k, p.hidden, p.inter, p.n_experts);
  auto* ws = static_cast<uint8_t*>(p.workspace);
  auto* offsets = reinterpret_cast<int32_t*>(ws + l.offsets);
  auto* ntiles = reinterpret_cast<int32_t*>(ws + l.ntiles);
  auto* tiles = reinterpret_cast<int2*>(ws + l.tiles);
  auto* perm = reinterpret_cast<int32_t*>(ws + l.perm);
  auto* xb = reinterpret_cast<uint16_t*>(ws + l.xb);
  auto* act = reinterpret_cast<uint16_t*>(ws + l.act);
  auto* y = reinterpret_cast<float*>(ws + l.y);
  const int pairs = p.tokens * p.k;
  const int variant = p.gemm_variant < 0 ? pick_variant(pairs, p.n_experts) : p.gemm_variant;
  const int bm = variant_bm(variant);

  const size_t route_smem = sizeof(int32_t) * 3 * p.n_experts;
  if (route_smem > 48 * 1024) {
    GS_CUDA_RETURN(cudaFuncSetAttribute(moe_prefill_route,
                                        cudaFuncAttributeMaxDynamicSharedMemorySize,
                                        static_cast<int>(route_smem)));
  }
  moe_prefill_route<<<1, kRouteThreads, route_smem, stream>>>(p.ids, pairs, p.n_experts, bm,
                                                              offsets, ntiles, tiles, perm);
  GS_RETURN_IF_ERROR(launch_status("moe_prefill_route"));

  if (is_wgmma_variant(variant)) {
    const size_t blocks = static_cast<size_t>(p.tokens) * p.hidden / 32;
    moe_prefill_x_bf16_p32<<<blocks_for(blocks, 256), 256, 0, stream>>>(p.x, xb, blocks);
  } else {
    const size_t groups = static_cast<size_t>(p.tokens) * p.hidden / 8;
    moe_prefill_x_bf16<<<blocks_for(groups, 256), 256, 0, stream>>>(
        reinterpret_cast<const float4*>(p.x), reinterpret_cast<uint4*>(xb), groups);
  }
  GS_RETURN_IF_ERROR(launch_status("moe_prefill_x_bf16"));

  GemmArgs g;
  g.perm = perm, g.offsets = offsets, g.ntiles = ntiles, g.tiles = tiles;
  g.k = p.k, g.max_tiles = max_tiles_for(pairs, p.n_experts, bm), g.variant = variant;
  g.alpha = p.alpha, g.limit = p.limit;
  g.blocks = p.gu_blocks, g.scales = p.gu_scales, g.bias = p.gu_bias, g.a = xb, g.act = act;
  g.N = 2 * p.inter, g.K = p.hidden;
  GS_RETURN_IF_ERROR(launch_gemm_gate_up(g, stream));

  g.blocks = p.dn_blocks, g.scales = p.dn_scales, g.bias = p.dn_bias, g.a = act, g.act = nullptr;
  g.y = y, g.weights = p.weights, g.N = p.hidden, g.K = p.inter;
  GS_RETURN_IF_ERROR(launch_gemm_down(g, stream));

  const int h4 = p.hidden / 4;
  moe_prefill_combine<<<blocks_for(static_cast<size_t>(p.tokens) * h4, 256), 256, 0, stream>>>(
      reinterpret_cast<const float4*>(y), p.ids, reinterpret_cast<float4*>(p.resid), p.tokens, p.k,
      h4, p.n_experts);
  return launch_status("moe_prefill_combine");
}

}  // namespace gossamer::kern

// norm_router_topk_wide<BT, RPW>: fused RMSNorm + router GEMV + top-k softmax (params.h), the
// decode default for hidden <= kWideMaxHidden. The router weight is tiny (128 x 2880 bf16 =
// 0.74 MB), so the kernel is latency-bound, not bandwidth-bound: the whole weight tile of a warp
// is loaded into registers BEFORE pdl_wait() (weights are never written by the step, pdl.h rule
// 1), i.e. while the previous kernel (O-projection) is still draining, and every load of the
// kernel is in flight at once.
//
// Layout: grid (C, ceil(batch / BT)), cluster (C, 1, 1) with C = ceil(E / (8 * RPW)) <= 16,
// 256 threads = 8 warps; warp w of cluster block `rank` owns experts (rank * 8 + w) * RPW + r.
// Lane l holds the 16-byte chunks l, l + 32, ... (< kMaxChunks per lane) of its rows.
// After the wait: every block sums the BT rows' squares (block_inv_rms<BT, 8>'s order), forms
// the activations as x * gain (staged once in shared memory for BT <= kStageBT, see stage_xg),
// writes its share of xn = (x * inv_rms) * gain (bit-identical to the rmsnorm kernel), and
// accumulates chunk by chunk in the order of warp_gemv_bf16, then the same butterfly warp sum,
// times inv_rms (+ bias): logits within ~1e-7 of rmsnorm + gemv_bf16w_f32a, the same for every
// batch tile (session 13: the GEMV no longer waits for the 1/rms). Lane 0 stores
// the logits into the leader block's shared memory (DSMEM); after cluster.sync() the leader runs
// one warp of top-k per batch row (router/topk.cuh).
#include <cooperative_groups.h>

#include "kernels/common/cuda_check.h"
#include "kernels/common/gemv_core.cuh"
#include "kernels/common/pdl.cuh"
#include "kernels/router/cluster_epilogue.cuh"
#include "kernels/router/params.h"
#include "kernels/router/topk.cuh"
#include "kernels/router/variants.h"

namespace gossamer::kern {
namespace {

namespace cg = cooperative_groups;
using router_detail::cluster_logits_topk;
using router_detail::write_xn_slice;

constexpr int kWarps = 8, kThreads = kWarps * 32, kMaxExperts = 128, kMaxCluster = 16;
static_assert(kThreads == router_detail::kBlockThreads, "cluster_epilogue.cuh block size");
constexpr int kMaxChunks = kWideMaxHidden / 8 / 32;    // 16-byte chunks per lane and row (12)
constexpr int kMaxF4 = kWideMaxHidden / 4 / kThreads;  // float4 of a row per thread (3)

// The sums of squares behind inv[b] = 1 / sqrt(mean(x[b, :]^2) + eps), with the fp32 operations
// of block_inv_rms<BT, 8> (gemv_core.cuh) and the rmsnorm kernel: thread t sums float4 t, t + 256,
// ... in order, warp butterfly into red[warp][b] (warp_ss_to_red); inv_from_red then adds warps
// 0..7 in order (after a barrier). Every load of a thread (all BT rows) is issued before the first
// add: one L2 round trip. v: the thread's float4 t + 256 m of each row, for the staging below.
template <int BT>
__device__ __forceinline__ void sum_sq_loads_first(const float* x, int hidden, int nb,
                                                   float4 (&v)[BT][kMaxF4], float (*red)[BT]) {
  const int n4 = hidden / 4;
#pragma unroll
  for (int b = 0; b < BT; ++b)
#pragma unroll
    for (int m = 0; m < kMaxF4; ++m) {
      const int i = threadIdx.x + m * kThreads;
      v[b][m] =
          (b < nb && i < n4)
              ? __ldg(reinterpret_cast<const float4*>(x + static_cast<size_t>(b) * hidden) + i)
              : make_float4(0.f, 0.f, 0.f, 0.f);
    }
  float ss[BT];
#pragma unroll
  for (int b = 0; b < BT; ++b) {
    ss[b] = 0.f;
#pragma unroll
    for (int m = 0; m < kMaxF4; ++m) {
      if (threadIdx.x + m * kThreads < n4) {
        const float4 q = v[b][m];
        ss[b] += q.x * q.x + q.y * q.y + q.z * q.z + q.w * q.w;
      }
    }
  }
  warp_ss_to_red<BT>(ss, red);
}

// f(b, m, i) for every float4 i = t + 256 m < hidden / 4 of the nb <= BT rows that this thread
// holds (v[b][m] of sum_sq_loads_first).
template <int BT, class F>
__device__ __forceinline__ void for_held_f4(int hidden, int nb, F f) {
  const int n4 = hidden / 4;
#pragma unroll
  for (int b = 0; b < BT; ++b) {
    if (b >= nb) continue;
#pragma unroll
    for (int m = 0; m < kMaxF4; ++m) {
      const int i = threadIdx.x + m * kThreads;
      if (i < n4) f(b, m, i);
    }
  }
}

// GEMV in the order of warp_gemv_bf16<BT, RPW, true>: chunk k = lane + 32 j ascending, per row
// b: acc += dot8(act(j, k, b), w), where act gives the 8 activations x * gain of chunk k of row
// b; then the butterfly warp sum (every lane has the totals). wr: this lane's weight chunks
// (registers). One loop for both activation sources keeps them bit-identical.
template <int BT, int RPW, class Act>
__device__ __forceinline__ void gemv_chunks(const uint4 (&wr)[RPW][kMaxChunks], int hidden, int nb,
                                            Act act, float (&acc)[RPW][BT]) {
  const int lane = threadIdx.x & 31, nch = hidden / 8;
#pragma unroll
  for (int r = 0; r < RPW; ++r)
#pragma unroll
    for (int b = 0; b < BT; ++b) acc[r][b] = 0.f;
#pragma unroll
  for (int j = 0; j < kMaxChunks; ++j) {
    const int k = lane + 32 * j;
    if (k >= nch) continue;
#pragma unroll
    for (int b = 0; b < BT; ++b) {
      if (b >= nb) continue;
      float4 x0, x1;
      act(j, k, b, x0, x1);
#pragma unroll
      for (int r = 0; r < RPW; ++r) acc[r][b] += dot8_bf16(wr[r][j], x0, x1);
    }
  }
#pragma unroll
  for (int r = 0; r < RPW; ++r)
#pragma unroll
    for (int b = 0; b < BT; ++b) acc[r][b] = warp_sum(acc[r][b]);
}

// Batch tiles of <= kStageBT rows: the activations x * gain are formed ONCE per block into
// shared memory, each thread from the float4 of x it already holds from sum_sq_loads_first
// (float4 i = t + 256 m, chunk i / 2) with its gains loaded before the wait, and every warp's GEMV
// reads them back ([2][nch] float4 halves, conflict-free LDS.128); 1/rms multiplies the dot
// products (session 13: the staging no longer waits for the block's sum of squares). Session 9:
// each of the 8 warps re-read x and re-scaled all of it (~2.6 us of the router's ~4.7; H100,
// globaltimer probe, docs/decode-budget.md); session 12: a second pass over x by chunk (~1 us)
// gave way to the registers. Larger tiles keep the per-warp path (the staged rows would not fit
// the 48 KB of static shared memory).
constexpr int kStageBT = 2, kHalf = kMaxChunks * 32;

template <int BT>
__device__ __forceinline__ void stage_xg(const float4 (&v)[BT][kMaxF4], const uint2 (&gq)[kMaxF4],
                                         int hidden, int nb, float4 (*xs)[2][kHalf]) {
  for_held_f4<BT>(hidden, nb, [&](int b, int m, int i) {
    xs[b][i & 1][i >> 1] = scale4_bf16(v[b][m], 1.f, gq[m]);  // x * 1 is exact
  });
}

// This block's share of xn = (x * inv) * gain (chunks k % csize == rank), the rmsnorm kernel's
// fp32 operations, from the registers of sum_sq_loads_first.
template <int BT>
__device__ __forceinline__ void store_xn_share(const NormRouterParams& p,
                                               const float4 (&v)[BT][kMaxF4],
                                               const uint2 (&gq)[kMaxF4], const float (&inv)[BT],
                                               int b0, int nb, int rank, int csize) {
  for_held_f4<BT>(p.hidden, nb, [&](int b, int m, int i) {
    if ((i >> 1) % csize == rank)
      reinterpret_cast<float4*>(p.xn + static_cast<size_t>(b0 + b) * p.hidden)[i] =
          scale4_bf16(v[b][m], inv[b], gq[m]);
  });
}

// Before the wait: the norm gains (per float4 of x this thread stages when kStaged, else per
// GEMV chunk of the lane) and the warp's RPW router rows from expert e0 (rows past n_experts
// load nothing), 16 bytes per chunk.
template <bool kStaged, int RPW>
__device__ __forceinline__ void load_gains_and_rows(const NormRouterParams& p, int e0, int lane,
                                                    uint2 (&gq)[kMaxF4],
                                                    uint4 (&gr)[kStaged ? 1 : kMaxChunks],
                                                    uint4 (&wr)[RPW][kMaxChunks]) {
  const int nch = p.hidden / 8;
  if constexpr (kStaged) {
#pragma unroll
    for (int m = 0; m < kMaxF4; ++m) {
      const int i = threadIdx.x + m * kThreads;
      gq[m] =
          i < p.hidden / 4 ? __ldg(reinterpret_cast<const uint2*>(p.norm_w) + i) : make_uint2(0, 0);
    }
  } else {
#pragma unroll
    for (int j = 0; j < kMaxChunks; ++j) {
      const int k = lane + 32 * j;
      gr[j] =
          k < nch ? __ldg(reinterpret_cast<const uint4*>(p.norm_w) + k) : make_uint4(0, 0, 0, 0);
    }
  }
#pragma unroll
  for (int r = 0; r < RPW; ++r) {
    const uint16_t* row = p.w + static_cast<size_t>(e0 + r) * p.hidden;
#pragma unroll
    for (int j = 0; j < kMaxChunks; ++j) {
      const int k = lane + 32 * j;
      wr[r][j] =
          (e0 + r < p.n_experts && k < nch) ? ld_stream16(row + 8 * k) : make_uint4(0, 0, 0, 0);
    }
  }
}

template <int BT, int RPW>
__global__ void __launch_bounds__(kThreads) norm_router_topk_wide(NormRouterParams p) {
  __shared__ float logit_s[BT][kMaxExperts];  // used in the leader block (rank 0)
  cg::cluster_group cluster = cg::this_cluster();
  const int rank = static_cast<int>(cluster.block_rank());
  const int csize = static_cast<int>(cluster.num_blocks());
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int b0 = blockIdx.y * BT, nb = min(BT, p.batch - b0);
  const int e0 = (rank * kWarps + warp) * RPW;  // this warp's first expert
  // Weights and norm gains into registers before the wait.
  constexpr bool kStaged = BT <= kStageBT;
  uint4 wr[RPW][kMaxChunks], gr[kStaged ? 1 : kMaxChunks];
  uint2 gq[kMaxF4];
  load_gains_and_rows<kStaged, RPW>(p, e0, lane, gq, gr, wr);
  float bias[RPW];
  router_detail::load_router_bias<RPW>(p, e0, p.n_experts - e0, bias);
  // Split cluster barrier: arrive now, wait before the first DSMEM store (every block of the
  // cluster must have started before its shared memory is written remotely).
  asm volatile("barrier.cluster.arrive.relaxed.aligned;" ::: "memory");
  pdl_wait();  // x comes from the previous kernel (O-projection + residual)
  pdl_trigger();
  const float* x = p.x + static_cast<size_t>(b0) * p.hidden;
  __shared__ float red[kWarps][BT];
  float inv[BT];
  float4 v[BT][kMaxF4];
  sum_sq_loads_first<BT>(x, p.hidden, nb, v, red);
  float acc[RPW][BT];
  if constexpr (kStaged) {
    __shared__ float4 xs[BT][2][kHalf];
    stage_xg<BT>(v, gq, p.hidden, nb, xs);
    __syncthreads();
    gemv_chunks<BT, RPW>(
        wr, p.hidden, nb,
        [&](int, int k, int b, float4& x0, float4& x1) {
          x0 = xs[b][0][k];
          x1 = xs[b][1][k];
        },
        acc);
    // After the GEMV (gate_up reads xn only after this kernel completes): 1/rms, xn share.
    inv_from_red<BT, kWarps>(red, p.hidden, p.eps, inv);
    if (p.xn) store_xn_share<BT>(p, v, gq, inv, b0, nb, rank, csize);
  } else {
    gemv_chunks<BT, RPW>(
        wr, p.hidden, nb,
        [&](int j, int k, int b, float4& x0, float4& x1) {
          const float4* xp = reinterpret_cast<const float4*>(x + static_cast<size_t>(b) * p.hidden);
          x0 = __ldg(xp + 2 * k);
          x1 = __ldg(xp + 2 * k + 1);
          scale8_bf16(x0, x1, 1.f, gr[j]);  // x * g; 1/rms multiplies the dot products below
        },
        acc);
    __syncthreads();  // red complete
    inv_from_red<BT, kWarps>(red, p.hidden, p.eps, inv);
    if (p.xn) write_xn_slice<BT>(p, x, b0, nb, inv, rank, csize);
  }
#pragma unroll
  for (int r = 0; r < RPW; ++r)
#pragma unroll
    for (int b = 0; b < BT; ++b) acc[r][b] *= inv[b];  // logit - bias = inv * dot(w, x * g)
  cluster_logits_topk<BT, RPW>(p, cluster, logit_s, acc, bias, e0, p.n_experts - e0, b0, nb);
}

template <int BT, int RPW>
Status launch_bt(const NormRouterParams& p, cudaStream_t s) {
  auto* kernel = norm_router_topk_wide<BT, RPW>;
  const int csize = (p.n_experts + kWarps * RPW - 1) / (kWarps * RPW);
  if (csize > kMaxCluster) return InvalidArgument("norm_router_topk_wide: cluster > 16");
  if (csize > 8) {
    GS_RETURN_IF_ERROR(
        cuda_status(cudaFuncSetAttribute(kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1),
                    "norm_router_topk_wide: non-portable cluster size"));
  }
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = dim3(csize, (p.batch + BT - 1) / BT);
  cfg.blockDim = dim3(kThreads);
  cfg.stream = s;
  cudaLaunchAttribute attr[2];
  attr[0].id = cudaLaunchAttributeClusterDimension;
  attr[0].val.clusterDim.x = csize;
  attr[0].val.clusterDim.y = 1;
  attr[0].val.clusterDim.z = 1;
  attr[1].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[1].val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = attr;
  cfg.numAttrs = p.pdl ? 2 : 1;
  return cuda_status(cudaLaunchKernelEx(&cfg, kernel, p), "norm_router_topk_wide");
}

template <int RPW>
Status launch_rpw(const NormRouterParams& p, cudaStream_t s) {
  if (p.batch <= 1) return launch_bt<1, RPW>(p, s);
  if (p.batch <= 2) return launch_bt<2, RPW>(p, s);
  if (p.batch <= 4) return launch_bt<4, RPW>(p, s);
  return launch_bt<8, RPW>(p, s);
}

}  // namespace

Status launch_norm_router_wide(const NormRouterParams& p, int rows_per_warp, cudaStream_t s) {
  if (p.hidden > kWideMaxHidden) {
    return InvalidArgument("norm_router_topk_wide: hidden " + std::to_string(p.hidden) + " > " +
                           std::to_string(kWideMaxHidden));
  }
  return rows_per_warp == 1 ? launch_rpw<1>(p, s) : launch_rpw<2>(p, s);
}

}  // namespace gossamer::kern

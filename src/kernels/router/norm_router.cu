// norm_router_topk<BT>: fused RMSNorm + router GEMV + top-k softmax (see params.h).
// Grid (8, ceil(batch / BT)), cluster (8, 1, 1), 256 threads = 8 warps. Block `rank` of a cluster
// owns experts [rank * E/8, (rank + 1) * E/8): warp w the 2 rows 2w, 2w + 1 of them (E <= 128).
// Before pdl_wait(): L2 prefetch of the block's router rows (weights only). After it: every block
// recomputes the BT rows' sum of squares (hidden floats each, from L2), writes its 1/8 slice of
// xn, runs the GEMV normalising the activations as it loads them (common/gemv_core.cuh: the same
// fp32 operations as rmsnorm + gemv, so the logits are bit-identical to the unfused path); lane 0
// of each warp stores its logits into the leader's shared memory through the cluster (DSMEM). After
// cluster.sync() the leader runs one warp of top-k per batch row.
#include <cooperative_groups.h>

#include "kernels/common/cuda_check.h"
#include "kernels/common/gemv_core.cuh"
#include "kernels/common/pdl.h"
#include "kernels/router/cluster_epilogue.cuh"
#include "kernels/router/params.h"
#include "kernels/router/topk.cuh"
#include "kernels/router/variants.h"

namespace gossamer::kern {
namespace {

namespace cg = cooperative_groups;
using router_detail::cluster_logits_topk;
using router_detail::write_xn_slice;

constexpr int kCluster = 8, kWarps = 8, kRpw = 2, kThreads = kWarps * 32;
static_assert(kThreads == router_detail::kBlockThreads, "cluster_epilogue.cuh block size");
constexpr int kUnroll = 2;  // 16-byte weight chunks per lane in flight (4 measured slower)
constexpr int kMaxExperts = kCluster * kWarps * kRpw;  // 128

template <int BT>
__global__ void __cluster_dims__(kCluster, 1, 1) __launch_bounds__(kThreads)
    norm_router_topk(NormRouterParams p) {
  __shared__ float logit_s[BT][kMaxExperts];  // used in the leader block (rank 0)
  cg::cluster_group cluster = cg::this_cluster();
  const int rank = static_cast<int>(cluster.block_rank());
  const int warp = threadIdx.x >> 5;
  const int rb = p.n_experts / kCluster;  // experts per block (<= 16)
  const int b0 = blockIdx.y * BT, nb = min(BT, p.batch - b0);
  const int e0 = rank * rb + warp * kRpw;  // this warp's first expert
  const bool active = warp * kRpw < rb;
  const uint16_t* rows[kRpw];
#pragma unroll
  for (int r = 0; r < kRpw; ++r)
    rows[r] = p.w + static_cast<size_t>(min(e0 + r, rank * rb + rb - 1)) * p.hidden;
  if (p.pdl && active && blockIdx.y == 0)
    warp_prefetch_rows<kRpw>(rows, p.hidden);  // weights: before the wait
  float bias[kRpw];
  router_detail::load_router_bias<kRpw>(p, e0, rb - warp * kRpw, bias);
  // Split cluster barrier: arrive now, wait before the first DSMEM store (every block of the
  // cluster must have started before its shared memory is written remotely).
  asm volatile("barrier.cluster.arrive.relaxed.aligned;" ::: "memory");
  pdl_wait();  // x comes from the previous kernel (O-projection + residual)
  pdl_trigger();
  const float* x = p.x + static_cast<size_t>(b0) * p.hidden;
  float inv[BT];
  block_inv_rms<BT, kWarps>(x, p.hidden, nb, p.eps, inv);
  if (p.xn) write_xn_slice<BT>(p, x, b0, nb, inv, rank, kCluster);  // this block's 1/8 of xn
  float acc[kRpw][BT] = {};
  if (active) warp_gemv_bf16<BT, kRpw, true, kUnroll>(rows, p.hidden, x, nb, acc, p.norm_w, inv);
  // Rows of this warp inside the block's expert range (<= 0 for inactive warps).
  cluster_logits_topk<BT, kRpw>(p, cluster, logit_s, acc, bias, e0, rb - warp * kRpw, b0, nb);
}

template <int BT>
Status launch_bt(const NormRouterParams& p, cudaStream_t s) {
  const dim3 grid(kCluster, (p.batch + BT - 1) / BT);
  return launch_pdl(p.pdl, "norm_router_topk", norm_router_topk<BT>, grid, dim3(kThreads), 0, s, p);
}

}  // namespace

Status launch_norm_router_cluster8(const NormRouterParams& p, cudaStream_t s) {
  if (p.batch <= 1) return launch_bt<1>(p, s);
  if (p.batch <= 2) return launch_bt<2>(p, s);
  if (p.batch <= 4) return launch_bt<4>(p, s);
  return launch_bt<8>(p, s);
}

namespace {

// variant 0 (auto) -> 1, 2 or 3. H100 router_bench (docs/decode-overhead.md): the wide kernel
// with one row per warp is the fastest except for 128 experts at large batches, where the
// cluster-8 kernel (2 rows per warp share the activation loads) wins.
int resolve_variant(const NormRouterParams& p) {
  if (p.variant != 0) return p.variant;
  if (p.hidden > kWideMaxHidden) return 1;
  return p.n_experts > 64 && p.batch > 16 ? 1 : 2;
}

}  // namespace

const char* norm_router_variant(const NormRouterParams& p) {
  return resolve_variant(p) >= 2 ? "norm_router_topk_wide" : "norm_router_topk";
}

Status launch_norm_router_topk(const NormRouterParams& p, cudaStream_t s) {
  GS_RETURN_IF_ERROR(p.validate());
  const int v = resolve_variant(p);
  if (v == 1) return launch_norm_router_cluster8(p, s);
  return launch_norm_router_wide(p, v == 3 ? 2 : 1, s);
}

}  // namespace gossamer::kern

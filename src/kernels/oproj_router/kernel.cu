// oproj_router_bulk_bf16w_f32a: batch-1 O-projection + residual, then RMSNorm + router GEMV +
// top-k softmax of the MoE block, in one kernel (params.h says what it computes and why).
//
// Grid: one block per SM (at most `hidden`), block b owns the rows h in [b H / G, (b + 1) H / G).
// 288 threads: warps 0..7 consume, warp 8 lane 0 produces. Phases of a block:
//   1. before pdl_wait (weights only, common/pdl.h rule 1): the producer streams the block's wo
//      rows into a shared-memory ring (common/bulk_gemv.cuh, as gemv_bulk_bf16w_f32a); the
//      consumers load the router columns of the block's rows times the norm gain,
//      wg[j][e] = wr[e, h0 + j] * norm_w[h0 + j] (a bf16 x bf16 product: exact in f32).
//   2. after the wait: attn staged in shared memory; each row's dot (per-lane chunk order and
//      butterfly of warp_gemv_bf16); y = x[h] + (dot + bo[h]) goes to x and to ys[j].
//   3. shares: thread e < E: part[b][e] = sum_j wg[j][e] * ys[j] (j ascending); thread 128:
//      part[b][E] = sum_j ys[j]^2 (rows of S = pad4(E + 1) floats). Fence, one atomicAdd on the
//      ticket.
//   4. the block that draws the last ticket: one bulk copy brings all G x S shares into shared
//      memory (one L2 round trip; reading them thread by thread from L2 cost ~10 us), then
//      s_e = sum_b part[b][e] and ss = sum_b part[b][E] in block order, inv = rsqrt(ss / H +
//      eps), logits[e] = inv * s_e + br[e]; warp 0: top-k softmax (router/topk.cuh); all:
//      xn = (x * inv) * norm_w; ticket := 0.
// Other blocks exit after phase 3, so the next kernel's blocks (PDL) take their SMs early.
#include <algorithm>

#include "kernels/common/bulk_gemv.cuh"
#include "kernels/common/cuda_check.h"
#include "kernels/common/pdl.h"
#include "kernels/gemv/params.h"
#include "kernels/oproj_router/params.h"
#include "kernels/router/topk.cuh"

namespace gossamer::kern {
namespace {

constexpr int kConsumers = 8, kThreads = (kConsumers + 1) * 32, kConsumerBar = 1;
constexpr int kCThreads = kConsumers * 32, kSsThread = kOprojRouterMaxExperts;
constexpr int kMaxSmem = 227 * 1024;
static_assert(kSsThread < kCThreads, "the sum-of-squares thread is a consumer");

struct Layout {
  int slots, row_bytes, max_rows;
  int x_off;                  // attn staged as [2][qdim / 8] float4
  int y_off;                  // ys [max_rows] f32
  int wg_off;                 // wg [max_rows][n_experts] f32
  int part_off, part_stride;  // all blocks' shares [G][S] f32 (the last block), S = pad4(E + 1)
  int bar_off, smem;          // full[slots], empty[slots], tail barrier
};

// Phase 4 (last block): block-order sums of the shares, logits, top-k, xn.
__device__ void router_tail(const OprojRouterParams& p, const Layout& L, uint8_t* smem,
                            uint64_t* tail_bar, float* logit_s, float* inv_s) {
  const int t = threadIdx.x, E = p.n_experts, G = gridDim.x, S = L.part_stride;
  float* shares = reinterpret_cast<float*>(smem + L.part_off);  // [G][S]
  if (t == 0) {
    // The shares were written by other blocks' generic stores (fenced before their tickets):
    // order them before this thread's async-proxy (bulk copy) read.
    asm volatile("fence.proxy.async.global;" ::: "memory");
    const uint32_t bytes = static_cast<uint32_t>(G) * S * 4;
    bulk_copy::mbar_arrive_expect_tx(tail_bar, bytes);
    bulk_copy::bulk_g2s(shares, p.part, bytes, tail_bar);
  }
  bulk_copy::mbar_wait(tail_bar, 0);
  if (t < E || t == kSsThread) {
    const int col = t < E ? t : E;
    float acc = 0.f;
#pragma unroll 8
    for (int b = 0; b < G; ++b) acc += shares[b * S + col];
    if (t < E)
      logit_s[t] = acc;
    else
      *inv_s = rsqrtf(acc / static_cast<float>(p.hidden) + p.eps);
  }
  bulk_copy::named_sync(kConsumerBar, kCThreads);
  const float inv = *inv_s;
  if (t < E) {
    const float v = inv * logit_s[t] + (p.br ? p.br[t] : 0.f);
    logit_s[t] = v;
    if (p.logits) p.logits[t] = v;
  }
  bulk_copy::named_sync(kConsumerBar, kCThreads);
  if (t < 32) warp_topk_softmax(logit_s, E, p.k, p.ids, p.weights);
  const uint2* g = reinterpret_cast<const uint2*>(p.norm_w);
  for (int i = t; i < p.hidden / 4; i += kCThreads) {
    const float4 v = __ldcg(reinterpret_cast<const float4*>(p.x) + i);
    const uint2 gg = __ldg(g + i);
    reinterpret_cast<float4*>(p.xn)[i] =
        make_float4(v.x * inv * bf16_lo(gg.x), v.y * inv * bf16_hi(gg.x), v.z * inv * bf16_lo(gg.y),
                    v.w * inv * bf16_hi(gg.y));
  }
  if (t == 0) *p.ticket = 0u;  // every block has drawn its ticket: ready for the next launch
}

// wg[j][e] = wr[e, r0 + j] * norm_w[r0 + j] for the block's n rows. kBatch loads per thread are
// issued before the first store (one memory round trip per batch, not per element).
__device__ __forceinline__ void load_router_columns(const OprojRouterParams& p, int r0, int n,
                                                    float* wg) {
  constexpr int kBatch = 16;
  const int E = p.n_experts, total = n * E;
  for (int base = threadIdx.x; base < total; base += kBatch * kCThreads) {
    uint16_t w[kBatch], g[kBatch];
#pragma unroll
    for (int u = 0; u < kBatch; ++u) {
      const int i = base + u * kCThreads, j = i / E, e = i - j * E;
      w[u] = i < total ? __ldg(p.wr + static_cast<size_t>(e) * p.hidden + r0 + j) : 0;
      g[u] = i < total ? __ldg(p.norm_w + r0 + j) : 0;
    }
#pragma unroll
    for (int u = 0; u < kBatch; ++u) {
      const int i = base + u * kCThreads;
      if (i < total) wg[i] = bf16_lo(w[u]) * bf16_lo(g[u]);
    }
  }
}

__global__ void __launch_bounds__(kThreads, 1)
    oproj_router_bulk_bf16w_f32a(OprojRouterParams p, Layout L) {
  extern __shared__ __align__(128) uint8_t smem[];
  __shared__ float logit_s[kOprojRouterMaxExperts], inv_s;
  __shared__ int last_s;
  uint64_t* full = reinterpret_cast<uint64_t*>(smem + L.bar_off);
  uint64_t* tail_bar = full + 2 * L.slots;
  const bulk_gemv::Ring ring{smem, full, full + L.slots, L.slots, L.row_bytes};
  float4* xs = reinterpret_cast<float4*>(smem + L.x_off);  // [2][nch]
  float* ys = reinterpret_cast<float*>(smem + L.y_off);    // [n]
  float* wg = reinterpret_cast<float*>(smem + L.wg_off);   // [n][E]
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, nch = p.qdim / 8, E = p.n_experts;
  const int r0 = static_cast<int>(static_cast<long long>(blockIdx.x) * p.hidden / gridDim.x);
  const int n =
      static_cast<int>(static_cast<long long>(blockIdx.x + 1) * p.hidden / gridDim.x) - r0;
  if (threadIdx.x == 0) {
    bulk_copy::mbar_init(tail_bar, 1);
    bulk_gemv::ring_init(ring);  // (its fence covers the tail barrier too)
  }
  __syncthreads();
  if (warp == kConsumers) {  // producer: weights only, so it never waits for the predecessor
    if (lane == 0) {
      bulk_gemv::ring_produce(ring, n,
                              [&](int j) { return p.wo + static_cast<size_t>(r0 + j) * p.qdim; });
    }
    return;
  }
  load_router_columns(p, r0, n, wg);  // weights and gains only: before the wait
  pdl_wait();                         // attn and x come from earlier kernels
  pdl_trigger();
  for (int c = threadIdx.x; c < nch; c += kCThreads) {
    const float4* src = reinterpret_cast<const float4*>(p.attn) + 2 * c;
    xs[c] = __ldg(src);
    xs[nch + c] = __ldg(src + 1);
  }
  bulk_copy::named_sync(kConsumerBar, kCThreads);
  bulk_gemv::ring_consume<kConsumers>(ring, n, xs, nch, warp, [&](int j, float dot) {
    const int row = r0 + j;
    const float y = p.x[row] + (dot + (p.bo ? p.bo[row] : 0.f));
    p.x[row] = y;
    ys[j] = y;
  });
  bulk_copy::named_sync(kConsumerBar, kCThreads);
  const int t = threadIdx.x;
  if (t < E || t == kSsThread) {
    float acc = 0.f;
    for (int j = 0; j < n; ++j) acc += t < E ? wg[j * E + t] * ys[j] : ys[j] * ys[j];
    p.part[static_cast<size_t>(blockIdx.x) * L.part_stride + (t < E ? t : E)] = acc;
  }
  __threadfence();  // this block's x rows and shares are visible before its ticket
  bulk_copy::named_sync(kConsumerBar, kCThreads);
  if (t == 0) last_s = atomicAdd(p.ticket, 1u) == gridDim.x - 1;
  bulk_copy::named_sync(kConsumerBar, kCThreads);
  if (!last_s) return;
  __threadfence();  // acquire side: the other blocks' rows and shares
  router_tail(p, L, smem, tail_bar, logit_s, &inv_s);
}

Result<Layout> make_layout(const OprojRouterParams& p, int grid) {
  Layout L{};
  L.row_bytes = 2 * p.qdim;
  L.max_rows = (p.hidden + grid - 1) / grid;
  L.part_stride = static_cast<int>(oproj_router_scratch_floats(1, p.n_experts));
  const int x_bytes = 4 * p.qdim, y_bytes = 4 * L.max_rows, wg_bytes = 4 * L.max_rows * p.n_experts;
  const int part_bytes = 4 * grid * L.part_stride;
  GS_ASSIGN_OR_RETURN(
      L.slots, bulk_gemv::ring_slots("oproj_router", L.row_bytes, L.max_rows,
                                     p.ring_bytes > 0 ? p.ring_bytes : kGemvBulkRingBytes,
                                     kMaxSmem - x_bytes - y_bytes - wg_bytes - part_bytes - 2048));
  L.x_off = L.slots * L.row_bytes;
  L.y_off = L.x_off + x_bytes;
  L.wg_off = L.y_off + y_bytes;
  L.part_off = (L.wg_off + wg_bytes + 127) / 128 * 128;
  L.bar_off = L.part_off + part_bytes;  // a multiple of 16
  L.smem = L.bar_off + 16 * L.slots + 8;
  return L;
}

}  // namespace

Result<int> oproj_router_grid(int hidden) {
  GS_ASSIGN_OR_RETURN(const int sms, bulk_copy::sm_count());
  return std::min(hidden, sms);
}

bool oproj_router_supported(const OprojRouterParams& p) {
  return p.validate().ok() && bulk_copy::device_is_sm90();
}

Status launch_oproj_router(const OprojRouterParams& p, cudaStream_t s) {
  GS_RETURN_IF_ERROR(p.validate());
  if (!bulk_copy::device_is_sm90()) return InvalidArgument("oproj_router: needs an sm_90 GPU");
  GS_ASSIGN_OR_RETURN(const int grid, oproj_router_grid(p.hidden));
  GS_ASSIGN_OR_RETURN(const Layout L, make_layout(p, grid));
  GS_CUDA_RETURN(cudaFuncSetAttribute(oproj_router_bulk_bf16w_f32a,
                                      cudaFuncAttributeMaxDynamicSharedMemorySize, L.smem));
  return launch_pdl(p.pdl, "oproj_router_bulk_bf16w_f32a", oproj_router_bulk_bf16w_f32a, dim3(grid),
                    dim3(kThreads), static_cast<size_t>(L.smem), s, p, L);
}

}  // namespace gossamer::kern

// oproj_router<BT> (oproj_router.h): O-projection GEMV + residual add, grid barrier, RMSNorm +
// router GEMV, last-block top-k softmax, in one kernel.
//
// Grid (ceil(hidden / 16)), 256 threads = 8 warps, each warp 2 O rows (the gemv_bf16w_f32a
// layout and GEMV core: the O output is bit-identical to launch_gemv). Block b also owns the
// router rows e = b + m * grid (m < rpb = ceil(E / grid), warp m computes row m): they and the
// norm gain are copied into dynamic shared memory with cp.async BEFORE pdl_wait() (weights, rule
// 1 of pdl.h). Sequence per block:
//   1. router rows + gain -> smem (async); L2 prefetch of the O rows; pdl_wait()
//   2. O rows: x[b, r] += W_o attn + bo (lane 0 of each warp)
//   3. grid barrier (arrival counter + generation word in `sync`; the last arriving block resets
//      the counter and bumps the generation, so the buffer is reusable by the next launch and by
//      graph replays without any host reset)
//   4. pdl_trigger(): only now, so the next kernel cannot occupy SMs while blocks of this grid
//      still wait to be scheduled (all blocks are resident once every block has arrived)
//   5. 1/rms of the final rows (all blocks redundantly, L2 reads), this block's slice of xn,
//      the router rows' logits (chunk order of warp_gemv_bf16, butterfly sum, + bias)
//   6. ticket: the last block to finish its logits resets the ticket and runs one warp of
//      top-k softmax per batch row (router/topk.cuh) on the logits read back from L2.
// Reads of data written by other blocks of this grid (x after the barrier, logits in the last
// block) use ld.global.cg (L2): the non-coherent __ldg path is not allowed there.
#include <string>

#include "kernels/common/cuda_check.h"
#include "kernels/common/gemv_core.cuh"
#include "kernels/common/pdl.cuh"
#include "kernels/common/pdl.h"
#include "kernels/router/oproj_router.h"
#include "kernels/router/topk.cuh"

namespace gossamer::kern {
namespace {

constexpr int kWarps = 8, kThreads = kWarps * 32, kRpw = 2, kRowsPerBlock = kWarps * kRpw;
constexpr int kMaxF4 = 4;  // float4 of a row per thread: hidden <= 4096
constexpr int kMaxHidden = kThreads * kMaxF4 * 4, kMaxExperts = 256;
constexpr int kMaxRouterRowsPerBlock = kWarps;
// sync words: 0 arrival counter, 1 generation, 2 logits ticket.
constexpr int kArrive = 0, kGen = 1, kTicket = 2;

__device__ __forceinline__ void cp_async16(void* smem, const void* g) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(
                   static_cast<uint32_t>(__cvta_generic_to_shared(smem))),
               "l"(g)
               : "memory");
}

// Grid-wide barrier of `nblocks` co-resident blocks (see the file comment, step 3).
__device__ __forceinline__ void grid_barrier(unsigned* sync, unsigned nblocks) {
  __syncthreads();
  if (threadIdx.x == 0) {
    volatile unsigned* gen = sync + kGen;
    const unsigned g = *gen;  // cannot advance before this block arrives
    __threadfence();          // this block's writes (ordered by __syncthreads) before the arrival
    if (atomicAdd(sync + kArrive, 1u) == nblocks - 1) {
      atomicExch(sync + kArrive, 0u);
      __threadfence();
      atomicAdd(sync + kGen, 1u);
    } else {
      while (*gen == g) __nanosleep(32);
    }
    __threadfence();
  }
  __syncthreads();
}

// inv[b] = 1 / sqrt(mean(x[b, :]^2) + eps): thread t sums float4 t, t + 256, ... in order, warp
// butterfly, warps 0..7 in order (the fp32 operations of the rmsnorm kernel). L2 loads.
template <int BT>
__device__ __forceinline__ void inv_rms_l2(const float* x, int hidden, int nb, float eps,
                                           float (&inv)[BT]) {
  __shared__ float red[kWarps][BT];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, n4 = hidden / 4;
  float4 v[BT][kMaxF4];
#pragma unroll
  for (int b = 0; b < BT; ++b)
#pragma unroll
    for (int m = 0; m < kMaxF4; ++m) {
      const int i = threadIdx.x + m * kThreads;
      v[b][m] =
          (b < nb && i < n4)
              ? __ldcg(reinterpret_cast<const float4*>(x + static_cast<size_t>(b) * hidden) + i)
              : make_float4(0.f, 0.f, 0.f, 0.f);
    }
#pragma unroll
  for (int b = 0; b < BT; ++b) {
    float ss = 0.f;
#pragma unroll
    for (int m = 0; m < kMaxF4; ++m) {
      if (threadIdx.x + m * kThreads < n4) {
        const float4 q = v[b][m];
        ss += q.x * q.x + q.y * q.y + q.z * q.z + q.w * q.w;
      }
    }
    ss = warp_sum(ss);
    if (lane == 0) red[warp][b] = ss;
  }
  __syncthreads();
#pragma unroll
  for (int b = 0; b < BT; ++b) {
    float t = 0.f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) t += red[w][b];
    inv[b] = rsqrtf(t / static_cast<float>(hidden) + eps);
  }
}

// Step 5: this block's slice of xn (float4 blockIdx.x * 256 + t, + grid * 256, ...) and the
// logits of its router rows (warp m: row blockIdx.x + m * grid; weights and gain in smem).
template <int BT>
__device__ __forceinline__ void norm_and_router(const OprojRouterParams& p, const uint4* rw_s,
                                                const uint4* g_s, int nb, const float (&inv)[BT]) {
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, n4 = p.hidden / 4;
  const int nch = p.hidden / 8, G = static_cast<int>(gridDim.x);
  const uint2* g2 = reinterpret_cast<const uint2*>(g_s);
  for (int b = 0; b < nb; ++b) {
    const float4* xr = reinterpret_cast<const float4*>(p.x + static_cast<size_t>(b) * p.hidden);
    float4* yr = reinterpret_cast<float4*>(p.xn + static_cast<size_t>(b) * p.hidden);
    for (int i = blockIdx.x * kThreads + threadIdx.x; i < n4; i += G * kThreads) {
      const float4 v = __ldcg(xr + i);
      const uint2 gg = g2[i];
      const float s = inv[b];
      yr[i] = make_float4(v.x * s * bf16_lo(gg.x), v.y * s * bf16_hi(gg.x), v.z * s * bf16_lo(gg.y),
                          v.w * s * bf16_hi(gg.y));
    }
  }
  const int e = blockIdx.x + warp * G;
  if (e >= p.n_experts) return;
  const uint4* wrow = rw_s + static_cast<size_t>(warp) * nch;
  float acc[BT];
#pragma unroll
  for (int b = 0; b < BT; ++b) acc[b] = 0.f;
  for (int k = lane; k < nch; k += 32) {  // the chunk order of warp_gemv_bf16
    const uint4 w = wrow[k], g = g_s[k];
#pragma unroll
    for (int b = 0; b < BT; ++b) {
      if (b < nb) {
        const float4* xp =
            reinterpret_cast<const float4*>(p.x + static_cast<size_t>(b) * p.hidden + 8 * k);
        float4 x0 = __ldcg(xp), x1 = __ldcg(xp + 1);
        scale8_bf16(x0, x1, inv[b], g);
        acc[b] += dot8_bf16(w, x0, x1);
      }
    }
  }
#pragma unroll
  for (int b = 0; b < BT; ++b) acc[b] = warp_sum(acc[b]);
  if (lane != 0) return;
  const float bias = p.router_b ? p.router_b[e] : 0.f;
  for (int b = 0; b < nb; ++b) p.logits[static_cast<size_t>(b) * p.n_experts + e] = acc[b] + bias;
}

// Step 6: the last block to arrive runs the top-k of every batch row.
template <int BT>
__device__ __forceinline__ void last_block_topk(const OprojRouterParams& p, int nb) {
  __shared__ float lg[BT][kMaxExperts];
  __shared__ int is_last;
  __syncthreads();
  if (threadIdx.x == 0) {
    __threadfence();
    is_last = atomicAdd(p.sync + kTicket, 1u) == gridDim.x - 1;
    if (is_last) atomicExch(p.sync + kTicket, 0u);
    __threadfence();
  }
  __syncthreads();
  if (!is_last) return;
  for (int i = threadIdx.x; i < nb * p.n_experts; i += kThreads)
    lg[i / p.n_experts][i % p.n_experts] = __ldcg(p.logits + i);
  __syncthreads();
  const int warp = threadIdx.x >> 5;
  if (warp >= nb) return;
  const size_t o = static_cast<size_t>(warp) * p.k;
  warp_topk_softmax(&lg[warp][0], p.n_experts, p.k, p.ids + o, p.weights + o);
}

template <int BT>
__global__ void __launch_bounds__(kThreads, 2) oproj_router(OprojRouterParams p, bool prefetch) {
  extern __shared__ uint4 smem[];  // [rpb, hidden / 8] router rows, then [hidden / 8] gain
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, G = static_cast<int>(gridDim.x);
  const int nch = p.hidden / 8, nb = min(BT, p.batch);
  const int rpb = (p.n_experts + G - 1) / G;
  uint4* g_s = smem + static_cast<size_t>(rpb) * nch;
  for (int m = 0; m < rpb; ++m) {  // 1. weights only before the wait
    const int e = blockIdx.x + m * G;
    if (e >= p.n_experts) break;
    for (int i = threadIdx.x; i < nch; i += kThreads)
      cp_async16(smem + static_cast<size_t>(m) * nch + i,
                 p.router_w + static_cast<size_t>(e) * p.hidden + 8 * i);
  }
  for (int i = threadIdx.x; i < nch; i += kThreads) cp_async16(g_s + i, p.norm_w + 8 * i);
  asm volatile("cp.async.commit_group;" ::: "memory");
  const int r0 = blockIdx.x * kRowsPerBlock + warp * kRpw;
  const uint16_t* rows[kRpw];
#pragma unroll
  for (int r = 0; r < kRpw; ++r)
    rows[r] = p.wo + static_cast<size_t>(min(r0 + r, p.hidden - 1)) * p.qd;  // clamp: discarded
  if (prefetch) warp_prefetch_rows<kRpw>(rows, p.qd);
  pdl_wait();           // attn and x come from earlier kernels
  float acc[kRpw][BT];  // 2. O rows, as gemv_bf16w_f32a with accumulate
  warp_gemv_bf16<BT, kRpw>(rows, p.qd, p.attn, nb, acc);
  if (lane == 0) {
#pragma unroll
    for (int r = 0; r < kRpw; ++r) {
      const int row = r0 + r;
      if (row >= p.hidden) continue;
      const float bias = p.bo ? p.bo[row] : 0.f;
#pragma unroll
      for (int b = 0; b < BT; ++b) {
        if (b >= nb) continue;
        float* dst = p.x + static_cast<size_t>(b) * p.hidden + row;
        *dst = *dst + (acc[r][b] + bias);
      }
    }
  }
  grid_barrier(p.sync, gridDim.x);  // 3.
  pdl_trigger();                    // 4.
  asm volatile("cp.async.wait_all;" ::: "memory");
  __syncthreads();
  float inv[BT];  // 5.
  inv_rms_l2<BT>(p.x, p.hidden, nb, p.eps, inv);
  norm_and_router<BT>(p, smem, g_s, nb, inv);
  last_block_topk<BT>(p, nb);  // 6.
}

int grid_blocks(const OprojRouterParams& p) {
  return (p.hidden + kRowsPerBlock - 1) / kRowsPerBlock;
}

size_t smem_bytes(const OprojRouterParams& p) {
  const int G = grid_blocks(p), rpb = (p.n_experts + G - 1) / G;
  return static_cast<size_t>(rpb + 1) * p.hidden * sizeof(uint16_t);
}

template <int BT>
Result<bool> fits_bt(const OprojRouterParams& p) {
  const size_t smem = smem_bytes(p);
  GS_CUDA_RETURN(cudaFuncSetAttribute(oproj_router<BT>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                      static_cast<int>(smem)));
  int dev = 0, sms = 0, per_sm = 0;
  GS_CUDA_RETURN(cudaGetDevice(&dev));
  GS_CUDA_RETURN(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  GS_CUDA_RETURN(
      cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, oproj_router<BT>, kThreads, smem));
  return static_cast<int64_t>(per_sm) * sms >= grid_blocks(p);
}

Result<bool> fits(const OprojRouterParams& p) {
  if (p.batch <= 1) return fits_bt<1>(p);
  if (p.batch <= 2) return fits_bt<2>(p);
  return fits_bt<4>(p);
}

template <int BT>
Status launch_bt(const OprojRouterParams& p, cudaStream_t s) {
  const dim3 grid(grid_blocks(p));
  // O-proj weight prefetch as in launch_gemv (one wave: the hints are useful with PDL only).
  return launch_pdl(p.pdl, "oproj_router", oproj_router<BT>, grid, dim3(kThreads), smem_bytes(p), s,
                    p, p.pdl);
}

}  // namespace

Status OprojRouterParams::validate() const {
  if (!wo || !attn || !x || !norm_w || !router_w || !xn || !logits || !ids || !weights || !sync)
    return InvalidArgument(
        "oproj_router: null pointer (wo, attn, x, norm_w, router_w, xn, "
        "logits, ids, weights and sync are required)");
  if (batch < 1 || batch > kOprojRouterMaxBatch)
    return InvalidArgument("oproj_router: batch " + std::to_string(batch) + " not in 1.." +
                           std::to_string(kOprojRouterMaxBatch));
  if (hidden < 8 || hidden % 8 != 0 || hidden > kMaxHidden)
    return InvalidArgument("oproj_router: hidden " + std::to_string(hidden) +
                           " must be a multiple of 8 in 8.." + std::to_string(kMaxHidden));
  if (qd < 8 || qd % 8 != 0)
    return InvalidArgument("oproj_router: qd " + std::to_string(qd) + " must be a multiple of 8");
  if (n_experts < 1 || n_experts > kMaxExperts)
    return InvalidArgument("oproj_router: n_experts " + std::to_string(n_experts) +
                           " not in 1..256");
  if (k < 1 || k > kTopkMaxK || k > n_experts)
    return InvalidArgument("oproj_router: k " + std::to_string(k) + " not in 1..min(8, E)");
  const int G = grid_blocks(*this);
  if ((n_experts + G - 1) / G > kMaxRouterRowsPerBlock)
    return InvalidArgument("oproj_router: more than 8 router rows per block (E " +
                           std::to_string(n_experts) + ", hidden " + std::to_string(hidden) + ")");
  const auto misaligned = [](const void* q) { return reinterpret_cast<uintptr_t>(q) % 16 != 0; };
  if (misaligned(wo) || misaligned(attn) || misaligned(x) || misaligned(norm_w) ||
      misaligned(router_w) || misaligned(xn))
    return InvalidArgument(
        "oproj_router: wo, attn, x, norm_w, router_w and xn must be 16-byte "
        "aligned");
  return Status::Ok();
}

Result<bool> oproj_router_supported(const OprojRouterParams& p) {
  if (!p.validate().ok()) return false;
  return fits(p);
}

Status launch_oproj_router(const OprojRouterParams& p, cudaStream_t s) {
  GS_RETURN_IF_ERROR(p.validate());
  GS_ASSIGN_OR_RETURN(const bool ok, fits(p));
  if (!ok) {
    return InvalidArgument("oproj_router: the grid of " + std::to_string(grid_blocks(p)) +
                           " blocks is not co-resident on this device (grid barrier)");
  }
  if (p.batch <= 1) return launch_bt<1>(p, s);
  if (p.batch <= 2) return launch_bt<2>(p, s);
  return launch_bt<4>(p, s);
}

}  // namespace gossamer::kern

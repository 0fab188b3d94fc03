// gemv_chain_probe_bf16w_f32a: the persistent-kernel probe of chain_probe.h.
//
// Grid: one block per SM, 288 threads: warps 0..7 consume, warp 8 lane 0 produces. Step m's rows
// are split evenly over the blocks as in gemv_bulk_bf16w_f32a (block b: [b R / G, (b+1) R / G)).
// The block's rows of all steps form one sequence j = 0, 1, ... (step by step); row j goes to
// ring slot j % slots, owned by consumer warp slot % 8 (the parity rule of common/bulk_gemv.cuh).
// The producer never waits for data, only for free slots, so it streams step m + 1's rows while
// the consumers still wait for step m's input. Step m's consumers: thread 0 spins until
// counters[m] == G (every block finished step m - 1; step 0 starts at once), the block stages
// x_m from act[m & 1] (ld.global.cg: written by other blocks of this grid), reduces its rows
// (same per-lane order as the bulk GEMV: results bit-identical), writes y into act[(m + 1) & 1],
// fences, and thread 0 adds 1 to counters[m + 1]. One block per SM and every block resident
// (checked at launch), so the spin cannot deadlock.
#include <algorithm>
#include <string>

#include "kernels/common/bulk_gemv.cuh"
#include "kernels/common/cuda_check.h"
#include "kernels/gemv/chain_probe.h"
#include "kernels/gemv/params.h"

namespace gossamer::kern {
namespace {

constexpr int kConsumers = 8, kThreads = (kConsumers + 1) * 32, kConsumerBar = 1;

struct Steps {
  const uint16_t* w[kChainProbeMaxSteps];
  int rows[kChainProbeMaxSteps], cols[kChainProbeMaxSteps];
  int n;
};

__device__ __forceinline__ int2 block_rows(int rows) {  // (first row, count) of this block
  const int r0 = static_cast<int>(static_cast<long long>(blockIdx.x) * rows / gridDim.x);
  return {r0, static_cast<int>(static_cast<long long>(blockIdx.x + 1) * rows / gridDim.x) - r0};
}

__device__ void produce(const bulk_gemv::Ring& r, const Steps& S) {
  int j = 0;
  for (int m = 0; m < S.n; ++m) {
    const int2 br = block_rows(S.rows[m]);
    const uint32_t bytes = 2u * S.cols[m];
    for (int i = 0; i < br.y; ++i, ++j) {
      const int s = j % r.slots;
      if (j >= r.slots) bulk_copy::mbar_wait(r.empty + s, ((j / r.slots) - 1) & 1);
      bulk_copy::mbar_arrive_expect_tx(r.full + s, bytes);
      bulk_copy::bulk_g2s(r.smem + static_cast<size_t>(s) * r.row_bytes,
                          S.w[m] + static_cast<size_t>(br.x + i) * S.cols[m], bytes, r.full + s);
    }
  }
}

__device__ void wait_counter(const unsigned* c, unsigned target) {
  unsigned v;
  do {
    asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(c) : "memory");
  } while (v < target);
}

__global__ void __launch_bounds__(kThreads, 1)
    gemv_chain_probe_bf16w_f32a(Steps S, float* act, int act_len, unsigned* counters, int slots,
                                int row_bytes) {
  extern __shared__ __align__(128) uint8_t smem[];
  uint64_t* full = reinterpret_cast<uint64_t*>(smem + static_cast<size_t>(slots) * row_bytes);
  const bulk_gemv::Ring ring{smem, full, full + slots, slots, row_bytes};
  float4* xs = reinterpret_cast<float4*>(full + 2 * slots);  // [2][nch]
  const int warp = threadIdx.x >> 5;
  if (threadIdx.x == 0) bulk_gemv::ring_init(ring);
  __syncthreads();
  if (warp == kConsumers) {
    if ((threadIdx.x & 31) == 0) produce(ring, S);
    return;
  }
  int j0 = 0;
  for (int m = 0; m < S.n; ++m) {
    const int2 br = block_rows(S.rows[m]);
    const int nch = S.cols[m] / 8;
    if (m > 0 && threadIdx.x == 0) wait_counter(counters + m, gridDim.x);
    bulk_copy::named_sync(kConsumerBar, kConsumers * 32);
    const float* x = act + static_cast<size_t>(m & 1) * act_len;
    float* y = act + static_cast<size_t>((m + 1) & 1) * act_len;
    for (int c = threadIdx.x; c < nch; c += kConsumers * 32) {
      const float4* src = reinterpret_cast<const float4*>(x) + 2 * c;
      xs[c] = __ldcg(src);
      xs[nch + c] = __ldcg(src + 1);
    }
    bulk_copy::named_sync(kConsumerBar, kConsumers * 32);
    // Rows j0 .. j0 + n - 1 of the block's sequence (ring_consume's loop with an offset).
    for (int i = 0; i < br.y; ++i) {
      const int j = j0 + i, s = j % slots;
      if (s % kConsumers != warp) continue;
      bulk_copy::mbar_wait(ring.full + s, (j / slots) & 1);
      const uint4* wr = reinterpret_cast<const uint4*>(smem + static_cast<size_t>(s) * row_bytes);
      float acc = 0.f;
      const int lane = threadIdx.x & 31;
#pragma unroll 8
      for (int k = lane; k < nch; k += 32) acc += dot8_bf16(wr[k], xs[k], xs[nch + k]);
      bulk_copy::mbar_arrive(ring.empty + s);
      acc = warp_sum(acc);
      if (lane == 0) y[br.x + i] = acc;
    }
    j0 += br.y;
    __threadfence();
    bulk_copy::named_sync(kConsumerBar, kConsumers * 32);  // xs is reused by the next step
    if (threadIdx.x == 0) atomicAdd(counters + m + 1, 1u);
  }
}

}  // namespace

Status GemvChainProbe::validate() const {
  if (!w || !rows || !cols || !act || !counters || steps <= 0 || steps > kChainProbeMaxSteps) {
    return InvalidArgument("gemv_chain_probe: null arrays or steps outside 1..64");
  }
  for (int m = 0; m < steps; ++m) {
    if (rows[m] <= 0 || cols[m] <= 0 || cols[m] % 8 != 0 || rows[m] > act_len ||
        cols[m] > act_len || (m > 0 && cols[m] > rows[m - 1])) {
      return InvalidArgument("gemv_chain_probe: step " + std::to_string(m) +
                             " needs cols % 8 == 0, rows / cols <= act_len and cols <= the "
                             "previous step's rows");
    }
  }
  return Status::Ok();
}

Status launch_gemv_chain_probe(const GemvChainProbe& p, cudaStream_t s) {
  GS_RETURN_IF_ERROR(p.validate());
  Steps S{};
  S.n = p.steps;
  int max_cols = 0;
  for (int m = 0; m < p.steps; ++m) {
    S.w[m] = p.w[m], S.rows[m] = p.rows[m], S.cols[m] = p.cols[m];
    max_cols = std::max(max_cols, p.cols[m]);
  }
  GS_ASSIGN_OR_RETURN(const int sms, bulk_copy::sm_count());
  const int row_bytes = 2 * max_cols, slots = std::max(2, p.ring_bytes / row_bytes);
  const size_t smem = static_cast<size_t>(slots) * row_bytes + 16 * slots + 4 * max_cols;
  GS_CUDA_RETURN(cudaFuncSetAttribute(gemv_chain_probe_bf16w_f32a,
                                      cudaFuncAttributeMaxDynamicSharedMemorySize,
                                      static_cast<int>(smem)));
  int per_sm = 0;
  GS_CUDA_RETURN(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, gemv_chain_probe_bf16w_f32a,
                                                               kThreads, smem));
  if (per_sm < 1) return InvalidArgument("gemv_chain_probe: a block does not fit on an SM");
  gemv_chain_probe_bf16w_f32a<<<sms, kThreads, smem, s>>>(S, p.act, p.act_len, p.counters, slots,
                                                          row_bytes);
  return cuda_status(cudaGetLastError(), "gemv_chain_probe_bf16w_f32a");
}

Status launch_gemv_chain_pdl(const GemvChainProbe& p, cudaStream_t s) {
  GS_RETURN_IF_ERROR(p.validate());
  for (int m = 0; m < p.steps; ++m) {
    GemvParams g;
    g.w = p.w[m];
    g.x = p.act + static_cast<size_t>(m & 1) * p.act_len;
    g.y = p.act + static_cast<size_t>((m + 1) & 1) * p.act_len;
    g.rows = g.ldy = p.rows[m];
    g.cols = p.cols[m];
    g.batch = 1;
    g.pdl = true;
    g.variant = 2;
    GS_RETURN_IF_ERROR(launch_gemv(g, s));
  }
  return Status::Ok();
}

}  // namespace gossamer::kern

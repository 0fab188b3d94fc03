// qkv_rope_bulk_bf16w_f32a<NORM>: the batch-1 fused QKV projection (+RMSNorm) + RoPE + KV-cache
// write with the weight rows streamed by bulk copies (1-D TMA) into a shared-memory ring, like
// gemv_bulk_bf16w_f32a (gemv/bulk.cu; the reasons and measurements are there and in
// docs/decode-overhead.md section 6).
//
// Work: the (nh + 2 kvh) x 32 rotation pairs (i, i + 32) of every head, split evenly over one
// block per SM (block b: pairs [b P / G, (b + 1) P / G)). The block's rows in order: pair q
// gives rows 2q (head row i) and 2q + 1 (head row i + 32). Warps 0..7 consume, warp 8 lane 0
// produces (the ring: common/bulk_gemv.cuh); row j's dot product goes to res[j]. x is staged once
// in shared memory; with NORM as x * gain, and the 1/rms is applied to each row's dot product
// afterwards (dot(w, x * g) * inv = dot(w, (x * inv) * g)): the squares are summed from the same
// loads and reduced across the warps while the rows stream, so the GEMV does not wait for a
// block reduction first (session 13: +0.5% tg128). After a consumer barrier thread t < pairs
// finishes pair t (epilogue.cuh), with the pair's bias, RoPE sin / cos and cache slot formed
// before pdl_wait (session 10: they were ~1.3 us of dependent loads and fp64 range reduction
// after the GEMV). Bit-identical to qkv_rope_bf16w_f32a<1, NORM>, which applies 1/rms the same
// way with the same summation order (qkv_rope_test).
#include <algorithm>

#include "kernels/common/bulk_gemv.cuh"
#include "kernels/common/cuda_check.h"
#include "kernels/common/pdl.h"
#include "kernels/qkv_rope/epilogue.cuh"
#include "kernels/qkv_rope/params.h"

namespace gossamer::kern {
namespace {

constexpr int kConsumers = 8, kThreads = (kConsumers + 1) * 32, kConsumerBar = 1;
constexpr int kMaxSmem = 220 * 1024;  // leaves room for the static shared memory of the norm

struct Layout {
  int slots, row_bytes, max_pairs;
  int x_off, res_off, bar_off, smem;
};

// Global weight row of the block's row j (pairs from p0).
__device__ __forceinline__ size_t pair_row(int p0, int j) {
  const int gp = p0 + (j >> 1), unit = gp >> 5, i = gp & 31;
  return static_cast<size_t>(unit) * kHeadDim + i + 32 * (j & 1);
}

template <bool NORM>
__global__ void __launch_bounds__(kThreads, 1) qkv_rope_bulk_bf16w_f32a(QkvRopeParams p, Layout L) {
  extern __shared__ __align__(128) uint8_t smem[];
  uint64_t* full = reinterpret_cast<uint64_t*>(smem + L.bar_off);
  const bulk_gemv::Ring ring{smem, full, full + L.slots, L.slots, L.row_bytes};
  float4* xs = reinterpret_cast<float4*>(smem + L.x_off);   // [2][nch]
  float* res = reinterpret_cast<float*>(smem + L.res_off);  // [2 max_pairs]
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, nch = p.hidden / 8;
  const int npairs = (p.n_heads + 2 * p.n_kv_heads) * 32;
  const int p0 = static_cast<int>(static_cast<long long>(blockIdx.x) * npairs / gridDim.x);
  const int pairs =
      static_cast<int>(static_cast<long long>(blockIdx.x + 1) * npairs / gridDim.x) - p0;
  if (threadIdx.x == 0) bulk_gemv::ring_init(ring);
  __syncthreads();
  if (warp == kConsumers) {  // weights only: never waits for the predecessor
    if (lane == 0) {
      bulk_gemv::ring_produce(ring, 2 * pairs,
                              [&](int j) { return p.w + pair_row(p0, j) * p.hidden; });
    }
    return;
  }
  // The norm gains of this thread's chunks: weights, so loaded before the wait.
  constexpr int kMaxG = (kQkvBulkMaxHidden / 8 + kConsumers * 32 - 1) / (kConsumers * 32);
  uint4 g[kMaxG];
#pragma unroll
  for (int m = 0; m < kMaxG; ++m) {
    const int k = threadIdx.x + m * kConsumers * 32;
    g[m] = NORM && k < nch ? __ldg(reinterpret_cast<const uint4*>(p.norm_w) + k)
                           : make_uint4(0, 0, 0, 0);
  }
  // The epilogue inputs of this thread's first pair (bias, RoPE sin / cos, cache slot): weights
  // and step inputs (pos, block table) that no kernel of the step writes (pdl.h rule 1).
  const QkvPairPrep prep =
      static_cast<int>(threadIdx.x) < pairs
          ? qkv_prep_pair(p, 0, (p0 + threadIdx.x) >> 5, (p0 + threadIdx.x) & 31)
          : QkvPairPrep{};
  pdl_wait();  // x comes from the previous kernel
  pdl_trigger();
  __shared__ float ss_warp[kConsumers][1];  // NORM: each consumer warp's sum of squares of x
  float ss[1] = {0.f};
#pragma unroll
  for (int m = 0; m < kMaxG; ++m) {
    const int k = threadIdx.x + m * kConsumers * 32;
    if (k >= nch) continue;
    const float4* src = reinterpret_cast<const float4*>(p.x) + 2 * k;
    float4 a = __ldg(src), b = __ldg(src + 1);
    if constexpr (NORM) {
      add_sum_sq8(ss[0], a, b);
      scale8_bf16(a, b, 1.f, g[m]);  // x * g (x * 1 is exact)
    }
    xs[k] = a;
    xs[nch + k] = b;
  }
  if constexpr (NORM) warp_ss_to_red<1>(ss, ss_warp);
  bulk_copy::named_sync(kConsumerBar, kConsumers * 32);
  bulk_gemv::ring_consume<kConsumers>(ring, 2 * pairs, xs, nch, warp,
                                      [&](int j, float dot) { res[j] = dot; });
  bulk_copy::named_sync(kConsumerBar, kConsumers * 32);
  // 1 / rms of x: the order of block_inv_rms_chunks (qkv_rope_bf16w_f32a's), warps in order.
  float inv[1] = {1.f};
  if constexpr (NORM) inv_from_red<1, kConsumers>(ss_warp, p.hidden, p.eps, inv);
  // The products are rounded before the epilogue adds the bias (__fmul_rn: never contracted into
  // an FMA with it), as the warp kernel rounds them into shared memory: bit-identical with bias.
  for (int t = threadIdx.x; t < pairs; t += kConsumers * 32) {
    const int gp = p0 + t, unit = gp >> 5, i = gp & 31;
    qkv_store_pair(p, unit, i, __fmul_rn(res[2 * t], inv[0]), __fmul_rn(res[2 * t + 1], inv[0]),
                   t == static_cast<int>(threadIdx.x) ? prep : qkv_prep_pair(p, 0, unit, i));
  }
}

Result<Layout> make_layout(const QkvRopeParams& p, int grid) {
  Layout L{};
  L.row_bytes = 2 * p.hidden;
  const int npairs = (p.n_heads + 2 * p.n_kv_heads) * 32;
  L.max_pairs = (npairs + grid - 1) / grid;
  const int x_bytes = 4 * p.hidden, res_bytes = 8 * L.max_pairs;
  GS_ASSIGN_OR_RETURN(
      L.slots, bulk_gemv::ring_slots("qkv_rope_bulk", L.row_bytes, 2 * L.max_pairs,
                                     p.bulk_ring_bytes > 0 ? p.bulk_ring_bytes : kQkvBulkRingBytes,
                                     kMaxSmem - x_bytes - res_bytes - 128));
  L.x_off = L.slots * L.row_bytes;
  L.res_off = L.x_off + x_bytes;
  L.bar_off = (L.res_off + res_bytes + 15) / 16 * 16;
  L.smem = L.bar_off + 16 * L.slots;
  return L;
}

}  // namespace

bool qkv_rope_bulk_supported(const QkvRopeParams& p) {
  return p.batch == 1 && p.hidden <= kQkvBulkMaxHidden && bulk_copy::device_is_sm90();
}

Status launch_qkv_rope_bulk(const QkvRopeParams& p, cudaStream_t s) {
  GS_RETURN_IF_ERROR(p.validate());
  if (!qkv_rope_bulk_supported(p)) {
    return InvalidArgument("qkv_rope_bulk: needs batch 1, hidden <= " +
                           std::to_string(kQkvBulkMaxHidden) + " and an sm_90 GPU");
  }
  GS_ASSIGN_OR_RETURN(const int sms, bulk_copy::sm_count());
  const int grid = std::min((p.n_heads + 2 * p.n_kv_heads) * 32, sms);
  GS_ASSIGN_OR_RETURN(const Layout L, make_layout(p, grid));
  auto* kernel = p.norm_w ? qkv_rope_bulk_bf16w_f32a<true> : qkv_rope_bulk_bf16w_f32a<false>;
  GS_CUDA_RETURN(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, L.smem));
  return launch_pdl(p.pdl, "qkv_rope_bulk_bf16w_f32a", kernel, dim3(grid), dim3(kThreads),
                    static_cast<size_t>(L.smem), s, p, L);
}

}  // namespace gossamer::kern

// qkv_rope_bulk_bf16w_f32a<NORM, BT>: the fused QKV projection (+RMSNorm) + RoPE + KV-cache write
// of BT = 1..4 rows with the weight rows streamed by bulk copies (1-D TMA) into a shared-memory
// ring (each weight row read once for all batch rows), like
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
// way with the same summation order (qkv_rope_test); each batch row of BT > 1 is bit-identical to
// that row alone.
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

// Stages this thread's 8-float chunks k = threadIdx.x + 256 m (m < G) of the BT rows of x (row b
// at xs + 2 b nch as float4 halves; rows past nb repeat the last), times the gains g[m] when
// NORM, and sums each row's squares into ss[b] (in increasing m). The chunks go in pairs
// (m, m + 1) whose loads are all issued before the first is used: x is on the critical path
// after pdl_wait, and a thread with two chunks (hidden 2880: threads 0..103) paid two L2 round
// trips when each chunk's loads followed the previous chunk's stores (session 21, H100, tg64
// A/B in one call: 120b 403.6 / 402.2 -> 405.0 / 404.7 t/s, 20b 565.4 / 564.3 -> 569.1 / 568.2).
template <bool NORM, int BT, int G>
__device__ __forceinline__ void stage_rows(const float* x, int nch, int nb, const uint4 (&g)[G],
                                           float4* xs, float (&ss)[BT]) {
#pragma unroll
  for (int b = 0; b < BT; ++b) ss[b] = 0.f;
#pragma unroll
  for (int m0 = 0; m0 < G; m0 += 2) {
    if (static_cast<int>(threadIdx.x) + m0 * kConsumers * 32 >= nch) break;
    float4 v[2][BT][2];
    auto each = [&](auto&& f) {  // f(d, b, k) for the pair's chunks k of this thread, rows b
#pragma unroll
      for (int d = 0; d < 2; ++d) {
        const int k = threadIdx.x + (m0 + d) * kConsumers * 32;
        if (m0 + d >= G || k >= nch) continue;
#pragma unroll
        for (int b = 0; b < BT; ++b) f(d, b, k);
      }
    };
    each([&](int d, int b, int k) {
      const float4* src =
          reinterpret_cast<const float4*>(x + static_cast<size_t>(min(b, nb - 1)) * 8 * nch) +
          2 * k;
      v[d][b][0] = __ldg(src);
      v[d][b][1] = __ldg(src + 1);
    });
    each([&](int d, int b, int k) {
      float4 lo = v[d][b][0], hi = v[d][b][1];
      if constexpr (NORM) {
        add_sum_sq8(ss[b], lo, hi);
        scale8_bf16(lo, hi, 1.f, g[m0 + d]);  // x * g (x * 1 is exact)
      }
      xs[2 * b * nch + k] = lo;
      xs[(2 * b + 1) * nch + k] = hi;
    });
  }
}

template <bool NORM, int BT>
__global__ void __launch_bounds__(kThreads, 1) qkv_rope_bulk_bf16w_f32a(QkvRopeParams p, Layout L) {
  extern __shared__ __align__(128) uint8_t smem[];
  uint64_t* full = reinterpret_cast<uint64_t*>(smem + L.bar_off);
  const bulk_gemv::Ring ring{smem, full, full + L.slots, L.slots, L.row_bytes};
  float4* xs = reinterpret_cast<float4*>(smem + L.x_off);   // [BT][2][nch]
  float* res = reinterpret_cast<float*>(smem + L.res_off);  // [BT][2 max_pairs]
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, nch = p.hidden / 8;
  const int npairs = (p.n_heads + 2 * p.n_kv_heads) * 32, nb = min(BT, p.batch);
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
  QkvPairPrep prep[BT];
#pragma unroll
  for (int b = 0; b < BT; ++b)
    prep[b] = static_cast<int>(threadIdx.x) < pairs && b < nb
                  ? qkv_prep_pair(p, b, (p0 + threadIdx.x) >> 5, (p0 + threadIdx.x) & 31)
                  : QkvPairPrep{};
  pdl_wait();  // x comes from the previous kernel
  pdl_trigger();
  __shared__ float ss_warp[kConsumers][BT];  // NORM: each consumer warp's sums of squares of x
  float ss[BT];
  stage_rows<NORM>(p.x, nch, nb, g, xs, ss);
  if constexpr (NORM) warp_ss_to_red<BT>(ss, ss_warp);
  bulk_copy::named_sync(kConsumerBar, kConsumers * 32);
  const int rstride = 2 * L.max_pairs;  // res row b at res + b rstride
  bulk_gemv::ring_consume<kConsumers, BT>(ring, 2 * pairs, xs, nch, warp,
                                          [&](int j, const float* dot) {
#pragma unroll
                                            for (int b = 0; b < BT; ++b)
                                              res[b * rstride + j] = dot[b];
                                          });
  bulk_copy::named_sync(kConsumerBar, kConsumers * 32);
  // 1 / rms of x: the order of block_inv_rms_chunks (qkv_rope_bf16w_f32a's), warps in order.
  float inv[BT];
#pragma unroll
  for (int b = 0; b < BT; ++b) inv[b] = 1.f;
  if constexpr (NORM) {
    inv_from_red<BT, kConsumers>(ss_warp, p.hidden, p.eps, inv);
  }
  // The products are rounded before the epilogue adds the bias (__fmul_rn: never contracted into
  // an FMA with it), as the warp kernel rounds them into shared memory: bit-identical with bias.
#pragma unroll
  for (int b = 0; b < BT; ++b) {
    if (b >= nb) break;
    const float* rb = res + b * rstride;
    for (int t = threadIdx.x; t < pairs; t += kConsumers * 32) {
      const int gp = p0 + t, unit = gp >> 5, i = gp & 31;
      qkv_store_pair(p, unit, i, __fmul_rn(rb[2 * t], inv[b]), __fmul_rn(rb[2 * t + 1], inv[b]),
                     t == static_cast<int>(threadIdx.x) ? prep[b] : qkv_prep_pair(p, b, unit, i));
    }
  }
}

Result<Layout> make_layout(const QkvRopeParams& p, int grid) {
  Layout L{};
  L.row_bytes = 2 * p.hidden;
  const int npairs = (p.n_heads + 2 * p.n_kv_heads) * 32;
  L.max_pairs = (npairs + grid - 1) / grid;
  const int x_bytes = 4 * p.hidden * p.batch, res_bytes = 8 * L.max_pairs * p.batch;
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
  return p.batch >= 1 && p.batch <= kQkvBulkMaxBatch && p.hidden <= kQkvBulkMaxHidden &&
         bulk_copy::device_is_sm90();
}

namespace {

struct Prepared {
  Layout L;
  bulk_copy::OneBlockLaunch<void (*)(QkvRopeParams, Layout)> k;
};

// The kernel, grid and shared memory of a launch (at least one_block_per_sm_smem: with 76..151
// registers two blocks would otherwise fit on one SM).
Result<Prepared> prepare(const QkvRopeParams& p) {
  GS_RETURN_IF_ERROR(p.validate());
  if (!qkv_rope_bulk_supported(p)) {
    return InvalidArgument("qkv_rope_bulk: needs batch 1.." + std::to_string(kQkvBulkMaxBatch) +
                           ", hidden <= " + std::to_string(kQkvBulkMaxHidden) +
                           " and an sm_90 GPU");
  }
  GS_ASSIGN_OR_RETURN(const int sms, bulk_copy::sm_count());
  const int grid = std::min((p.n_heads + 2 * p.n_kv_heads) * 32, sms);
  GS_ASSIGN_OR_RETURN(const Layout L, make_layout(p, grid));
  static_assert(kQkvBulkMaxBatch <= 4, "instantiated for 1..4 rows");
  void (*const kernels[][2])(QkvRopeParams, Layout) = {
      {qkv_rope_bulk_bf16w_f32a<false, 1>, qkv_rope_bulk_bf16w_f32a<true, 1>},
      {qkv_rope_bulk_bf16w_f32a<false, 2>, qkv_rope_bulk_bf16w_f32a<true, 2>},
      {qkv_rope_bulk_bf16w_f32a<false, 3>, qkv_rope_bulk_bf16w_f32a<true, 3>},
      {qkv_rope_bulk_bf16w_f32a<false, 4>, qkv_rope_bulk_bf16w_f32a<true, 4>}};
  GS_ASSIGN_OR_RETURN(const auto k, bulk_copy::one_block_launch(
                                        kernels[p.batch - 1][p.norm_w != nullptr], grid, L.smem));
  return Prepared{L, k};
}

}  // namespace

Status launch_qkv_rope_bulk(const QkvRopeParams& p, cudaStream_t s) {
  GS_ASSIGN_OR_RETURN(const Prepared b, prepare(p));
  return launch_pdl(p.pdl, "qkv_rope_bulk_bf16w_f32a", b.k.kernel, dim3(b.k.grid), dim3(kThreads),
                    static_cast<size_t>(b.k.smem), s, p, b.L);
}

Result<int> qkv_rope_bulk_blocks_per_sm(const QkvRopeParams& p) {
  GS_ASSIGN_OR_RETURN(const Prepared b, prepare(p));
  return bulk_copy::blocks_per_sm(b.k, kThreads);
}

}  // namespace gossamer::kern

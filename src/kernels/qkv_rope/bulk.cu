// qkv_rope_bulk_bf16w_f32a<NORM>: the batch-1 fused QKV projection (+RMSNorm) + RoPE + KV-cache
// write with the weight rows streamed by bulk copies (1-D TMA) into a shared-memory ring, like
// gemv_bulk_bf16w_f32a (gemv/bulk.cu; the reasons and measurements are there and in
// docs/decode-overhead.md section 6).
//
// Work: the (nh + 2 kvh) x 32 rotation pairs (i, i + 32) of every head, split evenly over one
// block per SM (block b: pairs [b P / G, (b + 1) P / G)). The block's rows in order: pair q
// gives rows 2q (head row i) and 2q + 1 (head row i + 32). Warps 0..7 consume, warp 8 lane 0
// produces: row j goes to ring slot j % slots and is reduced by the slot's owner warp
// (j % slots) % 8 (one owner per slot: see gemv/bulk.cu) into res[j]. x (normed when NORM, in
// the same fp32 operations as the warp kernel) is staged once in shared memory as low / high
// float4 halves. After a consumer barrier thread t < pairs finishes pair t (epilogue.cuh).
// Per-lane summation order = warp_gemv_bf16's: bit-identical to qkv_rope_bf16w_f32a<1, NORM>.
#include <algorithm>

#include "kernels/common/bulk_copy.cuh"
#include "kernels/common/cuda_check.h"
#include "kernels/common/gemv_core.cuh"
#include "kernels/common/pdl.h"
#include "kernels/qkv_rope/epilogue.cuh"
#include "kernels/qkv_rope/params.h"

namespace gossamer::kern {
namespace {

using namespace bulk_copy;  // NOLINT: mbarrier / bulk-copy helpers

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

__device__ __forceinline__ void produce(const QkvRopeParams& p, const Layout& L, uint8_t* smem,
                                        uint64_t* full, uint64_t* empty, int p0, int n) {
  for (int j = 0; j < n; ++j) {
    const int s = j % L.slots;
    if (j >= L.slots) mbar_wait(empty + s, ((j / L.slots) - 1) & 1);
    mbar_arrive_expect_tx(full + s, L.row_bytes);
    bulk_g2s(smem + static_cast<size_t>(s) * L.row_bytes, p.w + pair_row(p0, j) * p.hidden,
             L.row_bytes, full + s);
  }
}

template <bool NORM>
__global__ void __launch_bounds__(kThreads, 1) qkv_rope_bulk_bf16w_f32a(QkvRopeParams p, Layout L) {
  extern __shared__ __align__(128) uint8_t smem[];
  uint64_t* full = reinterpret_cast<uint64_t*>(smem + L.bar_off);
  uint64_t* empty = full + L.slots;
  float4* xs = reinterpret_cast<float4*>(smem + L.x_off);   // [2][nch]
  float* res = reinterpret_cast<float*>(smem + L.res_off);  // [2 max_pairs]
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, nch = p.hidden / 8;
  const int npairs = (p.n_heads + 2 * p.n_kv_heads) * 32;
  const int p0 = static_cast<int>(static_cast<long long>(blockIdx.x) * npairs / gridDim.x);
  const int pairs =
      static_cast<int>(static_cast<long long>(blockIdx.x + 1) * npairs / gridDim.x) - p0;
  const int n = 2 * pairs;
  if (threadIdx.x == 0) {
    for (int s = 0; s < L.slots; ++s) {
      mbar_init(full + s, 1);
      mbar_init(empty + s, 1);
    }
    mbar_init_fence();
  }
  __syncthreads();
  if (warp == kConsumers) {  // weights only: never waits for the predecessor
    if (lane == 0) produce(p, L, smem, full, empty, p0, n);
    return;
  }
  pdl_wait();  // x comes from the previous kernel
  pdl_trigger();
  float inv[1] = {1.f};
  if constexpr (NORM) block_inv_rms<1, kConsumers, kConsumerBar>(p.x, p.hidden, 1, p.eps, inv);
  for (int k = threadIdx.x; k < nch; k += kConsumers * 32) {
    const float4* src = reinterpret_cast<const float4*>(p.x) + 2 * k;
    float4 a = __ldg(src), b = __ldg(src + 1);
    if constexpr (NORM)
      scale8_bf16(a, b, inv[0], __ldg(reinterpret_cast<const uint4*>(p.norm_w) + k));
    xs[k] = a;
    xs[nch + k] = b;
  }
  named_sync(kConsumerBar, kConsumers * 32);
  for (int j = 0; j < n; ++j) {
    const int s = j % L.slots;
    if (s % kConsumers != warp) continue;  // slot s belongs to warp s % kConsumers
    mbar_wait(full + s, (j / L.slots) & 1);
    const uint4* wr = reinterpret_cast<const uint4*>(smem + static_cast<size_t>(s) * L.row_bytes);
    float acc = 0.f;
#pragma unroll 2
    for (int k = lane; k < nch; k += 32) acc += dot8_bf16(wr[k], xs[k], xs[nch + k]);
    acc = warp_sum(acc);
    __syncwarp();
    if (lane == 0) {
      mbar_arrive(empty + s);
      res[j] = acc;
    }
  }
  named_sync(kConsumerBar, kConsumers * 32);
  for (int t = threadIdx.x; t < pairs; t += kConsumers * 32) {
    const int gp = p0 + t;
    qkv_finish_pair(p, 0, gp >> 5, gp & 31, res[2 * t], res[2 * t + 1]);
  }
}

Result<Layout> make_layout(const QkvRopeParams& p, int grid) {
  Layout L{};
  L.row_bytes = 2 * p.hidden;
  const int npairs = (p.n_heads + 2 * p.n_kv_heads) * 32;
  L.max_pairs = (npairs + grid - 1) / grid;
  const int x_bytes = 4 * p.hidden, res_bytes = 8 * L.max_pairs;
  const int ring = p.bulk_ring_bytes > 0 ? p.bulk_ring_bytes : kQkvBulkRingBytes;
  const int want = std::max(ring, 2 * (L.row_bytes + 16));
  const int fit = std::min(want, kMaxSmem - x_bytes - res_bytes - 128) / (L.row_bytes + 16);
  if (fit < 2) {
    return InvalidArgument("qkv_rope_bulk: a row of " + std::to_string(p.hidden) +
                           " columns does not fit twice in shared memory");
  }
  L.slots = std::min(2 * L.max_pairs, fit);
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
  int dev = 0, sms = 0;
  GS_CUDA_RETURN(cudaGetDevice(&dev));
  GS_CUDA_RETURN(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  const int grid = std::min((p.n_heads + 2 * p.n_kv_heads) * 32, sms);
  GS_ASSIGN_OR_RETURN(const Layout L, make_layout(p, grid));
  auto* kernel = p.norm_w ? qkv_rope_bulk_bf16w_f32a<true> : qkv_rope_bulk_bf16w_f32a<false>;
  GS_CUDA_RETURN(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, L.smem));
  return launch_pdl(p.pdl, "qkv_rope_bulk_bf16w_f32a", kernel, dim3(grid), dim3(kThreads),
                    static_cast<size_t>(L.smem), s, p, L);
}

}  // namespace gossamer::kern

// gemv_bulk_bf16w_f32a: the batch-1 GEMV (y (+)= W x + bias, no argmax) with the weight rows
// streamed into shared memory by bulk copies (1-D TMA), as the MoE decode kernels do.
//
// Why: the warp GEMV of kernel.cu keeps only ~4 KB per warp in flight and its grid (one block per
// 16 rows: 180 blocks for the O-projection on 132 SMs) is uneven across SMs. Here the grid is one
// block per SM with an even split of the rows (block b: rows [b R / G, (b + 1) R / G)), and the
// block's producer thread requests its rows as soon as the block is resident: up to `slots`
// whole rows (for gpt-oss every row of the block: 22 x 8 KB for the O-projection) are in
// flight at once, before pdl_wait() (weights only: common/pdl.h rule 1).
//
// Mapping: warps 0..7 consume, warp 8 lane 0 produces. Row j of the block (j = 0..n-1) goes to
// slot j % slots (full / empty mbarrier pair) and is reduced by the warp that owns the slot,
// (j % slots) % 8, in increasing j. One owner per slot matters when the ring wraps: a parity wait
// cannot tell phase k + 2 from phase k, so no warp may wait for a slot's next row before the
// slot's previous row has been consumed (a first version with row j -> warp j % 8 raced
// there and faulted). Without a wrap (slots = rows of the block) this is warp j % 8. A consumer
// lane walks the 16-byte chunks lane, lane + 32, ... of the row against x, which the consumers
// stage once in shared memory split into low / high float4 halves (conflict-free LDS.128).
// Summation order per lane and the butterfly are the ones of warp_gemv_bf16 (gemv_core.cuh), so
// the results are bit-identical to gemv_bf16w_f32a<1> (asserted by gemv_test).
#include <algorithm>

#include "kernels/common/bulk_copy.cuh"
#include "kernels/common/cuda_check.h"
#include "kernels/common/gemv_core.cuh"
#include "kernels/common/pdl.h"
#include "kernels/gemv/params.h"

namespace gossamer::kern {
namespace {

using namespace bulk_copy;  // NOLINT: mbarrier / bulk-copy helpers

constexpr int kConsumers = 8, kThreads = (kConsumers + 1) * 32, kConsumerBar = 1;
constexpr int kMaxSmem = 227 * 1024;

struct Layout {
  int slots;      // rows of the ring
  int row_bytes;  // 2 cols
  int x_off;      // x staged as [2][cols / 8] float4
  int bar_off;    // full[slots], empty[slots]
  int smem;
};

__global__ void __launch_bounds__(kThreads, 1) gemv_bulk_bf16w_f32a(GemvParams p, Layout L) {
  extern __shared__ __align__(128) uint8_t smem[];
  uint64_t* full = reinterpret_cast<uint64_t*>(smem + L.bar_off);
  uint64_t* empty = full + L.slots;
  float4* xs = reinterpret_cast<float4*>(smem + L.x_off);  // [2][nch]
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, nch = p.cols / 8;
  const int r0 = static_cast<int>(static_cast<long long>(blockIdx.x) * p.rows / gridDim.x);
  const int n = static_cast<int>(static_cast<long long>(blockIdx.x + 1) * p.rows / gridDim.x) - r0;
  if (threadIdx.x == 0) {
    for (int s = 0; s < L.slots; ++s) {
      mbar_init(full + s, 1);
      mbar_init(empty + s, 1);
    }
    mbar_init_fence();
  }
  __syncthreads();
  if (warp == kConsumers) {  // producer: weights only, so it never waits for the predecessor
    if (lane == 0) {
      for (int j = 0; j < n; ++j) {
        const int s = j % L.slots;
        if (j >= L.slots) mbar_wait(empty + s, ((j / L.slots) - 1) & 1);
        mbar_arrive_expect_tx(full + s, L.row_bytes);
        bulk_g2s(smem + static_cast<size_t>(s) * L.row_bytes,
                 p.w + static_cast<size_t>(r0 + j) * p.cols, L.row_bytes, full + s);
      }
    }
    return;
  }
  pdl_wait();  // x (and y when accumulating) come from earlier kernels
  pdl_trigger();
  for (int k = threadIdx.x; k < nch; k += kConsumers * 32) {
    const float4* src = reinterpret_cast<const float4*>(p.x) + 2 * k;
    xs[k] = __ldg(src);
    xs[nch + k] = __ldg(src + 1);
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
      mbar_arrive(empty + s);  // every lane's reads of the slot are done (values consumed)
      const int row = r0 + j;
      const float v = acc + (p.bias ? p.bias[row] : 0.f);
      float* dst = p.y + row;
      *dst = p.accumulate ? *dst + v : v;
    }
  }
}

Result<Layout> make_layout(const GemvParams& p, int grid) {
  Layout L{};
  L.row_bytes = 2 * p.cols;
  const int max_rows = (p.rows + grid - 1) / grid;
  const int x_bytes = 4 * p.cols;
  const int ring = p.bulk_ring_bytes > 0 ? p.bulk_ring_bytes : kGemvBulkRingBytes;
  // At least two rows in flight even when a row is larger than half the requested ring.
  const int want = std::max(ring, 2 * (L.row_bytes + 16));
  const int fit = std::min(want, kMaxSmem - x_bytes - 128) / (L.row_bytes + 16);
  L.slots = std::min(max_rows, fit);
  if (fit < 2)
    return InvalidArgument("gemv_bulk: a row of " + std::to_string(p.cols) +
                           " columns does not fit twice in shared memory");
  L.x_off = L.slots * L.row_bytes;
  L.bar_off = (L.x_off + x_bytes + 15) / 16 * 16;
  L.smem = L.bar_off + 16 * L.slots;
  return L;
}

}  // namespace

bool gemv_bulk_supported(const GemvParams& p) {
  return p.batch == 1 && !p.argmax && p.cols <= kGemvBulkMaxCols && bulk_copy::device_is_sm90();
}

Status launch_gemv_bulk(const GemvParams& p, cudaStream_t s) {
  GS_RETURN_IF_ERROR(p.validate());
  if (!gemv_bulk_supported(p)) {
    return InvalidArgument("gemv_bulk: needs batch 1, y, no argmax, cols <= " +
                           std::to_string(kGemvBulkMaxCols) + " and an sm_90 GPU");
  }
  int dev = 0, sms = 0;
  GS_CUDA_RETURN(cudaGetDevice(&dev));
  GS_CUDA_RETURN(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  const int grid = std::min(p.rows, sms);
  GS_ASSIGN_OR_RETURN(const Layout L, make_layout(p, grid));
  GS_CUDA_RETURN(cudaFuncSetAttribute(gemv_bulk_bf16w_f32a,
                                      cudaFuncAttributeMaxDynamicSharedMemorySize, L.smem));
  return launch_pdl(p.pdl, "gemv_bulk_bf16w_f32a", gemv_bulk_bf16w_f32a, dim3(grid), dim3(kThreads),
                    static_cast<size_t>(L.smem), s, p, L);
}

}  // namespace gossamer::kern

// gemv_bf16w_f32a<BT>: 256 threads = 8 warps per block, each warp RPW=2 consecutive weight rows
// (16 rows per block, grid.x = ceil(rows/16)); grid.y tiles the batch by BT. Each lane loads
// 16 B of weights per row per step (see common/gemv_core.cuh). Epilogue: lane 0 of each warp
// adds bias, writes or accumulates y; with argmax, a block-wide max per batch row in shared
// memory, then one 64-bit atomicMax per block and batch row.
#include "kernels/common/cuda_check.h"
#include "kernels/common/gemv_core.cuh"
#include "kernels/common/pdl.h"
#include "kernels/gemv/epilogue.cuh"
#include "kernels/gemv/params.h"

namespace gossamer::kern {
namespace {

constexpr int kWarps = 8, kRpw = 2, kRowsPerBlock = kWarps * kRpw;
constexpr unsigned kMaxPrefetchBlocks = 1024;

template <int BT>
__global__ void __launch_bounds__(kWarps * 32) gemv_bf16w_f32a(GemvParams p, bool prefetch) {
  static_assert(BT >= 1 && BT <= 8, "batch tile 1..8");
  __shared__ unsigned long long best[BT];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int b0 = blockIdx.y * BT, nb = min(BT, p.batch - b0);
  const int r0 = blockIdx.x * kRowsPerBlock + warp * kRpw;
  if (p.argmax && threadIdx.x < BT) best[threadIdx.x] = 0ull;
  const uint16_t* rows[kRpw];
#pragma unroll
  for (int r = 0; r < kRpw; ++r) {
    rows[r] = p.w + static_cast<size_t>(min(r0 + r, p.rows - 1)) * p.cols;  // clamp: discarded
  }
  if (prefetch && blockIdx.y == 0)
    warp_prefetch_rows<kRpw>(rows, p.cols);  // weights: safe before the wait
  pdl_wait();  // x (and y when accumulating) come from earlier kernels
  pdl_trigger();
  float acc[kRpw][BT];
  warp_gemv_bf16<BT, kRpw>(rows, p.cols, p.x + static_cast<size_t>(b0) * p.cols, nb, acc);
  if (p.argmax) __syncthreads();
  if (lane == 0) {
#pragma unroll
    for (int r = 0; r < kRpw; ++r) {
      const int row = r0 + r;
      if (row >= p.rows) continue;
      const float bias = p.bias ? p.bias[row] : 0.f;
#pragma unroll
      for (int b = 0; b < BT; ++b)
        if (b < nb) gemv_epi::store(p, row, b0, b, acc[r][b] + bias, best);
    }
  }
  gemv_epi::publish_argmax(p, b0, nb, best);
}

template <int BT>
Status launch_bt(const GemvParams& p, cudaStream_t s) {
  dim3 grid((p.rows + kRowsPerBlock - 1) / kRowsPerBlock, (p.batch + BT - 1) / BT);
  // Prefetch only when the grid is about one wave (O-proj, router): later waves of a large grid
  // (lm_head) start after the wait anyway, and the hints would only double the L2 requests.
  const bool prefetch = p.pdl && grid.x * grid.y <= kMaxPrefetchBlocks;
  return launch_pdl(p.pdl, "gemv_bf16w_f32a", gemv_bf16w_f32a<BT>, grid, dim3(kWarps * 32), 0, s, p,
                    prefetch);
}

}  // namespace

int gemv_resolved_variant(const GemvParams& p) {
  if (p.variant != 0) return p.variant;
  return gemv_bulk_supported(p) ? 2 : gemv_mma_preferred(p) ? 3 : 1;
}

const char* gemv_variant(const GemvParams& p) {
  const int v = gemv_resolved_variant(p);  // once: the bulk check sizes a layout
  if (v == 2) return "gemv_bulk_bf16w_f32a";
  if (v == 3) return "gemv_mma_bf16w_f32a";
  return p.batch <= 1   ? "gemv_bf16w_f32a<BT=1>"
         : p.batch <= 2 ? "gemv_bf16w_f32a<BT=2>"
         : p.batch <= 4 ? "gemv_bf16w_f32a<BT=4>"
                        : "gemv_bf16w_f32a<BT=8>";
}

Status launch_gemv(const GemvParams& p, cudaStream_t s) {
  GS_RETURN_IF_ERROR(p.validate());
  const int v = gemv_resolved_variant(p);  // once: the bulk check sizes a layout
  if (v == 2) return launch_gemv_bulk(p, s);
  if (v == 3) return launch_gemv_mma(p, s);
  if (p.batch <= 1) return launch_bt<1>(p, s);
  if (p.batch <= 2) return launch_bt<2>(p, s);
  if (p.batch <= 4) return launch_bt<4>(p, s);
  return launch_bt<8>(p, s);
}

}  // namespace gossamer::kern

// gemv_mma_bf16w_f32a (variant 3): the GEMV for batch tiles of 8, 16 or 32 activation rows on
// the tensor cores (one pass over the weights per tile). The warp GEMV (kernel.cu) spends ~BT fp32
// FMAs and an L1 load of x per weight and runs at 54% of the copy ceiling for the lm_head at batch
// 8 (704 us on the H100); here each weight is one bf16 A element of mma.sync.m16n8k16 and x is the
// B operand (lm_head b8: 444 us, 88%).
//
// Mapping: a block owns a tile of 16 weight rows (rows r0 + g and r0 + g + 8 for lane g =
// lane / 4, t = lane % 4); its 8 warps split K by 32-column steps, warp w taking steps w, w + 8,
// ... so that at any time the block reads adjacent 64-byte pieces of each row (a warp per tile
// with its own K range, or contiguous K slices per warp, ran at 65% / 82%: the DRAM wants long
// runs). Grid (ceil(rows / 16), ceil(batch / tile)). Per 32 columns k0: lane (g, t) loads 16
// bytes of each of its two rows (columns k0 + 8t .. 8t + 7) and, for each n-tile j of the batch
// tile, the 8 floats x[8j + g][k0 + 8t ..] (L1-resident) split into three bf16 terms (hi,
// lo = bf16(x - hi), lo2 = bf16(x - hi - lo): 24 bits, as fp32). The K order inside an mma is free
// as long as A and B agree: mma 1 takes columns 8t .. 8t + 3 of every lane, mma 2 the columns
// 8t + 4 .. 8t + 7 (a0 / a2 = row g's first / second pair, a1 / a3 row g + 8's; b0 / b1 the same
// pairs of x). D (lane g, t) of n-tile j = rows g, g + 8 x batch columns 8j + 2t, 8j + 2t + 1.
// Accumulators restart every 32 columns (the tensor core's fp32 accumulation truncates) and are
// added in fp32: hi, lo, lo2 separately, summed at the end; the 8 partials of a tile are added in
// warp order through shared memory (deterministic). Epilogue as kernel.cu: bias, y (+)=, argmax.
#include <cuda_bf16.h>

#include <algorithm>

#include "kernels/common/cuda_check.h"
#include "kernels/common/device.cuh"
#include "kernels/common/gemv_core.cuh"
#include "kernels/common/mma_split.cuh"
#include "kernels/common/pdl.cuh"
#include "kernels/common/pdl.h"
#include "kernels/gemv/epilogue.cuh"
#include "kernels/gemv/params.h"

namespace gossamer::kern {
namespace {

// kSplit warps per tile of 16 rows = the block; 4 steps of 32 columns in flight per warp.
constexpr int kWarps = 8, kSplit = kWarps, kUnroll = 4, kSplits = kMmaSplits;

// One 32-column step: weights wa (row g), wb (row g + 8); n-tile j of the batch tile takes
// activation row 8j + g (xr[j]).
template <int kNT>
__device__ __forceinline__ void step32(const uint4& wa, const uint4& wb,
                                       const float* const (&xr)[kNT], int k,
                                       float (&acc)[kNT][kSplits][4]) {
#pragma unroll
  for (int j = 0; j < kNT; ++j) {
    const float4* xp = reinterpret_cast<const float4*>(xr[j] + k);
    uint32_t x[kSplits][4];
    split_x8(__ldg(xp), __ldg(xp + 1), x);
    mma_step32(wa, wb, x, acc[j]);
  }
}

// Batch tiles of 8 kNT activation rows (n-tile j: rows 8j .. 8j + 7 of the tile).
template <int kNT>
__global__ void __launch_bounds__(kWarps * 32) gemv_mma_bf16w_f32a(GemvParams p) {
  constexpr int kBT = 8 * kNT;
  __shared__ float red[kWarps][32][kNT * 4];
  __shared__ unsigned long long best[kBT];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const int tile = blockIdx.x, part = warp;
  const int b0 = blockIdx.y * kBT, nb = min(kBT, p.batch - b0);
  const int r0 = tile * 16;
  // Lane rows g and g + 8 of the tile (at column 8t of each step).
  const uint16_t* const wr[2] = {
      p.w + static_cast<size_t>(min(r0 + g, p.rows - 1)) * p.cols + 8 * t,
      p.w + static_cast<size_t>(min(r0 + g + 8, p.rows - 1)) * p.cols + 8 * t};
  const float* xr[kNT];
#pragma unroll
  for (int j = 0; j < kNT; ++j)
    xr[j] = p.x + static_cast<size_t>(b0 + min(8 * j + g, nb - 1)) * p.cols + 8 * t;
  if (p.argmax && threadIdx.x < kBT) best[threadIdx.x] = 0ull;
  pdl_wait();  // x (and y when accumulating) come from earlier kernels
  pdl_trigger();
  float acc[kNT][kSplits][4] = {};
  // This warp's 32-column steps: part, part + kSplit, ... (the block's warps read adjacent
  // 64-byte pieces of each row at a time: contiguous runs for the DRAM).
  mma_k_loop<kSplit, kUnroll>(wr, part, p.cols / 32, [&](const uint4(&w)[2], int k) {
    step32<kNT>(w[0], w[1], xr, k, acc);
  });
#pragma unroll
  for (int j = 0; j < kNT; ++j)
#pragma unroll
    for (int i = 0; i < 4; ++i) red[warp][lane][4 * j + i] = fold_splits(acc[j], i);
  __syncthreads();
  if (part == 0) {
#pragma unroll
    for (int j = 0; j < kNT; ++j)
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        float v = red[0][lane][4 * j + i];
#pragma unroll
        for (int w = 1; w < kSplit; ++w) v += red[w][lane][4 * j + i];
        const int row = r0 + g + (i >= 2 ? 8 : 0), b = 8 * j + 2 * t + (i & 1);
        if (row < p.rows && b < nb)
          gemv_epi::store(p, row, b0, b, v + (p.bias ? p.bias[row] : 0.f), best);
      }
  }
  gemv_epi::publish_argmax(p, b0, nb, best);
}

template <int kNT>
Status launch_nt(const GemvParams& p, cudaStream_t s) {
  const dim3 grid((p.rows + 15) / 16, (p.batch + 8 * kNT - 1) / (8 * kNT));
  return launch_pdl(p.pdl, "gemv_mma_bf16w_f32a", gemv_mma_bf16w_f32a<kNT>, grid, dim3(kWarps * 32),
                    0, s, p);
}

}  // namespace

// Shape only (as gemv_bulk_supported): launch_gemv_mma validates the rest.
bool gemv_mma_supported(const GemvParams& p) {
  return p.batch >= 2 && p.cols > 0 && p.cols % 32 == 0;
}

bool gemv_mma_preferred(const GemvParams& p) {
  return gemv_mma_supported(p) && p.batch >= 3;
}

Status launch_gemv_mma(const GemvParams& p, cudaStream_t s) {
  GS_RETURN_IF_ERROR(p.validate());
  if (!gemv_mma_supported(p)) {
    return Unsupported("gemv_mma_bf16w_f32a: needs batch >= 2 and cols % 32 == 0");
  }
  // Batch tiles of 8, 16 or 32 rows: one pass over the weights per tile.
  if (p.batch <= 8) return launch_nt<1>(p, s);
  if (p.batch <= 16) return launch_nt<2>(p, s);
  return launch_nt<4>(p, s);
}

}  // namespace gossamer::kern

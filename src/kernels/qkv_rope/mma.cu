// qkv_rope_mma_bf16w_f32a (variant 3): the fused QKV projection + RoPE + cache write for decode
// batches of 2..8 rows on the tensor cores (common/mma_split.cuh: weights = bf16 A operand,
// activations = B split into three bf16 terms). The warp kernel (kernel.cu) spends BT fp32 FMAs
// and an L1 load per weight and slows down with the batch (120b: 14.2 us at b1, 20.8 at b4).
//
// Mapping: grid.x = 2 * (nh + 2 kvh) blocks, one per half of a 64-row head (the rows of the 16
// rotation pairs (i, i + 32), i in [16 half, 16 half + 16), as in kernel.cu): m-tile 0 = head
// rows 16 half + 0..15, m-tile 1 = rows 32 + 16 half + 0..15. One n-tile = the batch (<= 8).
// The block's 8 warps split K by 32-column steps, warp w taking steps w, w + 8, ... (adjacent
// 64-byte pieces of each row at a time); per step lane (g, t) loads 16 bytes of its four rows
// (g, g + 8 of both m-tiles) and the 8 activations of batch row g, times the RMSNorm gain when
// fused. The warps' partials are added in warp order through shared memory, times 1/rms (the
// other kernels' block_inv_rms_chunks), then thread t < 16 nb finishes pair (t / 16, t % 16)
// with the shared epilogue (bias, RoPE, q / cache stores).
#include "kernels/common/cuda_check.h"
#include "kernels/common/device.cuh"
#include "kernels/common/gemv_core.cuh"
#include "kernels/common/mma_split.cuh"
#include "kernels/common/pdl.cuh"
#include "kernels/common/pdl.h"
#include "kernels/qkv_rope/epilogue.cuh"
#include "kernels/qkv_rope/params.h"

namespace gossamer::kern {
namespace {

constexpr int kWarps = 8, kUnroll = 4, kBatch = 8, kTiles = 2, kRows = 16 * kTiles;
static_assert(kRows == kHeadDim / 2, "a block covers the 16 rotation pairs of half a head");

// The 8 activations of batch row xb at columns k .. k + 7, times the gain when fused.
template <bool NORM>
__device__ __forceinline__ void load_x8(const float* xb, const uint16_t* gain, int k, float4& a,
                                        float4& b) {
  a = __ldg(reinterpret_cast<const float4*>(xb + k));
  b = __ldg(reinterpret_cast<const float4*>(xb + k) + 1);
  if constexpr (NORM) {
    const uint4 g = __ldg(reinterpret_cast<const uint4*>(gain + k));
    a.x *= bf16_lo(g.x), a.y *= bf16_hi(g.x), a.z *= bf16_lo(g.y), a.w *= bf16_hi(g.y);
    b.x *= bf16_lo(g.z), b.y *= bf16_hi(g.z), b.z *= bf16_lo(g.w), b.w *= bf16_hi(g.w);
  }
}

template <bool NORM>
__global__ void __launch_bounds__(kWarps * 32) qkv_rope_mma_bf16w_f32a(QkvRopeParams p) {
  __shared__ float red[kWarps][kTiles * 4][32];
  __shared__ float res[kBatch][kRows];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const int unit = blockIdx.x >> 1, half = blockIdx.x & 1, nb = min(kBatch, p.batch);
  // Lane row r = 2 m + h: row g + 8 h of m-tile m = head row 32 m + 16 half + g + 8 h.
  const uint16_t* wr[2 * kTiles];
#pragma unroll
  for (int r = 0; r < 2 * kTiles; ++r)
    wr[r] = p.w +
            (static_cast<size_t>(unit) * kHeadDim + 32 * (r >> 1) + 16 * half + g + 8 * (r & 1)) *
                p.hidden +
            8 * t;
  const float* xb = p.x + static_cast<size_t>(min(g, nb - 1)) * p.hidden + 8 * t;
  const uint16_t* gain = NORM ? p.norm_w + 8 * t : nullptr;
  if (p.pdl) {  // weights: safe to prefetch into L2 before the wait (warp w: local rows 4w ..)
    const uint16_t* pr[4];
#pragma unroll
    for (int r = 0; r < 4; ++r) {
      const int lr = 4 * warp + r, hr = lr < 16 ? 16 * half + lr : 32 + 16 * half + lr - 16;
      pr[r] = p.w + (static_cast<size_t>(unit) * kHeadDim + hr) * p.hidden;
    }
    warp_prefetch_rows<4>(pr, p.hidden);
  }
  pdl_wait();  // x comes from the previous kernel
  pdl_trigger();
  float inv[kBatch];
#pragma unroll
  for (int b = 0; b < kBatch; ++b) inv[b] = 1.f;
  if constexpr (NORM) block_inv_rms_chunks<kBatch, kWarps>(p.x, p.hidden, nb, p.eps, inv);
  float acc[kTiles][kMmaSplits][4] = {};
  mma_k_loop<kWarps, kUnroll>(wr, warp, p.hidden / 32, [&](const uint4(&w)[2 * kTiles], int k) {
    float4 xa, xc;
    load_x8<NORM>(xb, gain, k, xa, xc);
    uint32_t x[kMmaSplits][4];
    split_x8(xa, xc, x);
#pragma unroll
    for (int m = 0; m < kTiles; ++m) mma_step32(w[2 * m], w[2 * m + 1], x, acc[m]);
  });
#pragma unroll
  for (int m = 0; m < kTiles; ++m)
#pragma unroll
    for (int e = 0; e < 4; ++e) red[warp][4 * m + e][lane] = fold_splits(acc[m], e);
  __syncthreads();
  {  // thread -> (local row lr, batch column b): D element e of lane (g, t) of m-tile lr / 16
    const int b = threadIdx.x & 7, lr = threadIdx.x >> 3, rr = lr & 15;
    const int e = 4 * (lr >> 4) + 2 * (rr >> 3) + (b & 1), src = 4 * (rr & 7) + (b >> 1);
    float v = red[0][e][src];
#pragma unroll
    for (int w = 1; w < kWarps; ++w) v += red[w][e][src];
    float iv = inv[0];  // inv[b] without a local-memory array (b varies per thread)
#pragma unroll
    for (int j = 1; j < kBatch; ++j) iv = b == j ? inv[j] : iv;
    res[b][lr] = v * iv;
  }
  __syncthreads();
  const int tt = threadIdx.x;
  if (tt >= 16 * nb) return;
  const int b = tt / 16, pi = tt % 16;
  qkv_finish_pair(p, b, unit, half * 16 + pi, res[b][pi], res[b][16 + pi]);
}

}  // namespace

bool qkv_rope_mma_supported(const QkvRopeParams& p) {
  return p.batch >= 2 && p.batch <= kBatch && p.hidden % 32 == 0;
}

Status launch_qkv_rope_mma(const QkvRopeParams& p, cudaStream_t s) {
  GS_RETURN_IF_ERROR(p.validate());
  if (!qkv_rope_mma_supported(p)) {
    return Unsupported("qkv_rope_mma_bf16w_f32a: needs batch 2..8 and hidden % 32 == 0");
  }
  auto* kernel = p.norm_w ? qkv_rope_mma_bf16w_f32a<true> : qkv_rope_mma_bf16w_f32a<false>;
  return launch_pdl(p.pdl, "qkv_rope_mma_bf16w_f32a", kernel,
                    dim3(2 * (p.n_heads + 2 * p.n_kv_heads)), dim3(kWarps * 32), 0, s, p);
}

}  // namespace gossamer::kern

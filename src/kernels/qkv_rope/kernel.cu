// qkv_rope_bf16w_f32a<BT>: (optional fused RMSNorm: each block recomputes the BT rows' 1/rms
// and normalises the activations inside the GEMV loads) grid.x = 2 * (nh + 2 kvh) blocks, one per
// half of a 64-row head
// ("unit": a q, k or v head); block = 8 warps x 4 rows = 32 rows: the 16 rotation pairs
// (i, i + 32) for i in [half*16, half*16 + 16), so the RoPE partner of every row is in the same
// block. grid.y tiles the batch by BT. The GEMV core (common/gemv_core.cuh) leaves the 32 x BT
// dot products in shared memory; then thread t < 16*BT finishes pair (b = t/16, i): bias, RoPE
// (cos/sin from pos[b] * inv_freq[i], scaled), and the store: q fp32, or k/v bf16 into the
// cache slot given by the block table.
#include "kernels/common/cuda_check.h"
#include "kernels/common/gemv_core.cuh"
#include "kernels/common/pdl.h"
#include "kernels/qkv_rope/params.h"

namespace gossamer::kern {
namespace {

constexpr int kWarps = 8, kRpw = 4, kRows = kWarps * kRpw;
static_assert(kRows == kHeadDim / 2, "a block covers the 16 rotation pairs of half a head");

template <int BT, bool NORM>
__global__ void __launch_bounds__(kWarps * 32) qkv_rope_bf16w_f32a(QkvRopeParams p) {
  __shared__ float res[BT][kRows];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int unit = blockIdx.x >> 1, half = blockIdx.x & 1;
  const int b0 = blockIdx.y * BT, nb = min(BT, p.batch - b0);
  // local row lr -> row inside the head: lr < 16 -> half*16 + lr, else 32 + half*16 + lr - 16.
  const uint16_t* rows[kRpw];
#pragma unroll
  for (int r = 0; r < kRpw; ++r) {
    const int lr = warp * kRpw + r;
    const int hr = lr < 16 ? half * 16 + lr : 32 + half * 16 + (lr - 16);
    rows[r] = p.w + (static_cast<size_t>(unit) * kHeadDim + hr) * p.hidden;
  }
  if (p.pdl && blockIdx.y == 0)
    warp_prefetch_rows<kRpw>(rows, p.hidden);  // weights: safe before the wait
  pdl_wait();  // x (residual or normed) comes from the previous kernel
  pdl_trigger();
  const float* x = p.x + static_cast<size_t>(b0) * p.hidden;
  float inv[BT];
#pragma unroll
  for (int b = 0; b < BT; ++b) inv[b] = 1.f;
  if constexpr (NORM) block_inv_rms<BT, kWarps>(x, p.hidden, nb, p.eps, inv);  // fused RMSNorm
  float acc[kRpw][BT];
  warp_gemv_bf16<BT, kRpw, NORM>(rows, p.hidden, x, nb, acc, p.norm_w, inv);
  if (lane == 0) {
#pragma unroll
    for (int r = 0; r < kRpw; ++r)
#pragma unroll
      for (int b = 0; b < BT; ++b) res[b][warp * kRpw + r] = acc[r][b];
  }
  __syncthreads();
  const int t = threadIdx.x;
  if (t >= 16 * nb) return;
  const int b = t / 16, pi = t % 16, i = half * 16 + pi;
  const size_t brow = static_cast<size_t>(unit) * kHeadDim;
  float x1 = res[b][pi] + (p.bias ? p.bias[brow + i] : 0.f);
  float x2 = res[b][16 + pi] + (p.bias ? p.bias[brow + i + 32] : 0.f);
  const int pos = p.pos[b0 + b];
  const bool is_v = unit >= p.n_heads + p.n_kv_heads;
  if (!is_v) {
    // The angle is formed and range-reduced in fp64: in fp32, pos * inv_freq loses ~1e-2 rad
    // at pos ~ 1e5. The reduced angle is then accurate enough for sincosf.
    const double ang = fmod(static_cast<double>(pos) * p.inv_freq[i], 6.283185307179586);
    float sn, cs;
    sincosf(static_cast<float>(ang), &sn, &cs);
    cs *= p.rope_scale;
    sn *= p.rope_scale;
    const float o1 = x1 * cs - x2 * sn, o2 = x2 * cs + x1 * sn;
    x1 = o1;
    x2 = o2;
  }
  if (unit < p.n_heads) {
    float* q = p.q + (static_cast<size_t>(b0 + b) * p.n_heads + unit) * kHeadDim;
    q[i] = x1;
    q[i + 32] = x2;
    return;
  }
  const int kh = is_v ? unit - p.n_heads - p.n_kv_heads : unit - p.n_heads;
  const int seq = p.row_seq ? p.row_seq[b0 + b] : b0 + b;
  const int blk = p.block_table[static_cast<size_t>(seq) * p.max_blocks + pos / p.block_size];
  if (blk < 0 || blk >= p.num_blocks) return;  // the host validates tables before the step
  uint16_t* cache = is_v ? p.v_cache : p.k_cache;
  uint16_t* dst =
      cache + ((static_cast<size_t>(blk) * p.n_kv_heads + kh) * p.block_size + pos % p.block_size) *
                  kHeadDim;
  dst[i] = f32_to_bf16(x1);
  dst[i + 32] = f32_to_bf16(x2);
}

template <int BT>
Status launch_bt(const QkvRopeParams& p, cudaStream_t s) {
  dim3 grid(2 * (p.n_heads + 2 * p.n_kv_heads), (p.batch + BT - 1) / BT);
  auto* kernel = p.norm_w ? qkv_rope_bf16w_f32a<BT, true> : qkv_rope_bf16w_f32a<BT, false>;
  return launch_pdl(p.pdl, "qkv_rope_bf16w_f32a", kernel, grid, dim3(kWarps * 32), 0, s, p);
}

}  // namespace

const char* qkv_rope_variant(int batch) {
  return batch <= 1   ? "qkv_rope_bf16w_f32a<BT=1>"
         : batch <= 4 ? "qkv_rope_bf16w_f32a<BT=4>"
                      : "qkv_rope_bf16w_f32a<BT=8>";
}

Status launch_qkv_rope(const QkvRopeParams& p, cudaStream_t s) {
  GS_RETURN_IF_ERROR(p.validate());
  if (p.batch <= 1) return launch_bt<1>(p, s);
  if (p.batch <= 4) return launch_bt<4>(p, s);
  return launch_bt<8>(p, s);
}

}  // namespace gossamer::kern

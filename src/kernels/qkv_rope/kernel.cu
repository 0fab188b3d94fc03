// qkv_rope_bf16w_f32a<BT>: (optional fused RMSNorm: each block recomputes the BT rows' 1/rms,
// scales the activations by the gain inside the GEMV loads and the dot products by 1/rms:
// dot(w, x * g) * inv, the bulk kernel's order, so the two are bit-identical) grid.x =
// 2 * (nh + 2 kvh) blocks, one per half of a 64-row head
// ("unit": a q, k or v head); block = 8 warps x 4 rows = 32 rows: the 16 rotation pairs
// (i, i + 32) for i in [half*16, half*16 + 16), so the RoPE partner of every row is in the same
// block. grid.y tiles the batch by BT. The GEMV core (common/gemv_core.cuh) leaves the 32 x BT
// dot products in shared memory; then thread t < 16*BT finishes pair (b = t/16, i): bias, RoPE
// (cos/sin from pos[b] * inv_freq[i], scaled), and the store: q fp32, or k/v bf16 into the
// cache slot given by the block table.
#include "kernels/common/cuda_check.h"
#include "kernels/common/gemv_core.cuh"
#include "kernels/common/pdl.h"
#include "kernels/qkv_rope/epilogue.cuh"
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
  float inv[BT], one[BT];
#pragma unroll
  for (int b = 0; b < BT; ++b) inv[b] = one[b] = 1.f;
  if constexpr (NORM) block_inv_rms_chunks<BT, kWarps>(x, p.hidden, nb, p.eps, inv);
  float acc[kRpw][BT];
  warp_gemv_bf16<BT, kRpw, NORM>(rows, p.hidden, x, nb, acc, p.norm_w, one);  // x * 1 * gain
  if (lane == 0) {
#pragma unroll
    for (int r = 0; r < kRpw; ++r)
#pragma unroll
      for (int b = 0; b < BT; ++b) res[b][warp * kRpw + r] = acc[r][b] * inv[b];
  }
  __syncthreads();
  const int t = threadIdx.x;
  if (t >= 16 * nb) return;
  const int b = t / 16, pi = t % 16;
  qkv_finish_pair(p, b0 + b, unit, half * 16 + pi, res[b][pi], res[b][16 + pi]);
}

template <int BT>
Status launch_bt(const QkvRopeParams& p, cudaStream_t s) {
  dim3 grid(2 * (p.n_heads + 2 * p.n_kv_heads), (p.batch + BT - 1) / BT);
  auto* kernel = p.norm_w ? qkv_rope_bf16w_f32a<BT, true> : qkv_rope_bf16w_f32a<BT, false>;
  return launch_pdl(p.pdl, "qkv_rope_bf16w_f32a", kernel, grid, dim3(kWarps * 32), 0, s, p);
}

}  // namespace

int qkv_rope_resolved_variant(const QkvRopeParams& p) {
  if (p.variant != 0) return p.variant;
  if (qkv_rope_bulk_supported(p)) return 2;
  // Past the bulk kernel's rows (1..4), the mma kernel: engine tg32 on an H100, 120b, warp ->
  // mma: b2 547 -> 530 t/s, b3 605 -> 610, b4 681 -> 702, b5 697 -> 739, b6 736 -> 786; bulk at
  // b2..4 beat both (docs/perf-notes.md "Session 20").
  return p.batch >= 3 && qkv_rope_mma_supported(p) ? 3 : 1;
}

const char* qkv_rope_variant(const QkvRopeParams& p) {
  const int v = qkv_rope_resolved_variant(p);
  if (v == 2) return "qkv_rope_bulk_bf16w_f32a";
  if (v == 3) return "qkv_rope_mma_bf16w_f32a";
  return p.batch <= 1   ? "qkv_rope_bf16w_f32a<BT=1>"
         : p.batch <= 4 ? "qkv_rope_bf16w_f32a<BT=4>"
                        : "qkv_rope_bf16w_f32a<BT=8>";
}

Status launch_qkv_rope(const QkvRopeParams& p, cudaStream_t s) {
  GS_RETURN_IF_ERROR(p.validate());
  const int v = qkv_rope_resolved_variant(p);
  if (v == 2) return launch_qkv_rope_bulk(p, s);
  if (v == 3) return launch_qkv_rope_mma(p, s);
  if (p.batch <= 1) return launch_bt<1>(p, s);
  if (p.batch <= 4) return launch_bt<4>(p, s);
  return launch_bt<8>(p, s);
}

}  // namespace gossamer::kern

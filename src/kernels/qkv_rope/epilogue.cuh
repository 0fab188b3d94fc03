// The per-pair epilogue shared by qkv_rope_bf16w_f32a (kernel.cu) and qkv_rope_bulk_bf16w_f32a
// (bulk.cu): rotation pair (i, i + 32) of head `unit` for batch row b, from its two raw dot
// products d1, d2: + bias, YaRN RoPE on q and k heads, store (q fp32; k / v bf16 into the paged
// cache slot of the row's position).
#pragma once

#include "kernels/common/device.cuh"
#include "kernels/qkv_rope/params.h"

namespace gossamer::kern {

__device__ __forceinline__ void qkv_finish_pair(const QkvRopeParams& p, int b, int unit, int i,
                                                float d1, float d2) {
  const size_t brow = static_cast<size_t>(unit) * kHeadDim;
  float x1 = d1 + (p.bias ? p.bias[brow + i] : 0.f);
  float x2 = d2 + (p.bias ? p.bias[brow + i + 32] : 0.f);
  const int pos = p.pos[b];
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
    float* q = p.q + (static_cast<size_t>(b) * p.n_heads + unit) * kHeadDim;
    q[i] = x1;
    q[i + 32] = x2;
    return;
  }
  const int kh = is_v ? unit - p.n_heads - p.n_kv_heads : unit - p.n_heads;
  const int seq = p.row_seq ? p.row_seq[b] : b;
  const int blk = p.block_table[static_cast<size_t>(seq) * p.max_blocks + pos / p.block_size];
  if (blk < 0 || blk >= p.num_blocks) return;  // the host validates tables before the step
  uint16_t* cache = is_v ? p.v_cache : p.k_cache;
  uint16_t* dst =
      cache + ((static_cast<size_t>(blk) * p.n_kv_heads + kh) * p.block_size + pos % p.block_size) *
                  kHeadDim;
  dst[i] = f32_to_bf16(x1);
  dst[i + 32] = f32_to_bf16(x2);
}

}  // namespace gossamer::kern

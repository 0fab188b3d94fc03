// The per-pair epilogue shared by qkv_rope_bf16w_f32a (kernel.cu) and qkv_rope_bulk_bf16w_f32a
// (bulk.cu): rotation pair (i, i + 32) of head `unit` for batch row b, from its two raw dot
// products d1, d2: + bias, YaRN RoPE on q and k heads, store (q fp32; k / v bf16 into the paged
// cache slot of the row's position). qkv_finish_pair = qkv_prep_pair (inputs) + qkv_store_pair.
#pragma once

#include "kernels/common/device.cuh"
#include "kernels/qkv_rope/params.h"

namespace gossamer::kern {

// What a pair needs besides its two dot products, all of it from weights and step inputs that
// no kernel of the step writes (bias, pos, block table): qkv_rope_bulk forms it before
// pdl_wait, so that only arithmetic and stores are left after the GEMV.
struct QkvPairPrep {
  float b1, b2;  // bias of rows i and i + 32
  float cs, sn;  // rope_scale * cos / sin of the angle (q and k heads)
  float* q;      // q heads: &q[b, head, 0]
  uint16_t* kv;  // k / v heads: the cache slot of the row's position (null: invalid table entry)
};

__device__ __forceinline__ QkvPairPrep qkv_prep_pair(const QkvRopeParams& p, int b, int unit,
                                                     int i) {
  QkvPairPrep r{};
  const size_t brow = static_cast<size_t>(unit) * kHeadDim;
  r.b1 = p.bias ? p.bias[brow + i] : 0.f;
  r.b2 = p.bias ? p.bias[brow + i + 32] : 0.f;
  const int pos = p.pos[b];
  const bool is_v = unit >= p.n_heads + p.n_kv_heads;
  if (!is_v) {
    // The angle is formed and range-reduced in fp64: in fp32, pos * inv_freq loses ~1e-2 rad
    // at pos ~ 1e5. The reduced angle is then accurate enough for sincosf.
    const double ang = fmod(static_cast<double>(pos) * p.inv_freq[i], 6.283185307179586);
    sincosf(static_cast<float>(ang), &r.sn, &r.cs);
    r.cs *= p.rope_scale;
    r.sn *= p.rope_scale;
  }
  if (unit < p.n_heads) {
    r.q = p.q + (static_cast<size_t>(b) * p.n_heads + unit) * kHeadDim;
    return r;
  }
  const int kh = is_v ? unit - p.n_heads - p.n_kv_heads : unit - p.n_heads;
  const int seq = p.row_seq ? p.row_seq[b] : b;
  const int blk = p.block_table[static_cast<size_t>(seq) * p.max_blocks + pos / p.block_size];
  if (blk < 0 || blk >= p.num_blocks) return r;  // the host validates tables before the step
  uint16_t* cache = is_v ? p.v_cache : p.k_cache;
  r.kv =
      cache + ((static_cast<size_t>(blk) * p.n_kv_heads + kh) * p.block_size + pos % p.block_size) *
                  kHeadDim;
  return r;
}

// The pair's outputs from its dot products d1, d2: + bias, RoPE (q and k heads), store.
__device__ __forceinline__ void qkv_store_pair(const QkvRopeParams& p, int unit, int i, float d1,
                                               float d2, const QkvPairPrep& r) {
  float x1 = d1 + r.b1, x2 = d2 + r.b2;
  if (unit < p.n_heads + p.n_kv_heads) {
    const float o1 = x1 * r.cs - x2 * r.sn, o2 = x2 * r.cs + x1 * r.sn;
    x1 = o1;
    x2 = o2;
  }
  if (r.q) {
    r.q[i] = x1;
    r.q[i + 32] = x2;
  } else if (r.kv) {
    r.kv[i] = f32_to_bf16(x1);
    r.kv[i + 32] = f32_to_bf16(x2);
  }
}

__device__ __forceinline__ void qkv_finish_pair(const QkvRopeParams& p, int b, int unit, int i,
                                                float d1, float d2) {
  qkv_store_pair(p, unit, i, d1, d2, qkv_prep_pair(p, b, unit, i));
}

}  // namespace gossamer::kern

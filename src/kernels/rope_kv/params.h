// Prefill RoPE + paged KV write on the output of the QKV GEMM (bias already added by the GEMM
// epilogue). Same math as qkv_rope (kernels/qkv_rope/params.h) minus the projection:
//   qkv[r] = [q heads (nh x 64) | k heads (kvh x 64) | v heads (kvh x 64)]   f32
//   q[r, h, :] = rope(qkv_q[r, h, :], pos[r]);  cache_k[slot(r)] = rope(k), cache_v[slot(r)] = v
// rope: half-split rotation of pairs (i, i + 32) by angle pos * inv_freq[i] (fp64 angle), cos
// and sin scaled by rope_scale (YaRN attention scaling). K/V are stored as bf16 (RNE) into
// [num_blocks, kvh, block_size, 64] at slot(r) = (block_table[row_seq[r] * max_blocks +
// pos[r] / block_size], pos[r] % block_size).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

#include "common/status.h"

namespace gossamer::kern {

struct RopeKvParams {
  const float* qkv = nullptr;            // [rows, ld] f32, ld >= (nh + 2 kvh) * 64
  const int32_t* pos = nullptr;          // [rows]
  const int32_t* row_seq = nullptr;      // [rows] block-table row; null: identity
  const int32_t* block_table = nullptr;  // [seqs, max_blocks]
  float* q = nullptr;                    // [rows, nh, 64] f32 out (may be null if q_bf16 set)
  uint16_t* q_bf16 = nullptr;            // [rows, nh, 64] bf16 out (optional)
  uint16_t* k_cache = nullptr;           // [num_blocks, kvh, block_size, 64] bf16
  uint16_t* v_cache = nullptr;           // same
  int rows = 0, ld = 0, n_heads = 0, n_kv_heads = 0;
  int block_size = 16, max_blocks = 0, num_blocks = 0;
  double inv_freq[32] = {};
  float rope_scale = 1.f;
  bool pdl = false;  // programmatic dependent launch (common/pdl.h); angles formed before the wait
  Status validate() const;
};

// Kernel rope_kv_f32: one block per row.
Status launch_rope_kv(const RopeKvParams& p, cudaStream_t stream);

// fp64 reference: q [rows, nh, 64]; k_out / v_out [rows, kvh, 64] (the values the kernel must
// have written into each row's cache slot).
std::vector<double> rope_kv_ref(const std::vector<float>& qkv, const std::vector<int32_t>& pos,
                                const RopeKvParams& shape, std::vector<double>* k_out,
                                std::vector<double>* v_out);

}  // namespace gossamer::kern

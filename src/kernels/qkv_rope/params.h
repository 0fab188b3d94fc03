// Fused QKV projection for decode: one bf16 GEMV over the concatenated [Wq; Wk; Wv] rows, + bias,
// YaRN RoPE (half-split rotation) on q and k, q written as fp32, k and v written as bf16 into a
// paged KV cache.
//   qkv[b] = Wqkv x[b] + bias                         (rows: nh*64 q, kvh*64 k, kvh*64 v)
//   q[b, h, :] = rope(qkv_q[b, h, :], pos[b]);  cache_k[slot(b)] = rope(k), cache_v[slot(b)] = v
// Paged cache layout (per layer): [num_blocks, kv_heads, block_size, 64] bf16;
// slot(b) = (block_table[b * max_blocks + pos[b] / block_size], pos[b] % block_size).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

#include "common/status.h"

namespace gossamer::kern {

inline constexpr int kHeadDim = 64;

struct QkvRopeParams {
  const uint16_t* w = nullptr;  // [(nh + 2 kvh) * 64, hidden] bf16
  const float* bias = nullptr;  // [(nh + 2 kvh) * 64] f32 (may be null)
  const float* x = nullptr;     // [batch, hidden] f32 (normed activations)
  // Fused RMSNorm: when set, x is the raw residual stream and the kernel uses
  // x / sqrt(mean(x^2) + eps) * norm_w instead ([hidden] bf16, 16-byte aligned).
  const uint16_t* norm_w = nullptr;
  float eps = 1e-5f;
  const int32_t* pos = nullptr;          // [batch] position of each row's token (device)
  const int32_t* block_table = nullptr;  // [seqs, max_blocks] physical block ids (device)
  const int32_t* row_seq = nullptr;      // [batch] table row of each activation row; null: identity
  float* q = nullptr;                    // [batch, nh, 64] f32 out
  uint16_t* k_cache = nullptr;           // [num_blocks, kvh, block_size, 64] bf16
  uint16_t* v_cache = nullptr;           // same
  int batch = 0, hidden = 0, n_heads = 0, n_kv_heads = 0;
  int block_size = 16, max_blocks = 0, num_blocks = 0;
  double inv_freq[kHeadDim / 2] = {};  // YaRN inverse frequencies (angles in fp64)
  float rope_scale = 1.f;              // multiplies cos and sin (YaRN attention scaling)
  bool pdl = false;                    // programmatic dependent launch (common/pdl.h)
  // 0 = auto, 1 = qkv_rope_bf16w_f32a<BT>, 2 = qkv_rope_bulk_bf16w_f32a (batch 1..4),
  // 3 = qkv_rope_mma_bf16w_f32a (batch 2..8)
  int variant = 0;
  int bulk_ring_bytes = 0;  // variant 2: weight ring bytes per block (0 = kQkvBulkRingBytes)
  Status validate() const;
};

// qkv_rope_bulk_bf16w_f32a (bulk.cu): batch 1..kQkvBulkMaxBatch, hidden <= kQkvBulkMaxHidden,
// sm_90.
inline constexpr int kQkvBulkMaxHidden = 8192;
inline constexpr int kQkvBulkMaxBatch = 4;
inline constexpr int kQkvBulkRingBytes = 48 * 1024;  // H100: docs/decode-overhead.md section 6
bool qkv_rope_bulk_supported(const QkvRopeParams& p);
Status launch_qkv_rope_bulk(const QkvRopeParams& p, cudaStream_t stream);
// Blocks of qkv_rope_bulk's kernel for p that fit on one SM (1: the launch keeps it to one).
Result<int> qkv_rope_bulk_blocks_per_sm(const QkvRopeParams& p);

// qkv_rope_mma_bf16w_f32a (mma.cu): batch 2..8, hidden % 32 == 0, tensor cores.
bool qkv_rope_mma_supported(const QkvRopeParams& p);
Status launch_qkv_rope_mma(const QkvRopeParams& p, cudaStream_t stream);

// Variant 0 resolves to 2 where qkv_rope_bulk_supported (1..4 rows), else 3 where
// qkv_rope_mma_supported (from 3 rows: in effect 5..8), else 1 (batch tile BT from `batch`).
Status launch_qkv_rope(const QkvRopeParams& p, cudaStream_t stream);
int qkv_rope_resolved_variant(const QkvRopeParams& p);
// Name of the kernel launch_qkv_rope runs (kernel-path report; only the shape fields matter).
const char* qkv_rope_variant(const QkvRopeParams& p);

// fp64 reference. Returns q [batch, nh, 64]; k_out/v_out receive [batch, kvh, 64] (the values the
// kernel must have written into the cache slots).
std::vector<double> qkv_rope_ref(const std::vector<uint16_t>& w, const std::vector<float>& bias,
                                 const std::vector<float>& x, const std::vector<int32_t>& pos,
                                 const QkvRopeParams& shape, std::vector<double>* k_out,
                                 std::vector<double>* v_out);

}  // namespace gossamer::kern

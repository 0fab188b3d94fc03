// Decode attention with attention sinks, optional sliding window and GQA (head_dim 64) over a
// paged bf16 KV cache, split over the context (flash-decoding): row b's query at position pos[b]
// attends to keys [lo, pos[b]], lo = max(0, pos[b] - window + 1) (window 0: lo = 0):
//   out[b, h, :] = sum_j softmax_j([s_j..., sink_h]) v_j,  s_j = scale * q[b, h] . k_j
// (the sink's column is part of the softmax and then dropped).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"

namespace gossamer::kern {

struct AttnParams {
  const float* q = nullptr;              // [batch, nh, 64] f32 (rotated)
  const uint16_t* k_cache = nullptr;     // [num_blocks, kvh, block_size, 64] bf16
  const uint16_t* v_cache = nullptr;     // same
  const int32_t* block_table = nullptr;  // [seqs, max_blocks]
  const int32_t* row_seq = nullptr;      // [batch] table row of each query row; null: identity
  const int32_t* pos = nullptr;          // [batch]
  const float* sinks = nullptr;          // [nh] f32
  float* part_o = nullptr;               // [batch, nh, splits, 64] f32 scratch
  float* part_ml = nullptr;  // [batch, nh, splits, 2] f32 scratch (max, sum) in log2 units
  float* out = nullptr;      // [batch, nh * 64] f32
  int batch = 0, n_heads = 0, n_kv_heads = 0;
  int block_size = 16, max_blocks = 0, num_blocks = 0;
  int window = 0;  // sliding window in tokens, 0 = full attention
  int splits = 1;  // context splits per (row, kv head); scratch sized for this
  float scale = 0.125f;
  // 0: the scalar split kernel below; 1: the tensor-core kernel of kernels/flash_attn (narrow
  // one-warp tiles for batch <= 64, wide tiles above) with precise bf16 hi/lo inputs (~1e-6);
  // 2: the same with plain bf16 q and P (~2e-3). Same partials layout for all.
  int kernel = 1;
  int stages = 0;    // kernels 1-2: cp.async ring depth (FlashAttnParams::stages), 0 default
  bool pdl = false;  // programmatic dependent launch (common/pdl.h)
  // One-kernel decode (kernels 1-2, batch <= 64): with `tickets` set, attn_decode_mma_bf16kv_f32q
  // chooses the number of splits per row on the device (ceil(key tiles / split_tiles), at most
  // `splits`; idle CTAs exit), a single split writes `out` directly, and with several the last
  // CTA of each (row, kv head) merges the partials (ticket counter) -- no combine kernel.
  // [batch * n_kv_heads] int32, all zero before the launch; the kernel leaves them zero.
  // Null: the split kernel + combine kernel of kernels/flash_attn.
  int32_t* tickets = nullptr;
  int split_tiles = 0;  // one-kernel decode: minimum 64-key tiles per split (0: default 4)
  Status validate() const;
};

// kernel 0: attn_decode_split_bf16kv_f32q (grid splits x kvh x batch) + attn_combine_f32;
// kernel 1: launch_flash_attn (kernels/flash_attn/params.h) over the same buffers, or with
// `tickets` the one-kernel decode (decode_mma.cu).
Status launch_attention(const AttnParams& p, cudaStream_t stream);
// The kernel(s) launch_attention runs for a kernel-1/2 decode of `batch` rows with `splits`
// (and tickets when `one_kernel`), e.g. "attn_decode_mma_bf16kv_f32q(splits<=64)".
std::string attention_variant(int batch, int splits, bool one_kernel);
// A split count that gives ~4 CTAs per SM for this batch and kv-head count (<= max_splits).
int attention_splits(int batch, int n_kv_heads, int num_sms, int max_splits = 64);

// fp64 reference over a host copy of the cache (same layout as the device one).
std::vector<double> attention_ref(const std::vector<float>& q, const std::vector<uint16_t>& k_cache,
                                  const std::vector<uint16_t>& v_cache,
                                  const std::vector<int32_t>& block_table,
                                  const std::vector<int32_t>& pos, const std::vector<float>& sinks,
                                  const AttnParams& shape);

}  // namespace gossamer::kern

// Internals of the CPU reference forward (fp32): the prepared weights, the paged KV pools, the
// per-layer attention and MoE blocks, and the activation dumper. Used by cpu_runner.cpp and the
// engine tests; the public entry point is engine/cpu_runner.h.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "common/status.h"
#include "common/thread_pool.h"
#include "engine/cpu_ops.h"
#include "engine/model_runner.h"
#include "engine/rope.h"
#include "model/weights.h"

namespace gossamer::cpu {

// Checked views of one layer plus its small vectors converted to fp32 once.
struct PreparedLayer {
  const LayerWeights* w = nullptr;
  bool sliding = false;
  int64_t kind_index = 0;  // index among the layers of the same kind (its slot in its KV pool)
  MatView q, k, v, o, router;
  std::vector<float> attn_norm, q_b, k_b, v_b, o_b, sinks, mlp_norm, router_b;
};

struct PreparedModel {
  MatView embed, lm_head;
  std::vector<float> final_norm;
  std::vector<PreparedLayer> layers;
  RopeTable rope;
  int64_t n_full = 0, n_sliding = 0;  // layers of each kind
};

// Validates every tensor against the config (shape, dtype; errors name the tensor) and prepares.
Result<PreparedModel> prepare_model(const ModelConfig& cfg, const ModelWeights& w);

// One KV pool: K and V as [num_blocks][layers][block_size][kv_heads][head_dim] fp32.
struct KvPool {
  int64_t num_blocks = 0, layers = 0, block_size = 0, kv_heads = 0, head_dim = 0;
  std::vector<float> k, v;
  void allocate();
  int64_t offset(int64_t block, int64_t layer, int64_t slot) const {
    return ((block * layers + layer) * block_size + slot) * kv_heads * head_dim;
  }
};

// A token of the flattened step batch.
struct TokenSlot {
  int64_t pos = 0;
  const SeqChunk* chunk = nullptr;
};

// Writes named activations as .npy files DIR/s<step>.L<layer>.<name>.npy (layer < 0: no L part).
struct Dumper {
  std::string dir;  // empty: disabled
  int64_t step = 0;
  bool enabled() const { return !dir.empty(); }
  Status dump(int64_t layer, const std::string& name, const float* data,
              const std::vector<int64_t>& shape) const;
};

// Everything a layer block needs besides its weights.
struct ForwardCtx {
  const ModelConfig* cfg = nullptr;
  const PreparedModel* model = nullptr;
  ThreadPool* pool = nullptr;
  KvPool* kv_full = nullptr;
  KvPool* kv_sliding = nullptr;
  std::span<const TokenSlot> tokens;
  const Dumper* dumper = nullptr;
  bool kv_bf16 = false;  // round K/V to bf16 when writing them to the cache
};

// x [T, hidden] += o_proj(attention(rmsnorm(x))), writing K/V of the T tokens into the cache.
Status attention_block(const ForwardCtx& ctx, int64_t layer, std::vector<float>& x);
// x [T, hidden] += moe(rmsnorm(x)).
Status moe_block(const ForwardCtx& ctx, int64_t layer, std::vector<float>& x);

}  // namespace gossamer::cpu

// The boundary between the runtime (scheduler, server: no CUDA headers) and a model backend
// (CPU reference or CUDA). A backend owns the weights and a paged KV cache made of physical
// blocks of `block_size` token slots; the runtime owns the block tables and decides which tokens
// each step computes (vLLM v1 style: every sequence catches up to its computed tokens).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "common/status.h"
#include "model/config.h"

namespace gossamer {

// Which attention pool a block table indexes: full-attention layers keep every position;
// sliding-window layers only need the last `sliding_window` positions, so their table may hold
// kNoBlock for blocks that fell out of the window (those blocks are freed and reused).
inline constexpr int32_t kNoBlock = -1;

struct KvCacheSpec {
  int64_t block_size = 16;       // token slots per block
  int64_t num_blocks_full = 0;   // physical blocks in the full-attention pool
  int64_t num_blocks_sliding = 0;  // physical blocks in the sliding-window pool
};

enum class LogitsMode { kNone, kLast, kAll };

// One sequence's share of a step: compute `tokens` at positions [pos0, pos0 + tokens.size()).
// Positions < pos0 must already be in the KV cache (through the block tables).
struct SeqChunk {
  std::span<const int32_t> tokens;
  int64_t pos0 = 0;
  std::span<const int32_t> blocks_full;     // logical block i -> physical block (full pool)
  std::span<const int32_t> blocks_sliding;  // logical block i -> physical block or kNoBlock
  LogitsMode logits = LogitsMode::kLast;
};

struct StepOutput {
  // Rows of logits, in the order of the chunks, kLast contributing one row and kAll
  // tokens.size() rows. Shape [rows, vocab], float32.
  std::vector<float> logits;
  int64_t rows = 0;
};

class ModelRunner {
 public:
  virtual ~ModelRunner() = default;
  virtual const ModelConfig& config() const = 0;
  virtual const KvCacheSpec& kv_spec() const = 0;
  // Human-readable backend name and kernel-path report ("cpu-reference fp32", ...).
  virtual std::string describe() const = 0;
  // Runs one step over several sequences. Writes K/V for the new tokens into the cache.
  virtual Status step(std::span<const SeqChunk> chunks, StepOutput* out) = 0;
  // Copies one physical block to another in the given pool (copy-on-write for prefix sharing).
  virtual Status copy_block(bool sliding_pool, int32_t src, int32_t dst) = 0;
};

}  // namespace gossamer

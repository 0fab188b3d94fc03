// A deterministic ModelRunner for tests and load tests: no weights. Its "KV cache" stores the
// token ids themselves in paged blocks; the logits for position p are a hash of every token at
// positions [0, p] read back through the full-pool block table and of the last `sliding_window`
// tokens read back through the sliding-pool table. Any block-table mistake (a freed, shared or
// overwritten block, a missing window block) changes the logits or is reported as an error, and
// fake_reference_logits() gives the expected row from the plain token list.
#pragma once

#include <chrono>
#include <cstdint>
#include <span>
#include <vector>

#include "engine/model_runner.h"

namespace gossamer {

// A small config (alternating sliding/full layers) that the FakeRunner and the scheduler accept.
ModelConfig fake_model_config(int64_t vocab, int64_t sliding_window, int64_t max_len);

// Logits row [vocab] for the next token after `seq` (seq = tokens at positions 0..p).
void fake_reference_logits(std::span<const int32_t> seq, int64_t sliding_window,
                           std::span<float> out);

class FakeRunner final : public ModelRunner {
 public:
  FakeRunner(ModelConfig cfg, KvCacheSpec spec,
             std::chrono::microseconds step_delay = std::chrono::microseconds(0));
  const ModelConfig& config() const override { return cfg_; }
  const KvCacheSpec& kv_spec() const override { return spec_; }
  std::string describe() const override { return "fake (hash logits, token-id KV cache)"; }
  Status step(std::span<const SeqChunk> chunks, StepOutput* out) override;
  Status copy_block(bool sliding_pool, int32_t src, int32_t dst) override;
  int64_t steps() const { return steps_; }

 private:
  Result<int32_t> read(bool sliding, std::span<const int32_t> table, int64_t pos) const;
  Status write(bool sliding, std::span<const int32_t> table, int64_t pos, int32_t tok);

  ModelConfig cfg_;
  KvCacheSpec spec_;
  std::chrono::microseconds delay_;
  std::vector<int32_t> full_kv_;     // [num_blocks_full * block_size] token ids, -1 = empty
  std::vector<int32_t> sliding_kv_;  // [num_blocks_sliding * block_size]
  int64_t steps_ = 0;
};

}  // namespace gossamer

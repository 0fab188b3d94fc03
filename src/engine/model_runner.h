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
  int64_t block_size = 16;         // token slots per block
  int64_t num_blocks_full = 0;     // physical blocks in the full-attention pool
  int64_t num_blocks_sliding = 0;  // physical blocks in the sliding-window pool
};

enum class LogitsMode { kNone, kLast, kAll };

// A generated token as returned to clients (runtime/request.h re-exports it through this header;
// it lives here so that a runner that samples on the device can return it).
struct TokenLogprob {
  int32_t token = 0;
  float logprob = 0.f;
};

struct SampledToken {
  int32_t token = 0;
  float logprob = 0.f;            // log-softmax of the chosen token (before sampling filters)
  std::vector<TokenLogprob> top;  // the top_logprobs most likely tokens
};

// Sampling of a kLast chunk's logits row on the device (runners whose samples_on_device() is
// true), with the reference CPU sampler's rule (runtime/sampler.h): penalties, logprobs,
// temperature 0 = greedy, else softmax(z / T), top_k, top_p, min_p and a draw from a
// counter-based generator of (seed, counter), so a fixed seed reproduces a completion.
// penalty_tokens: the ids generated so far (when a penalty is set) and the logit_bias ids.
struct DeviceSampling {
  double temperature = 1.0;
  double top_p = 1.0;
  int64_t top_k = 0;  // 0 = off
  double min_p = 0.0;
  double presence_penalty = 0.0;
  double frequency_penalty = 0.0;
  int64_t top_logprobs = 0;  // alternatives returned (0..20)
  uint64_t seed = 0;
  uint64_t counter = 0;     // index of the token being generated (0 = first output token)
  int64_t vocab_limit = 0;  // ids >= vocab_limit are never sampled (0 = the whole row)
  std::span<const int32_t> penalty_tokens;  // distinct ids (see above)
  std::span<const int32_t> penalty_counts;  // how often each was generated (same length)
  // Empty, or (same length) a logit_bias added to each listed id before the penalties; ids
  // with a bias but never generated are listed with count 0.
  std::span<const float> penalty_bias;
};

// Prompt scoring of a kAll chunk's rows on the device (runners whose samples_on_device() is
// true), instead of copying each ~vocab-float row to the host: row j with targets[j] >= 0
// reports log_softmax(row j)[targets[j]] and the top_logprobs most likely ids, with ids >=
// vocab_limit masked (the rule of score_token in runtime/sampler.h), in StepOutput::scored.
// Rows with targets[j] < 0 come back as host logits rows, as without scoring.
struct DeviceScoring {
  std::span<const int32_t> targets;  // [tokens.size()] the id each row scores, or < 0
  int64_t top_logprobs = 0;          // alternatives returned (0..20)
  int64_t vocab_limit = 0;           // 0 = the whole row
};

// One sequence's share of a step: compute `tokens` at positions [pos0, pos0 + tokens.size()).
// Positions < pos0 must already be in the KV cache (through the block tables).
struct SeqChunk {
  std::span<const int32_t> tokens;
  int64_t pos0 = 0;
  std::span<const int32_t> blocks_full;     // logical block i -> physical block (full pool)
  std::span<const int32_t> blocks_sliding;  // logical block i -> physical block or kNoBlock
  LogitsMode logits = LogitsMode::kLast;
  // kLast only, honoured when the runner samples_on_device(): sample this row on the device
  // and return the token in StepOutput::sampled instead of the logits row. Null: logits.
  const DeviceSampling* sampling = nullptr;
  // kAll only, honoured when the runner samples_on_device(); null: every row as host logits.
  const DeviceScoring* scoring = nullptr;
};

struct StepOutput {
  // Rows of logits, in the order of the chunks, kLast contributing one row and kAll
  // tokens.size() rows. Shape [rows, vocab], float32.
  // Chunks sampled on the device (SeqChunk::sampling) and rows scored on the device
  // (SeqChunk::scoring) contribute no row here.
  std::vector<float> logits;
  int64_t rows = 0;
  // One entry per chunk with SeqChunk::sampling set, in chunk order. token < 0: that row's
  // logits were not finite (NaN or +inf), nothing was sampled.
  std::vector<SampledToken> sampled;
  // One entry per row scored on the device (SeqChunk::scoring, targets >= 0), in chunk and row
  // order: token = the target (-1: the row was not finite, nothing was scored), logprob, top.
  // Those rows contribute no row to `logits`.
  std::vector<SampledToken> scored;
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
  // True when step() honours SeqChunk::sampling (samples on the device, returns tokens only).
  virtual bool samples_on_device() const { return false; }
};

}  // namespace gossamer

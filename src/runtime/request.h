// A generation request as the runtime sees it, and the thread-safe stream through which the
// engine thread hands its tokens to an HTTP handler.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "common/status.h"
#include "engine/model_runner.h"
#include "runtime/block_manager.h"

namespace gossamer {

using Clock = std::chrono::steady_clock;

// Optional restriction of a request's next token (grammar steering, e.g. tool_choice "required"
// with several tools: only tokens that continue one of the tool names). Called on the engine
// thread before each sampled token with the tokens generated so far; returns the allowed ids, or
// std::nullopt when the next token is unrestricted. Must not block.
class TokenConstraint {
 public:
  virtual ~TokenConstraint() = default;
  virtual std::optional<std::vector<int32_t>> allowed(std::span<const int32_t> generated) = 0;
};

// Per-request sampling and stop parameters (OpenAI names).
struct GenerationParams {
  double temperature = 1.0;  // 0 = greedy
  double top_p = 1.0;
  int64_t top_k = 0;  // 0 = off
  double min_p = 0.0;
  double presence_penalty = 0.0;
  double frequency_penalty = 0.0;
  std::optional<uint64_t> seed;
  int64_t top_logprobs = 0;  // alternatives returned per token (0..20)
  bool logprobs = false;
  // Prompt logprobs (legacy Completions `echo` + `logprobs`): -1 = off, else the alternatives
  // returned per prompt token (0..20). Prompt position i >= 1 gets log p(prompt[i] | prompt[<i])
  // under log_softmax of the row at i - 1 over ids < vocab_limit (the sampler's logprob rule;
  // logit_bias and penalties do not apply); position 0 gets no entry (StreamChunk).
  int64_t prompt_logprobs = -1;
  int64_t max_tokens = 256;             // generated tokens, all channels included; 0 only with
                                        // prompt_logprobs (score the prompt, finish with kLength)
  std::vector<int32_t> stop_token_ids;  // finish (reason stop) when sampled
  std::optional<std::chrono::milliseconds> timeout;  // per-request deadline from arrival
  std::shared_ptr<TokenConstraint> constraint;       // null: no restriction (see above)
  // Ids >= vocab_limit are never sampled (0 = every logits row). The model has more logits
  // rows (201088) than the tokenizer has ids (200019); the scheduler fills this from
  // SchedulerOptions::vocab_limit when it is 0 or larger.
  int64_t vocab_limit = 0;
  // OpenAI logit_bias: (id, bias) with distinct ids and bias in [-100, 100], added to the logits
  // before penalties, logprobs and sampling. The scheduler rejects ids outside the vocabulary.
  std::vector<std::pair<int32_t, float>> logit_bias;

  Status validate() const;  // ranges; the message names the field
};

// TokenLogprob and SampledToken are defined in engine/model_runner.h (device sampling returns
// them).

enum class FinishReason { kNone, kStop, kLength, kCancelled, kTimeout, kError };
const char* finish_reason_name(FinishReason r);  // "stop", "length", "cancelled", ...

// What a consumer receives: the tokens produced since its last read, and the end state.
struct StreamChunk {
  std::vector<SampledToken> tokens;
  // Prompt logprobs (GenerationParams::prompt_logprobs), in prompt order from position 1 (the
  // first prompt token has no logprob and no entry): entry j is prompt position j + 1, its token
  // that prompt token. Every entry arrives before the first generated token, exactly once.
  std::vector<SampledToken> prompt_logprobs;
  bool finished = false;
  FinishReason reason = FinishReason::kNone;
  int32_t stop_token = -1;  // the stop token id that ended it, when reason == kStop
  std::string error;        // when reason == kError
  int64_t prompt_tokens = 0;
  int64_t cached_tokens = 0;  // prompt tokens served from the prefix cache
};

// Single producer (engine thread), single consumer (HTTP handler). The consumer may cancel at
// any time; the engine notices at its next step and frees the request's KV blocks.
class RequestStream {
 public:
  void push(const SampledToken& t);
  void push_prompt_logprobs(std::vector<SampledToken> entries);  // appended in order
  void set_prompt_info(int64_t prompt_tokens, int64_t cached_tokens);
  void finish(FinishReason reason, int32_t stop_token = -1, std::string error = {});
  // Waits up to `timeout` for news; moves it into *out (tokens since the last read, end state).
  // Returns false on timeout with nothing new.
  bool wait(StreamChunk* out, std::chrono::milliseconds timeout);
  void cancel();
  // The consumer ended the request itself because its output is complete (a stop string
  // matched): the engine drops it as for cancel() but counts it as finished with reason stop.
  void stop_early();
  bool cancelled() const;
  bool stopped_early() const;
  bool finished() const;

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  StreamChunk pending_;
  bool news_ = false;
  bool cancelled_ = false;
  bool stopped_early_ = false;
  bool finished_ = false;
};

// Runtime state of one request (owned by the scheduler).
struct Request {
  uint64_t id = 0;
  std::vector<int32_t> tokens;  // prompt followed by the generated tokens
  int64_t num_prompt = 0;
  int64_t num_computed = 0;  // tokens whose KV is in the cache
  int64_t num_cached = -1;   // prompt tokens found in the prefix cache at first admission
  int64_t num_preemptions = 0;
  // Prompt logprobs: the next prompt position whose entry is reported (position p comes from
  // the logits row of position p - 1). Survives preemption, so nothing is reported twice.
  int64_t prompt_lp_next = 1;
  GenerationParams params;
  SeqBlocks blocks;
  std::shared_ptr<RequestStream> stream;
  std::mt19937_64 rng;
  uint64_t sample_seed = 0;  // params.seed, or a random one drawn at admission (device draws)
  Clock::time_point arrival{};
  Clock::time_point last_token{};
  int64_t num_output() const { return static_cast<int64_t>(tokens.size()) - num_prompt; }
  // True while some prompt position's logprob (prompt_logprobs >= 0) is not yet reported.
  bool owes_prompt_logprobs() const {
    return params.prompt_logprobs >= 0 && prompt_lp_next < num_prompt;
  }
};

}  // namespace gossamer

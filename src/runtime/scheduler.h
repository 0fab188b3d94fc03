// Continuous-batching scheduler (vLLM v1 invariant): each step, every running request catches
// up toward its tokens (prompt + generated) under a per-step token budget, so chunked prefills
// and decodes share a step. FCFS: running requests first, in arrival order, then waiting ones
// while budget, sequence slots and KV blocks last. When a running request needs a block and
// none is free, the most recently admitted running request is preempted: its blocks are
// released (full blocks stay in the prefix cache) and it goes back to the front of the waiting
// queue, to be recomputed later (its tokens so far become its prompt).
//
// Prompt logprobs (GenerationParams::prompt_logprobs >= 0): the request skips the prefix cache
// for the positions it still has to report (a cached position has no logits row), and its prompt
// chunks are computed with LogitsMode::kAll, at most prompt_logprob_rows rows per request and
// prompt_logprob_step_rows per step. Each row reports the next prompt token's logprob
// (score_token in runtime/sampler.h) to the stream: scored on the device when the runner
// samples_on_device() (SeqChunk::scoring: only the scores come back), else from host logits
// rows (vocab floats a row);
// Request::prompt_lp_next remembers what was reported, so a recomputation after preemption reports
// nothing twice. The row of the last prompt position samples the first generated token on the host
// when it falls in such a chunk; with max_tokens 0 the request finishes (reason length) once every
// position is reported, without sampling.
//
// Single-threaded: the Engine calls it from its own thread.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <random>
#include <vector>

#include "common/thread_pool.h"
#include "engine/model_runner.h"
#include "runtime/block_manager.h"
#include "runtime/metrics.h"
#include "runtime/request.h"
#include "runtime/token_sampler.h"

namespace gossamer {

struct SchedulerOptions {
  int64_t max_num_seqs = 64;              // running requests at most
  int64_t max_num_batched_tokens = 2048;  // tokens computed per step at most
  int64_t max_model_len = 0;              // prompt + output at most (0: the model's limit)
  bool prefix_caching = true;
  // Ids >= vocab_limit are never sampled (0: every logits row). Set it to the tokenizer's
  // vocab_size(): gpt-oss has 201088 logits rows for 200019 token ids. Applied to every request
  // (GenerationParams::vocab_limit) at add().
  int64_t vocab_limit = 0;
  // Prompt logprobs: logits rows (positions) per request per step, and per step in all.
  int64_t prompt_logprob_rows = 256;
  int64_t prompt_logprob_step_rows = 256;
  Status validate() const;
};

struct StepResult {
  int64_t scheduled_requests = 0;
  int64_t scheduled_tokens = 0;
  int64_t preempted = 0;
  int64_t finished = 0;
};

class Scheduler {
 public:
  // metrics may be null.
  Scheduler(const ModelConfig& cfg, const KvCacheSpec& spec, SchedulerOptions opts,
            Metrics* metrics);

  int64_t max_model_len() const { return max_model_len_; }
  // Rejects (InvalidArgument, naming the limit) a request that can never run: empty prompt,
  // token ids out of range, prompt + max_tokens beyond max_model_len or beyond what the KV
  // pools can hold for one sequence.
  Status check(const std::vector<int32_t>& prompt, const GenerationParams& params) const;
  // Queues a checked request (FCFS).
  Status add(std::unique_ptr<Request> req);

  // Drops cancelled and timed-out requests (finishing their streams), schedules, runs one
  // model step, samples, and finishes requests that hit a stop condition. Tokens are sampled
  // on the device when runner.samples_on_device() (SeqChunk::sampling; same rule, draws from
  // splitmix64(Request::sample_seed, output index)), else on the host with `sampler`
  // (Request::rng). Rows whose TokenConstraint restricts the next token always take the host
  // path (the row's logits are copied, every other id masked to -inf).
  Result<StepResult> step(ModelRunner& runner, TokenSampler& sampler);
  // Finishes every request with `reason` (shutdown).
  void abort_all(FinishReason reason, const std::string& why);

  bool has_work() const { return !running_.empty() || !waiting_.empty(); }
  int64_t num_running() const { return static_cast<int64_t>(running_.size()); }
  int64_t num_waiting() const { return static_cast<int64_t>(waiting_.size()); }
  const KvBlockManager& blocks() const { return kv_; }

 private:
  struct Scheduled {
    Request* req;
    int64_t num_new;
  };
  // How one chunk's next token is sampled (kept alive across runner.step: SeqChunk points here).
  struct RowSampling {
    bool wanted = false;  // the chunk's last row samples the request's next token
    bool on_device = false;
    std::optional<std::vector<int32_t>> allowed;  // TokenConstraint restriction (host path)
    DeviceSampling dev;
    std::vector<int32_t> pen_tokens, pen_counts;  // dev.penalty_* view these
    std::vector<float> pen_bias;                  // dev.penalty_bias views it (logit_bias)
    DeviceScoring score;                          // SeqChunk::scoring (device runners)
    std::vector<int32_t> score_targets;           // score.targets views it
  };
  // Where the next chunk's share of a StepOutput starts: host logits row, sampled, scored.
  struct OutCursor {
    int64_t row = 0;
    size_t sampled = 0, scored = 0;
  };
  // The next chunk of r under `budget` tokens and `*rows_left` prompt-logprob rows (consumed).
  int64_t next_chunk(const Request& r, int64_t budget, int64_t* rows_left) const;
  // Takes cached prefix blocks for a request entering the running set (none for positions
  // whose prompt logprobs are still owed).
  void acquire_prefix(Request* r);
  SeqChunk make_chunk(const Scheduled& s, bool device, RowSampling* rs);
  // Reports the prompt logprobs of a kAll chunk's rows (positions [pos0, pos0 + n)): from host
  // logits rows, or the entries the runner scored on the device.
  Status report_prompt_logprobs(Request* r, int64_t pos0, std::span<const float> rows,
                                int64_t vocab);
  Status report_scored(Request* r, int64_t pos0, std::span<const SampledToken> scored);
  // Handles one scheduled chunk's output after the step; true when r finished.
  Result<bool> after_chunk(Request* r, const SeqChunk& c, const RowSampling& rs,
                           const StepOutput& out, OutCursor* at, TokenSampler& sampler);
  void prepare_sampling(Request* r, bool device, RowSampling* s);
  static void build_penalty_list(const GenerationParams& p, std::span<const int32_t> generated,
                                 RowSampling* s);
  Result<SampledToken> sample_on_host(Request* r, std::span<const float> logits,
                                      const RowSampling& s, TokenSampler& sampler);
  // Applies a sampled token (or the sampling error) to r; true when r finished.
  bool take_sample(Request* r, const Result<SampledToken>& t);
  void reap_cancelled();
  std::vector<Scheduled> schedule(int64_t* preempted);
  void preempt(Request* r);
  // Applies one sampled token; returns true when the request is finished.
  bool append_token(Request* r, const SampledToken& t);
  void finish(Request* r, FinishReason reason, int32_t stop_token, const std::string& err);
  void remove_finished();
  void update_gauges();

  ModelConfig cfg_;
  SchedulerOptions opts_;
  int64_t max_model_len_;
  KvBlockManager kv_;
  Metrics* metrics_;
  std::vector<std::unique_ptr<Request>> running_;  // admission order
  std::deque<std::unique_ptr<Request>> waiting_;
  std::vector<float> logits_scratch_;
  std::random_device seed_source_;          // seeds of requests without params.seed
  std::unique_ptr<ThreadPool> score_pool_;  // prompt logprob rows (made on first use)
};

}  // namespace gossamer

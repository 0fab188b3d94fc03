#include "runtime/scheduler.h"

#include <algorithm>
#include <string>

namespace gossamer {

Status SchedulerOptions::validate() const {
  if (max_num_seqs < 1) return InvalidArgument("max_num_seqs must be >= 1");
  if (max_num_batched_tokens < 1) return InvalidArgument("max_num_batched_tokens must be >= 1");
  if (max_model_len < 0) return InvalidArgument("max_model_len must be >= 0");
  if (vocab_limit < 0) return InvalidArgument("vocab_limit must be >= 0");
  if (prompt_logprob_rows < 1) return InvalidArgument("prompt_logprob_rows must be >= 1");
  if (prompt_logprob_step_rows < 1) {
    return InvalidArgument("prompt_logprob_step_rows must be >= 1");
  }
  return Status::Ok();
}

namespace {
bool has_sliding_layers(const ModelConfig& cfg) {
  return std::find(cfg.layer_types.begin(), cfg.layer_types.end(), LayerType::kSlidingAttention) !=
         cfg.layer_types.end();
}
}  // namespace

Scheduler::Scheduler(const ModelConfig& cfg, const KvCacheSpec& spec, SchedulerOptions opts,
                     Metrics* metrics)
    : cfg_(cfg),
      opts_(opts),
      max_model_len_(opts.max_model_len > 0 ? opts.max_model_len : cfg.max_position_embeddings),
      kv_(spec, has_sliding_layers(cfg) ? cfg.sliding_window : 0, opts.prefix_caching),
      metrics_(metrics) {}

Status Scheduler::check(const std::vector<int32_t>& prompt, const GenerationParams& p) const {
  GS_RETURN_IF_ERROR(p.validate());
  if (prompt.empty()) return InvalidArgument("the prompt is empty (0 tokens)");
  for (size_t i = 0; i < prompt.size(); ++i) {
    if (prompt[i] < 0 || prompt[i] >= cfg_.vocab_size) {
      return InvalidArgument("prompt token " + std::to_string(i) + " = " +
                             std::to_string(prompt[i]) + " is outside the vocabulary [0, " +
                             std::to_string(cfg_.vocab_size) + ")");
    }
  }
  for (const auto& [id, bias] : p.logit_bias) {
    if (id >= cfg_.vocab_size) {
      return InvalidArgument("logit_bias token id " + std::to_string(id) +
                             " is outside the vocabulary [0, " + std::to_string(cfg_.vocab_size) +
                             ")");
    }
  }
  // Compared without forming prompt + max_tokens, which overflows for max_tokens near INT64_MAX.
  const int64_t n_prompt = static_cast<int64_t>(prompt.size());
  if (n_prompt > max_model_len_ || p.max_tokens > max_model_len_ - n_prompt) {
    const bool small = p.max_tokens <= INT64_MAX - n_prompt;
    return OutOfRange("this model's maximum context length is " + std::to_string(max_model_len_) +
                      " tokens; the request has " + std::to_string(n_prompt) +
                      " prompt tokens + max_tokens " + std::to_string(p.max_tokens) +
                      (small ? " = " + std::to_string(n_prompt + p.max_tokens) : ""));
  }
  const int64_t total = n_prompt + p.max_tokens;
  const int64_t need_full = kv_.full_blocks_needed(total);
  const int64_t need_sliding = kv_.sliding_blocks_needed(total, opts_.max_num_batched_tokens);
  if (need_full > kv_.full_pool().num_blocks() || need_sliding > kv_.sliding_pool().num_blocks()) {
    return OutOfRange("prompt + max_tokens = " + std::to_string(total) +
                      " tokens does not fit in the KV cache (" +
                      std::to_string(kv_.full_pool().num_blocks()) + " blocks of " +
                      std::to_string(kv_.block_size()) + " tokens)");
  }
  return Status::Ok();
}

Status Scheduler::add(std::unique_ptr<Request> req) {
  GS_RETURN_IF_ERROR(check(req->tokens, req->params));
  req->num_prompt = static_cast<int64_t>(req->tokens.size());
  req->sample_seed = req->params.seed ? *req->params.seed
                                      : (static_cast<uint64_t>(seed_source_()) << 32) ^
                                            static_cast<uint64_t>(seed_source_());
  req->rng.seed(req->sample_seed);
  if (opts_.vocab_limit > 0 &&
      (req->params.vocab_limit == 0 || req->params.vocab_limit > opts_.vocab_limit)) {
    req->params.vocab_limit = opts_.vocab_limit;
  }
  waiting_.push_back(std::move(req));
  return Status::Ok();
}

void Scheduler::finish(Request* r, FinishReason reason, int32_t stop_token,
                       const std::string& err) {
  kv_.free(&r->blocks);
  if (metrics_) {  // counted before the stream ends: a client that saw its answer sees it counted
    metrics_->observe_e2e(std::chrono::duration<double>(Clock::now() - r->arrival).count());
    metrics_->update([&](MetricsSnapshot& s) {
      switch (reason) {
        case FinishReason::kStop:
          ++s.finished_stop;
          break;
        case FinishReason::kLength:
          ++s.finished_length;
          break;
        case FinishReason::kCancelled:
          ++s.finished_cancelled;
          break;
        case FinishReason::kTimeout:
          ++s.finished_timeout;
          break;
        default:
          ++s.finished_error;
          break;
      }
    });
  }
  if (r->stream) r->stream->finish(reason, stop_token, err);
  r->num_computed = -1;  // marks it for removal
}

void Scheduler::remove_finished() {
  std::erase_if(running_, [](const auto& r) { return r->num_computed < 0; });
  std::erase_if(waiting_, [](const auto& r) { return r->num_computed < 0; });
}

void Scheduler::reap_cancelled() {
  const auto now = Clock::now();
  auto reap = [&](Request* r) {
    if (r->stream && r->stream->cancelled()) {
      // A stop string ends a request from the consumer side: it finished, it was not cancelled.
      finish(r, r->stream->stopped_early() ? FinishReason::kStop : FinishReason::kCancelled, -1,
             "");
    } else if (r->params.timeout && now - r->arrival > *r->params.timeout) {
      finish(r, FinishReason::kTimeout, -1, "request timed out");
    }
  };
  for (auto& r : running_) reap(r.get());
  for (auto& r : waiting_) reap(r.get());
  remove_finished();
}

void Scheduler::abort_all(FinishReason reason, const std::string& why) {
  for (auto& r : running_) finish(r.get(), reason, -1, why);
  for (auto& r : waiting_) finish(r.get(), reason, -1, why);
  remove_finished();
}

void Scheduler::preempt(Request* r) {
  kv_.free(&r->blocks);
  r->num_computed = 0;
  ++r->num_preemptions;
  if (metrics_) metrics_->update([](MetricsSnapshot& s) { ++s.preemptions; });
}

int64_t Scheduler::next_chunk(const Request& r, int64_t budget, int64_t* rows_left) const {
  const int64_t n = std::min(static_cast<int64_t>(r.tokens.size()) - r.num_computed, budget);
  if (!r.owes_prompt_logprobs()) return n;
  const int64_t first_row = r.prompt_lp_next - 1;  // rows before it were reported already
  if (r.num_computed < first_row) return std::min(n, first_row - r.num_computed);
  // Scored chunks stay inside the prompt; with max_tokens 0 the last row is not needed.
  const int64_t end = r.params.max_tokens == 0 ? r.num_prompt - 1 : r.num_prompt;
  const int64_t k = std::min({n, opts_.prompt_logprob_rows, *rows_left, end - r.num_computed});
  *rows_left -= std::max<int64_t>(k, 0);
  return k;
}

void Scheduler::acquire_prefix(Request* r) {
  std::span<const int32_t> toks = r->tokens;
  // A cached position has no logits row: hits must end before the first owed row.
  if (r->owes_prompt_logprobs()) toks = toks.first(static_cast<size_t>(r->prompt_lp_next));
  r->num_computed = toks.size() > 1 || !r->owes_prompt_logprobs()
                        ? kv_.acquire_cached_prefix(toks, &r->blocks)
                        : 0;
  if (r->num_cached >= 0) return;
  r->num_cached = r->num_computed;
  if (r->stream) r->stream->set_prompt_info(r->num_prompt, r->num_cached);
  if (metrics_) {
    metrics_->update([&](MetricsSnapshot& s) {
      s.prompt_tokens += r->num_prompt;
      s.cached_prompt_tokens += r->num_cached;
    });
  }
}

std::vector<Scheduler::Scheduled> Scheduler::schedule(int64_t* preempted) {
  std::vector<Scheduled> out;
  int64_t budget = opts_.max_num_batched_tokens;
  int64_t rows_left = opts_.prompt_logprob_step_rows;
  // 1. Running requests, oldest first. Victims of preemption come from the back.
  for (size_t i = 0; i < running_.size() && budget > 0; ++i) {
    Request* r = running_[i].get();
    int64_t rows = rows_left;
    const int64_t n = next_chunk(*r, budget, &rows);
    if (n <= 0) continue;
    bool ok = kv_.allocate(&r->blocks, r->num_computed, r->num_computed + n);
    while (!ok) {
      std::unique_ptr<Request> victim = std::move(running_.back());
      running_.pop_back();
      preempt(victim.get());
      ++*preempted;
      const bool self = victim.get() == r;
      waiting_.push_front(std::move(victim));
      if (self) break;
      ok = kv_.allocate(&r->blocks, r->num_computed, r->num_computed + n);
    }
    if (!ok) break;
    out.push_back({r, n});
    budget -= n;
    rows_left = rows;
  }
  // 2. Waiting requests (FCFS), only when nothing was preempted this step.
  while (*preempted == 0 && !waiting_.empty() && budget > 0 &&
         (int64_t)running_.size() < opts_.max_num_seqs) {
    Request* r = waiting_.front().get();
    if (r->blocks.full.empty() && r->blocks.sliding.empty()) acquire_prefix(r);
    int64_t rows = rows_left;
    const int64_t n = next_chunk(*r, budget, &rows);
    if (n <= 0 || !kv_.allocate(&r->blocks, r->num_computed, r->num_computed + n)) {
      kv_.free(&r->blocks);  // give the prefix back; retry when blocks (or rows) free up
      r->num_computed = 0;
      break;
    }
    running_.push_back(std::move(waiting_.front()));
    waiting_.pop_front();
    out.push_back({r, n});
    budget -= n;
    rows_left = rows;
  }
  return out;
}

bool Scheduler::append_token(Request* r, const SampledToken& t) {
  r->tokens.push_back(t.token);
  const auto now = Clock::now();
  if (r->stream) r->stream->push(t);
  if (metrics_) {
    if (r->num_output() == 1) {
      metrics_->observe_ttft(std::chrono::duration<double>(now - r->arrival).count());
    } else {
      metrics_->observe_itl(std::chrono::duration<double>(now - r->last_token).count());
    }
    metrics_->update([](MetricsSnapshot& s) { ++s.generation_tokens; });
  }
  r->last_token = now;
  const auto& stops = r->params.stop_token_ids;
  if (std::find(stops.begin(), stops.end(), t.token) != stops.end()) {
    finish(r, FinishReason::kStop, t.token, "");
    return true;
  }
  if (r->num_output() >= r->params.max_tokens ||
      static_cast<int64_t>(r->tokens.size()) >= max_model_len_) {
    finish(r, FinishReason::kLength, -1, "");
    return true;
  }
  return false;
}

Result<StepResult> Scheduler::step(ModelRunner& runner, TokenSampler& sampler) {
  reap_cancelled();
  StepResult res;
  const bool device = runner.samples_on_device();
  std::vector<Scheduled> sched = schedule(&res.preempted);
  if (sched.empty()) {
    update_gauges();
    return res;
  }
  std::vector<SeqChunk> chunks;
  std::vector<RowSampling> sampling(sched.size());  // not resized below: chunks point into it
  chunks.reserve(sched.size());
  for (size_t i = 0; i < sched.size(); ++i) {
    chunks.push_back(make_chunk(sched[i], device, &sampling[i]));
    res.scheduled_tokens += sched[i].num_new;
  }
  res.scheduled_requests = static_cast<int64_t>(sched.size());
  StepOutput out;
  Status st = runner.step(chunks, &out);
  if (!st.ok()) {
    // The step failed as a whole: fail the requests in it, keep serving the others.
    for (const Scheduled& s : sched) finish(s.req, FinishReason::kError, -1, st.ToString());
    remove_finished();
    return st;
  }
  OutCursor at;
  for (size_t i = 0; i < sched.size(); ++i) {
    Request* r = sched[i].req;
    r->num_computed += sched[i].num_new;
    kv_.on_computed(&r->blocks, r->tokens, r->num_computed);
    GS_ASSIGN_OR_RETURN(const bool fin, after_chunk(r, chunks[i], sampling[i], out, &at, sampler));
    res.finished += fin;
  }
  remove_finished();
  if (metrics_) metrics_->update([](MetricsSnapshot& s) { ++s.steps; });
  update_gauges();
  return res;
}

void Scheduler::update_gauges() {
  if (!metrics_) return;
  const BlockManagerStats b = kv_.stats();
  metrics_->update([&](MetricsSnapshot& s) {
    s.running = num_running();
    s.waiting = num_waiting();
    s.kv_usage = b.full_total > 0      ? (double)b.full_used / (double)b.full_total
                 : b.sliding_total > 0 ? (double)b.sliding_used / (double)b.sliding_total
                                       : 0.0;
    s.prefix_queries = b.prefix_queries;
    s.prefix_hits = b.prefix_hits;
  });
}

}  // namespace gossamer

#include "runtime/scheduler.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <thread>

#include "runtime/sampler.h"

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
    return InvalidArgument("this model's maximum context length is " +
                           std::to_string(max_model_len_) + " tokens; the request has " +
                           std::to_string(n_prompt) + " prompt tokens + max_tokens " +
                           std::to_string(p.max_tokens) +
                           (small ? " = " + std::to_string(n_prompt + p.max_tokens) : ""));
  }
  const int64_t total = n_prompt + p.max_tokens;
  const int64_t need_full = kv_.full_blocks_needed(total);
  const int64_t need_sliding = kv_.sliding_blocks_needed(total, opts_.max_num_batched_tokens);
  if (need_full > kv_.full_pool().num_blocks() || need_sliding > kv_.sliding_pool().num_blocks()) {
    return InvalidArgument("prompt + max_tokens = " + std::to_string(total) +
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
  if (r->stream) r->stream->finish(reason, stop_token, err);
  if (metrics_) {
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

void Scheduler::prepare_sampling(Request* r, bool device, RowSampling* s) {
  const GenerationParams& p = r->params;
  std::span<const int32_t> generated(r->tokens.data() + r->num_prompt, r->num_output());
  if (p.constraint) s->allowed = p.constraint->allowed(generated);
  s->on_device = device && !s->allowed;
  if (!s->on_device) return;
  DeviceSampling& d = s->dev;
  d.temperature = p.temperature;
  d.top_p = p.top_p;
  d.top_k = p.top_k;
  d.min_p = p.min_p;
  d.presence_penalty = p.presence_penalty;
  d.frequency_penalty = p.frequency_penalty;
  d.top_logprobs = p.logprobs ? p.top_logprobs : 0;
  d.seed = r->sample_seed;
  d.counter = static_cast<uint64_t>(r->num_output());
  d.vocab_limit = p.vocab_limit;
  build_penalty_list(p, generated, s);
  d.penalty_tokens = s->pen_tokens;
  d.penalty_counts = s->pen_counts;
  d.penalty_bias = s->pen_bias;
}

// The device sampler's per-id adjustments: (token, count, bias) with distinct tokens, the
// generated ids (counts, when a penalty is set) merged with the logit_bias ids (count 0 unless
// generated); pen_bias stays empty without logit_bias.
void Scheduler::build_penalty_list(const GenerationParams& p, std::span<const int32_t> generated,
                                   RowSampling* s) {
  std::vector<int32_t> sorted;
  if (p.presence_penalty != 0 || p.frequency_penalty != 0) {
    sorted.assign(generated.begin(), generated.end());
  }
  for (const auto& [id, bias] : p.logit_bias) sorted.push_back(id);
  std::sort(sorted.begin(), sorted.end());
  for (size_t i = 0; i < sorted.size();) {
    size_t j = i;
    while (j < sorted.size() && sorted[j] == sorted[i]) ++j;
    s->pen_tokens.push_back(sorted[i]);
    s->pen_counts.push_back(static_cast<int32_t>(j - i));
    i = j;
  }
  if (p.logit_bias.empty()) return;
  s->pen_bias.assign(s->pen_tokens.size(), 0.f);
  for (const auto& [id, bias] : p.logit_bias) {
    const size_t k = static_cast<size_t>(
        std::lower_bound(s->pen_tokens.begin(), s->pen_tokens.end(), id) - s->pen_tokens.begin());
    s->pen_bias[k] = bias;
    --s->pen_counts[k];  // the bias entry itself is not a generated token
  }
}

Result<SampledToken> Scheduler::sample_on_host(Request* r, std::span<const float> logits,
                                               const RowSampling& s, TokenSampler& sampler) {
  std::span<const int32_t> generated(r->tokens.data() + r->num_prompt, r->num_output());
  if (s.allowed) {  // mask every id the constraint does not allow
    const int64_t lim = r->params.vocab_limit > 0 ? r->params.vocab_limit : (int64_t)logits.size();
    logits_scratch_.assign(logits.size(), -INFINITY);
    bool any = false;
    for (int32_t t : *s.allowed) {
      if (t >= 0 && t < lim && static_cast<size_t>(t) < logits.size()) {
        logits_scratch_[static_cast<size_t>(t)] = logits[static_cast<size_t>(t)];
        any = true;
      }
    }
    if (!any) {
      return InvalidArgument("the token constraint allows no id of the vocabulary (" +
                             std::to_string(s.allowed->size()) + " ids given)");
    }
    logits = logits_scratch_;
  }
  return sampler.sample(logits, r->params, generated, r->rng);
}

bool Scheduler::take_sample(Request* r, const Result<SampledToken>& t) {
  if (!t.ok()) {
    finish(r, FinishReason::kError, -1, "sampling failed: " + t.status().message());
    return true;
  }
  return append_token(r, *t);
}

SeqChunk Scheduler::make_chunk(const Scheduled& s, bool device, RowSampling* rs) {
  Request* r = s.req;
  SeqChunk c;
  c.tokens = std::span<const int32_t>(r->tokens).subspan(r->num_computed, s.num_new);
  c.pos0 = r->num_computed;
  c.blocks_full = r->blocks.full;
  c.blocks_sliding = r->blocks.sliding;
  const bool caught_up = r->num_computed + s.num_new == (int64_t)r->tokens.size();
  const bool scoring = r->owes_prompt_logprobs() && r->num_computed >= r->prompt_lp_next - 1;
  rs->wanted = caught_up && r->params.max_tokens > 0;
  c.logits = scoring ? LogitsMode::kAll : rs->wanted ? LogitsMode::kLast : LogitsMode::kNone;
  if (rs->wanted) {
    prepare_sampling(r, device && !scoring, rs);  // kAll rows come back as host logits
    if (rs->on_device) c.sampling = &rs->dev;
  }
  return c;
}

Status Scheduler::report_prompt_logprobs(Request* r, int64_t pos0, std::span<const float> rows,
                                         int64_t vocab) {
  // Row j predicts prompt position pos0 + j + 1; report [prompt_lp_next, num_prompt).
  const int64_t n = vocab > 0 ? static_cast<int64_t>(rows.size()) / vocab : 0;
  const int64_t first = r->prompt_lp_next - pos0 - 1;
  const int64_t end = std::min(n, r->num_prompt - pos0 - 1);
  if (first < 0) {
    return Internal("prompt position " + std::to_string(r->prompt_lp_next) + " was skipped");
  }
  if (end <= first) return Status::Ok();
  std::vector<SampledToken> entries(static_cast<size_t>(end - first));
  std::vector<Status> errors(entries.size());
  if (!score_pool_) {  // the rows are independent (~2 ms each at gpt-oss's vocabulary)
    score_pool_ = std::make_unique<ThreadPool>(
        static_cast<int>(std::clamp(std::thread::hardware_concurrency(), 1u, 8u)));
  }
  score_pool_->parallel_for(end - first, [&](int64_t b, int64_t e) {
    for (int64_t k = b; k < e; ++k) {
      const int64_t j = first + k;
      Result<SampledToken> t =
          score_token(rows.subspan(static_cast<size_t>(j * vocab), static_cast<size_t>(vocab)),
                      r->tokens[pos0 + j + 1], r->params.prompt_logprobs, r->params.vocab_limit);
      if (t.ok()) {
        entries[k] = std::move(*t);
      } else {
        errors[k] = t.status();
      }
    }
  });
  for (const Status& st : errors) GS_RETURN_IF_ERROR(st);
  r->prompt_lp_next += end - first;
  if (r->stream) r->stream->push_prompt_logprobs(std::move(entries));
  return Status::Ok();
}

Result<bool> Scheduler::after_chunk(Request* r, const SeqChunk& c, const RowSampling& rs,
                                    const StepOutput& out, int64_t* row, size_t* dev_row,
                                    TokenSampler& sampler) {
  const int64_t vocab = out.rows > 0 ? (int64_t)out.logits.size() / out.rows : 0;
  const int64_t n = c.logits == LogitsMode::kAll                   ? (int64_t)c.tokens.size()
                    : c.logits == LogitsMode::kLast && !c.sampling ? 1
                                                                   : 0;
  if (*row + n > out.rows) return Internal("runner returned fewer logits rows than requested");
  std::span<const float> rows;
  if (n > 0) rows = std::span<const float>(out.logits).subspan(*row * vocab, n * vocab);
  *row += n;
  if (c.logits == LogitsMode::kAll) {
    Status st = report_prompt_logprobs(r, c.pos0, rows, vocab);
    if (!st.ok()) {
      finish(r, FinishReason::kError, -1, "prompt logprobs failed: " + st.message());
      return true;
    }
  }
  if (r->params.max_tokens == 0 && !r->owes_prompt_logprobs()) {
    finish(r, FinishReason::kLength, -1, "");  // scored, nothing to generate
    return true;
  }
  if (!rs.wanted) return false;
  Result<SampledToken> t = InvalidArgument("unset");
  if (c.sampling) {
    if (*dev_row >= out.sampled.size()) return Internal("runner returned fewer sampled tokens");
    t = out.sampled[(*dev_row)++];
    if (t->token < 0) t = InvalidArgument("the logits row is not finite (NaN or +inf)");
  } else {
    t = sample_on_host(r, rows.subspan(rows.size() - static_cast<size_t>(vocab)), rs, sampler);
  }
  return take_sample(r, t);
}

Result<StepResult> Scheduler::step(ModelRunner& runner, TokenSampler& sampler) {
  reap_cancelled();
  StepResult res;
  std::vector<Scheduled> sched = schedule(&res.preempted);
  if (sched.empty()) {
    update_gauges();
    return res;
  }
  const bool device = runner.samples_on_device();
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
  int64_t row = 0;
  size_t dev_row = 0;
  for (size_t i = 0; i < sched.size(); ++i) {
    Request* r = sched[i].req;
    r->num_computed += sched[i].num_new;
    kv_.on_computed(&r->blocks, r->tokens, r->num_computed);
    GS_ASSIGN_OR_RETURN(const bool fin,
                        after_chunk(r, chunks[i], sampling[i], out, &row, &dev_row, sampler));
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

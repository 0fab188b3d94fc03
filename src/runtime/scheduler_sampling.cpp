// The scheduler's per-chunk row handling (see scheduler.h): which logits rows a chunk asks
// for, how its next token is sampled (host or device), and the prompt logprobs its rows report
// (host rows through score_token, or rows scored on the device).
#include <algorithm>
#include <cmath>
#include <string>
#include <thread>

#include "runtime/sampler.h"
#include "runtime/scheduler.h"

namespace gossamer {

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
    prepare_sampling(r, device && !scoring, rs);  // a kAll chunk's last row: host logits
    if (rs->on_device) c.sampling = &rs->dev;
  }
  if (scoring && device) {  // row j scores position pos0 + j + 1 while it is owed
    rs->score_targets.resize(static_cast<size_t>(s.num_new));
    for (int64_t j = 0; j < s.num_new; ++j) {
      const int64_t pos = c.pos0 + j + 1;
      rs->score_targets[static_cast<size_t>(j)] = pos >= r->prompt_lp_next && pos < r->num_prompt
                                                      ? r->tokens[static_cast<size_t>(pos)]
                                                      : -1;
    }
    rs->score = {rs->score_targets, r->params.prompt_logprobs, r->params.vocab_limit};
    c.scoring = &rs->score;
  }
  return c;
}

Status Scheduler::report_scored(Request* r, int64_t pos0, std::span<const SampledToken> scored) {
  // The scored rows are positions [pos0 + 1, ...) that are still owed: they start at
  // prompt_lp_next (make_chunk's targets), unless a position was skipped.
  if (scored.empty()) return Status::Ok();
  if (pos0 + 1 != r->prompt_lp_next) {
    return Internal("prompt position " + std::to_string(r->prompt_lp_next) + " was skipped");
  }
  for (const SampledToken& t : scored) {
    if (t.token < 0) return InvalidArgument("the logits row is not finite (NaN or +inf)");
  }
  r->prompt_lp_next += static_cast<int64_t>(scored.size());
  if (r->stream) r->stream->push_prompt_logprobs({scored.begin(), scored.end()});
  return Status::Ok();
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
                                    const StepOutput& out, OutCursor* at, TokenSampler& sampler) {
  const int64_t vocab = out.rows > 0 ? (int64_t)out.logits.size() / out.rows : 0;
  const auto n_scored = static_cast<size_t>(
      c.scoring ? std::count_if(c.scoring->targets.begin(), c.scoring->targets.end(),
                                [](int32_t t) { return t >= 0; })
                : 0);
  const int64_t n = c.logits == LogitsMode::kAll ? (int64_t)(c.tokens.size() - n_scored)
                    : c.logits == LogitsMode::kLast && !c.sampling ? 1
                                                                   : 0;
  if (at->row + n > out.rows) return Internal("runner returned fewer logits rows than requested");
  if (at->scored + n_scored > out.scored.size()) {
    return Internal("runner returned fewer scored rows than requested");
  }
  std::span<const float> rows;
  if (n > 0) rows = std::span<const float>(out.logits).subspan(at->row * vocab, n * vocab);
  at->row += n;
  if (c.logits == LogitsMode::kAll) {
    Status st = c.scoring
                    ? report_scored(r, c.pos0, std::span(out.scored).subspan(at->scored, n_scored))
                    : report_prompt_logprobs(r, c.pos0, rows, vocab);
    at->scored += n_scored;
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
    if (at->sampled >= out.sampled.size()) return Internal("runner returned fewer sampled tokens");
    t = out.sampled[at->sampled++];
    if (t->token < 0) t = InvalidArgument("the logits row is not finite (NaN or +inf)");
  } else {
    if (n == 0) return Internal("runner returned no logits row to sample from");
    t = sample_on_host(r, rows.subspan(rows.size() - static_cast<size_t>(vocab)), rs, sampler);
  }
  return take_sample(r, t);
}

}  // namespace gossamer

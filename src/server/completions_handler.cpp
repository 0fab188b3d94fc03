// POST /v1/completions: raw text (or token ids) in, text out; no chat template.
#include <algorithm>

#include "server/completions_request.h"
#include "server/handlers.h"
#include "server/stop_filter.h"

namespace gossamer::server {

namespace {

constexpr auto kPoll = std::chrono::milliseconds(20);

struct TextChoice {
  std::shared_ptr<RequestStream> stream;
  IncrementalDecoder dec;
  StopFilter stop;
  std::string text;
  std::vector<SampledToken> tokens;
  FinishReason reason = FinishReason::kNone;
  std::string error;
  bool done = false, stop_hit = false;
  int64_t prompt_tokens = 0, cached_tokens = 0;
  std::vector<int32_t> stop_ids;
  // echo: the prompt text and ids, and the prompt logprobs (entry j: prompt position j + 1).
  bool echo = false, echo_sent = false;
  std::string echo_text;
  std::vector<int32_t> prompt_ids;
  std::vector<SampledToken> prompt_lps;
  TextChoice(std::shared_ptr<RequestStream> s, std::shared_ptr<const Tokenizer> tok,
             std::vector<std::string> stops, std::vector<int32_t> stop_token_ids)
      : stream(std::move(s)),
        dec(std::move(tok)),
        stop(std::move(stops)),
        stop_ids(std::move(stop_token_ids)) {}
  ~TextChoice() {
    if (!stream->finished()) stream->cancel();
  }
  // Appends newly released text to *delta; true when done.
  bool poll(std::string* delta) {
    if (done) return true;
    StreamChunk c;
    if (!stream->wait(&c, kPoll)) return false;
    prompt_tokens = c.prompt_tokens;
    cached_tokens = c.cached_tokens;
    prompt_lps.insert(prompt_lps.end(), c.prompt_logprobs.begin(), c.prompt_logprobs.end());
    for (const SampledToken& t : c.tokens) {
      if (stop_hit) break;
      tokens.push_back(t);
      // A stop token (eos) ends the request: it counts as generated but is not text.
      if (std::find(stop_ids.begin(), stop_ids.end(), t.token) != stop_ids.end()) continue;
      Result<std::string> piece = dec.push(t.token);
      bool hit = false;
      *delta += stop.push(piece.ok() ? *piece : std::string(), &hit);
      stop_hit = hit;
    }
    if (stop_hit) {
      stream->stop_early();
    } else if (!c.finished) {
      return false;
    }
    if (!stop_hit) {
      reason = c.reason;
      bool hit = false;
      *delta += stop.push(dec.flush(), &hit);
      stop_hit = hit;
      *delta += stop.flush();
      if (c.reason == FinishReason::kError || c.reason == FinishReason::kCancelled) {
        error = c.error.empty() ? "the request was cancelled" : c.error;
      }
    }
    text += *delta;
    done = true;
    return true;
  }
  bool timed_out() const { return reason == FinishReason::kTimeout; }
  // Every prompt logprob has arrived (or none was asked for): the echo can be sent.
  bool echo_ready(bool scoring) const {
    return !scoring || prompt_lps.size() + 1 >= prompt_ids.size();
  }
  std::string finish_reason() const {
    if (stop_hit) return "stop";
    return reason == FinishReason::kLength || reason == FinishReason::kTimeout ? "length" : "stop";
  }
};

struct Job {
  RequestOptions ro;
  std::vector<std::unique_ptr<TextChoice>> choices;
  std::string id;
  int64_t created = 0;
  std::vector<bool> finished;
};

// The legacy logprobs object, built token by token; `off` is the text offset in bytes.
struct LogprobArrays {
  json tokens = json::array(), lps = json::array(), tops = json::array(), offs = json::array();
  int64_t off = 0;
  // t == nullptr: a token without logprob (the first prompt token): null entries.
  void add(const Tokenizer& tok, int32_t id, const SampledToken* t) {
    Result<std::string> b = tok.token_bytes(id);
    std::string s = b.ok() ? *b : std::string();
    tokens.push_back(s);
    lps.push_back(t ? json(t->logprob) : json(nullptr));
    json top = t ? json::object() : json(nullptr);
    for (size_t i = 0; t && i < t->top.size(); ++i) {
      Result<std::string> ab = tok.token_bytes(t->top[i].token);
      top[ab.ok() ? *ab : std::string()] = t->top[i].logprob;
    }
    tops.push_back(std::move(top));
    offs.push_back(off);
    off += static_cast<int64_t>(s.size());
  }
  json done() {
    return json{
        {"tokens", tokens}, {"token_logprobs", lps}, {"top_logprobs", tops}, {"text_offset", offs}};
  }
};

// The prompt's tokens (echo): the first has null logprobs, the others their reported entries.
void add_prompt_logprobs(const Ctx& ctx, const TextChoice& c, LogprobArrays* a) {
  for (size_t i = 0; i < c.prompt_ids.size(); ++i) {
    const SampledToken* t = i > 0 && i - 1 < c.prompt_lps.size() ? &c.prompt_lps[i - 1] : nullptr;
    a->add(*ctx.tok, c.prompt_ids[i], t);
  }
}

json logprobs_json(const Ctx& ctx, const std::vector<SampledToken>& toks, size_t from,
                   int64_t text_offset0) {
  LogprobArrays a;
  a.off = text_offset0;
  for (size_t i = from; i < toks.size(); ++i) a.add(*ctx.tok, toks[i].token, &toks[i]);
  return a.done();
}

// Prompt tokens are counted once per prompt (choices i*n .. i*n+n-1 share prompt i).
json usage(const Job& job) {
  int64_t prompt = 0, cached = 0, completion = 0;
  for (size_t i = 0; i < job.choices.size(); i += static_cast<size_t>(job.ro.n)) {
    prompt += job.choices[i]->prompt_tokens;
    int64_t best = 0;
    for (size_t j = i; j < i + static_cast<size_t>(job.ro.n); ++j) {
      best = std::max(best, job.choices[j]->cached_tokens);
    }
    cached += best;
  }
  for (const auto& c : job.choices) completion += static_cast<int64_t>(c->tokens.size());
  return json{{"prompt_tokens", prompt},
              {"completion_tokens", completion},
              {"total_tokens", prompt + completion},
              {"prompt_tokens_details", {{"cached_tokens", cached}}}};
}

// Streamed with stream_options.include_usage: "usage": null but in the last chunk (as OpenAI).
json body_json(const Ctx& ctx, const Job& job, json choices) {
  json b{{"id", job.id},
         {"object", "text_completion"},
         {"created", job.created},
         {"model", ctx.opts.model_name},
         {"system_fingerprint", "gossamer"},
         {"choices", std::move(choices)}};
  if (job.ro.stream && job.ro.include_usage) b["usage"] = nullptr;
  return b;
}

bool pump(Ctx& ctx, Job& job, httplib::DataSink& sink) {
  if (!sink.is_writable()) return false;
  auto send = [&](const json& j) {
    const std::string t = sse_data(j);
    return sink.write(t.data(), t.size());
  };
  bool all = true;
  for (size_t i = 0; i < job.choices.size(); ++i) {
    if (job.finished[i]) continue;
    TextChoice& c = *job.choices[i];
    const size_t before = c.tokens.size();
    const int64_t off0 = static_cast<int64_t>(c.echo_text.size() + c.text.size());
    std::string delta;
    const bool done = c.poll(&delta);
    if (!done) c.text += delta;
    if (c.echo && !c.echo_sent && (done || c.echo_ready(job.ro.gen.prompt_logprobs >= 0))) {
      c.echo_sent = true;  // the prompt text (and its logprobs) before any generated text
      LogprobArrays a;
      if (job.ro.gen.logprobs) add_prompt_logprobs(ctx, c, &a);
      json ch{{"index", (int)i},
              {"text", c.echo_text},
              {"logprobs", job.ro.gen.logprobs ? a.done() : json(nullptr)},
              {"finish_reason", nullptr}};
      if (!send(body_json(ctx, job, json::array({ch})))) return false;
    }
    if (!delta.empty() || (done && !c.timed_out())) {
      json lp = job.ro.gen.logprobs ? logprobs_json(ctx, c.tokens, before, off0) : json(nullptr);
      // A timeout or an error ends with an error event instead of a finish_reason.
      const bool end = done && !c.timed_out() && c.error.empty();
      json ch{{"index", (int)i},
              {"text", delta},
              {"logprobs", lp},
              {"finish_reason", end ? json(c.finish_reason()) : json(nullptr)}};
      if (!send(body_json(ctx, job, json::array({ch})))) return false;
    }
    if (done) {
      job.finished[i] = true;
      if (c.timed_out()) {
        json e = error_body(timeout_error(ctx, static_cast<int64_t>(c.tokens.size()), true));
        e["error"]["choice_index"] = static_cast<int>(i);
        if (!send(e)) return false;
      } else if (!c.error.empty()) {
        json e = error_body(generation_error(ctx, c.error));
        e["error"]["choice_index"] = static_cast<int>(i);
        if (!send(e)) return false;
      }
    } else {
      all = false;
    }
  }
  if (!all) return true;
  if (job.ro.include_usage) {
    json u = body_json(ctx, job, json::array());
    u["usage"] = usage(job);
    if (!send(u)) return false;
  }
  sink.write(kSseDone.data(), kSseDone.size());
  sink.done();
  return true;
}

// Waits for every choice; false (all cancelled) when the client went away.
bool wait_all(Job& job, PeerWatch& peer) {
  std::string scratch;
  for (bool all = false; !all;) {
    if (peer.disconnected()) {
      for (auto& c : job.choices) c->stream->cancel();
      return false;
    }
    all = true;
    for (auto& c : job.choices) {
      scratch.clear();
      if (!c->poll(&scratch)) {
        c->text += scratch;
        all = false;
      }
    }
  }
  return true;
}

// Submits n choices per prompt: choice index = prompt_index * n + j, seed + j.
bool submit_all(Ctx& ctx, const std::vector<Prompt>& prompts, Job& job, ApiError* err) {
  for (const Prompt& pr : prompts) {
    const std::vector<int32_t>& ids = pr.ids;
    std::string echo_text;
    if (job.ro.echo) {  // the prompt as given, or the decoded ids
      Result<std::string> text = pr.is_text ? Result<std::string>(pr.text) : ctx.tok->decode(ids);
      echo_text = text.ok() ? *text : std::string();
    }
    GenerationParams g0 = job.ro.gen;
    if (!job.ro.max_tokens_given) {
      const int64_t room = ctx.engine->max_model_len() - static_cast<int64_t>(ids.size());
      g0.max_tokens = std::min<int64_t>(16, std::max<int64_t>(room, 1));
    }
    for (int64_t j = 0; j < job.ro.n; ++j) {
      GenerationParams g = g0;
      if (g.seed) g.seed = *g.seed + static_cast<uint64_t>(j);
      auto stream = ctx.engine->submit(ids, g);
      if (!stream.ok()) {
        const auto n_ids = static_cast<int64_t>(ids.size());
        *err = submit_error(stream.status(), Endpoint::kCompletions, n_ids,
                            ctx.engine->max_model_len());
        return false;
      }
      job.choices.push_back(
          std::make_unique<TextChoice>(*stream, ctx.tok, job.ro.stop, g.stop_token_ids));
      TextChoice& c = *job.choices.back();
      c.echo = job.ro.echo;
      if (c.echo) {
        c.prompt_ids = ids;
        c.echo_text = echo_text;
      }
    }
  }
  return true;
}

void respond_blocking(Ctx& ctx, Job& job, PeerWatch& peer, httplib::Response& res) {
  if (!wait_all(job, peer)) return client_gone(res);
  json choices = json::array();
  for (size_t i = 0; i < job.choices.size(); ++i) {
    const TextChoice& c = *job.choices[i];
    if (c.timed_out()) {
      return send_error(res, timeout_error(ctx, static_cast<int64_t>(c.tokens.size())));
    }
    if (!c.error.empty()) return send_error(res, generation_error(ctx, c.error));
    json lp = nullptr;
    if (job.ro.gen.logprobs) {  // echo: the prompt's tokens first
      LogprobArrays a;
      if (c.echo) add_prompt_logprobs(ctx, c, &a);
      a.off = static_cast<int64_t>(c.echo_text.size());
      for (const SampledToken& t : c.tokens) a.add(*ctx.tok, t.token, &t);
      lp = a.done();
    }
    choices.push_back({{"index", (int)i},
                       {"text", c.echo_text + c.text},
                       {"logprobs", std::move(lp)},
                       {"finish_reason", c.finish_reason()}});
  }
  json out = body_json(ctx, job, choices);
  out["usage"] = usage(job);
  res.set_content(dump(out), "application/json");
}

}  // namespace

void handle_completions(Ctx& ctx, const httplib::Request& req, httplib::Response& res) {
  json body;
  ApiError err;
  if (!parse_body(ctx, req, &body, &err)) return send_error(res, err);
  std::vector<Prompt> prompts;
  if (!prompt_batch(ctx, body, &prompts, &err)) return send_error(res, err);
  auto job = std::make_shared<Job>();
  auto in_flight = std::make_shared<InFlight>(ctx);  // until the response is complete
  if (!parse_request_options(body, Endpoint::kCompletions, 16, &job->ro, &err,
                             ctx.tok->vocab_size())) {
    return send_error(res, err);
  }
  if (prompts.size() * static_cast<size_t>(job->ro.n) > kMaxChoices) {
    return send_error(res,
                      bad_request("a request may ask for at most " + std::to_string(kMaxChoices) +
                                      " completions (prompts x n)",
                                  "prompt"));
  }
  if (!job->ro.ignore_eos) job->ro.gen.stop_token_ids = ctx.completion_stop_ids;
  GenerationParams& g = job->ro.gen;
  // echo + logprobs: the prompt tokens' logprobs too; max_tokens 0 always scores the prompt.
  if (job->ro.echo && (g.logprobs || g.max_tokens == 0)) {
    g.prompt_logprobs = g.logprobs ? g.top_logprobs : 0;
  }
  job->ro.gen.timeout =
      std::chrono::duration_cast<std::chrono::milliseconds>(ctx.opts.request_timeout);
  job->id = make_id(ctx, "cmpl-");
  job->created = unix_now();
  if (!submit_all(ctx, prompts, *job, &err)) return send_error(res, err);  // ~Job cancels
  job->finished.assign(job->choices.size(), false);
  if (!job->ro.stream) {
    PeerWatch peer = watch_peer(req);
    return respond_blocking(ctx, *job, peer, res);
  }
  res.set_header("Cache-Control", "no-cache");
  res.set_chunked_content_provider(
      "text/event-stream",
      [&ctx, job, in_flight](size_t, httplib::DataSink& sink) { return pump(ctx, *job, sink); },
      [job](bool) {
        for (auto& c : job->choices) c->stream->cancel();
      });
}

}  // namespace gossamer::server

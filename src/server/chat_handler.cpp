// POST /v1/chat/completions (streaming and not).
#include <algorithm>
#include <cstdint>
#include <thread>

#include "harmony/render.h"
#include "server/chat_constraints.h"
#include "server/handlers.h"

namespace gossamer::server {

namespace {

constexpr auto kPoll = std::chrono::milliseconds(20);

json delta_json(const Delta& d) {
  json j;
  switch (d.kind) {
    case Delta::Kind::kReasoning:
      j["reasoning_content"] = d.text;
      j["reasoning"] = d.text;
      break;
    case Delta::Kind::kContent:
      j["content"] = d.text;
      break;
    case Delta::Kind::kToolStart:
      j["tool_calls"] = json::array({json{{"index", d.tool_index},
                                          {"id", d.call_id},
                                          {"type", "function"},
                                          {"function", {{"name", d.text}, {"arguments", ""}}}}});
      break;
    case Delta::Kind::kToolArgs:
      j["tool_calls"] =
          json::array({json{{"index", d.tool_index}, {"function", {{"arguments", d.text}}}}});
      break;
  }
  return j;
}

// With stream_options.include_usage every chunk has "usage": null but the last (as OpenAI).
json chunk(const ChatJob& job, const std::string& model, json choices) {
  json c{{"id", job.id},   {"object", "chat.completion.chunk"}, {"created", job.created},
         {"model", model}, {"system_fingerprint", "gossamer"},  {"choices", std::move(choices)}};
  if (job.ro.include_usage) c["usage"] = nullptr;
  return c;
}

json choice_chunk(int index, json delta, json finish, json logprobs = nullptr) {
  return json{{"index", index},
              {"delta", std::move(delta)},
              {"logprobs", std::move(logprobs)},
              {"finish_reason", std::move(finish)}};
}

json message_json(const ChatChoice& c) {
  json m{{"role", "assistant"}};
  const auto& r = c.result();
  m["content"] = c.content().empty() && !r.tool_calls.empty() ? json(nullptr) : json(c.content());
  if (!c.reasoning().empty()) {
    m["reasoning_content"] = c.reasoning();
    m["reasoning"] = c.reasoning();
  }
  if (!r.tool_calls.empty()) {
    json calls = json::array();
    for (const auto& t : r.tool_calls) {
      calls.push_back({{"id", t.id},
                       {"type", "function"},
                       {"function", {{"name", t.name}, {"arguments", t.arguments}}}});
    }
    m["tool_calls"] = calls;
  }
  return m;
}

void respond_blocking(Ctx& ctx, ChatJob& job, PeerWatch& peer, httplib::Response& res) {
  if (!wait_chat_job(job, peer)) return client_gone(res);
  json choices = json::array();
  for (size_t i = 0; i < job.choices.size(); ++i) {
    const ChatChoice& c = *job.choices[i];
    if (c.failed()) return send_error(res, generation_error(ctx, c.error()));
    if (c.timed_out()) return send_error(res, timeout_error(ctx, c.completion_tokens()));
    json lp = nullptr;
    if (job.ro.gen.logprobs) {
      size_t sent = 0;
      lp = json{{"content", logprob_entries(*ctx.tok, c.content_tokens(), &sent, SIZE_MAX,
                                            job.ro.gen.top_logprobs > 0)}};
    }
    choices.push_back({{"index", (int)i},
                       {"message", message_json(c)},
                       {"logprobs", lp},
                       {"finish_reason", c.finish_reason()}});
  }
  json body{{"id", job.id},
            {"object", "chat.completion"},
            {"created", job.created},
            {"model", ctx.opts.model_name},
            {"system_fingerprint", "gossamer"},
            {"choices", choices},
            {"usage", chat_usage(job)}};
  res.set_content(dump(body), "application/json");
}

struct StreamState {
  Ctx* ctx;
  ChatJob job;
  bool started = false;
  std::vector<bool> finished;
  std::vector<size_t> lp_sent;  // content tokens whose logprobs were sent, per choice
};

// logprobs.content of a streamed chunk: choice i's entries not sent yet, up to `end`.
json stream_logprobs(StreamState& s, size_t i, size_t end) {
  if (!s.job.ro.gen.logprobs) return nullptr;
  return json{{"content", logprob_entries(*s.ctx->tok, s.job.choices[i]->content_tokens(),
                                          &s.lp_sent[i], end, s.job.ro.gen.top_logprobs > 0)}};
}

// One call of the chunked-content provider: writes what is ready. False = stop (disconnect).
bool pump(StreamState& s, httplib::DataSink& sink) {
  const std::string& model = s.ctx->opts.model_name;
  auto send = [&](const json& j) {
    const std::string t = sse_data(j);
    return sink.write(t.data(), t.size());
  };
  if (!s.started) {
    s.started = true;
    for (size_t i = 0; i < s.job.choices.size(); ++i) {
      if (!send(chunk(s.job, model,
                      json::array({choice_chunk(
                          (int)i, json{{"role", "assistant"}, {"content", ""}}, nullptr)})))) {
        return false;
      }
      for (const Delta& d : s.job.prefill_deltas[i]) {
        if (!send(chunk(s.job, model, json::array({choice_chunk((int)i, delta_json(d), nullptr)}))))
          return false;
      }
    }
  }
  if (!sink.is_writable()) return false;
  bool all = true;
  std::vector<Delta> deltas;
  for (size_t i = 0; i < s.job.choices.size(); ++i) {
    if (s.finished[i]) continue;
    ChatChoice& c = *s.job.choices[i];
    deltas.clear();
    const bool done = c.poll(kPoll, &deltas);
    for (const Delta& d : deltas) {
      json lp = d.kind == Delta::Kind::kContent ? stream_logprobs(s, i, d.lp_end) : json(nullptr);
      if (!send(
              chunk(s.job, model, json::array({choice_chunk((int)i, delta_json(d), nullptr, lp)}))))
        return false;
    }
    if (!done) {
      all = false;
      continue;
    }
    s.finished[i] = true;
    if (c.timed_out()) {  // an error event instead of a finish_reason: the output is cut short
      json err = error_body(timeout_error(*s.ctx, c.completion_tokens(), /*streamed=*/true));
      err["error"]["choice_index"] = static_cast<int>(i);
      if (!send(err)) return false;
      continue;
    }
    if (c.failed()) {  // the same: an error event, no finish_reason
      json err = error_body(generation_error(*s.ctx, c.error()));
      err["error"]["choice_index"] = static_cast<int>(i);
      if (!send(err)) return false;
      continue;
    }
    // Tokens whose text the stop filter held back and then cut: their entries come last.
    json lp = s.lp_sent[i] < c.content_tokens().size()
                  ? stream_logprobs(s, i, c.content_tokens().size())
                  : json(nullptr);
    if (!send(chunk(s.job, model,
                    json::array({choice_chunk((int)i, json::object(), c.finish_reason(), lp)})))) {
      return false;
    }
  }
  if (!all) return true;
  if (s.job.ro.include_usage) {
    json u = chunk(s.job, model, json::array());
    u["usage"] = chat_usage(s.job);
    if (!send(u)) return false;
  }
  sink.write(kSseDone.data(), kSseDone.size());
  sink.done();
  return true;
}

}  // namespace

json logprob_entry(const Tokenizer& tok, const SampledToken& t, bool with_top) {
  auto one = [&](int32_t id, float lp) {
    Result<std::string> b = tok.token_bytes(id);
    std::string s = b.ok() ? *b : std::string();
    json bytes = json::array();
    for (unsigned char ch : s) bytes.push_back((int)ch);
    return json{{"token", s}, {"logprob", lp}, {"bytes", bytes}};
  };
  json e = one(t.token, t.logprob);
  json top = json::array();
  if (with_top) {
    for (const auto& a : t.top) top.push_back(one(a.token, a.logprob));
  }
  e["top_logprobs"] = top;
  return e;
}

json logprob_entries(const Tokenizer& tok, const std::vector<SampledToken>& tokens, size_t* sent,
                     size_t end, bool with_top) {
  json out = json::array();
  for (; *sent < std::min(end, tokens.size()); ++*sent) {
    out.push_back(logprob_entry(tok, tokens[*sent], with_top));
  }
  return out;
}

bool wait_chat_job(ChatJob& job, PeerWatch& peer,
                   const std::function<void(size_t, const Delta&)>& on_delta) {
  std::vector<Delta> scratch;
  for (bool all = false; !all;) {
    if (peer.disconnected()) {
      for (auto& c : job.choices) c->cancel();
      return false;
    }
    all = true;
    for (size_t i = 0; i < job.choices.size(); ++i) {
      scratch.clear();
      if (!job.choices[i]->poll(kPoll, &scratch)) all = false;
      if (on_delta) {
        for (const Delta& d : scratch) on_delta(i, d);
      }
    }
  }
  return true;
}

json chat_usage(const ChatJob& job) {
  int64_t prompt = 0, cached = 0, completion = 0, reasoning = 0;
  for (const auto& c : job.choices) {
    prompt = c->prompt_tokens();  // the same prompt for every choice
    cached = std::max(cached, c->cached_tokens());
    completion += c->completion_tokens();
    reasoning += c->reasoning_tokens();
  }
  return json{{"prompt_tokens", prompt},
              {"completion_tokens", completion},
              {"total_tokens", prompt + completion},
              {"prompt_tokens_details", {{"cached_tokens", cached}}},
              {"completion_tokens_details", {{"reasoning_tokens", reasoning}}}};
}

namespace {

harmony::ParserOptions parser_options(const harmony::ChatRequest& req) {
  harmony::ParserOptions opt;
  for (const auto& t : req.tools) opt.tool_names.push_back(t.name);
  return opt;
}

}  // namespace

bool start_chat_job(Ctx& ctx, const json& body, Endpoint ep, ChatJob* job, ApiError* err) {
  Result<harmony::ChatRequest> creq = harmony::parse_chat_request(body);
  if (!creq.ok()) return *err = from_status(creq.status()), false;
  Result<harmony::RenderedPrompt> prompt =
      harmony::render_chat_request(*creq, *ctx.tok, ctx.opts.render);
  if (!prompt.ok()) return *err = from_status(prompt.status()), false;
  ChatConstraints cons;
  if (!chat_constraints(ctx, *creq, *prompt, &cons, err)) return false;
  std::vector<int32_t> ids = prompt->ids;
  ids.insert(ids.end(), cons.steer_ids.begin(), cons.steer_ids.end());
  const int64_t room = ctx.engine->max_model_len() - static_cast<int64_t>(ids.size());
  if (room < 1) {
    *err = bad_request("this model's maximum context length is " +
                           std::to_string(ctx.engine->max_model_len()) +
                           " tokens; the prompt has " + std::to_string(ids.size()),
                       prompt_param(ep));
    err->code = "context_length_exceeded";
    return false;
  }
  const int64_t dflt =
      ctx.opts.default_max_tokens > 0 ? std::min(room, ctx.opts.default_max_tokens) : room;
  if (!parse_request_options(body, ep, dflt, &job->ro, err, ctx.tok->vocab_size())) return false;
  if (!job->ro.ignore_eos) job->ro.gen.stop_token_ids = ctx.chat_stop_ids;
  job->ro.gen.timeout =
      std::chrono::duration_cast<std::chrono::milliseconds>(ctx.opts.request_timeout);
  job->id = make_id(ctx, "chatcmpl-");
  job->created = unix_now();
  for (int64_t i = 0; i < job->ro.n; ++i) {
    GenerationParams g = job->ro.gen;
    if (g.seed) g.seed = *g.seed + static_cast<uint64_t>(i);
    Result<std::shared_ptr<TokenConstraint>> c = make_constraint(ctx, cons);  // one per choice
    if (!c.ok()) return *err = from_status(c.status()), false;
    g.constraint = *c;
    auto parser = harmony::StreamingParser::create(ctx.tok, parser_options(*creq));
    if (!parser.ok()) return *err = from_status(parser.status()), false;
    auto stream = ctx.engine->submit(ids, g);
    if (!stream.ok()) {  // ~ChatChoice cancels the ones already submitted
      const auto n_ids = static_cast<int64_t>(ids.size());
      return *err = submit_error(stream.status(), ep, n_ids, ctx.engine->max_model_len()), false;
    }
    job->choices.push_back(
        std::make_unique<ChatChoice>(*stream, std::move(parser).value(), job->ro.stop, ctx.tok));
    job->choices.back()->set_silent_stop_ids(ctx.chat_silent_stop_ids);
    job->prefill_deltas.emplace_back();
    job->choices.back()->prefill(cons.steer_ids, &job->prefill_deltas.back());
  }
  return true;
}

void handle_chat(Ctx& ctx, const httplib::Request& req, httplib::Response& res) {
  json body;
  ApiError err;
  if (!parse_body(ctx, req, &body, &err)) return send_error(res, err);
  auto state = std::make_shared<StreamState>();
  state->ctx = &ctx;
  auto in_flight = std::make_shared<InFlight>(ctx);  // until the response is complete
  if (!start_chat_job(ctx, body, Endpoint::kChat, &state->job, &err)) return send_error(res, err);
  if (!state->job.ro.stream) {
    PeerWatch peer = watch_peer(req);
    return respond_blocking(ctx, state->job, peer, res);
  }
  state->finished.assign(state->job.choices.size(), false);
  state->lp_sent.assign(state->job.choices.size(), 0);
  res.set_header("Cache-Control", "no-cache");
  res.set_chunked_content_provider(
      "text/event-stream",
      [state, in_flight](size_t, httplib::DataSink& sink) { return pump(*state, sink); },
      [state](bool) {
        for (auto& c : state->job.choices) c->cancel();  // no-op when finished
      });
}

}  // namespace gossamer::server

// POST /v1/chat/completions (streaming and not).
#include <thread>

#include "harmony/render.h"
#include "server/handlers.h"

namespace gossamer::server {

namespace {

constexpr auto kPoll = std::chrono::milliseconds(20);

// Tokens appended after "<|start|>assistant" to force a tool call (tool_choice required or a
// named function): the header of a commentary message addressed to functions.NAME. With
// "required" and several tools the header stops after "functions." and a ToolNameConstraint
// lets the model write only one of the names (then closes the header).
struct Steering {
  std::vector<int32_t> ids;
  std::shared_ptr<TokenConstraint> constraint;
};

Result<Steering> steering(Ctx& ctx, const harmony::ChatRequest& req, harmony::RenderedPrompt p) {
  const Tokenizer& tok = *ctx.tok;
  Steering s;
  if (!p.tool_call_required) return s;
  if (p.required_tool.empty() && req.tools.size() == 1) p.required_tool = req.tools[0].name;
  auto special = [&](const char* name) -> Result<int32_t> {
    auto id = tok.special_id(name);
    if (!id) return Internal(std::string("tokenizer lacks ") + name);
    return *id;
  };
  GS_ASSIGN_OR_RETURN(int32_t channel, special("<|channel|>"));
  s.ids.push_back(channel);
  if (p.required_tool.empty()) {
    auto t = tok.encode("commentary to=functions.");
    s.ids.insert(s.ids.end(), t.begin(), t.end());
    std::vector<std::string> names;
    for (const auto& tool : req.tools) names.push_back(tool.name);
    GS_ASSIGN_OR_RETURN(auto pieces, token_pieces(ctx));
    GS_ASSIGN_OR_RETURN(s.constraint, ToolNameConstraint::create(tok, pieces, names));
    return s;
  }
  auto t = tok.encode("commentary to=functions." + p.required_tool + " ");
  s.ids.insert(s.ids.end(), t.begin(), t.end());
  GS_ASSIGN_OR_RETURN(int32_t constrain, special("<|constrain|>"));
  s.ids.push_back(constrain);
  auto j = tok.encode("json");
  s.ids.insert(s.ids.end(), j.begin(), j.end());
  GS_ASSIGN_OR_RETURN(int32_t message, special("<|message|>"));
  s.ids.push_back(message);
  return s;
}

// response_format json_object / json_schema: the compiled schema (shared by the choices; each
// choice gets its own JsonConstraint, which keeps the parse of its tokens). Not applied when a
// tool call is forced (the output is then the call, steered by `steering`).
struct Structured {
  std::shared_ptr<const CompiledJsonSchema> schema;  // null: plain text
  bool force_final = false;                          // no tools: the final channel follows <|end|>
};

Result<Structured> structured_output(const harmony::ChatRequest& req,
                                     const harmony::RenderedPrompt& p) {
  using Kind = harmony::ResponseFormat::Kind;
  const harmony::ResponseFormat& f = req.response_format;
  Structured s;
  if (f.kind == Kind::kText || p.tool_call_required) return s;
  const json any = true;
  const json* schema = f.kind == Kind::kJsonObject ? nullptr : f.schema ? &*f.schema : &any;
  GS_ASSIGN_OR_RETURN(s.schema, compile_json_schema(schema));
  s.force_final = !req.tools_visible();
  return s;
}

Result<std::shared_ptr<TokenConstraint>> json_constraint(Ctx& ctx, const Structured& s) {
  GS_ASSIGN_OR_RETURN(auto pieces, token_pieces(ctx));
  GS_ASSIGN_OR_RETURN(auto trie, token_trie(ctx));
  JsonConstraintOptions o;
  o.compiled = s.schema;
  o.force_final_after_end = s.force_final;
  GS_ASSIGN_OR_RETURN(auto c, JsonConstraint::create(*ctx.tok, pieces, trie, o));
  return std::shared_ptr<TokenConstraint>(std::move(c));
}

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

json chunk(const ChatJob& job, const std::string& model, json choices) {
  return json{
      {"id", job.id},   {"object", "chat.completion.chunk"}, {"created", job.created},
      {"model", model}, {"system_fingerprint", "gossamer"},  {"choices", std::move(choices)}};
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
    if (c.failed()) return send_error(res, ApiError{500, c.error(), "server_error", "", ""});
    if (c.timed_out()) return send_error(res, timeout_error(ctx, c.completion_tokens()));
    json lp = nullptr;
    if (job.ro.gen.logprobs) {
      json content = json::array();
      for (const auto& t : c.content_tokens()) {
        content.push_back(logprob_entry(*ctx.tok, t, job.ro.gen.top_logprobs > 0));
      }
      lp = json{{"content", content}};
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
      json lp = nullptr;
      if (d.kind == Delta::Kind::kContent && s.job.ro.gen.logprobs) {
        json content = json::array();
        for (; s.lp_sent[i] < c.content_tokens().size(); ++s.lp_sent[i]) {
          content.push_back(logprob_entry(*s.ctx->tok, c.content_tokens()[s.lp_sent[i]],
                                          s.job.ro.gen.top_logprobs > 0));
        }
        lp = json{{"content", content}};
      }
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
      json err = error_body(timeout_error(*s.ctx, c.completion_tokens()));
      err["error"]["choice_index"] = static_cast<int>(i);
      if (!send(err)) return false;
      continue;
    }
    if (c.failed()) {
      json err = error_body(ApiError{500, c.error(), "server_error", "", ""});
      if (!send(err)) return false;
    }
    if (!send(chunk(s.job, model,
                    json::array({choice_chunk((int)i, json::object(), c.finish_reason())})))) {
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

bool start_chat_job(Ctx& ctx, const json& body, Endpoint ep, ChatJob* job, ApiError* err) {
  Result<harmony::ChatRequest> creq = harmony::parse_chat_request(body);
  if (!creq.ok()) return *err = from_status(creq.status()), false;
  Result<harmony::RenderedPrompt> prompt =
      harmony::render_chat_request(*creq, *ctx.tok, ctx.opts.render);
  if (!prompt.ok()) return *err = from_status(prompt.status()), false;
  Result<Steering> steer = steering(ctx, *creq, *prompt);
  if (!steer.ok()) return *err = from_status(steer.status()), false;
  Result<Structured> structured = structured_output(*creq, *prompt);
  if (!structured.ok()) {
    *err = from_status(structured.status());
    err->param = "response_format";
    return false;
  }
  std::vector<int32_t> ids = prompt->ids;
  ids.insert(ids.end(), steer->ids.begin(), steer->ids.end());
  const int64_t room = ctx.engine->max_model_len() - static_cast<int64_t>(ids.size());
  if (room < 1) {
    *err = bad_request("this model's maximum context length is " +
                           std::to_string(ctx.engine->max_model_len()) +
                           " tokens; the prompt has " + std::to_string(ids.size()),
                       "messages");
    return false;
  }
  const int64_t dflt =
      ctx.opts.default_max_tokens > 0 ? std::min(room, ctx.opts.default_max_tokens) : room;
  if (!parse_request_options(body, ep, dflt, &job->ro, err, ctx.tok->vocab_size())) return false;
  if (!job->ro.ignore_eos) job->ro.gen.stop_token_ids = ctx.chat_stop_ids;
  job->ro.gen.constraint = steer->constraint;  // stateless: shared by the n choices
  job->ro.gen.timeout =
      std::chrono::duration_cast<std::chrono::milliseconds>(ctx.opts.request_timeout);
  job->id = make_id(ctx, "chatcmpl-");
  job->created = unix_now();
  for (int64_t i = 0; i < job->ro.n; ++i) {
    GenerationParams g = job->ro.gen;
    if (g.seed) g.seed = *g.seed + static_cast<uint64_t>(i);
    if (structured->schema) {
      Result<std::shared_ptr<TokenConstraint>> c = json_constraint(ctx, *structured);
      if (!c.ok()) return *err = from_status(c.status()), false;
      g.constraint = *c;
    }
    auto parser = harmony::StreamingParser::create(ctx.tok);
    if (!parser.ok()) return *err = from_status(parser.status()), false;
    auto stream = ctx.engine->submit(ids, g);
    if (!stream.ok()) {
      *err = from_status(stream.status());
      if (stream.status().code() == StatusCode::kInvalidArgument) err->param = "max_tokens";
      return false;  // ~ChatChoice cancels the ones already submitted
    }
    job->choices.push_back(
        std::make_unique<ChatChoice>(*stream, std::move(parser).value(), job->ro.stop));
    job->choices.back()->set_silent_stop_ids(ctx.chat_silent_stop_ids);
    job->prefill_deltas.emplace_back();
    job->choices.back()->prefill(steer->ids, &job->prefill_deltas.back());
  }
  return true;
}

void handle_chat(Ctx& ctx, const httplib::Request& req, httplib::Response& res) {
  json body;
  ApiError err;
  if (!parse_body(ctx, req, &body, &err)) return send_error(res, err);
  auto state = std::make_shared<StreamState>();
  state->ctx = &ctx;
  if (!start_chat_job(ctx, body, Endpoint::kChat, &state->job, &err)) return send_error(res, err);
  if (!state->job.ro.stream) {
    PeerWatch peer = watch_peer(req);
    return respond_blocking(ctx, state->job, peer, res);
  }
  state->finished.assign(state->job.choices.size(), false);
  state->lp_sent.assign(state->job.choices.size(), 0);
  res.set_header("Cache-Control", "no-cache");
  res.set_chunked_content_provider(
      "text/event-stream", [state](size_t, httplib::DataSink& sink) { return pump(*state, sink); },
      [state](bool) {
        for (auto& c : state->job.choices) c->cancel();  // no-op when finished
      });
}

}  // namespace gossamer::server

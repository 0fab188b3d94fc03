// POST /v1/responses: the text + function-call subset of the Responses API, mapped onto the chat
// path (same harmony rendering and parser), streaming (typed SSE events) and not.
#include <cstdint>

#include "server/handlers.h"
#include "server/responses_request.h"

namespace gossamer::server {

namespace {

constexpr auto kPoll = std::chrono::milliseconds(20);

// Turns chat deltas into Responses output items and (when streaming) typed SSE events.
class ResponseBuilder {
 public:
  // `lp`: the choice whose content-token logprobs go into output_text.logprobs (include:
  // ["message.output_text.logprobs"]), nullptr for none.
  ResponseBuilder(Ctx& ctx, json base, const ChatChoice* lp, bool top)
      : ctx_(ctx), base_(std::move(base)), lp_(lp), top_(top) {}

  void start(std::string* sse) {
    json r = snapshot("in_progress");
    event(sse, "response.created", {{"response", r}});
    event(sse, "response.in_progress", {{"response", r}});
  }
  void add(const Delta& d, std::string* sse) {
    std::string kind = d.kind == Delta::Kind::kReasoning ? "reasoning"
                       : d.kind == Delta::Kind::kContent ? "message"
                                                         : "function_call";
    if (open_ < 0 || kind != output_[open_]["type"] || d.kind == Delta::Kind::kToolStart) {
      close(sse);
      open(kind, d, sse);
    }
    json& item = output_[open_];
    const std::string id = item["id"];
    if (kind == "reasoning") {
      item["content"][0]["text"] = item["content"][0]["text"].get<std::string>() + d.text;
      event(sse, "response.reasoning_text.delta",
            {{"item_id", id}, {"output_index", open_}, {"content_index", 0}, {"delta", d.text}});
    } else if (kind == "message") {
      item["content"][0]["text"] = item["content"][0]["text"].get<std::string>() + d.text;
      event(sse, "response.output_text.delta",
            {{"item_id", id},
             {"output_index", open_},
             {"content_index", 0},
             {"delta", d.text},
             {"logprobs", take_logprobs(item, d.lp_end)}});
    } else if (d.kind == Delta::Kind::kToolArgs) {
      item["arguments"] = item["arguments"].get<std::string>() + d.text;
      event(sse, "response.function_call_arguments.delta",
            {{"item_id", id}, {"output_index", open_}, {"delta", d.text}});
    }
  }
  json finish(const ChatJob& job, std::string* sse) {
    const ChatChoice& c = *job.choices[0];
    const bool incomplete = c.finish_reason() == "length";
    if (open_ >= 0 && output_[open_]["type"] == "message") {
      take_logprobs(output_[open_], SIZE_MAX);  // tokens that decoded to no text yet
    }
    close(sse, incomplete ? "incomplete" : "completed");  // the item the budget cut off
    json r = snapshot(incomplete ? "incomplete" : "completed");
    if (incomplete) r["incomplete_details"] = {{"reason", "max_output_tokens"}};
    json u = chat_usage(job);
    r["usage"] = {{"input_tokens", u["prompt_tokens"]},
                  {"input_tokens_details", {{"cached_tokens", c.cached_tokens()}}},
                  {"output_tokens", u["completion_tokens"]},
                  {"output_tokens_details", {{"reasoning_tokens", c.reasoning_tokens()}}},
                  {"total_tokens", u["total_tokens"]}};
    event(sse, incomplete ? "response.incomplete" : "response.completed", {{"response", r}});
    return r;
  }
  // The response failed (timeout, backend error): an "error" event, then response.failed.
  void fail(const ApiError& e, std::string* sse) {
    close(sse, "incomplete");
    event(sse, "error",
          {{"code", e.code.empty() ? e.type : e.code}, {"message", e.message}, {"param", nullptr}});
    json r = snapshot("failed");
    r["error"] = {{"code", e.code.empty() ? e.type : e.code}, {"message", e.message}};
    event(sse, "response.failed", {{"response", r}});
  }

 private:
  // The content tokens' logprob entries not given out yet, up to `end`: appended to the
  // message's output_text.logprobs and returned for its delta event.
  json take_logprobs(json& item, size_t end) {
    if (!lp_) return json::array();
    json out = logprob_entries(*ctx_.tok, lp_->content_tokens(), &lp_sent_, end, top_);
    for (const json& e : out) item["content"][0]["logprobs"].push_back(e);
    return out;
  }
  json snapshot(const char* status) {
    json r = base_;
    r["status"] = status;
    r["output"] = output_;
    return r;
  }
  void event(std::string* sse, const std::string& type, json j) {
    if (!sse) return;
    json e{{"type", type}, {"sequence_number", seq_++}};
    e.update(j);
    *sse += sse_event(type, e);
  }
  void open(const std::string& kind, const Delta& d, std::string* sse) {
    json item;
    if (kind == "reasoning") {
      item = {{"id", make_id(ctx_, "rs_")},
              {"type", "reasoning"},
              {"summary", json::array()},
              {"content", {{{"type", "reasoning_text"}, {"text", ""}}}}};
    } else if (kind == "message") {
      item = {{"id", make_id(ctx_, "msg_")},
              {"type", "message"},
              {"role", "assistant"},
              {"status", "in_progress"},
              {"content",
               {{{"type", "output_text"},
                 {"text", ""},
                 {"annotations", json::array()},
                 {"logprobs", json::array()}}}}};
    } else {
      item = {{"id", make_id(ctx_, "fc_")},
              {"type", "function_call"},
              {"call_id", d.call_id},
              {"name", d.text},
              {"arguments", ""},
              {"status", "in_progress"}};
    }
    output_.push_back(item);
    open_ = static_cast<int>(output_.size()) - 1;
    json added = item;
    if (kind != "function_call") added["content"] = json::array();
    event(sse, "response.output_item.added", {{"output_index", open_}, {"item", added}});
    if (kind == "message") {
      event(sse, "response.content_part.added",
            {{"item_id", item["id"]},
             {"output_index", open_},
             {"content_index", 0},
             {"part", item["content"][0]}});
    }
  }
  void close(std::string* sse, const char* status = "completed") {
    if (open_ < 0) return;
    json& item = output_[open_];
    const std::string kind = item["type"];
    if (item.contains("status")) item["status"] = status;
    if (kind == "message") {
      event(sse, "response.output_text.done",
            {{"item_id", item["id"]},
             {"output_index", open_},
             {"content_index", 0},
             {"text", item["content"][0]["text"]},
             {"logprobs", item["content"][0]["logprobs"]}});
      event(sse, "response.content_part.done",
            {{"item_id", item["id"]},
             {"output_index", open_},
             {"content_index", 0},
             {"part", item["content"][0]}});
    } else if (kind == "reasoning") {
      event(sse, "response.reasoning_text.done",
            {{"item_id", item["id"]},
             {"output_index", open_},
             {"content_index", 0},
             {"text", item["content"][0]["text"]}});
    } else {
      event(sse, "response.function_call_arguments.done",
            {{"item_id", item["id"]}, {"output_index", open_}, {"arguments", item["arguments"]}});
    }
    event(sse, "response.output_item.done", {{"output_index", open_}, {"item", item}});
    open_ = -1;
  }

  Ctx& ctx_;
  json base_;
  const ChatChoice* lp_;
  bool top_;
  size_t lp_sent_ = 0;
  json output_ = json::array();
  int open_ = -1;
  int64_t seq_ = 0;
};

struct RespState {
  Ctx* ctx = nullptr;
  ChatJob job;
  std::unique_ptr<ResponseBuilder> rb;
  json items;  // the conversation's input items (previous turns first)
  bool store = true;
  bool started = false;
};

// Keeps a finished response for GET /v1/responses/{id} and previous_response_id.
void remember(RespState& s, const json& response) {
  if (!s.store) return;
  s.ctx->store->put(response["id"].get<std::string>(), StoredResponse{response, s.items});
}

// The error that ended choice `c`, if any.
std::optional<ApiError> choice_error(const Ctx& ctx, const ChatChoice& c, bool streamed) {
  if (c.timed_out()) return timeout_error(ctx, c.completion_tokens(), streamed);
  if (c.failed()) return generation_error(ctx, c.error());
  return std::nullopt;
}

bool pump(RespState& s, httplib::DataSink& sink) {
  std::string out;
  std::vector<Delta> deltas;
  if (!s.started) {
    s.started = true;
    s.rb->start(&out);
    for (const Delta& d : s.job.prefill_deltas[0]) s.rb->add(d, &out);
  }
  if (!sink.is_writable()) return false;
  ChatChoice& c = *s.job.choices[0];
  const bool done = c.poll(kPoll, &deltas);
  for (const Delta& d : deltas) s.rb->add(d, &out);
  if (done) {
    if (auto e = choice_error(*s.ctx, c, /*streamed=*/true)) {
      s.rb->fail(*e, &out);
    } else {
      remember(s, s.rb->finish(s.job, &out));
    }
  }
  if (!out.empty() && !sink.write(out.data(), out.size())) return false;
  if (done) sink.done();
  return true;
}

// `store` and `previous_response_id`: fills s.store and s.items (earlier turns + this input).
bool conversation(Ctx& ctx, const json& body, RespState& s, size_t* offset, ApiError* err) {
  if (auto st = body.find("store"); st != body.end() && !st->is_null()) {
    if (!st->is_boolean()) return *err = bad_request("'store' must be a boolean", "store"), false;
    s.store = st->get<bool>();
  }
  json input;
  if (!responses_input_items(body, &input, err)) return false;
  s.items = json::array();
  auto prev = body.find("previous_response_id");
  if (prev != body.end() && !prev->is_null()) {
    if (!prev->is_string()) {
      *err = bad_request("'previous_response_id' must be a string", "previous_response_id");
      return false;
    }
    std::optional<StoredResponse> p = ctx.store->get(prev->get<std::string>());
    if (!p) {
      *err =
          ApiError{404,
                   "Previous response with id '" + prev->get<std::string>() +
                       "' not found (never stored, stored with store: false, or evicted)",
                   "invalid_request_error", "previous_response_id", "previous_response_not_found"};
      return false;
    }
    s.items = std::move(p->input);
    for (const auto& o : p->response["output"]) s.items.push_back(o);
  }
  *offset = s.items.size();
  for (const auto& it : input) s.items.push_back(it);
  return true;
}

// reasoning.effort as requested (checked by then), else the default.
json reasoning_effort(const json& body) {
  auto r = body.find("reasoning");
  if (r == body.end() || !r->is_object()) return "medium";
  auto e = r->find("effort");
  return e == r->end() || e->is_null() ? json("medium") : *e;
}

json base_response(Ctx& ctx, const json& body, const RespState& s) {
  json text = {{"format", {{"type", "text"}}}};  // as requested (checked by then) or plain text
  if (auto t = body.find("text"); t != body.end() && t->is_object() && t->contains("format")) {
    text = {{"format", (*t)["format"]}};
  }
  return json{{"id", make_id(ctx, "resp_")},
              {"object", "response"},
              {"created_at", unix_now()},
              {"model", ctx.opts.model_name},
              {"error", nullptr},
              {"incomplete_details", nullptr},
              {"instructions", body.value("instructions", json(nullptr))},
              {"max_output_tokens", body.value("max_output_tokens", json(nullptr))},
              {"parallel_tool_calls", body.value("parallel_tool_calls", json(true))},
              {"previous_response_id", body.value("previous_response_id", json(nullptr))},
              {"store", s.store},
              {"temperature", s.job.ro.gen.temperature},
              {"top_p", s.job.ro.gen.top_p},
              {"tool_choice", body.value("tool_choice", json("auto"))},
              {"tools", body.value("tools", json::array())},
              {"text", text},
              {"reasoning", {{"effort", reasoning_effort(body)}, {"summary", nullptr}}},
              {"metadata", body.value("metadata", json::object())},
              {"user", body.value("user", json(nullptr))},
              {"top_logprobs", body.value("top_logprobs", json(0))},
              {"truncation", "disabled"},
              {"background", false}};
}

}  // namespace

void handle_responses(Ctx& ctx, const httplib::Request& req, httplib::Response& res) {
  json body, chat;
  ApiError err;
  if (!parse_body(ctx, req, &body, &err)) return send_error(res, err);
  auto s = std::make_shared<RespState>();
  s->ctx = &ctx;
  auto in_flight = std::make_shared<InFlight>(ctx);  // until the response is complete
  size_t offset = 0;
  if (!conversation(ctx, body, *s, &offset, &err)) return send_error(res, err);
  if (!responses_to_chat(body, s->items, offset, &chat, &err)) return send_error(res, err);
  if (!start_chat_job(ctx, chat, Endpoint::kResponses, &s->job, &err)) {
    to_responses_fields(&err);
    return send_error(res, err);
  }
  const GenerationParams& g = s->job.ro.gen;
  s->rb = std::make_unique<ResponseBuilder>(ctx, base_response(ctx, body, *s),
                                            g.logprobs ? s->job.choices[0].get() : nullptr,
                                            g.top_logprobs > 0);
  if (s->job.ro.stream) {
    res.set_header("Cache-Control", "no-cache");
    res.set_chunked_content_provider(
        "text/event-stream",
        [s, in_flight](size_t, httplib::DataSink& sink) { return pump(*s, sink); },
        [s](bool) { s->job.choices[0]->cancel(); });
    return;
  }
  for (const Delta& d : s->job.prefill_deltas[0]) s->rb->add(d, nullptr);
  PeerWatch peer = watch_peer(req);
  ResponseBuilder& rb = *s->rb;
  if (!wait_chat_job(s->job, peer, [&rb](size_t, const Delta& d) { rb.add(d, nullptr); })) {
    return client_gone(res);
  }
  if (auto e = choice_error(ctx, *s->job.choices[0], false)) return send_error(res, *e);
  json r = s->rb->finish(s->job, nullptr);
  remember(*s, r);
  res.set_content(dump(r), "application/json");
}

void handle_get_response(Ctx& ctx, const httplib::Request& req, httplib::Response& res) {
  const std::string id = req.matches.size() > 1 ? req.matches[1].str() : std::string();
  std::optional<StoredResponse> r = ctx.store->get(id);
  if (!r) {
    return send_error(res, ApiError{404, "No response with id '" + id + "' is stored",
                                    "invalid_request_error", "response_id", "not_found"});
  }
  res.set_content(dump(r->response), "application/json");
}

void handle_delete_response(Ctx& ctx, const httplib::Request& req, httplib::Response& res) {
  const std::string id = req.matches.size() > 1 ? req.matches[1].str() : std::string();
  if (!ctx.store->erase(id)) {
    return send_error(res, ApiError{404, "No response with id '" + id + "' is stored",
                                    "invalid_request_error", "response_id", "not_found"});
  }
  res.set_content(dump(json{{"id", id}, {"object", "response.deleted"}, {"deleted", true}}),
                  "application/json");
}

}  // namespace gossamer::server

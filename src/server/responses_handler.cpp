// POST /v1/responses: the text + function-call subset of the Responses API, mapped onto the chat
// path (same harmony rendering and parser), streaming (typed SSE events) and not.
#include "server/handlers.h"

namespace gossamer::server {

namespace {

constexpr auto kPoll = std::chrono::milliseconds(20);

bool fail(ApiError* err, const std::string& msg, const std::string& param) {
  *err = bad_request(msg, param);
  return false;
}

// obj["type"] when it is a string, `dflt` when absent or null, "" (never a valid type) otherwise.
std::string type_of(const json& obj, const char* dflt) {
  auto t = obj.find("type");
  if (t == obj.end() || t->is_null()) return dflt;
  return t->is_string() ? t->get<std::string>() : std::string();
}

// Text of a message content: a string or an array of {type: input_text|output_text|text, text}.
bool content_text(const json& c, const std::string& path, std::string* out, ApiError* err) {
  if (c.is_string()) return *out = c.get<std::string>(), true;
  if (!c.is_array()) return fail(err, "'" + path + "' must be a string or an array", path);
  for (size_t i = 0; i < c.size(); ++i) {
    const json& p = c[i];
    if (!p.is_object() || !p.contains("text") || !p["text"].is_string()) {
      return fail(err, "'" + path + "[" + std::to_string(i) + "]' must be a text part", path);
    }
    *out += p["text"].get<std::string>();
  }
  return true;
}

bool convert_item(const json& it, size_t i, json& msgs, ApiError* err) {
  const std::string path = "input[" + std::to_string(i) + "]";
  if (!it.is_object()) return fail(err, "'" + path + "' must be an object", path);
  const std::string type = type_of(it, "message");
  if (type == "message") {
    if (!it.contains("role") || !it["role"].is_string()) {
      return fail(err, "'" + path + ".role' must be a string", path + ".role");
    }
    const std::string role = it["role"].get<std::string>();
    if (role != "user" && role != "assistant" && role != "system" && role != "developer") {
      return fail(
          err,
          "'" + path + ".role' '" + role + "' is not one of user, assistant, system, developer",
          path + ".role");
    }
    std::string text;
    if (!content_text(it.value("content", json("")), path + ".content", &text, err)) return false;
    msgs.push_back({{"role", it["role"]}, {"content", text}});
  } else if (type == "function_call") {
    for (const char* k : {"call_id", "name", "arguments"}) {
      if (!it.contains(k) || !it[k].is_string()) {
        return fail(err, "'" + path + "." + k + "' must be a string", path + "." + k);
      }
    }
    json call{{"id", it["call_id"]},
              {"type", "function"},
              {"function", {{"name", it["name"]}, {"arguments", it["arguments"]}}}};
    if (!msgs.empty() && msgs.back()["role"] == "assistant" && msgs.back().contains("tool_calls")) {
      msgs.back()["tool_calls"].push_back(call);
    } else {
      msgs.push_back({{"role", "assistant"}, {"content", nullptr}, {"tool_calls", {call}}});
    }
  } else if (type == "function_call_output") {
    if (!it.contains("call_id") || !it["call_id"].is_string()) {
      return fail(err, "'" + path + ".call_id' must be a string", path + ".call_id");
    }
    std::string text;
    if (!content_text(it.value("output", json("")), path + ".output", &text, err)) return false;
    msgs.push_back({{"role", "tool"}, {"tool_call_id", it["call_id"]}, {"content", text}});
  } else if (type.empty()) {
    return fail(err, "'" + path + ".type' must be a string", path + ".type");
  } else if (type != "reasoning") {
    return fail(err, "'" + path + ".type' '" + type + "' is not supported", path + ".type");
  }
  return true;
}

// `input` as a list of items (a string is one user message).
bool input_items(const json& b, json* items, ApiError* err) {
  auto in = b.find("input");
  if (in == b.end()) return fail(err, "'input' is required", "input");
  if (in->is_string()) {
    *items = json::array({json{{"type", "message"}, {"role", "user"}, {"content", *in}}});
  } else if (in->is_array() && !in->empty()) {
    *items = *in;
  } else if (in->is_array()) {
    return fail(err, "'input' is an empty array", "input");
  } else {
    return fail(err, "'input' must be a string or an array of items", "input");
  }
  return true;
}

// text.format ({"type": "text" | "json_object" | "json_schema", "name", "schema", ...}) -> the
// Chat request's response_format (checked there; errors name Chat's path, so say where).
bool text_format(const json& b, json* chat, ApiError* err) {
  auto t = b.find("text");
  if (t == b.end() || t->is_null()) return true;
  if (!t->is_object()) return fail(err, "'text' must be an object", "text");
  auto f = t->find("format");
  if (f == t->end() || f->is_null()) return true;
  if (!f->is_object()) return fail(err, "'text.format' must be an object", "text.format");
  if (!f->contains("type") || !(*f)["type"].is_string()) {
    return fail(err, "'text.format.type' must be a string", "text.format.type");
  }
  if ((*f)["type"] != "json_schema") {
    (*chat)["response_format"] = *f;
    return true;
  }
  json js = *f;
  js.erase("type");
  (*chat)["response_format"] = {{"type", "json_schema"}, {"json_schema", js}};
  return true;
}

// Responses request (with its conversation `items`, earlier turns included) -> Chat request.
// items[offset..] are this request's input (error messages index them as input[i]).
bool to_chat(const json& b, const json& items, size_t offset, json* chat, ApiError* err) {
  json msgs = json::array();
  if (auto it = b.find("instructions"); it != b.end() && !it->is_null()) {
    if (!it->is_string()) return fail(err, "'instructions' must be a string", "instructions");
    msgs.push_back({{"role", "developer"}, {"content", *it}});
  }
  for (size_t i = 0; i < items.size(); ++i) {
    if (!convert_item(items[i], i >= offset ? i - offset : i, msgs, err)) return false;
  }
  *chat = json{{"model", b["model"]}, {"messages", msgs}};
  if (auto t = b.find("tools"); t != b.end() && !t->is_null()) {
    if (!t->is_array()) return fail(err, "'tools' must be an array", "tools");
    json tools = json::array();
    for (size_t i = 0; i < t->size(); ++i) {
      const json& x = (*t)[i];
      if (!x.is_object() || type_of(x, "") != "function") {
        return fail(err, "'tools[" + std::to_string(i) + "]': only function tools are supported",
                    "tools");
      }
      json fn = x;
      fn.erase("type");  // "strict" stays: the chat handler holds strict calls to the schema
      tools.push_back({{"type", "function"}, {"function", fn}});
    }
    (*chat)["tools"] = tools;
  }
  if (auto tc = b.find("tool_choice"); tc != b.end() && !tc->is_null()) {
    if (tc->is_object() && type_of(*tc, "") == "function" && tc->contains("name")) {
      (*chat)["tool_choice"] = {{"type", "function"}, {"function", {{"name", (*tc)["name"]}}}};
    } else {
      (*chat)["tool_choice"] = *tc;
    }
  }
  if (!text_format(b, chat, err)) return false;
  if (auto r = b.find("reasoning"); r != b.end() && !r->is_null()) {
    if (!r->is_object()) return fail(err, "'reasoning' must be an object", "reasoning");
    if (r->contains("effort") && !(*r)["effort"].is_null()) {
      (*chat)["reasoning_effort"] = (*r)["effort"];
    }
  }
  for (const char* k :
       {"temperature", "top_p", "max_output_tokens", "stream", "seed", "logit_bias"}) {
    if (b.contains(k)) (*chat)[k] = b[k];
  }
  return true;
}

// Turns chat deltas into Responses output items and (when streaming) typed SSE events.
class ResponseBuilder {
 public:
  ResponseBuilder(Ctx& ctx, json base) : ctx_(ctx), base_(std::move(base)) {}

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
             {"logprobs", json::array()}});
    } else if (d.kind == Delta::Kind::kToolArgs) {
      item["arguments"] = item["arguments"].get<std::string>() + d.text;
      event(sse, "response.function_call_arguments.delta",
            {{"item_id", id}, {"output_index", open_}, {"delta", d.text}});
    }
  }
  json finish(const ChatJob& job, std::string* sse) {
    const ChatChoice& c = *job.choices[0];
    const bool incomplete = c.finish_reason() == "length";
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
             {"logprobs", json::array()}});
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
std::optional<ApiError> choice_error(const Ctx& ctx, const ChatChoice& c) {
  if (c.timed_out()) return timeout_error(ctx, c.completion_tokens());
  if (c.failed()) return ApiError{500, c.error(), "server_error", "", ""};
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
    if (auto e = choice_error(*s.ctx, c)) {
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
    if (!st->is_boolean()) return fail(err, "'store' must be a boolean", "store");
    s.store = st->get<bool>();
  }
  json input;
  if (!input_items(body, &input, err)) return false;
  s.items = json::array();
  auto prev = body.find("previous_response_id");
  if (prev != body.end() && !prev->is_null()) {
    if (!prev->is_string()) {
      return fail(err, "'previous_response_id' must be a string", "previous_response_id");
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
              {"parallel_tool_calls", true},
              {"previous_response_id", body.value("previous_response_id", json(nullptr))},
              {"store", s.store},
              {"temperature", s.job.ro.gen.temperature},
              {"top_p", s.job.ro.gen.top_p},
              {"tool_choice", body.value("tool_choice", json("auto"))},
              {"tools", body.value("tools", json::array())},
              {"text", text}};
}

}  // namespace

void handle_responses(Ctx& ctx, const httplib::Request& req, httplib::Response& res) {
  json body, chat;
  ApiError err;
  if (!parse_body(ctx, req, &body, &err)) return send_error(res, err);
  auto s = std::make_shared<RespState>();
  s->ctx = &ctx;
  size_t offset = 0;
  if (!conversation(ctx, body, *s, &offset, &err)) return send_error(res, err);
  if (!to_chat(body, s->items, offset, &chat, &err)) return send_error(res, err);
  if (!start_chat_job(ctx, chat, Endpoint::kResponses, &s->job, &err)) return send_error(res, err);
  s->rb = std::make_unique<ResponseBuilder>(ctx, base_response(ctx, body, *s));
  if (s->job.ro.stream) {
    res.set_header("Cache-Control", "no-cache");
    res.set_chunked_content_provider(
        "text/event-stream", [s](size_t, httplib::DataSink& sink) { return pump(*s, sink); },
        [s](bool) { s->job.choices[0]->cancel(); });
    return;
  }
  for (const Delta& d : s->job.prefill_deltas[0]) s->rb->add(d, nullptr);
  PeerWatch peer = watch_peer(req);
  ResponseBuilder& rb = *s->rb;
  if (!wait_chat_job(s->job, peer, [&rb](size_t, const Delta& d) { rb.add(d, nullptr); })) {
    return client_gone(res);
  }
  if (auto e = choice_error(ctx, *s->job.choices[0])) return send_error(res, *e);
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

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
  const std::string type = it.value("type", "message");
  if (type == "message") {
    if (!it.contains("role") || !it["role"].is_string()) {
      return fail(err, "'" + path + ".role' must be a string", path + ".role");
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
  } else if (type != "reasoning") {
    return fail(err, "'" + path + ".type' '" + type + "' is not supported", path + ".type");
  }
  return true;
}

// Responses request -> Chat Completions request.
bool to_chat(const json& b, json* chat, ApiError* err) {
  json msgs = json::array();
  if (auto it = b.find("instructions"); it != b.end() && !it->is_null()) {
    if (!it->is_string()) return fail(err, "'instructions' must be a string", "instructions");
    msgs.push_back({{"role", "developer"}, {"content", *it}});
  }
  auto in = b.find("input");
  if (in == b.end()) return fail(err, "'input' is required", "input");
  if (in->is_string()) {
    msgs.push_back({{"role", "user"}, {"content", *in}});
  } else if (in->is_array()) {
    for (size_t i = 0; i < in->size(); ++i) {
      if (!convert_item((*in)[i], i, msgs, err)) return false;
    }
  } else {
    return fail(err, "'input' must be a string or an array of items", "input");
  }
  *chat = json{{"model", b["model"]}, {"messages", msgs}};
  if (auto t = b.find("tools"); t != b.end() && !t->is_null()) {
    if (!t->is_array()) return fail(err, "'tools' must be an array", "tools");
    json tools = json::array();
    for (size_t i = 0; i < t->size(); ++i) {
      const json& x = (*t)[i];
      if (!x.is_object() || x.value("type", "") != "function") {
        return fail(err, "'tools[" + std::to_string(i) + "]': only function tools are supported",
                    "tools");
      }
      json fn = x;
      fn.erase("type");
      fn.erase("strict");
      tools.push_back({{"type", "function"}, {"function", fn}});
    }
    (*chat)["tools"] = tools;
  }
  if (auto tc = b.find("tool_choice"); tc != b.end() && !tc->is_null()) {
    if (tc->is_object() && tc->value("type", "") == "function" && tc->contains("name")) {
      (*chat)["tool_choice"] = {{"type", "function"}, {"function", {{"name", (*tc)["name"]}}}};
    } else {
      (*chat)["tool_choice"] = *tc;
    }
  }
  if (auto r = b.find("reasoning"); r != b.end() && r->is_object() && r->contains("effort")) {
    (*chat)["reasoning_effort"] = (*r)["effort"];
  }
  for (const char* k : {"temperature", "top_p", "max_output_tokens", "stream", "seed"}) {
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
    close(sse);
    const ChatChoice& c = *job.choices[0];
    const bool incomplete = c.finish_reason() == "length";
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
  void close(std::string* sse) {
    if (open_ < 0) return;
    json& item = output_[open_];
    const std::string kind = item["type"];
    if (item.contains("status")) item["status"] = "completed";
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
  ChatJob job;
  std::unique_ptr<ResponseBuilder> rb;
  bool started = false;
};

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
    if (c.failed()) {
      out += sse_event("error", json{{"type", "error"}, {"message", c.error()}});
    } else {
      s.rb->finish(s.job, &out);
    }
  }
  if (!out.empty() && !sink.write(out.data(), out.size())) return false;
  if (done) sink.done();
  return true;
}

}  // namespace

void handle_responses(Ctx& ctx, const httplib::Request& req, httplib::Response& res) {
  json body, chat;
  ApiError err;
  if (!parse_body(ctx, req, &body, &err)) return send_error(res, err);
  if (!to_chat(body, &chat, &err)) return send_error(res, err);
  auto s = std::make_shared<RespState>();
  if (!start_chat_job(ctx, chat, Endpoint::kResponses, &s->job, &err)) return send_error(res, err);
  json base{{"id", make_id(ctx, "resp_")},
            {"object", "response"},
            {"created_at", unix_now()},
            {"model", ctx.opts.model_name},
            {"error", nullptr},
            {"incomplete_details", nullptr},
            {"instructions", body.value("instructions", json(nullptr))},
            {"max_output_tokens", body.value("max_output_tokens", json(nullptr))},
            {"parallel_tool_calls", true},
            {"temperature", s->job.ro.gen.temperature},
            {"top_p", s->job.ro.gen.top_p},
            {"tool_choice", body.value("tool_choice", json("auto"))},
            {"tools", body.value("tools", json::array())},
            {"text", {{"format", {{"type", "text"}}}}}};
  s->rb = std::make_unique<ResponseBuilder>(ctx, base);
  if (s->job.ro.stream) {
    res.set_header("Cache-Control", "no-cache");
    res.set_chunked_content_provider(
        "text/event-stream", [s](size_t, httplib::DataSink& sink) { return pump(*s, sink); },
        [s](bool) { s->job.choices[0]->cancel(); });
    return;
  }
  std::vector<Delta> deltas;
  ChatChoice& c = *s->job.choices[0];
  for (const Delta& d : s->job.prefill_deltas[0]) s->rb->add(d, nullptr);
  for (bool done = false; !done;) {
    deltas.clear();
    done = c.poll(kPoll, &deltas);
    for (const Delta& d : deltas) s->rb->add(d, nullptr);
  }
  if (c.failed()) return send_error(res, ApiError{500, c.error(), "server_error", "", ""});
  res.set_content(dump(s->rb->finish(s->job, nullptr)), "application/json");
}

}  // namespace gossamer::server

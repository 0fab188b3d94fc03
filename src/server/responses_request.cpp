// /v1/responses request -> chat request: input items (messages, function calls and their
// outputs, reasoning) to chat messages, flat function tools to chat tools, text.format to
// response_format, reasoning.effort and the sampling fields. Errors name the field.
#include "server/responses_request.h"

#include <regex>
#include <set>
#include <utility>

namespace gossamer::server {

namespace {

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

// call_ids: the function_call items seen so far (a function_call_output must answer one).
bool convert_item(const json& it, size_t i, json& msgs, std::set<std::string>& call_ids,
                  ApiError* err) {
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
    call_ids.insert(it["call_id"].get<std::string>());
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
    if (call_ids.count(it["call_id"].get<std::string>()) == 0) {
      return fail(err,
                  "'" + path + ".call_id' '" + it["call_id"].get<std::string>() +
                      "' answers no earlier function_call item of this conversation",
                  path + ".call_id");
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

}  // namespace

// `input` as a list of items (a string is one user message).
bool responses_input_items(const json& b, json* items, ApiError* err) {
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

namespace {

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

// Fields only echoed in the response object: their types are checked; background runs in the
// foreground (the response says background: false).
bool echoed_fields(const json& b, ApiError* err) {
  auto bad_type = [&](const char* k, bool ok, const char* what) {
    return b.contains(k) && !b[k].is_null() && !ok
               ? fail(err, std::string("'") + k + "' must be " + what, k)
               : true;
  };
  auto at = [&](const char* k) { return b.contains(k) ? b[k] : json(); };
  if (!bad_type("parallel_tool_calls", at("parallel_tool_calls").is_boolean(), "a boolean"))
    return false;
  if (!bad_type("background", at("background").is_boolean(), "a boolean")) return false;
  if (!bad_type("user", at("user").is_string(), "a string")) return false;
  const json k = at("top_logprobs");
  if (!bad_type("top_logprobs", k.is_number_integer() && k >= 0 && k <= 20,
                "an integer in [0, 20]")) {
    return false;
  }
  const json m = at("metadata");
  bool strings = m.is_object() && m.size() <= 16;
  for (auto it = m.begin(); strings && it != m.end(); ++it) strings = it->is_string();
  return bad_type("metadata", strings, "an object of at most 16 string values");
}

// include: ["message.output_text.logprobs"] asks for output_text.logprobs (top_logprobs of them
// each); other include values name data this server never has and are ignored.
bool output_logprobs(const json& b, json* chat, ApiError* err) {
  auto inc = b.find("include");
  if (inc == b.end() || inc->is_null()) return true;
  if (!inc->is_array()) return fail(err, "'include' must be an array of strings", "include");
  bool lp = false;
  for (size_t i = 0; i < inc->size(); ++i) {
    const json& v = (*inc)[i];
    if (!v.is_string()) {
      return fail(err, "'include[" + std::to_string(i) + "]' must be a string", "include");
    }
    lp = lp || v == "message.output_text.logprobs";
  }
  if (!lp) return true;
  (*chat)["logprobs"] = true;
  if (b.contains("top_logprobs")) (*chat)["top_logprobs"] = b["top_logprobs"];
  return true;
}

}  // namespace

// Responses request (with its conversation `items`, earlier turns included) -> Chat request.
// items[offset..] are this request's input (error messages index them as input[i]).
bool responses_to_chat(const json& b, const json& items, size_t offset, json* chat, ApiError* err) {
  json msgs = json::array();
  if (auto it = b.find("instructions"); it != b.end() && !it->is_null()) {
    if (!it->is_string()) return fail(err, "'instructions' must be a string", "instructions");
    msgs.push_back({{"role", "developer"}, {"content", *it}});
  }
  std::set<std::string> call_ids;
  for (size_t i = 0; i < items.size(); ++i) {
    if (!convert_item(items[i], i >= offset ? i - offset : i, msgs, call_ids, err)) return false;
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
       {"temperature", "top_p", "max_output_tokens", "stream", "seed",
        // extensions, as on the other endpoints
        "logit_bias", "top_k", "min_p", "presence_penalty", "frequency_penalty", "ignore_eos"}) {
    if (b.contains(k)) (*chat)[k] = b[k];
  }
  return echoed_fields(b, err) && output_logprobs(b, chat, err);
}

void to_responses_fields(ApiError* err) {
  static const std::pair<std::regex, const char*> kMap[] = {
      {std::regex(R"((tools\[\d+\]|tool_choice)\.function\.)"), "$1."},
      {std::regex(R"(response_format(\.json_schema)?)"), "text.format"},
  };
  for (const auto& [re, to] : kMap) {
    err->message = std::regex_replace(err->message, re, to);
    err->param = std::regex_replace(err->param, re, to);
  }
}

}  // namespace gossamer::server

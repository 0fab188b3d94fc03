#include "harmony/chat_request.h"

#include <algorithm>
#include <map>
#include <set>

#include "common/json_depth.h"
#include "harmony/typescript_schema.h"

namespace gossamer::harmony {
namespace {

using Json = nlohmann::ordered_json;

std::string type_name(const Json& j) {
  return j.type_name();
}

Status wrong_type(const std::string& path, const char* want, const Json& got) {
  return InvalidArgument(path + ": expected " + want + ", got " + type_name(got));
}

// Text of a message `content`: a string, or an array of {"type":"text","text":...} parts
// (concatenated). `null`/absent -> nullopt.
Result<std::optional<std::string>> content_text(const Json& msg, const std::string& path) {
  auto it = msg.find("content");
  if (it == msg.end() || it->is_null()) return std::optional<std::string>();
  if (it->is_string()) return std::optional<std::string>(it->get<std::string>());
  if (!it->is_array()) return wrong_type(path + ".content", "a string or an array of parts", *it);
  std::string text;
  for (size_t j = 0; j < it->size(); ++j) {
    const Json& part = (*it)[j];
    const std::string p = path + ".content[" + std::to_string(j) + "]";
    if (!part.is_object()) return wrong_type(p, "an object", part);
    auto t = part.find("type");
    if (t == part.end() || !t->is_string())
      return InvalidArgument(p + ".type: missing or not a string");
    if (*t != "text") {
      return Unsupported(p + ".type: content part type '" + t->get<std::string>() +
                         "' is not supported (only 'text')");
    }
    auto tx = part.find("text");
    if (tx == part.end() || !tx->is_string())
      return InvalidArgument(p + ".text: missing or not a string");
    text += tx->get<std::string>();
  }
  return std::optional<std::string>(std::move(text));
}

Result<std::string> required_text(const Json& msg, const std::string& path) {
  GS_ASSIGN_OR_RETURN(auto text, content_text(msg, path));
  if (!text) return InvalidArgument(path + ".content: missing (required for this role)");
  return *text;
}

Status parse_effort(const Json& req, ChatRequest& out) {
  const Json* effort = nullptr;
  std::string path = "reasoning_effort";
  if (auto it = req.find("reasoning_effort"); it != req.end() && !it->is_null()) {
    effort = &*it;
  } else if (auto r = req.find("reasoning"); r != req.end() && r->is_object()) {
    if (auto e = r->find("effort"); e != r->end() && !e->is_null()) {
      effort = &*e;
      path = "reasoning.effort";
    }
  }
  if (effort == nullptr) return Status::Ok();
  if (!effort->is_string()) return wrong_type(path, "a string", *effort);
  const auto& s = effort->get_ref<const std::string&>();
  if (s == "low") {
    out.effort = ReasoningEffort::kLow;
  } else if (s == "medium") {
    out.effort = ReasoningEffort::kMedium;
  } else if (s == "high") {
    out.effort = ReasoningEffort::kHigh;
  } else {
    return InvalidArgument(path + ": '" + s + "' is not one of low, medium, high");
  }
  return Status::Ok();
}

// OpenAI allows 64 characters; the output parser's header limit (ParserOptions::
// max_header_tokens) leaves room for a call of a name this long spelled one token per byte.
constexpr size_t kMaxToolNameBytes = 64;

// The model calls a tool as `to=functions.NAME`, a header the parser ends at whitespace or a
// special token: a name with either could be offered but never called back.
bool breaks_header(const std::string& name) {
  return name.find("<|") != std::string::npos || std::any_of(name.begin(), name.end(), [](char c) {
           return static_cast<unsigned char>(c) <= 0x20 || c == 0x7f;
         });
}

Status parse_tool(const Json& tool, const std::string& p, ChatRequest& out) {
  if (!tool.is_object()) return wrong_type(p, "an object", tool);
  auto type = tool.find("type");
  if (type != tool.end() && !(type->is_string() && *type == "function")) {
    return Unsupported(p + ".type: only 'function' tools are supported, got " + type->dump());
  }
  auto fn = tool.find("function");
  if (fn == tool.end() || !fn->is_object())
    return InvalidArgument(p + ".function: missing or not an object");
  FunctionTool ft;
  auto name = fn->find("name");
  if (name == fn->end() || !name->is_string() || name->get_ref<const std::string&>().empty()) {
    return InvalidArgument(p + ".function.name: missing or not a non-empty string");
  }
  ft.name = name->get<std::string>();
  if (auto d = fn->find("description"); d != fn->end() && !d->is_null()) {
    if (!d->is_string()) return wrong_type(p + ".function.description", "a string", *d);
    ft.description = d->get<std::string>();
  }
  if (auto params = fn->find("parameters"); params != fn->end() && !params->is_null()) {
    if (!params->is_object())
      return wrong_type(p + ".function.parameters", "a JSON schema object", *params);
    ft.parameters = *params;
  }
  if (auto st = fn->find("strict"); st != fn->end() && !st->is_null()) {
    if (!st->is_boolean()) return wrong_type(p + ".function.strict", "a boolean", *st);
    ft.strict = st->get<bool>();
  }
  out.tools.push_back(std::move(ft));
  return Status::Ok();
}

Status parse_tools(const Json& req, ChatRequest& out) {
  auto it = req.find("tools");
  if (it == req.end() || it->is_null()) return Status::Ok();
  if (!it->is_array()) return wrong_type("tools", "an array", *it);
  for (size_t i = 0; i < it->size(); ++i) {
    GS_RETURN_IF_ERROR(parse_tool((*it)[i], "tools[" + std::to_string(i) + "]", out));
  }
  return Status::Ok();
}

Status parse_tool_choice(const Json& req, ChatRequest& out) {
  auto it = req.find("tool_choice");
  if (it == req.end() || it->is_null()) return Status::Ok();
  if (it->is_string()) {
    const auto& s = it->get_ref<const std::string&>();
    if (s == "auto") {
      out.tool_choice = ToolChoiceMode::kAuto;
    } else if (s == "none") {
      out.tool_choice = ToolChoiceMode::kNone;
    } else if (s == "required") {
      out.tool_choice = ToolChoiceMode::kRequired;
    } else {
      return InvalidArgument("tool_choice: '" + s + "' is not one of none, auto, required");
    }
    return Status::Ok();
  }
  if (!it->is_object()) return wrong_type("tool_choice", "a string or an object", *it);
  auto fn = it->find("function");
  if (fn == it->end() || !fn->is_object()) return InvalidArgument("tool_choice.function: missing");
  auto name = fn->find("name");
  if (name == fn->end() || !name->is_string()) {
    return InvalidArgument("tool_choice.function.name: missing or not a string");
  }
  out.tool_choice = ToolChoiceMode::kNamed;
  out.tool_choice_name = name->get<std::string>();
  return Status::Ok();
}

// Maps the OpenAI messages after the leading system/developer block to harmony messages.
class MessageMapper {
 public:
  explicit MessageMapper(ChatRequest& out) : out_(out) {}

  Status map(const Json& msg, size_t index, bool leading) {
    const std::string path = "messages[" + std::to_string(index) + "]";
    if (!msg.is_object()) return wrong_type(path, "an object", msg);
    auto role_it = msg.find("role");
    if (role_it == msg.end() || !role_it->is_string()) {
      return InvalidArgument(path + ".role: missing or not a string");
    }
    const auto& role = role_it->get_ref<const std::string&>();
    if (role == "system" || role == "developer") return instructions(msg, path, leading);
    if (role == "user") {
      GS_ASSIGN_OR_RETURN(std::string text, required_text(msg, path));
      push(Role::kUser, "", "", "", "", std::move(text));
      return Status::Ok();
    }
    if (role == "assistant") return assistant(msg, path);
    if (role == "tool") return tool(msg, path);
    return InvalidArgument(path + ".role: unknown role '" + role +
                           "' (expected system, developer, user, assistant or tool)");
  }

 private:
  void push(Role role, std::string author, std::string recipient, std::string channel,
            std::string content_type, std::string text) {
    out_.turns.push_back(HarmonyMessage{role, std::move(author), std::move(recipient),
                                        std::move(channel), std::move(content_type),
                                        std::move(text)});
  }

  Status instructions(const Json& msg, const std::string& path, bool leading) {
    GS_ASSIGN_OR_RETURN(std::string text, required_text(msg, path));
    if (leading) {
      out_.instructions = out_.instructions ? *out_.instructions + "\n\n" + text : text;
    } else {
      push(Role::kDeveloper, "", "", "", "", "# Instructions\n\n" + text);
    }
    return Status::Ok();
  }

  Result<std::optional<std::string>> reasoning(const Json& msg, const std::string& path) {
    for (const char* key : {"reasoning_content", "reasoning"}) {
      auto it = msg.find(key);
      if (it == msg.end() || it->is_null()) continue;
      if (!it->is_string()) return wrong_type(path + "." + key, "a string", *it);
      return std::optional<std::string>(it->get<std::string>());
    }
    return std::optional<std::string>();
  }

  Status tool_call(const Json& call, const std::string& p) {
    if (!call.is_object()) return wrong_type(p, "an object", call);
    if (auto t = call.find("type"); t != call.end() && !(t->is_string() && *t == "function")) {
      return Unsupported(p + ".type: only 'function' tool calls are supported");
    }
    auto fn = call.find("function");
    if (fn == call.end() || !fn->is_object())
      return InvalidArgument(p + ".function: missing or not an object");
    auto name = fn->find("name");
    if (name == fn->end() || !name->is_string() || name->get_ref<const std::string&>().empty()) {
      return InvalidArgument(p + ".function.name: missing or not a non-empty string");
    }
    auto args = fn->find("arguments");
    std::string arguments;
    if (args == fn->end() || args->is_null()) {
      return InvalidArgument(p + ".function.arguments: missing");
    } else if (args->is_string()) {
      arguments = args->get<std::string>();
    } else if (args->is_object()) {
      arguments = compact_json(*args);
    } else {
      return wrong_type(p + ".function.arguments", "a JSON string", *args);
    }
    if (auto id = call.find("id"); id != call.end() && !id->is_null()) {
      if (!id->is_string()) return wrong_type(p + ".id", "a string", *id);
      call_names_[id->get<std::string>()] = name->get<std::string>();
    }
    push(Role::kAssistant, "", "functions." + name->get<std::string>(), "commentary",
         "<|constrain|>json", std::move(arguments));
    return Status::Ok();
  }

  Status assistant(const Json& msg, const std::string& path) {
    GS_ASSIGN_OR_RETURN(auto content, content_text(msg, path));
    GS_ASSIGN_OR_RETURN(auto thinking, reasoning(msg, path));
    const Json* calls = nullptr;
    if (auto it = msg.find("tool_calls"); it != msg.end() && !it->is_null()) {
      if (!it->is_array()) return wrong_type(path + ".tool_calls", "an array", *it);
      if (!it->empty()) calls = &*it;
    }
    if (!content && !thinking && calls == nullptr) {
      return InvalidArgument(path + ": assistant message has no content, reasoning or tool_calls");
    }
    if (thinking) push(Role::kAssistant, "", "", "analysis", "", *thinking);
    if (calls == nullptr) {
      if (content) push(Role::kAssistant, "", "", "final", "", *content);
      return Status::Ok();
    }
    if (content && !content->empty()) push(Role::kAssistant, "", "", "commentary", "", *content);
    for (size_t j = 0; j < calls->size(); ++j) {
      GS_RETURN_IF_ERROR(tool_call((*calls)[j], path + ".tool_calls[" + std::to_string(j) + "]"));
    }
    return Status::Ok();
  }

  Status tool(const Json& msg, const std::string& path) {
    GS_ASSIGN_OR_RETURN(std::string text, required_text(msg, path));
    std::string name;
    auto id = msg.find("tool_call_id");
    if (id != msg.end() && !id->is_null()) {
      if (!id->is_string()) return wrong_type(path + ".tool_call_id", "a string", *id);
      auto found = call_names_.find(id->get<std::string>());
      if (found == call_names_.end()) {
        return InvalidArgument(path + ".tool_call_id: unknown id '" + id->get<std::string>() +
                               "' (no earlier assistant tool call has this id)");
      }
      name = found->second;
    } else if (auto n = msg.find("name");
               n != msg.end() && n->is_string() && !n->get_ref<const std::string&>().empty()) {
      name = n->get<std::string>();
    } else {
      return InvalidArgument(path + ".tool_call_id: missing");
    }
    push(Role::kTool, "functions." + name, "assistant", "commentary", "", std::move(text));
    return Status::Ok();
  }

  ChatRequest& out_;
  std::map<std::string, std::string> call_names_;  // tool call id -> function name
};

}  // namespace

const char* role_name(Role r) {
  switch (r) {
    case Role::kSystem:
      return "system";
    case Role::kDeveloper:
      return "developer";
    case Role::kUser:
      return "user";
    case Role::kAssistant:
      return "assistant";
    case Role::kTool:
      return "tool";
  }
  return "user";
}

Status ChatRequest::validate() const {
  std::set<std::string> names;
  for (size_t i = 0; i < tools.size(); ++i) {
    if (tools[i].name.empty())
      return InvalidArgument("tools[" + std::to_string(i) + "].function.name: empty");
    if (breaks_header(tools[i].name)) {
      return InvalidArgument("tools[" + std::to_string(i) + "].function.name: '" + tools[i].name +
                             "' contains whitespace, a control character or '<|' (the model "
                             "calls a tool as to=functions.NAME, which ends there)");
    }
    if (tools[i].name.size() > kMaxToolNameBytes) {
      return InvalidArgument("tools[" + std::to_string(i) +
                             "].function.name: " + std::to_string(tools[i].name.size()) +
                             " bytes, more than the " + std::to_string(kMaxToolNameBytes) +
                             " allowed (OpenAI allows at most 64 characters)");
    }
    if (!names.insert(tools[i].name).second) {
      return InvalidArgument("tools[" + std::to_string(i) +
                             "].function.name: duplicate tool name '" + tools[i].name + "'");
    }
    if (tools[i].parameters && !tools[i].parameters->is_object()) {
      return InvalidArgument("tools[" + std::to_string(i) + "].function.parameters: not an object");
    }
  }
  if (tool_choice == ToolChoiceMode::kNamed && names.count(tool_choice_name) == 0) {
    return InvalidArgument("tool_choice.function.name: '" + tool_choice_name +
                           "' is not one of the request's tools");
  }
  if ((tool_choice == ToolChoiceMode::kRequired) && tools.empty()) {
    return InvalidArgument("tool_choice: 'required' but the request has no tools");
  }
  return Status::Ok();
}

Result<ChatRequest> parse_chat_request(const Json& request) {
  if (!request.is_object()) return wrong_type("request", "a JSON object", request);
  ChatRequest out;
  GS_RETURN_IF_ERROR(parse_effort(request, out));
  GS_RETURN_IF_ERROR(parse_tools(request, out));
  GS_RETURN_IF_ERROR(parse_tool_choice(request, out));
  GS_ASSIGN_OR_RETURN(out.response_format, parse_response_format(request));
  auto msgs = request.find("messages");
  if (msgs == request.end()) return InvalidArgument("messages: missing");
  if (!msgs->is_array()) return wrong_type("messages", "an array", *msgs);
  if (msgs->empty()) return InvalidArgument("messages: empty");
  MessageMapper mapper(out);
  bool leading = true;
  for (size_t i = 0; i < msgs->size(); ++i) {
    const Json& m = (*msgs)[i];
    const Json* role = m.is_object() && m.contains("role") ? &m["role"] : nullptr;
    leading = leading && role != nullptr && (*role == "system" || *role == "developer");
    GS_RETURN_IF_ERROR(mapper.map(m, i, leading));
  }
  GS_RETURN_IF_ERROR(out.validate());
  return out;
}

Result<ChatRequest> parse_chat_request(const std::string& request_json) {
  if (json_nesting_exceeds(request_json)) {
    return InvalidArgument("request: JSON nests deeper than " + std::to_string(kMaxJsonDepth) +
                           " levels");
  }
  Json j;
  try {
    j = Json::parse(request_json);
  } catch (const Json::parse_error& e) {
    return InvalidArgument("request: invalid JSON at byte " + std::to_string(e.byte) + ": " +
                           e.what());
  }
  return parse_chat_request(j);
}

}  // namespace gossamer::harmony

// OpenAI Chat Completions request -> harmony conversation (the messages openai-harmony would
// render). Validation lives here: every malformed field yields InvalidArgument naming the JSON
// path (e.g. "messages[3].tool_calls[0].function.name"), which the server maps to HTTP 400.
//
// Mapping (see docs/harmony.md for the full rules):
//   system message    : identity, knowledge cutoff, current date, "Reasoning: <effort>",
//                       valid channels (+ the "Calls to these tools ..." line with function tools)
//   leading OpenAI `system` / `developer` messages -> one harmony developer message
//                       "# Instructions\n\n<texts joined by \n\n>" (+ "# Tools" namespace)
//   later `system` / `developer` messages -> a developer message "# Instructions" in place
//   user              -> user
//   assistant         -> [analysis: reasoning_content|reasoning] [commentary: content, only
//                        when it also has tool_calls] [commentary to=functions.NAME
//                        <|constrain|>json: arguments] ... | [final: content]
//   tool              -> functions.NAME to=assistant, channel commentary (NAME from the
//                        assistant tool call whose id == tool_call_id)
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"

namespace gossamer::harmony {

enum class Role { kSystem, kDeveloper, kUser, kAssistant, kTool };
const char* role_name(Role r);

// One harmony message, already reduced to its header fields and its content text.
struct HarmonyMessage {
  Role role = Role::kUser;
  std::string author_name;   // tool messages: "functions.NAME" (rendered instead of the role)
  std::string recipient;     // "" = none; e.g. "functions.get_weather", "assistant"
  std::string channel;       // "" = none; "analysis" | "commentary" | "final"
  std::string content_type;  // "" = none; "<|constrain|>json" renders as " " <|constrain|> "json"
  std::string text;          // message body (system/developer bodies are pre-rendered text)
};

enum class ReasoningEffort { kLow, kMedium, kHigh };

struct FunctionTool {
  std::string name;
  std::string description;                           // "" when absent
  std::optional<nlohmann::ordered_json> parameters;  // a JSON object when present
  bool strict = false;  // the server holds the call's arguments to `parameters`
};

enum class ToolChoiceMode { kAuto, kNone, kRequired, kNamed };

// `response_format` (structured output). json_schema is rendered at the end of the developer
// message (harmony docs/format.md, "Structured output"):
//   "# Response Formats\n\n## NAME\n\n// DESCRIPTION\nSCHEMA" (no "// ..." line without a
// description; SCHEMA as compact JSON in the request's key order). json_object adds nothing to
// the prompt. Enforcing the format while sampling is the server's job (server/json_constraint.h).
struct ResponseFormat {
  enum class Kind { kText, kJsonObject, kJsonSchema };
  Kind kind = Kind::kText;
  std::string name;                              // json_schema: [A-Za-z0-9_-]{1,64}
  std::string description;                       // "" when absent
  std::optional<nlohmann::ordered_json> schema;  // json_schema; absent = any JSON value
  bool strict = false;                           // accepted; the format is always enforced
};

// Parses `response_format` ({"type": "text" | "json_object" | "json_schema", "json_schema":
// {"name", "description"?, "schema"?, "strict"?}}); absent / null = text. Errors name the path.
Result<ResponseFormat> parse_response_format(const nlohmann::ordered_json& request);
// The developer-message section for a json_schema format ("" for text / json_object).
std::string response_format_section(const ResponseFormat& f);

// The parts of a Chat Completions request that shape the prompt.
struct ChatRequest {
  ReasoningEffort effort = ReasoningEffort::kMedium;
  std::vector<FunctionTool> tools;
  ToolChoiceMode tool_choice = ToolChoiceMode::kAuto;
  std::string tool_choice_name;  // kNamed only
  // Messages after the leading system/developer block, mapped to harmony messages (without the
  // synthesized system / developer messages, which the renderer adds).
  std::vector<HarmonyMessage> turns;
  std::optional<std::string> instructions;  // leading system/developer texts joined by "\n\n"
  ResponseFormat response_format;

  bool tools_visible() const { return !tools.empty() && tool_choice != ToolChoiceMode::kNone; }
  Status validate() const;
};

// Parses and validates the request (`messages` required and non-empty).
Result<ChatRequest> parse_chat_request(const nlohmann::ordered_json& request);
Result<ChatRequest> parse_chat_request(const std::string& request_json);

}  // namespace gossamer::harmony

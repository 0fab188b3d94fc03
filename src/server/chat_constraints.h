// What a chat request steers and constrains while it samples, built once per request:
// - tool_choice "required" / a named function: tokens appended to the prompt (the header of a
//   commentary message to functions.NAME; with several tools the header stops after
//   "functions." and a ToolNameConstraint picks the name);
// - response_format json_object / json_schema: the final message held to the schema (not when
//   a call is forced);
// - tool arguments: a strict tool's call (function.strict = true), and a forced call, held to
//   the tool's parameters schema (a forced non-strict tool whose schema is outside the enforced
//   subset: any JSON object).
// make_constraint() then gives each choice its own TokenConstraint (they keep a parse).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "harmony/chat_request.h"
#include "harmony/render.h"
#include "server/handlers.h"

namespace gossamer::server {

struct ChatConstraints {
  std::vector<int32_t> steer_ids;                          // appended to the prompt
  std::vector<std::string> name_choices;                   // "required" with several tools
  std::shared_ptr<const CompiledJsonSchema> final_schema;  // null: the final message is free
  bool force_final = false;               // no tools: the final channel follows <|end|>
  std::vector<ToolArgsSchema> tool_args;  // calls whose arguments are held to a schema

  bool empty() const { return name_choices.empty() && !final_schema && tool_args.empty(); }
};

// False with *err set: a schema outside the enforced subset (param "response_format" or
// "tools", the keyword and JSON pointer named), or a tokenizer without the harmony tokens.
bool chat_constraints(Ctx& ctx, const harmony::ChatRequest& req,
                      const harmony::RenderedPrompt& prompt, ChatConstraints* out, ApiError* err);

// One choice's constraint (null when nothing is constrained).
Result<std::shared_ptr<TokenConstraint>> make_constraint(Ctx& ctx, const ChatConstraints& c);

}  // namespace gossamer::server

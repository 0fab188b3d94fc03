#include "server/chat_constraints.h"

namespace gossamer::server {

namespace {

// The header of a forced call: "<|channel|>commentary to=functions." and, for one tool,
// "NAME <|constrain|>json<|message|>".
Status steer(const Tokenizer& tok, const harmony::ChatRequest& req, std::string required,
             ChatConstraints* out) {
  if (required.empty() && req.tools.size() == 1) required = req.tools[0].name;
  GS_ASSIGN_OR_RETURN(int32_t channel, special_token(tok, "<|channel|>"));
  out->steer_ids.push_back(channel);
  if (required.empty()) {
    auto t = tok.encode("commentary to=functions.");
    out->steer_ids.insert(out->steer_ids.end(), t.begin(), t.end());
    for (const auto& tool : req.tools) out->name_choices.push_back(tool.name);
    return Status::Ok();
  }
  auto t = tok.encode("commentary to=functions." + required + " ");
  out->steer_ids.insert(out->steer_ids.end(), t.begin(), t.end());
  GS_ASSIGN_OR_RETURN(std::vector<int32_t> close, json_call_header_close(tok));
  out->steer_ids.insert(out->steer_ids.end(), close.begin(), close.end());
  return Status::Ok();
}

// Tools whose call arguments are held to their schema: strict ones (a schema outside the
// subset is an error) and, when a call is forced, the callable ones (falling back to any object).
Status tool_args(const harmony::ChatRequest& req, const harmony::RenderedPrompt& p,
                 ChatConstraints* out) {
  if (!req.tools_visible()) return Status::Ok();
  const json any_object = {{"type", "object"}};
  for (size_t i = 0; i < req.tools.size(); ++i) {
    const harmony::FunctionTool& t = req.tools[i];
    const bool forced =
        p.tool_call_required && (p.required_tool.empty() || p.required_tool == t.name);
    if (!t.strict && !forced) continue;
    const json schema = t.parameters ? *t.parameters : any_object;
    Result<std::shared_ptr<const CompiledJsonSchema>> c = compile_json_schema(&schema);
    if (!c.ok() && t.strict) {
      return InvalidArgument("tools[" + std::to_string(i) +
                             "].function.parameters (strict): " + c.status().message());
    }
    if (!c.ok()) c = compile_json_schema(&any_object);
    if (!c.ok()) return c.status();
    out->tool_args.push_back({t.name, *c});
  }
  return Status::Ok();
}

}  // namespace

bool chat_constraints(Ctx& ctx, const harmony::ChatRequest& req, const harmony::RenderedPrompt& p,
                      ChatConstraints* out, ApiError* err) {
  if (p.tool_call_required) {
    if (Status st = steer(*ctx.tok, req, p.required_tool, out); !st.ok()) {
      return *err = from_status(st), false;
    }
  }
  if (Status st = tool_args(req, p, out); !st.ok()) {
    *err = from_status(st);
    err->param = "tools";
    return false;
  }
  using Kind = harmony::ResponseFormat::Kind;
  const harmony::ResponseFormat& f = req.response_format;
  if (f.kind == Kind::kText || p.tool_call_required) return true;  // a forced call is the output
  const json any = true;
  const json* schema = f.kind == Kind::kJsonObject ? nullptr : f.schema ? &*f.schema : &any;
  Result<std::shared_ptr<const CompiledJsonSchema>> c = compile_json_schema(schema);
  if (!c.ok()) {
    *err = bad_request("response_format schema: " + c.status().message(), "response_format");
    return false;
  }
  out->final_schema = *c;
  out->force_final = !req.tools_visible();
  return true;
}

Result<std::shared_ptr<TokenConstraint>> make_constraint(Ctx& ctx, const ChatConstraints& c) {
  if (c.empty()) return std::shared_ptr<TokenConstraint>();
  GS_ASSIGN_OR_RETURN(auto pieces, token_pieces(ctx));
  std::shared_ptr<TokenConstraint> names;
  if (!c.name_choices.empty()) {
    GS_ASSIGN_OR_RETURN(names, ToolNameConstraint::create(*ctx.tok, pieces, c.name_choices));
  }
  if (!c.final_schema && c.tool_args.empty()) return names;
  GS_ASSIGN_OR_RETURN(auto trie, token_trie(ctx));
  JsonConstraintOptions o;
  o.constrain_final = c.final_schema != nullptr;
  o.compiled = c.final_schema;
  o.force_final_after_end = c.force_final;
  o.tools = c.tool_args;
  o.prefix = c.steer_ids;
  GS_ASSIGN_OR_RETURN(auto json_part, JsonConstraint::create(*ctx.tok, pieces, trie, o));
  if (!names) return std::shared_ptr<TokenConstraint>(std::move(json_part));
  return std::shared_ptr<TokenConstraint>(std::make_shared<FirstOfConstraint>(
      std::vector<std::shared_ptr<TokenConstraint>>{names, std::move(json_part)}));
}

}  // namespace gossamer::server

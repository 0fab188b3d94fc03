#include "harmony/render.h"

#include <cctype>
#include <ctime>

#include "harmony/typescript_schema.h"

namespace gossamer::harmony {
namespace {

const char* effort_name(ReasoningEffort e) {
  switch (e) {
    case ReasoningEffort::kLow:
      return "low";
    case ReasoningEffort::kMedium:
      return "medium";
    case ReasoningEffort::kHigh:
      return "high";
  }
  return "medium";
}

// Rust's str::lines(): split on '\n', strip one trailing '\r' per line, no final empty line.
std::vector<std::string> rust_lines(const std::string& s) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos < s.size()) {
    size_t nl = s.find('\n', pos);
    std::string line = s.substr(pos, nl == std::string::npos ? std::string::npos : nl - pos);
    if (nl != std::string::npos && !line.empty() && line.back() == '\r') line.pop_back();
    out.push_back(std::move(line));
    if (nl == std::string::npos) break;
    pos = nl + 1;
  }
  return out;
}

std::string join(const std::vector<std::string>& parts, const std::string& sep) {
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (i > 0) out += sep;
    out += parts[i];
  }
  return out;
}

// "# Tools\n\n## functions\n\nnamespace functions {\n\n// desc\ntype f = (_: {...}) => any;\n..."
std::string tools_section(const std::vector<FunctionTool>& tools) {
  std::vector<std::string> lines;
  lines.push_back("## functions\n");
  lines.push_back("namespace functions {\n");
  for (const auto& t : tools) {
    for (auto& l : rust_lines(t.description)) lines.push_back("// " + l);
    if (t.parameters) {
      lines.push_back("type " + t.name + " = (_: " + json_schema_to_typescript(*t.parameters, "") +
                      ") => any;\n");
    } else {
      lines.push_back("type " + t.name + " = () => any;\n");
    }
  }
  lines.push_back("} // namespace functions");
  return "# Tools\n\n" + join(lines, "\n");
}

HarmonyMessage make(Role role, std::string text) {
  HarmonyMessage m;
  m.role = role;
  m.text = std::move(text);
  return m;
}

}  // namespace

std::string today_utc() {
  std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buf[16];
  std::strftime(buf, sizeof(buf), "%Y-%m-%d", &tm);
  return buf;
}

Status RenderOptions::validate() const {
  if (date.empty()) return Status::Ok();
  bool ok = date.size() == 10 && date[4] == '-' && date[7] == '-';
  for (size_t i = 0; ok && i < date.size(); ++i) {
    if (i != 4 && i != 7) ok = std::isdigit(static_cast<unsigned char>(date[i])) != 0;
  }
  if (!ok) return InvalidArgument("date: '" + date + "' is not YYYY-MM-DD");
  return Status::Ok();
}

std::string render_system_text(const ChatRequest& req, const RenderOptions& opt) {
  std::vector<std::string> top;
  if (!opt.model_identity.empty()) top.push_back(opt.model_identity);
  if (!opt.knowledge_cutoff.empty()) top.push_back("Knowledge cutoff: " + opt.knowledge_cutoff);
  top.push_back("Current date: " + (opt.date.empty() ? today_utc() : opt.date));
  std::string channels =
      "# Valid channels: analysis, commentary, final. Channel must be included for every message.";
  if (req.tools_visible()) {
    channels += "\nCalls to these tools must go to the commentary channel: 'functions'.";
  }
  return join({join(top, "\n"), std::string("Reasoning: ") + effort_name(req.effort), channels},
              "\n\n");
}

std::string render_developer_text(const ChatRequest& req) {
  std::vector<std::string> sections;
  if (req.instructions) {
    sections.push_back("# Instructions");
    sections.push_back(*req.instructions);
  }
  if (req.tools_visible()) sections.push_back(tools_section(req.tools));
  const std::string formats = response_format_section(req.response_format);
  if (!formats.empty()) sections.push_back(formats);
  return join(sections, "\n\n");
}

std::vector<HarmonyMessage> build_conversation(const ChatRequest& req, const RenderOptions& opt) {
  std::vector<HarmonyMessage> msgs;
  msgs.push_back(make(Role::kSystem, render_system_text(req, opt)));
  if (req.instructions || req.tools_visible() ||
      req.response_format.kind == ResponseFormat::Kind::kJsonSchema) {
    msgs.push_back(make(Role::kDeveloper, render_developer_text(req)));
  }
  msgs.insert(msgs.end(), req.turns.begin(), req.turns.end());
  return msgs;
}

std::vector<HarmonyMessage> drop_earlier_analysis(const std::vector<HarmonyMessage>& msgs) {
  bool last_assistant_final = false;
  for (auto it = msgs.rbegin(); it != msgs.rend(); ++it) {
    if (it->role == Role::kAssistant) {
      last_assistant_final = it->channel == "final";
      break;
    }
  }
  size_t first_final = msgs.size();
  for (size_t i = 0; i < msgs.size(); ++i) {
    if (msgs[i].channel == "final") {
      first_final = i;
      break;
    }
  }
  std::vector<HarmonyMessage> out;
  for (size_t i = 0; i < msgs.size(); ++i) {
    if (last_assistant_final && i < first_final && msgs[i].channel == "analysis") continue;
    out.push_back(msgs[i]);
  }
  return out;
}

std::vector<Segment> render_segments(const std::vector<HarmonyMessage>& msgs) {
  std::vector<Segment> s;
  auto text = [&s](std::string t) { s.push_back(Segment{false, std::move(t)}); };
  auto special = [&s](const char* t) { s.push_back(Segment{true, t}); };
  for (const auto& m : msgs) {
    special("<|start|>");
    text(m.role == Role::kTool ? m.author_name : std::string(role_name(m.role)));
    if (!m.recipient.empty() && m.recipient != "all") text(" to=" + m.recipient);
    if (!m.channel.empty()) {
      special("<|channel|>");
      text(m.channel);
    }
    if (!m.content_type.empty()) {
      static constexpr std::string_view kConstrain = "<|constrain|>";
      if (m.content_type.rfind(kConstrain, 0) == 0) {
        text(" ");
        special("<|constrain|>");
        if (m.content_type.size() > kConstrain.size())
          text(m.content_type.substr(kConstrain.size()));
      } else {
        text(" " + m.content_type);
      }
    }
    special("<|message|>");
    text(m.text);
    special(m.role == Role::kAssistant && !m.recipient.empty() ? "<|call|>" : "<|end|>");
  }
  special("<|start|>");
  text("assistant");
  return s;
}

Result<std::vector<int32_t>> encode_segments(const std::vector<Segment>& segs,
                                             const Tokenizer& tok) {
  std::vector<int32_t> ids;
  for (const auto& seg : segs) {
    if (seg.special) {
      auto id = tok.special_id(seg.text);
      if (!id) return NotFound("tokenizer has no special token " + seg.text);
      ids.push_back(*id);
    } else if (!seg.text.empty()) {
      auto part = tok.encode(seg.text, /*allow_special=*/false);
      ids.insert(ids.end(), part.begin(), part.end());
    }
  }
  return ids;
}

Result<RenderedPrompt> render_chat_request(const ChatRequest& req, const Tokenizer& tok,
                                           const RenderOptions& opt) {
  GS_RETURN_IF_ERROR(opt.validate());
  GS_RETURN_IF_ERROR(req.validate());
  RenderedPrompt out;
  out.messages = drop_earlier_analysis(build_conversation(req, opt));
  auto segs = render_segments(out.messages);
  GS_ASSIGN_OR_RETURN(out.ids, encode_segments(segs, tok));
  for (const auto& seg : segs) out.text += seg.text;
  out.tool_call_required =
      req.tool_choice == ToolChoiceMode::kRequired || req.tool_choice == ToolChoiceMode::kNamed;
  out.required_tool = req.tool_choice_name;
  return out;
}

Result<RenderedPrompt> render_chat_request(const std::string& request_json, const Tokenizer& tok,
                                           const RenderOptions& opt) {
  GS_ASSIGN_OR_RETURN(ChatRequest req, parse_chat_request(request_json));
  return render_chat_request(req, tok, opt);
}

}  // namespace gossamer::harmony

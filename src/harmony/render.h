// Harmony prompt renderer: OpenAI Chat Completions request -> token ids for generation.
//
//   auto tok = Tokenizer::load(path);                       // o200k_harmony
//   harmony::RenderOptions opt;                            // opt.date = "2025-06-28" in tests
//   auto prompt = harmony::render_chat_request(request_json, *tok.value(), opt);
//   if (!prompt.ok()) -> HTTP 400 with prompt.status().message() (names the bad field)
//   prompt->ids  : the whole prompt, ending in <|start|>assistant (the model writes the header)
//
// Pass the raw request body (or an nlohmann::ordered_json): tool schemas render their properties
// in document order, so a std::map-backed nlohmann::json would reorder them.
//
// Token-exact with openai-harmony's render_conversation_for_completion(..., Role.ASSISTANT)
// (auto_drop_analysis=True): every text piece of a header (role, " to=R", channel, " type")
// and every content body is BPE-encoded on its own, formatting markers are single special
// tokens. Earlier `analysis` messages are dropped with openai-harmony's rule: only when the
// last assistant message is on the `final` channel, and then only those before the first
// `final` message (docs/harmony.md).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "harmony/chat_request.h"
#include "tokenizer/tokenizer.h"

namespace gossamer::harmony {

struct RenderOptions {
  std::string date;  // "YYYY-MM-DD" for "Current date:"; empty = today's date in UTC
  std::string model_identity = "You are ChatGPT, a large language model trained by OpenAI.";
  std::string knowledge_cutoff = "2024-06";
  Status validate() const;  // date shape
};

// A piece of the prompt: text to BPE-encode (no special tokens), or one special token.
struct Segment {
  bool special = false;
  std::string text;  // special: e.g. "<|start|>"
};

struct RenderedPrompt {
  std::vector<int32_t> ids;
  std::string text;                      // the prompt as text (special tokens spelled out)
  std::vector<HarmonyMessage> messages;  // rendered harmony messages (system/developer first)
  bool tool_call_required = false;       // tool_choice "required" or a named function
  std::string required_tool;             // tool_choice {"function":{"name":...}}
};

// Conversation building blocks (exposed for tests and other front-ends).
std::string render_system_text(const ChatRequest& req, const RenderOptions& opt);
std::string render_developer_text(const ChatRequest& req);  // "" when nothing to say
std::vector<HarmonyMessage> build_conversation(const ChatRequest& req, const RenderOptions& opt);
// openai-harmony's auto_drop_analysis filter.
std::vector<HarmonyMessage> drop_earlier_analysis(const std::vector<HarmonyMessage>& msgs);
// Segments of a full completion prompt (conversation + "<|start|>assistant").
std::vector<Segment> render_segments(const std::vector<HarmonyMessage>& msgs);
Result<std::vector<int32_t>> encode_segments(const std::vector<Segment>& segs,
                                             const Tokenizer& tok);

Result<RenderedPrompt> render_chat_request(const ChatRequest& req, const Tokenizer& tok,
                                           const RenderOptions& opt);
Result<RenderedPrompt> render_chat_request(const std::string& request_json, const Tokenizer& tok,
                                           const RenderOptions& opt);

std::string today_utc();  // "YYYY-MM-DD"

}  // namespace gossamer::harmony

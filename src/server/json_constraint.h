// Structured output (response_format "json_object" / "json_schema") as a TokenConstraint over a
// harmony completion. The generated tokens start after the prompt's "<|start|>assistant":
//   <|channel|>analysis<|message|>...<|end|><|start|>assistant<|channel|>final<|message|>{..}<|return|>
// - Outside a final-channel message body nothing is restricted (std::nullopt), except that with
//   force_final_after_end the tokens of "<|start|>assistant<|channel|>final<|message|>" are forced
//   one at a time right after an <|end|> (the server sets it when the request has no tools, so
//   the model cannot wander into other channels after its reasoning).
// - Which message a body belongs to is read as the output parser reads it: the same phases as
//   harmony::StreamingParser (a header opens at <|start|>, or at <|channel|> between or inside
//   messages; more than its max_header_tokens header tokens make content) and the same
//   harmony::parse_header_text on the header's text (e.g. "<|channel|>final <|constrain|>json").
// - The body of a message whose header names channel "final" and no "functions.*" recipient is
//   held to JSON: only ordinary tokens that keep the body a prefix of a document the schema
//   accepts (json_schema.h lists the enforced keywords); json_object mode: any JSON object. Once
//   the top-level value is complete only <|return|> is allowed (also beside more digits of a
//   top-level number).
// - Tool calls: the body of a message whose header names the recipient "functions.NAME" of a
//   tool in `tools` (whatever the channel) is held to that tool's parameters schema, and once the
//   arguments are complete only <|call|> is allowed (strict tools, and calls forced by
//   tool_choice). A call to any other function is free.
// - The allowed ids come from a depth-first walk of the token trie (json_matcher.h), unsorted.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "common/status.h"
#include "harmony/header.h"
#include "runtime/request.h"
#include "server/json_matcher.h"
#include "server/json_schema.h"
#include "server/tool_constraint.h"
#include "tokenizer/tokenizer.h"

namespace gossamer::server {

// A tool whose call arguments are held to its parameters schema.
struct ToolArgsSchema {
  std::string name;  // the recipient is "functions." + name
  std::shared_ptr<const CompiledJsonSchema> schema;
};

struct JsonConstraintOptions {
  // The final body: held to `compiled` (or `schema`; nullptr: json_object mode) when
  // `constrain_final`, free otherwise.
  bool constrain_final = true;
  const json* schema = nullptr;
  // compile_json_schema(schema) done once per request; wins over `schema` when set.
  std::shared_ptr<const CompiledJsonSchema> compiled;
  std::vector<ToolArgsSchema> tools;
  bool force_final_after_end = false;
  // The prompt's tail after "<|start|>assistant" (the server's tool-call steering), read
  // before the generated tokens: "...to=functions.NAME <|constrain|>json<|message|>" makes the
  // first generated token part of NAME's arguments.
  std::vector<int32_t> prefix;
  // The prompt already ends inside a final body ("...<|channel|>final<|message|>"): the first
  // generated token is JSON.
  bool start_in_body = false;
};

// One per request (it keeps the parse of the tokens generated so far).
class JsonConstraint : public TokenConstraint {
 public:
  // InvalidArgument for a schema outside the supported subset (keyword and JSON pointer named);
  // Internal when the tokenizer lacks a harmony special token or an index is missing.
  static Result<std::shared_ptr<JsonConstraint>> create(
      const Tokenizer& tok, std::shared_ptr<const TokenPieceIndex> pieces,
      std::shared_ptr<const TokenTrie> trie, const JsonConstraintOptions& options);

  // Incremental: `generated` extending the previous call's tokens costs only the new tokens;
  // anything else starts over. Never empty: if no token can continue the body (a broken parse),
  // {<|return|>} ends the generation.
  std::optional<std::vector<int32_t>> allowed(std::span<const int32_t> generated) override;

  const std::vector<int32_t>& forced_header() const { return forced_; }
  int32_t return_token() const { return return_; }
  int32_t call_token() const { return call_; }

 private:
  JsonConstraint() = default;
  void restart();
  void consume(int32_t id);
  void open_header(int32_t id);  // after <|start|> or <|channel|>
  // matchers_ index for the body of a message with this header, -1: free.
  int body_target(const harmony::HeaderFields& h) const;

  std::shared_ptr<const TokenPieceIndex> pieces_;
  std::shared_ptr<const TokenTrie> trie_;
  // [0]: the final body (absent when it is free); then one per tool of `names_`.
  std::vector<JsonMatcher> matchers_;
  std::vector<std::string> names_;  // "functions.NAME" of matchers_[first_tool_ + k]
  int first_tool_ = 0;
  std::vector<int32_t> prefix_;
  int target_ = -1;  // matchers_ index of the body being written
  int32_t start_ = -1, end_ = -1, message_ = -1, channel_ = -1, constrain_ = -1, return_ = -1,
          call_ = -1;
  std::vector<int32_t> forced_;  // <|start|>assistant<|channel|>final<|message|>
  bool force_ = false;
  bool start_in_body_ = false;

  // Where the tokens consumed so far leave off: between messages, in a header, in a free message
  // body, in a held one (matchers_[target_]).
  enum class Phase { kExpectStart, kHeader, kContent, kBody };
  std::vector<int32_t> seen_;  // the tokens consumed so far
  Phase phase_ = Phase::kHeader;
  std::string header_;        // the header's text (kHeader), special tokens spelled out
  size_t header_tokens_ = 0;  // tokens in header_
  int forced_pos_ = -1;       // next index into forced_, -1: not forcing
};

// The first of several constraints that restricts the next token (ToolNameConstraint, then a
// JsonConstraint holding the chosen tool's arguments). Each part reads every generated token.
class FirstOfConstraint : public TokenConstraint {
 public:
  explicit FirstOfConstraint(std::vector<std::shared_ptr<TokenConstraint>> parts)
      : parts_(std::move(parts)) {}
  std::optional<std::vector<int32_t>> allowed(std::span<const int32_t> generated) override {
    std::optional<std::vector<int32_t>> out;
    for (auto& p : parts_) {
      auto a = p->allowed(generated);  // every part sees every call (they parse incrementally)
      if (a && !out) out = std::move(a);
    }
    return out;
  }

 private:
  std::vector<std::shared_ptr<TokenConstraint>> parts_;
};

}  // namespace gossamer::server

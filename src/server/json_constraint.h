// Structured output (response_format "json_object" / "json_schema") as a TokenConstraint over a
// harmony completion. The generated tokens start after the prompt's "<|start|>assistant":
//   <|channel|>analysis<|message|>...<|end|><|start|>assistant<|channel|>final<|message|>{..}<|return|>
// - Outside a final-channel message body nothing is restricted (std::nullopt), except that with
//   force_final_after_end the tokens of "<|start|>assistant<|channel|>final<|message|>" are forced
//   one at a time right after an <|end|> (the server sets it when the request has no tools, so
//   the model cannot wander into other channels after its reasoning).
// - The body of a message whose header (decoded text since the last <|start|>, e.g.
//   "<|channel|>final <|constrain|>json") names channel "final" is held to JSON: only ordinary
//   tokens that keep the body a prefix of a document the schema accepts (json_schema.h lists
//   the enforced keywords); json_object mode: any JSON object. Once the top-level value is
//   complete only <|return|> is allowed (also beside more digits of a top-level number).
// - The allowed ids come from a depth-first walk of the token trie (json_matcher.h), unsorted.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "common/status.h"
#include "runtime/request.h"
#include "server/json_matcher.h"
#include "server/json_schema.h"
#include "server/tool_constraint.h"
#include "tokenizer/tokenizer.h"

namespace gossamer::server {

struct JsonConstraintOptions {
  const json* schema = nullptr;  // nullptr (and no `compiled`): json_object mode
  // compile_json_schema(schema) done once per request; wins over `schema` when set.
  std::shared_ptr<const CompiledJsonSchema> compiled;
  bool force_final_after_end = false;
  // The prompt already ends inside a final body ("...<|channel|>final<|message|>" appended by
  // the server): the first generated token is JSON.
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

 private:
  explicit JsonConstraint(std::shared_ptr<const CompiledJsonSchema> schema)
      : matcher_(std::move(schema)) {}
  void restart();
  void consume(int32_t id);

  std::shared_ptr<const TokenPieceIndex> pieces_;
  std::shared_ptr<const TokenTrie> trie_;
  JsonMatcher matcher_;
  int32_t start_ = -1, end_ = -1, message_ = -1, channel_ = -1, return_ = -1, call_ = -1;
  std::vector<int32_t> forced_;  // <|start|>assistant<|channel|>final<|message|>
  bool force_ = false;
  bool start_in_body_ = false;

  std::vector<int32_t> seen_;  // the tokens consumed so far
  bool in_body_ = false;       // inside a final-channel message body
  bool in_message_ = false;    // inside another message's body
  std::string header_;         // header text since the last <|start|> / message end
  int forced_pos_ = -1;        // next index into forced_, -1: not forcing
};

}  // namespace gossamer::server

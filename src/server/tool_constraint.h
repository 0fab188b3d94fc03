// Grammar steering for tool_choice "required" with several tools: after the server appended
// "<|channel|>commentary to=functions." to the prompt, only tokens that keep the generated text a
// prefix of "NAME " (NAME one of the tools) are allowed; once a whole "NAME " is written the
// header is closed with "<|constrain|>json<|message|>" (the form openai-harmony renders for a
// JSON tool call: "... to=functions.NAME <|constrain|>json<|message|>{args}<|call|>").
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "common/status.h"
#include "runtime/request.h"
#include "tokenizer/tokenizer.h"

namespace gossamer::server {

// The id of a special token such as "<|message|>"; Internal naming it when the tokenizer lacks it.
Result<int32_t> special_token(const Tokenizer& tok, const char* name);

// "<|constrain|>json<|message|>": how openai-harmony closes the header of a JSON tool call
// ("... to=functions.NAME <|constrain|>json<|message|>{args}<|call|>").
Result<std::vector<int32_t>> json_call_header_close(const Tokenizer& tok);

// Every ordinary (non-special) token by its bytes, and each token's bytes by id. Built once per
// server (about 200k entries for o200k_harmony); immutable afterwards, so shared across threads.
class TokenPieceIndex {
 public:
  static Result<std::shared_ptr<const TokenPieceIndex>> build(const Tokenizer& tok);
  TokenPieceIndex(const TokenPieceIndex&) = delete;  // by_bytes_ holds views into bytes_
  TokenPieceIndex& operator=(const TokenPieceIndex&) = delete;
  // Ids whose bytes are exactly `piece` (empty when none).
  std::span<const int32_t> ids(std::string_view piece) const;
  // Bytes of an ordinary token; nullptr for special or out-of-range ids.
  const std::string* bytes(int32_t id) const;

 private:
  TokenPieceIndex() = default;
  std::vector<std::string> bytes_;  // [vocab]: "" for special tokens
  std::unordered_map<std::string_view, std::vector<int32_t>> by_bytes_;  // views into bytes_
};

class ToolNameConstraint : public TokenConstraint {
 public:
  // names: the tool names (non-empty, no whitespace). InvalidArgument naming the tool otherwise,
  // or when the vocabulary cannot spell a name byte by byte; Internal when the tokenizer lacks
  // <|constrain|> / <|message|>.
  static Result<std::shared_ptr<ToolNameConstraint>> create(
      const Tokenizer& tok, std::shared_ptr<const TokenPieceIndex> index,
      const std::vector<std::string>& names);

  // generated: the tokens after the steered prompt. Name phase: the ids of every token t with
  // text(generated) + bytes(t) a prefix of some "NAME " (never empty). Then the closing tokens
  // one at a time; afterwards (or when `generated` left the grammar) std::nullopt.
  std::optional<std::vector<int32_t>> allowed(std::span<const int32_t> generated) override;

  const std::vector<int32_t>& closing_tokens() const { return tail_; }

 private:
  ToolNameConstraint() = default;

  std::shared_ptr<const TokenPieceIndex> index_;
  std::vector<std::string> targets_;  // "NAME " per tool
  std::vector<int32_t> tail_;         // <|constrain|> json... <|message|>
};

}  // namespace gossamer::server

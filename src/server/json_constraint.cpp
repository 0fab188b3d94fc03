#include "server/json_constraint.h"

#include <algorithm>

#include "harmony/parser.h"

namespace gossamer::server {

namespace {

// A header of more tokens is given up on, as the server's parser (default options) does.
const size_t kMaxHeaderTokens = harmony::ParserOptions{}.max_header_tokens;

constexpr std::string_view kFunctions = "functions.";

}  // namespace

Result<std::shared_ptr<JsonConstraint>> JsonConstraint::create(
    const Tokenizer& tok, std::shared_ptr<const TokenPieceIndex> pieces,
    std::shared_ptr<const TokenTrie> trie, const JsonConstraintOptions& options) {
  if (!pieces || !trie) return Internal("json constraint: no token index");
  auto c = std::shared_ptr<JsonConstraint>(new JsonConstraint());
  if (options.constrain_final) {
    std::shared_ptr<const CompiledJsonSchema> schema = options.compiled;
    if (!schema) {
      auto compiled = compile_json_schema(options.schema);
      if (!compiled.ok()) {
        return InvalidArgument("response_format schema: " + compiled.status().message());
      }
      schema = *compiled;
    }
    c->matchers_.emplace_back(std::move(schema));
  }
  c->first_tool_ = static_cast<int>(c->matchers_.size());
  for (const ToolArgsSchema& t : options.tools) {
    if (!t.schema) return Internal("json constraint: tool " + t.name + " has no schema");
    c->matchers_.emplace_back(t.schema);
    c->names_.push_back("functions." + t.name);
  }
  GS_ASSIGN_OR_RETURN(c->start_, special_token(tok, "<|start|>"));
  GS_ASSIGN_OR_RETURN(c->end_, special_token(tok, "<|end|>"));
  GS_ASSIGN_OR_RETURN(c->message_, special_token(tok, "<|message|>"));
  GS_ASSIGN_OR_RETURN(c->channel_, special_token(tok, "<|channel|>"));
  GS_ASSIGN_OR_RETURN(c->return_, special_token(tok, "<|return|>"));
  GS_ASSIGN_OR_RETURN(c->call_, special_token(tok, "<|call|>"));
  GS_ASSIGN_OR_RETURN(c->constrain_, special_token(tok, "<|constrain|>"));
  c->forced_ = tok.encode("<|start|>assistant<|channel|>final<|message|>", true);
  if (c->forced_.size() < 3 || c->forced_.front() != c->start_ ||
      c->forced_.back() != c->message_) {
    return Internal("json constraint: the tokenizer does not encode a harmony header");
  }
  c->pieces_ = std::move(pieces);
  c->trie_ = std::move(trie);
  c->force_ = options.force_final_after_end;
  c->start_in_body_ = options.start_in_body && options.constrain_final;
  c->prefix_ = options.prefix;
  c->restart();
  return c;
}

void JsonConstraint::restart() {
  seen_.clear();
  phase_ = start_in_body_ ? Phase::kBody : Phase::kHeader;  // after the prompt's <|start|>assistant
  target_ = start_in_body_ ? 0 : -1;
  header_.clear();
  header_tokens_ = 0;
  forced_pos_ = -1;
  if (target_ >= 0) matchers_[0].reset();
  for (int32_t id : prefix_) consume(id);
}

int JsonConstraint::body_target(const harmony::HeaderFields& h) const {
  // As the parser: a recipient "functions.NAME" makes a tool call whatever the channel; any other
  // recipient ("all", "browser.search") leaves the message to its channel.
  if (h.recipient.size() > kFunctions.size() && h.recipient.starts_with(kFunctions)) {
    for (size_t k = 0; k < names_.size(); ++k) {
      if (names_[k] == h.recipient) return first_tool_ + static_cast<int>(k);
    }
    return -1;
  }
  return first_tool_ > 0 && h.channel == "final" ? 0 : -1;
}

void JsonConstraint::open_header(int32_t id) {
  phase_ = Phase::kHeader;
  header_.clear();
  header_tokens_ = 0;
  if (id == channel_) {  // the parser keeps it as the header's first token
    header_ = "<|channel|>";
    header_tokens_ = 1;
  }
}

// The phases follow harmony::StreamingParser token by token (its kExpectStart, kHeader and
// kContent; kBody is a content the constraint holds), so that a body is held exactly when the
// parser reads it as the final answer or as a call to a held tool.
void JsonConstraint::consume(int32_t id) {
  if (forced_pos_ >= 0) {  // a token other than the forced one: the runtime did not apply it
    forced_pos_ = id == forced_[static_cast<size_t>(forced_pos_)] ? forced_pos_ + 1 : -1;
    if (forced_pos_ == static_cast<int>(forced_.size())) forced_pos_ = -1;
  }
  const std::string* bytes = pieces_->bytes(id);
  if (phase_ == Phase::kBody) {
    if (bytes != nullptr) {
      // A rejected byte breaks the matcher: allowed() ends the body.
      matchers_[static_cast<size_t>(target_)].feed(*bytes);
      return;
    }
    phase_ = Phase::kContent;  // a special token ends the held body
  }
  if (id == end_ || id == return_ || id == call_) {
    phase_ = Phase::kExpectStart;
    header_.clear();
    if (id == end_ && force_) forced_pos_ = 0;
  } else if (id == start_ || (id == channel_ && phase_ != Phase::kHeader)) {
    open_header(id);  // <|channel|> also closes a message, or opens a header without <|start|>
  } else if (phase_ == Phase::kHeader && id == message_) {
    const harmony::HeaderFields h = harmony::parse_header_text(harmony::sanitize_utf8(header_));
    header_.clear();
    target_ = body_target(h);
    phase_ = target_ >= 0 ? Phase::kBody : Phase::kContent;
    if (target_ >= 0) matchers_[static_cast<size_t>(target_)].reset();
  } else if (phase_ == Phase::kHeader) {
    // Special tokens spelled as the parser sees them where the header parse reads them; any
    // other one only needs to be some "<|...|>" (a boundary for the channel, part of a word).
    header_ += bytes != nullptr   ? *bytes
               : id == channel_   ? "<|channel|>"
               : id == constrain_ ? "<|constrain|>"
                                  : "<|special|>";
    if (++header_tokens_ > kMaxHeaderTokens) phase_ = Phase::kContent;  // given up on: content
  } else if (phase_ == Phase::kExpectStart && bytes != nullptr) {
    phase_ = Phase::kContent;  // text outside a message: content
  }
}

std::optional<std::vector<int32_t>> JsonConstraint::allowed(std::span<const int32_t> generated) {
  if (generated.size() < seen_.size() ||
      !std::equal(seen_.begin(), seen_.end(), generated.begin())) {
    restart();
  }
  for (size_t k = seen_.size(); k < generated.size(); ++k) {
    consume(generated[k]);
    seen_.push_back(generated[k]);
  }
  if (phase_ == Phase::kBody) {
    JsonMatcher& m = matchers_[static_cast<size_t>(target_)];
    std::vector<int32_t> out;
    m.collect(*trie_, &out);
    // Empty: no token continues the body. A pruned schema never gets here unless the sampler
    // ignored an earlier allowed set (the matcher is broken); ending the message is then the
    // only way out.
    if (out.empty() || m.can_end()) out.push_back(target_ < first_tool_ ? return_ : call_);
    return out;
  }
  if (forced_pos_ >= 0) return std::vector<int32_t>{forced_[static_cast<size_t>(forced_pos_)]};
  return std::nullopt;
}

}  // namespace gossamer::server

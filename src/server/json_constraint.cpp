#include "server/json_constraint.h"

#include <algorithm>
#include <cctype>

namespace gossamer::server {

namespace {

constexpr size_t kMaxHeader = 512;  // header bytes kept (a channel name comes early)

// The channel named in a harmony header: the word after "<|channel|>" up to whitespace or the
// next special token ("final" in "<|channel|>final <|constrain|>json").
std::string channel_of(const std::string& header) {
  constexpr std::string_view kTag = "<|channel|>";
  const size_t at = header.find(kTag);
  if (at == std::string::npos) return "";
  size_t end = at + kTag.size();
  while (end < header.size() && header.compare(end, 2, "<|") != 0 &&
         !std::isspace(static_cast<unsigned char>(header[end]))) {
    ++end;
  }
  return header.substr(at + kTag.size(), end - at - kTag.size());
}

// The recipient named in a harmony header: the word after "to=" ("functions.f" in
// "<|channel|>commentary to=functions.f <|constrain|>json").
std::string recipient_of(const std::string& header) {
  const size_t at = header.find("to=");
  if (at == std::string::npos) return "";
  size_t end = at + 3;
  while (end < header.size() && header.compare(end, 2, "<|") != 0 &&
         !std::isspace(static_cast<unsigned char>(header[end]))) {
    ++end;
  }
  return header.substr(at + 3, end - at - 3);
}

}  // namespace

Result<std::shared_ptr<JsonConstraint>> JsonConstraint::create(
    const Tokenizer& tok, std::shared_ptr<const TokenPieceIndex> pieces,
    std::shared_ptr<const TokenTrie> trie, const JsonConstraintOptions& options) {
  if (!pieces || !trie) return Internal("json constraint: no token index");
  auto c = std::shared_ptr<JsonConstraint>(new JsonConstraint());
  if (options.constrain_final) {
    std::shared_ptr<const CompiledJsonSchema> schema = options.compiled;
    if (!schema) {
      GS_ASSIGN_OR_RETURN(schema, compile_json_schema(options.schema));
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
  // Not used below, but a harmony tokenizer has it.
  GS_RETURN_IF_ERROR(special_token(tok, "<|constrain|>").status());
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
  in_body_ = start_in_body_;
  target_ = start_in_body_ ? 0 : -1;
  in_message_ = false;
  header_.clear();
  forced_pos_ = -1;
  if (target_ >= 0) matchers_[0].reset();
  for (int32_t id : prefix_) consume(id);
}

int JsonConstraint::body_target() const {
  if (first_tool_ > 0 && channel_of(header_) == "final") return 0;
  const std::string to = recipient_of(header_);
  if (to.empty()) return -1;
  for (size_t k = 0; k < names_.size(); ++k) {
    if (names_[k] == to) return first_tool_ + static_cast<int>(k);
  }
  return -1;
}

void JsonConstraint::consume(int32_t id) {
  if (forced_pos_ >= 0) {  // a token other than the forced one: the runtime did not apply it
    forced_pos_ = id == forced_[static_cast<size_t>(forced_pos_)] ? forced_pos_ + 1 : -1;
    if (forced_pos_ == static_cast<int>(forced_.size())) forced_pos_ = -1;
  }
  const std::string* bytes = pieces_->bytes(id);
  if (in_body_) {
    if (bytes != nullptr) {
      // A rejected byte breaks the matcher: allowed() ends the body.
      matchers_[static_cast<size_t>(target_)].feed(*bytes);
      return;
    }
    in_body_ = false;  // a special token ends the message
  }
  if (id == start_) {
    header_.clear();
    in_message_ = false;
  } else if (id == message_) {
    in_message_ = true;
    target_ = body_target();
    if (target_ >= 0) {
      in_body_ = true;
      matchers_[static_cast<size_t>(target_)].reset();
    }
    header_.clear();
  } else if (id == end_ || id == return_ || id == call_) {
    in_message_ = false;
    header_.clear();
    if (id == end_ && force_) forced_pos_ = 0;
  } else if (!in_message_ && header_.size() < kMaxHeader) {
    // Header text: ordinary tokens' bytes; special ones as a boundary ("<|channel|>" by name).
    header_ += bytes != nullptr ? *bytes : id == channel_ ? "<|channel|>" : "<|special|>";
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
  if (in_body_) {
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

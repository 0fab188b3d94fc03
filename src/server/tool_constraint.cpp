#include "server/tool_constraint.h"

#include <algorithm>
#include <cctype>

namespace gossamer::server {

Result<int32_t> special_token(const Tokenizer& tok, const char* name) {
  auto id = tok.special_id(name);
  if (!id) return Internal(std::string("tokenizer lacks ") + name);
  return *id;
}

Result<std::vector<int32_t>> json_call_header_close(const Tokenizer& tok) {
  GS_ASSIGN_OR_RETURN(int32_t constrain, special_token(tok, "<|constrain|>"));
  GS_ASSIGN_OR_RETURN(int32_t message, special_token(tok, "<|message|>"));
  std::vector<int32_t> ids{constrain};
  for (int32_t id : tok.encode("json")) ids.push_back(id);
  ids.push_back(message);
  return ids;
}

Result<std::shared_ptr<const TokenPieceIndex>> TokenPieceIndex::build(const Tokenizer& tok) {
  auto idx = std::shared_ptr<TokenPieceIndex>(new TokenPieceIndex());
  const int64_t vocab = tok.vocab_size();
  idx->bytes_.resize(static_cast<size_t>(std::max<int64_t>(vocab, 0)));
  for (int64_t id = 0; id < vocab; ++id) {
    const auto i32 = static_cast<int32_t>(id);
    if (tok.is_special(i32)) continue;
    Result<std::string> b = tok.token_bytes(i32);
    if (!b.ok()) continue;  // holes in the id space
    idx->bytes_[static_cast<size_t>(id)] = std::move(b).value();
  }
  // Views are taken after every string is in place (the vector no longer reallocates).
  for (size_t id = 0; id < idx->bytes_.size(); ++id) {
    const std::string& s = idx->bytes_[id];
    if (!s.empty()) idx->by_bytes_[std::string_view(s)].push_back(static_cast<int32_t>(id));
  }
  return std::shared_ptr<const TokenPieceIndex>(std::move(idx));
}

std::span<const int32_t> TokenPieceIndex::ids(std::string_view piece) const {
  auto it = by_bytes_.find(piece);
  if (it == by_bytes_.end()) return {};
  return it->second;
}

const std::string* TokenPieceIndex::bytes(int32_t id) const {
  if (id < 0 || static_cast<size_t>(id) >= bytes_.size()) return nullptr;
  const std::string& s = bytes_[static_cast<size_t>(id)];
  return s.empty() ? nullptr : &s;
}

Result<std::shared_ptr<ToolNameConstraint>> ToolNameConstraint::create(
    const Tokenizer& tok, std::shared_ptr<const TokenPieceIndex> index,
    const std::vector<std::string>& names) {
  if (!index) return Internal("tool constraint: no token index");
  if (names.empty()) return InvalidArgument("tool constraint: no tool names");
  auto c = std::shared_ptr<ToolNameConstraint>(new ToolNameConstraint());
  c->index_ = std::move(index);
  for (const std::string& n : names) {
    if (n.empty()) return InvalidArgument("tools: a function name is empty");
    for (unsigned char ch : n) {
      if (std::isspace(ch) || ch < 0x20) {
        return InvalidArgument("tools: function name '" + n + "' contains whitespace");
      }
      // Every byte must be writable on its own so that the grammar never dead-ends.
      if (c->index_->ids(std::string(1, static_cast<char>(ch))).empty()) {
        return InvalidArgument("tools: function name '" + n +
                               "' has a byte the vocabulary has no token for");
      }
    }
    c->targets_.push_back(n + " ");
  }
  if (c->index_->ids(" ").empty()) return Internal("tool constraint: no token for ' '");
  GS_ASSIGN_OR_RETURN(c->tail_, json_call_header_close(tok));
  return c;
}

std::optional<std::vector<int32_t>> ToolNameConstraint::allowed(
    std::span<const int32_t> generated) {
  std::string text;  // the name written so far
  size_t k = 0;
  bool complete = false;
  for (; k < generated.size() && !complete; ++k) {
    const std::string* b = index_->bytes(generated[k]);
    if (b == nullptr) return std::nullopt;  // left the grammar (constraint not honoured)
    text += *b;
    complete = std::find(targets_.begin(), targets_.end(), text) != targets_.end();
  }
  if (complete) {  // generated[k..] are the closing tokens
    const size_t j = generated.size() - k;
    for (size_t i = 0; i < j && i < tail_.size(); ++i) {
      if (generated[k + i] != tail_[i]) return std::nullopt;
    }
    if (j >= tail_.size()) return std::nullopt;
    return std::vector<int32_t>{tail_[j]};
  }
  std::vector<int32_t> out;
  for (const std::string& t : targets_) {
    if (t.size() <= text.size() || t.compare(0, text.size(), text) != 0) continue;
    for (size_t len = 1; len + text.size() <= t.size(); ++len) {
      for (int32_t id : index_->ids(std::string_view(t).substr(text.size(), len))) {
        out.push_back(id);
      }
    }
  }
  if (out.empty()) return std::nullopt;  // text is no prefix of a name: left the grammar
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

}  // namespace gossamer::server

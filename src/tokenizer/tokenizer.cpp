#include <algorithm>
#include <cstring>

#include "tokenizer/tokenizer_impl.h"
#include "tokenizer/utf8.h"

namespace gossamer::tok {

constexpr size_t kPieceBatch = 256;  // pieces per split_some call in encode_valid

AddedTokenMatcher::AddedTokenMatcher(std::vector<AddedToken> tokens) : tokens_(std::move(tokens)) {
  std::stable_sort(tokens_.begin(), tokens_.end(), [](const AddedToken& a, const AddedToken& b) {
    return a.text.size() > b.text.size();
  });
  for (const AddedToken& t : tokens_) first_byte_[static_cast<uint8_t>(t.text[0])] = true;
}

AddedTokenMatcher::Match AddedTokenMatcher::find(std::string_view text, size_t from) const {
  if (tokens_.empty()) return {};
  for (size_t i = from; i < text.size(); ++i) {
    if (!first_byte_[static_cast<uint8_t>(text[i])]) continue;
    const std::string_view rest = text.substr(i);
    for (const AddedToken& t : tokens_) {
      if (rest.starts_with(t.text)) return {i, &t};
    }
  }
  return {};
}

BpeTokenizer::BpeTokenizer(BpeModel model, std::vector<std::unique_ptr<Splitter>> splitters,
                           std::vector<AddedToken> added)
    : model_(std::move(model)),
      splitters_(std::move(splitters)),
      all_added_(added),
      plain_added_([&] {
        std::vector<AddedToken> plain;
        for (const AddedToken& t : added) {
          if (!t.special) plain.push_back(t);
        }
        return plain;
      }()) {
  vocab_size_ = model_.max_id() + 1;
  for (const AddedToken& t : added) {
    added_by_text_.emplace(t.text, t.id);
    added_by_id_.emplace(t.id, t);
    vocab_size_ = std::max<int64_t>(vocab_size_, t.id + 1);
  }
}

void BpeTokenizer::pretokenize(std::string_view text, std::vector<std::string_view>* out) const {
  out->push_back(text);
  for (const auto& splitter : splitters_) {
    std::vector<std::string_view> next;
    next.reserve(out->size() * 2);
    for (std::string_view piece : *out) splitter->split(piece, &next);
    *out = std::move(next);
  }
}

void BpeTokenizer::encode_valid(std::string_view text, std::vector<int32_t>* out,
                                Scratch* scratch) const {
  std::vector<std::string_view>& pieces = scratch->pieces;
  const char* limit = text.data() + text.size();
  // Pieces are made and encoded in batches that stay in L1 (one splitter), or all at once.
  size_t pos = 0;
  while (pos < text.size()) {
    pieces.clear();
    if (splitters_.size() == 1) {
      pos = splitters_[0]->split_some(text, pos, kPieceBatch, &pieces);
    } else {
      pretokenize(text, &pieces);
      pos = text.size();
    }
    if (scratch->cache) {
      for (std::string_view piece : pieces) {
        model_.encode_piece(piece, limit, out, scratch->cache.get());
      }
    } else {
      for (std::string_view piece : pieces) model_.encode_piece(piece, out);
    }
  }
}

// Invalid UTF-8 rule: every byte that is not part of a well-formed character is encoded as
// its own single-byte token, and the valid runs on either side are pre-tokenized separately.
void BpeTokenizer::encode_ordinary(std::string_view text, std::vector<int32_t>* out) const {
  Scratch scratch;
  encode_ordinary(text, out, &scratch);
}

void BpeTokenizer::encode_ordinary(std::string_view text, std::vector<int32_t>* out,
                                   Scratch* scratch) const {
  size_t i = 0;
  while (i < text.size()) {
    const size_t valid = utf8::valid_prefix_len(text.substr(i));
    if (valid > 0) {
      encode_valid(text.substr(i, valid), out, scratch);
      i += valid;
    }
    if (i < text.size()) {  // text[i] starts an ill-formed sequence
      out->push_back(model_.byte_token(static_cast<uint8_t>(text[i])));
      ++i;
    }
  }
}

std::vector<int32_t> BpeTokenizer::encode(std::string_view text, bool allow_special) const {
  std::vector<int32_t> out;
  out.reserve(text.size() / 3 + 4);
  const AddedTokenMatcher& matcher = allow_special ? all_added_ : plain_added_;
  Scratch scratch;
  if (text.size() >= kCacheMinBytes) scratch.cache = std::make_unique<PieceCache>(text.size());
  size_t pos = 0;
  while (pos < text.size()) {
    const AddedTokenMatcher::Match m = matcher.find(text, pos);
    const size_t end = m.token ? m.pos : text.size();
    if (end > pos) encode_ordinary(text.substr(pos, end - pos), &out, &scratch);
    if (!m.token) break;
    out.push_back(m.token->id);
    pos = m.pos + m.token->text.size();
  }
  return out;
}

Result<std::string> BpeTokenizer::token_bytes(int32_t id) const {
  if (auto it = added_by_id_.find(id); it != added_by_id_.end()) return it->second.text;
  if (model_.has_id(id)) return std::string(model_.bytes_of(id));
  return OutOfRange("token id " + std::to_string(id) + " is not in the vocabulary (size " +
                    std::to_string(vocab_size_) + ")");
}

Result<std::string> BpeTokenizer::decode(const std::vector<int32_t>& ids) const {
  std::string out;
  out.reserve(ids.size() * 4);
  for (size_t i = 0; i < ids.size(); ++i) {
    const int32_t id = ids[i];
    if (model_.has_id(id) && (added_by_id_.empty() || !added_by_id_.contains(id))) {
      out.append(model_.bytes_of(id));
      continue;
    }
    auto it = added_by_id_.find(id);
    if (it == added_by_id_.end()) {
      return OutOfRange("token id " + std::to_string(id) + " at position " + std::to_string(i) +
                        " is not in the vocabulary (size " + std::to_string(vocab_size_) + ")");
    }
    out.append(it->second.text);
  }
  return out;
}

std::optional<int32_t> BpeTokenizer::special_id(std::string_view text) const {
  auto it = added_by_text_.find(std::string(text));
  if (it == added_by_text_.end()) return std::nullopt;
  return it->second;
}

bool BpeTokenizer::is_special(int32_t id) const {
  auto it = added_by_id_.find(id);
  return it != added_by_id_.end() && it->second.special;
}

}  // namespace gossamer::tok

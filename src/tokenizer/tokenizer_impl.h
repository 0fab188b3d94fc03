// The concrete tokenizer behind Tokenizer::load (internal; tests and the benchmark may use it
// directly to reach the pieces).
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tokenizer/bpe.h"
#include "tokenizer/pretokenizer.h"
#include "tokenizer/tokenizer.h"

namespace gossamer::tok {

// Texts at least this long memoise piece -> ids during one encode() call.
constexpr size_t kCacheMinBytes = 4096;

struct AddedToken {
  std::string text;
  int32_t id = -1;
  bool special = true;
};

// Finds added tokens in text: leftmost match, longest at that position (like HF tokenizers'
// leftmost-longest Aho-Corasick).
class AddedTokenMatcher {
 public:
  explicit AddedTokenMatcher(std::vector<AddedToken> tokens);
  // Position and token of the first match at or after `from`; pos = npos when none.
  struct Match {
    size_t pos = std::string_view::npos;
    const AddedToken* token = nullptr;
  };
  Match find(std::string_view text, size_t from) const;
  bool empty() const { return tokens_.empty(); }

 private:
  std::vector<AddedToken> tokens_;  // longest first
  bool first_byte_[256] = {};
};

class BpeTokenizer final : public Tokenizer {
 public:
  BpeTokenizer(BpeModel model, std::vector<std::unique_ptr<Splitter>> splitters,
               std::vector<AddedToken> added);

  std::vector<int32_t> encode(std::string_view text, bool allow_special) const override;
  std::vector<int32_t> encode_parallel(std::string_view text, bool allow_special,
                                       ThreadPool* pool) const override;
  Result<std::string> decode(const std::vector<int32_t>& ids) const override;
  Result<std::string> token_bytes(int32_t id) const override;
  std::optional<int32_t> special_id(std::string_view text) const override;
  bool is_special(int32_t id) const override;
  int64_t vocab_size() const override { return vocab_size_; }

  // Encodes text that contains no added tokens (ordinary text only); appends to *out.
  void encode_ordinary(std::string_view text, std::vector<int32_t>* out) const;
  // Pre-tokenizer pieces of valid UTF-8 text (for tests).
  void pretokenize(std::string_view text, std::vector<std::string_view>* out) const;
  const BpeModel& model() const { return model_; }

  // A part of a text for encode_parallel: ordinary text, then an added token (id -1: none).
  struct Part {
    std::string_view text;
    int32_t added_id = -1;
  };
  // Cuts text into parts at added tokens and at safe cuts about `target` bytes apart.
  std::vector<Part> cut_parts(std::string_view text, bool allow_special, size_t target) const;

 private:
  struct Scratch {
    std::vector<std::string_view> pieces;
    std::unique_ptr<PieceCache> cache;  // only for long texts
  };
  void encode_valid(std::string_view text, std::vector<int32_t>* out, Scratch* scratch) const;
  void encode_ordinary(std::string_view text, std::vector<int32_t>* out, Scratch* scratch) const;

  BpeModel model_;
  std::vector<std::unique_ptr<Splitter>> splitters_;  // applied in sequence
  AddedTokenMatcher all_added_;                       // allow_special = true
  AddedTokenMatcher plain_added_;                     // non-special added tokens only
  std::unordered_map<std::string, int32_t> added_by_text_;
  std::unordered_map<int32_t, AddedToken> added_by_id_;
  int64_t vocab_size_ = 0;
};

}  // namespace gossamer::tok

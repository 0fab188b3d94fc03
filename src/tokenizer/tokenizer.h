// Byte-level BPE tokenizer for gpt-oss (o200k_harmony), loaded from a Hugging Face tokenizer.json.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace gossamer {

class ThreadPool;

class Tokenizer {
 public:
  static Result<std::shared_ptr<const Tokenizer>> load(const std::string& tokenizer_json_path);
  // Same from the file's contents; `source` names it in error messages.
  static Result<std::shared_ptr<const Tokenizer>> load_from_json(std::string_view json_text,
                                                                 const std::string& source);
  virtual ~Tokenizer() = default;

  // allow_special: text like "<|start|>" becomes its special token id; otherwise it is
  // encoded as ordinary text.
  virtual std::vector<int32_t> encode(std::string_view text, bool allow_special = false) const = 0;
  // Same ids as encode(). A long text may be cut where the cut provably cannot change the
  // result and the parts encoded on the pool's threads (pool may be null). Default: encode().
  virtual std::vector<int32_t> encode_parallel(std::string_view text, bool allow_special,
                                               ThreadPool* pool) const {
    (void)pool;
    return encode(text, allow_special);
  }
  // Concatenated bytes of the tokens (special tokens as their text). Ids out of range are an error.
  virtual Result<std::string> decode(const std::vector<int32_t>& ids) const = 0;
  // Raw bytes of one token (may be a partial UTF-8 sequence).
  virtual Result<std::string> token_bytes(int32_t id) const = 0;
  // Id of a special/added token by its text, e.g. "<|start|>".
  virtual std::optional<int32_t> special_id(std::string_view text) const = 0;
  virtual bool is_special(int32_t id) const = 0;
  virtual int64_t vocab_size() const = 0;  // highest id + 1
};

// Incremental detokenizer for streaming: feed ids one at a time, get text that is always valid
// UTF-8 and never loses bytes (an incomplete sequence is held back until completed; flush()
// returns whatever is left, with invalid bytes replaced by U+FFFD).
class IncrementalDecoder {
 public:
  explicit IncrementalDecoder(std::shared_ptr<const Tokenizer> tok) : tok_(std::move(tok)) {}
  Result<std::string> push(int32_t id);
  std::string flush();

 private:
  std::shared_ptr<const Tokenizer> tok_;
  std::string pending_;
};

}  // namespace gossamer

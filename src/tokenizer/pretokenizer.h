// Regex pre-tokenizer (tokenizer.json "Split" with behavior "Isolated"): the text is cut into
// the regex matches and the gaps between them. Runs the pattern with PCRE2 (UTF + UCP, JIT).
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace gossamer::tok {

// Rewrites \s and \S (outside and inside character classes) to the Unicode White_Space set,
// which is what Oniguruma (HF tokenizers) and Rust's regex (tiktoken) use; PCRE2's UCP \s
// leaves out U+0085. Unsupported: \S inside a class.
Result<std::string> rewrite_whitespace_classes(std::string_view pattern);

// Cuts valid UTF-8 text into pre-tokenizer pieces.
class Splitter {
 public:
  virtual ~Splitter() = default;
  // Appends the pieces of `text` (valid UTF-8, non-empty) to *out; the pieces, concatenated,
  // are exactly `text`. Thread-safe.
  virtual void split(std::string_view text, std::vector<std::string_view>* out) const = 0;
  // Incremental form: appends the pieces from byte `pos` (a piece start; 0 at first) on, at
  // least min_pieces of them unless the text ends first, and returns where the next call
  // continues (text.size() at the end). Default: all pieces at once.
  virtual size_t split_some(std::string_view text, size_t pos, size_t min_pieces,
                            std::vector<std::string_view>* out) const {
    (void)min_pieces;
    split(text.substr(pos), out);
    return text.size();
  }
  // Smallest p >= from (0 < p < text.size()) such that cutting the (possibly invalid UTF-8)
  // text at p provably leaves the pieces unchanged: pieces(text) == pieces(text[:p]) +
  // pieces(text[p:]), with invalid bytes as boundaries. npos when there is none or the
  // splitter cannot tell (the default).
  virtual size_t next_safe_cut(std::string_view text, size_t from) const {
    (void)text, (void)from;
    return std::string_view::npos;
  }
};

class RegexSplitter final : public Splitter {
 public:
  // pattern: the regex exactly as in tokenizer.json.
  static Result<std::unique_ptr<RegexSplitter>> create(std::string_view pattern);
  ~RegexSplitter() override;
  RegexSplitter(const RegexSplitter&) = delete;
  RegexSplitter& operator=(const RegexSplitter&) = delete;

  void split(std::string_view text, std::vector<std::string_view>* out) const override;

 private:
  RegexSplitter() = default;
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace gossamer::tok

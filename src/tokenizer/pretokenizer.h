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

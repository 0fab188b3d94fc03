// Hand-written equivalent of the o200k pre-tokenizer regex (tokenizer.json of gpt-oss):
//   A1
//   [^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?
//   A2
//   [^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?
//   A3 \p{N}{1,3}      A4 ' '?[^\s\p{L}\p{N}]+[\r\n/]*     A5 \s*[\r\n]+
//   A6 \s+(?!\S)       A7 \s+
// Each alternative reproduces the backtracking regex's first match exactly (see the .cpp).
// Unicode classes come from a Unicode 16.0 table, like the reference tokenizers.
#pragma once

#include <string_view>
#include <vector>

#include "tokenizer/pretokenizer.h"
#include "tokenizer/unicode_classes.h"

namespace gossamer::tok {

// The exact pattern string this splitter implements.
extern const char kO200kPattern[];

class O200kSplitter final : public Splitter {
 public:
  void split(std::string_view text, std::vector<std::string_view>* out) const override;
  size_t split_some(std::string_view text, size_t pos, size_t min_pieces,
                    std::vector<std::string_view>* out) const override;
  // Safe cuts (derivation in the .cpp): after '\n' when the next character is not whitespace
  // and not '/', and before ' ' between two ASCII letters.
  size_t next_safe_cut(std::string_view text, size_t from) const override;

 private:
  CharClassTable table_;
};

}  // namespace gossamer::tok

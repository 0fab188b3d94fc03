#include "tokenizer/o200k_splitter.h"

#include <algorithm>

#include "tokenizer/utf8.h"

namespace gossamer::tok {

const char kO200kPattern[] =
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?)"
    R"(|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?)"
    R"(|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

CharClassTable::CharClassTable() : index_(0x1100, 0) {
  // Build a flat map per 256-code-point block, then deduplicate identical blocks.
  std::vector<uint8_t> flat(0x110000, 0);
  for (size_t r = 0; r < kNumUnicodeRanges; ++r) {
    for (uint32_t cp = kUnicodeRanges[r].first; cp <= kUnicodeRanges[r].last; ++cp) {
      flat[cp] = kUnicodeRanges[r].bits;
    }
  }
  std::vector<std::vector<uint8_t>> uniq;
  for (size_t b = 0; b < 0x1100; ++b) {
    std::vector<uint8_t> blk(flat.begin() + b * 256, flat.begin() + (b + 1) * 256);
    size_t k = 0;
    while (k < uniq.size() && uniq[k] != blk) ++k;
    if (k == uniq.size()) uniq.push_back(std::move(blk));
    index_[b] = static_cast<uint16_t>(k);
  }
  for (const auto& blk : uniq) blocks_.insert(blocks_.end(), blk.begin(), blk.end());
  for (uint32_t c = 0; c < 128; ++c) ascii_[c] = (*this)(c);
}

namespace {

constexpr size_t kNone = std::string_view::npos;

// One decoded character: code point, byte length, class bits.
struct Ch {
  uint32_t cp = 0;
  uint32_t len = 0;
  uint8_t cls = 0;
};

class Scanner {
 public:
  Scanner(std::string_view t, const CharClassTable& tab) : t_(t), tab_(tab) {}

  // Decodes the character at i (valid UTF-8): ASCII inline, the rest out of line.
  [[gnu::always_inline]] Ch at(size_t i) const {
    const auto c0 = static_cast<uint8_t>(t_[i]);
    if (c0 < 0x80) [[likely]]
      return {c0, 1, tab_.ascii(c0)};
    return at_multibyte(i);
  }
  [[gnu::noinline]] Ch at_multibyte(size_t i) const {
    const auto b = [&](size_t k) { return static_cast<uint32_t>(static_cast<uint8_t>(t_[k])); };
    const uint32_t c0 = b(i);
    uint32_t cp, len;
    if (c0 < 0xE0) {
      cp = ((c0 & 0x1F) << 6) | (b(i + 1) & 0x3F), len = 2;
    } else if (c0 < 0xF0) {
      cp = ((c0 & 0x0F) << 12) | ((b(i + 1) & 0x3F) << 6) | (b(i + 2) & 0x3F), len = 3;
    } else {
      cp = ((c0 & 0x07) << 18) | ((b(i + 1) & 0x3F) << 12) | ((b(i + 2) & 0x3F) << 6) |
           (b(i + 3) & 0x3F);
      len = 4;
    }
    return {cp, len, tab_(cp)};
  }
  static bool is_crlf(const Ch& c) { return c.cp == '\r' || c.cp == '\n'; }
  // [^\r\n\p{L}\p{N}]
  static bool is_p(const Ch& c) { return !(c.cls & (kLetter | kNumber)) && !is_crlf(c); }
  // [^\s\p{L}\p{N}]
  static bool is_q(const Ch& c) { return !(c.cls & (kLetter | kNumber | kSpace)); }

  // Returns the end of the first match at i (i < size), or kNone.
  size_t match(size_t i) const {
    const Ch c0 = at(i);
    size_t e = alt_letters(i, c0, /*first=*/true);
    if (e == kNone) e = alt_letters(i, c0, /*first=*/false);
    if (e != kNone) return e + contraction(e);
    if (c0.cls & kNumber) {  // A3 \p{N}{1,3}
      size_t j = i + c0.len;
      for (int n = 1; n < 3 && j < t_.size(); ++n) {
        const Ch c = at(j);
        if (!(c.cls & kNumber)) break;
        j += c.len;
      }
      return j;
    }
    if (c0.cp == ' ' && i + 1 < t_.size() && is_q(at(i + 1))) return punct_tail(i + 1);  // A4
    if (is_q(c0)) return punct_tail(i);                                                  // A4
    if (c0.cls & kSpace) return whitespace(i);  // A5, A6, A7
    return kNone;
  }

 private:
  // A1 (first) or A2: optional [^\r\n\p{L}\p{N}] then the letter body; end or kNone.
  size_t alt_letters(size_t i, const Ch& c0, bool first) const {
    if (is_p(c0) && i + c0.len < t_.size()) {
      const size_t e = first ? body_a1(i + c0.len) : body_a2(i + c0.len);
      if (e != kNone) return e;
    }
    return first ? body_a1(i) : body_a2(i);
  }

  // [Upperish]*[Lowerish]+ with the regex's backtracking: the Upperish run gives back
  // characters until a Lowerish one can start the second part.
  size_t body_a1(size_t i) const {
    size_t j = i, last_w = kNone;
    while (j < t_.size()) {
      const Ch c = at(j);
      if (!(c.cls & kUpperish)) {
        if (c.cls & kLowerish) return lowerish_run(j);
        break;
      }
      if (c.cls & kLowerish) last_w = j;
      j += c.len;
    }
    // Characters after last_w in the run are not Lowerish, so the + stops after one.
    return last_w == kNone ? kNone : last_w + at(last_w).len;
  }

  // [Upperish]+[Lowerish]*
  size_t body_a2(size_t i) const {
    size_t j = i;
    while (j < t_.size()) {
      const Ch c = at(j);
      if (!(c.cls & kUpperish)) break;
      j += c.len;
    }
    return j == i ? kNone : lowerish_run(j);
  }

  size_t lowerish_run(size_t j) const {
    while (j < t_.size()) {
      const Ch c = at(j);
      if (!(c.cls & kLowerish)) break;
      j += c.len;
    }
    return j;
  }

  // (?i:'s|'t|'re|'ve|'m|'ll|'d) at i: its length, or 0. Case folding also maps U+017F to s.
  size_t contraction(size_t i) const {
    if (i + 1 >= t_.size() || t_[i] != '\'') return 0;
    const char a = static_cast<char>(t_[i + 1] | 0x20);
    if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
    if (t_.substr(i + 1, 2) == "\xC5\xBF") return 3;  // U+017F LATIN SMALL LETTER LONG S
    if (i + 2 >= t_.size()) return 0;
    const char b = static_cast<char>(t_[i + 2] | 0x20);
    if ((a == 'r' || a == 'v') && b == 'e') return 3;
    if (a == 'l' && b == 'l') return 3;
    return 0;
  }

  // [^\s\p{L}\p{N}]+[\r\n/]* starting at a Q character.
  size_t punct_tail(size_t j) const {
    while (j < t_.size()) {
      const Ch c = at(j);
      if (!is_q(c)) break;
      j += c.len;
    }
    while (j < t_.size() && (t_[j] == '\r' || t_[j] == '\n' || t_[j] == '/')) ++j;
    return j;
  }

  // \s*[\r\n]+ | \s+(?!\S) | \s+ on the whitespace run at i.
  size_t whitespace(size_t i) const {
    size_t j = i, last_start = i, after_crlf = kNone;
    while (j < t_.size()) {
      const Ch c = at(j);
      if (!(c.cls & kSpace)) break;
      if (is_crlf(c)) after_crlf = j + 1;
      last_start = j;
      j += c.len;
    }
    if (after_crlf != kNone) return after_crlf;       // A5 ends after the run's last CR/LF
    if (j == t_.size() || last_start == i) return j;  // A6 at end of text, or A7 (one char)
    return last_start;                                // A6: leave the last one for the next piece
  }

  std::string_view t_;
  const CharClassTable& tab_;
};

}  // namespace

void O200kSplitter::split(std::string_view text, std::vector<std::string_view>* out) const {
  split_some(text, 0, std::string_view::npos, out);
}

size_t O200kSplitter::split_some(std::string_view text, size_t pos, size_t min_pieces,
                                 std::vector<std::string_view>* out) const {
  const Scanner sc(text, table_);
  size_t i = pos, gap = kNone, n = 0;
  while (i < text.size()) {
    if (n >= min_pieces && gap == kNone) return i;
    const size_t e = sc.match(i);
    if (e == kNone) {  // unmatched character: part of a gap piece (never happens for o200k)
      if (gap == kNone) gap = i;
      i += sc.at(i).len;
      continue;
    }
    if (gap != kNone) out->push_back(text.substr(gap, i - gap)), gap = kNone, ++n;
    out->push_back(text.substr(i, e - i));
    ++n;
    i = e;
  }
  if (gap != kNone) out->push_back(text.substr(gap));
  return text.size();
}

}  // namespace gossamer::tok

namespace gossamer::tok {

// Why these cuts are safe (p is the cut, c = the character at p):
//  1. p is a piece boundary of the whole text. After '\n': only A4's [\r\n/]* and the
//     whitespace alternatives can contain '\n'; they cannot go on with c when c is neither
//     whitespace nor '/'. Before ' ' between ASCII letters: a letter at p-1 belongs to an A1/A2
//     piece (letters, then a contraction), which cannot contain ' '.
//  2. The pieces before p are the same in text[:p]: the pattern has no lookbehind and its only
//     lookahead, (?!\S) in A6, differs at p only for a whitespace run ending at p; such a run
//     would contain the '\n' at p-1, so A5 (tried first) takes it; with a letter at p-1 there
//     is no such run.
//  3. The pieces from p on are the same in text[p:] (matching at p never looks left).
//  Invalid UTF-8 bytes are boundaries in both cases and '\n' / ' ' are complete characters,
//  so the valid runs on either side are cut at the same place.
// tokenizer_test checks the rule against PCRE2 on random text.
size_t O200kSplitter::next_safe_cut(std::string_view text, size_t from) const {
  const auto is_alpha = [](char ch) { return (ch | 0x20) >= 'a' && (ch | 0x20) <= 'z'; };
  for (size_t p = std::max<size_t>(from, 1); p + 1 < text.size(); ++p) {
    const char prev = text[p - 1], c = text[p];
    if (prev == '\n') {
      if (c == '/') continue;
      const auto b = static_cast<uint8_t>(c);
      if (b < 0x80) {
        if (!(table_.ascii(b) & kSpace)) return p;
        continue;
      }
      const size_t len = utf8::valid_char_len(text, p);
      if (len == 0) return p;  // an invalid byte is a boundary anyway
      const Scanner sc(text, table_);
      if (!(sc.at(p).cls & kSpace)) return p;
    } else if (c == ' ' && is_alpha(prev) && is_alpha(text[p + 1])) {
      return p;
    }
  }
  return std::string_view::npos;
}

}  // namespace gossamer::tok

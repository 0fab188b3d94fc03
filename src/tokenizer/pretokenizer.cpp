#define PCRE2_CODE_UNIT_WIDTH 8
#include "tokenizer/pretokenizer.h"

#include <pcre2.h>

#include "tokenizer/utf8.h"

namespace gossamer::tok {
namespace {

// Unicode White_Space (PropList.txt), as PCRE2 class items.
constexpr std::string_view kWhiteSpaceItems =
    "\\t\\n\\x{0B}\\f\\r\\x{20}\\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}"
    "\\x{202F}\\x{205F}\\x{3000}";

struct CodeDeleter {
  void operator()(pcre2_code* c) const { pcre2_code_free(c); }
};
struct MatchDataDeleter {
  void operator()(pcre2_match_data* m) const { pcre2_match_data_free(m); }
};

}  // namespace

Result<std::string> rewrite_whitespace_classes(std::string_view p) {
  std::string out;
  bool in_class = false;
  for (size_t i = 0; i < p.size(); ++i) {
    const char c = p[i];
    if (c == '\\' && i + 1 < p.size()) {
      const char e = p[i + 1];
      ++i;
      if (e == 's') {
        out += in_class ? std::string(kWhiteSpaceItems) : "[" + std::string(kWhiteSpaceItems) + "]";
      } else if (e == 'S') {
        if (in_class) return Unsupported("pre_tokenizer regex: \\S inside a character class");
        out += "[^" + std::string(kWhiteSpaceItems) + "]";
      } else {
        out += c;
        out += e;
      }
      continue;
    }
    if (!in_class && c == '[') {
      in_class = true;
      out += c;
      // A ']' right after '[' or '[^' is a literal.
      if (i + 1 < p.size() && p[i + 1] == '^') out += p[++i];
      if (i + 1 < p.size() && p[i + 1] == ']') out += p[++i];
      continue;
    }
    if (in_class && c == ']') in_class = false;
    out += c;
  }
  if (in_class) return InvalidArgument("pre_tokenizer regex: unterminated character class");
  return out;
}

struct RegexSplitter::Impl {
  std::unique_ptr<pcre2_code, CodeDeleter> code;
};

RegexSplitter::~RegexSplitter() = default;

Result<std::unique_ptr<RegexSplitter>> RegexSplitter::create(std::string_view pattern) {
  GS_ASSIGN_OR_RETURN(std::string rewritten, rewrite_whitespace_classes(pattern));
  int err = 0;
  PCRE2_SIZE err_off = 0;
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(rewritten.data()), rewritten.size(),
                                   PCRE2_UTF | PCRE2_UCP, &err, &err_off, nullptr);
  if (code == nullptr) {
    PCRE2_UCHAR msg[256];
    pcre2_get_error_message(err, msg, sizeof(msg));
    return InvalidArgument("pre_tokenizer regex does not compile at offset " +
                           std::to_string(err_off) + ": " + reinterpret_cast<char*>(msg));
  }
  std::unique_ptr<RegexSplitter> s(new RegexSplitter());
  s->impl_ = std::make_unique<Impl>();
  s->impl_->code.reset(code);
  // JIT is an optimisation only: if unavailable, pcre2_match interprets.
  (void)pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);
  return s;
}

void RegexSplitter::split(std::string_view text, std::vector<std::string_view>* out) const {
  std::unique_ptr<pcre2_match_data, MatchDataDeleter> md(
      pcre2_match_data_create_from_pattern(impl_->code.get(), nullptr));
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t pos = 0;   // next byte to search from
  size_t last = 0;  // end of the last emitted piece
  while (pos < text.size()) {
    const int rc = pcre2_match(impl_->code.get(), subject, text.size(), pos, PCRE2_NO_UTF_CHECK,
                               md.get(), nullptr);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0 || md.get() == nullptr) {
      // Matching failed (resource limit): fall back to one piece per character so that
      // encoding still covers every byte.
      while (last < text.size()) {
        const size_t len = std::max<size_t>(1, utf8::valid_char_len(text, last));
        out->push_back(text.substr(last, len));
        last += len;
      }
      return;
    }
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md.get());
    const size_t ms = ov[0], me = ov[1];
    if (me == ms) {  // empty match: step over one character
      pos = ms + std::max<size_t>(1, utf8::valid_char_len(text, ms));
      continue;
    }
    if (ms > last) out->push_back(text.substr(last, ms - last));
    out->push_back(text.substr(ms, me - ms));
    last = pos = me;
  }
  if (last < text.size()) out->push_back(text.substr(last));
}

}  // namespace gossamer::tok

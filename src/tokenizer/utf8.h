// UTF-8 helpers shared by the tokenizer: strict validation (RFC 3629: no overlongs, no
// surrogates, nothing above U+10FFFF) and code point encoding.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace gossamer::utf8 {

// Length in bytes of the well-formed UTF-8 character starting at s[i], or 0 when the bytes at
// s[i] do not start a complete well-formed character (invalid lead byte, stray continuation
// byte, overlong form, surrogate, > U+10FFFF, or truncated by the end of s).
inline size_t valid_char_len(std::string_view s, size_t i) {
  const auto b = [&](size_t k) { return static_cast<uint8_t>(s[k]); };
  const size_t n = s.size() - i;
  const uint8_t c0 = b(i);
  if (c0 < 0x80) return 1;
  const auto cont = [&](size_t k) { return (b(k) & 0xC0) == 0x80; };
  if (c0 >= 0xC2 && c0 <= 0xDF) return (n >= 2 && cont(i + 1)) ? 2 : 0;
  if (c0 >= 0xE0 && c0 <= 0xEF) {
    if (n < 3 || !cont(i + 1) || !cont(i + 2)) return 0;
    const uint8_t c1 = b(i + 1);
    if (c0 == 0xE0 && c1 < 0xA0) return 0;   // overlong
    if (c0 == 0xED && c1 >= 0xA0) return 0;  // surrogate
    return 3;
  }
  if (c0 >= 0xF0 && c0 <= 0xF4) {
    if (n < 4 || !cont(i + 1) || !cont(i + 2) || !cont(i + 3)) return 0;
    const uint8_t c1 = b(i + 1);
    if (c0 == 0xF0 && c1 < 0x90) return 0;   // overlong
    if (c0 == 0xF4 && c1 >= 0x90) return 0;  // > U+10FFFF
    return 4;
  }
  return 0;
}

// Length of the longest prefix of s that is well-formed UTF-8.
inline size_t valid_prefix_len(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    if (static_cast<uint8_t>(s[i]) < 0x80) {
      ++i;
      continue;
    }
    const size_t len = valid_char_len(s, i);
    if (len == 0) break;
    i += len;
  }
  return i;
}

// True when the (non-empty) tail s[i..] could still become a well-formed character if more
// bytes were appended (a correct but truncated multi-byte sequence).
inline bool is_incomplete_prefix(std::string_view s, size_t i) {
  const size_t n = s.size() - i;
  const uint8_t c0 = static_cast<uint8_t>(s[i]);
  size_t need = 0;
  if (c0 >= 0xC2 && c0 <= 0xDF)
    need = 2;
  else if (c0 >= 0xE0 && c0 <= 0xEF)
    need = 3;
  else if (c0 >= 0xF0 && c0 <= 0xF4)
    need = 4;
  else
    return false;
  if (n >= need) return false;
  for (size_t k = 1; k < n; ++k) {
    const uint8_t c = static_cast<uint8_t>(s[i + k]);
    if ((c & 0xC0) != 0x80) return false;
    if (k == 1) {
      if (c0 == 0xE0 && c < 0xA0) return false;
      if (c0 == 0xED && c >= 0xA0) return false;
      if (c0 == 0xF0 && c < 0x90) return false;
      if (c0 == 0xF4 && c >= 0x90) return false;
    }
  }
  return true;
}

// Appends the UTF-8 encoding of code point cp (must be a valid scalar value).
inline void append_code_point(std::string* out, uint32_t cp) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

// Length (>= 1) of the maximal ill-formed subpart starting at s[i], where
// valid_char_len(s, i) == 0: the longest prefix of a well-formed sequence (Unicode's
// "maximal subpart" rule, the one Python's and Rust's lossy decoders use).
inline size_t invalid_subpart_len(std::string_view s, size_t i) {
  const uint8_t c0 = static_cast<uint8_t>(s[i]);
  size_t need = 0;
  if (c0 >= 0xC2 && c0 <= 0xDF)
    need = 2;
  else if (c0 >= 0xE0 && c0 <= 0xEF)
    need = 3;
  else if (c0 >= 0xF0 && c0 <= 0xF4)
    need = 4;
  else
    return 1;
  size_t k = 1;
  while (k < need && i + k < s.size()) {
    const uint8_t c = static_cast<uint8_t>(s[i + k]);
    if ((c & 0xC0) != 0x80) break;
    if (k == 1 && ((c0 == 0xE0 && c < 0xA0) || (c0 == 0xED && c >= 0xA0) ||
                   (c0 == 0xF0 && c < 0x90) || (c0 == 0xF4 && c >= 0x90))) {
      break;
    }
    ++k;
  }
  return k;
}

// Replaces every maximal ill-formed subpart with one U+FFFD (same output as Python's
// bytes.decode("utf-8", "replace")).
inline std::string sanitize(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    const size_t len = valid_char_len(s, i);
    if (len == 0) {
      out += "\xEF\xBF\xBD";
      i += invalid_subpart_len(s, i);
    } else {
      out.append(s.substr(i, len));
      i += len;
    }
  }
  return out;
}

}  // namespace gossamer::utf8

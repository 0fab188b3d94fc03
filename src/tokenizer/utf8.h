// UTF-8 helpers shared by the tokenizer: strict validation (RFC 3629: no overlongs, no
// surrogates, nothing above U+10FFFF) and code point encoding.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace gossamer::utf8 {

// Sequence length announced by a lead byte: 1 for ASCII, 2..4 for a valid multi-byte lead,
// 0 for a byte that can never start a well-formed character (continuation, C0/C1, F5..FF).
inline size_t lead_len(uint8_t c0) {
  if (c0 < 0x80) return 1;
  if (c0 >= 0xC2 && c0 <= 0xDF) return 2;
  if (c0 >= 0xE0 && c0 <= 0xEF) return 3;
  if (c0 >= 0xF0 && c0 <= 0xF4) return 4;
  return 0;
}

// Whether c1 may follow lead byte c0 (a continuation byte, excluding overlong E0/F0 forms,
// UTF-16 surrogates after ED and code points above U+10FFFF after F4).
inline bool second_ok(uint8_t c0, uint8_t c1) {
  if ((c1 & 0xC0) != 0x80) return false;
  if (c0 == 0xE0 && c1 < 0xA0) return false;   // overlong
  if (c0 == 0xED && c1 >= 0xA0) return false;  // surrogate
  if (c0 == 0xF0 && c1 < 0x90) return false;   // overlong
  if (c0 == 0xF4 && c1 >= 0x90) return false;  // > U+10FFFF
  return true;
}

// Length in bytes of the well-formed UTF-8 character starting at s[i], or 0 when the bytes at
// s[i] do not start a complete well-formed character (invalid lead byte, stray continuation
// byte, overlong form, surrogate, > U+10FFFF, or truncated by the end of s).
inline size_t valid_char_len(std::string_view s, size_t i) {
  const uint8_t c0 = static_cast<uint8_t>(s[i]);
  const size_t need = lead_len(c0);
  if (need <= 1) return need;
  if (s.size() - i < need || !second_ok(c0, static_cast<uint8_t>(s[i + 1]))) return 0;
  for (size_t k = 2; k < need; ++k) {
    if ((static_cast<uint8_t>(s[i + k]) & 0xC0) != 0x80) return 0;
  }
  return need;
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
  const size_t need = lead_len(c0);
  if (need <= 1 || n >= need) return false;
  if (n >= 2 && !second_ok(c0, static_cast<uint8_t>(s[i + 1]))) return false;
  for (size_t k = 2; k < n; ++k) {
    if ((static_cast<uint8_t>(s[i + k]) & 0xC0) != 0x80) return false;
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
  const size_t need = lead_len(c0);
  if (need <= 1) return 1;
  size_t k = 1;
  while (k < need && i + k < s.size()) {
    const uint8_t c = static_cast<uint8_t>(s[i + k]);
    if (k == 1 ? !second_ok(c0, c) : (c & 0xC0) != 0x80) break;
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

// Test helpers for the harmony tests: a tiny byte-level tokenizer with the harmony special
// tokens (fast, deterministic, every byte its own token so UTF-8 characters split across
// tokens), and a UTF-8 validity check.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace gossamer::harmony::testing {

class ByteTokenizer : public Tokenizer {
 public:
  ByteTokenizer() {
    specials_ = {{"<|endoftext|>", 199999}, {"<|return|>", 200002}, {"<|constrain|>", 200003},
                 {"<|channel|>", 200005},   {"<|start|>", 200006},  {"<|end|>", 200007},
                 {"<|message|>", 200008},   {"<|call|>", 200012}};
  }
  // Bytes -> ids; with allow_special, "<|...|>" spellings of known specials become their id.
  std::vector<int32_t> encode(std::string_view text, bool allow_special) const override {
    std::vector<int32_t> ids;
    for (size_t i = 0; i < text.size();) {
      bool matched = false;
      if (allow_special) {
        for (const auto& [s, id] : specials_) {
          if (text.substr(i, s.size()) == s) {
            ids.push_back(id);
            i += s.size();
            matched = true;
            break;
          }
        }
      }
      if (!matched) ids.push_back(static_cast<unsigned char>(text[i++]));
    }
    return ids;
  }
  Result<std::string> decode(const std::vector<int32_t>& ids) const override {
    std::string out;
    for (int32_t id : ids) {
      GS_ASSIGN_OR_RETURN(std::string b, token_bytes(id));
      out += b;
    }
    return out;
  }
  Result<std::string> token_bytes(int32_t id) const override {
    if (id >= 0 && id < 256) return std::string(1, static_cast<char>(id));
    for (const auto& [s, sid] : specials_) {
      if (sid == id) return s;
    }
    return OutOfRange("token id " + std::to_string(id) + " not in test vocabulary");
  }
  std::optional<int32_t> special_id(std::string_view text) const override {
    auto it = specials_.find(std::string(text));
    return it == specials_.end() ? std::nullopt : std::optional<int32_t>(it->second);
  }
  bool is_special(int32_t id) const override { return id >= 256; }
  int64_t vocab_size() const override { return 201088; }

 private:
  std::map<std::string, int32_t> specials_;
};

inline bool valid_utf8(const std::string& s) {
  for (size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (n == 0 || i + n > s.size()) return false;
    uint32_t cp = n == 1 ? c : n == 2 ? (c & 0x1F) : n == 3 ? (c & 0x0F) : (c & 0x07);
    for (size_t k = 1; k < n; ++k) {
      const auto cc = static_cast<unsigned char>(s[i + k]);
      if ((cc & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (cc & 0x3F);
    }
    const uint32_t min[] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < min[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    i += n;
  }
  return true;
}

}  // namespace gossamer::harmony::testing

#include "tokenizer/byte_level.h"

#include "tokenizer/utf8.h"

namespace gossamer::tok {

Result<std::string> ByteLevelMap::decode(std::string_view s, const std::string& what) const {
  std::string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    const size_t len = utf8::valid_char_len(s, i);
    if (len == 0) return Corrupt(what + ": invalid UTF-8 at byte " + std::to_string(i));
    const auto b = [&](size_t k) { return static_cast<uint32_t>(static_cast<uint8_t>(s[i + k])); };
    uint32_t cp = 0;
    if (len == 1)
      cp = b(0);
    else if (len == 2)
      cp = ((b(0) & 0x1F) << 6) | (b(1) & 0x3F);
    else if (len == 3)
      cp = ((b(0) & 0x0F) << 12) | ((b(1) & 0x3F) << 6) | (b(2) & 0x3F);
    else
      cp = 0x110000;  // 4-byte characters are never byte-level symbols
    if (cp >= from_cp_.size() || from_cp_[cp] < 0) {
      return Corrupt(what + ": character at byte " + std::to_string(i) +
                     " is not in the byte-level alphabet");
    }
    out.push_back(static_cast<char>(from_cp_[cp]));
    i += len;
  }
  return out;
}

}  // namespace gossamer::tok

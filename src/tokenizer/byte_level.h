// The GPT-2 "ByteLevel" mapping used by tokenizer.json: every byte 0..255 is shown as one
// printable code point (printable Latin-1 bytes map to themselves, the other 68 bytes to
// U+0100.. in byte order). Vocab and merge strings are stored in this alphabet.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

#include "common/status.h"

namespace gossamer::tok {

class ByteLevelMap {
 public:
  ByteLevelMap() {
    uint32_t extra = 0;
    for (uint32_t b = 0; b < 256; ++b) {
      const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
      to_cp_[b] = printable ? b : 256 + extra++;
    }
    from_cp_.fill(-1);
    for (uint32_t b = 0; b < 256; ++b) from_cp_[to_cp_[b]] = static_cast<int16_t>(b);
  }

  uint32_t code_point(uint8_t byte) const { return to_cp_[byte]; }

  // Raw bytes of a string written in the byte-level alphabet; `what` names it in errors.
  Result<std::string> decode(std::string_view s, const std::string& what) const;

 private:
  std::array<uint32_t, 256> to_cp_{};
  std::array<int16_t, 324> from_cp_{};
};

}  // namespace gossamer::tok

// Code point classes for the o200k pre-tokenizer (generated table, Unicode 16.0), looked up
// through a two-stage table built once per tokenizer.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace gossamer::tok {

enum CharClass : uint8_t {
  kLetter = 1,    // \p{L}
  kNumber = 2,    // \p{N}
  kUpperish = 4,  // [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]
  kLowerish = 8,  // [\p{Ll}\p{Lm}\p{Lo}\p{M}]
  kSpace = 16,    // \s (Unicode White_Space)
};

struct UnicodeRange {
  uint32_t first, last;
  uint8_t bits;
};
extern const UnicodeRange kUnicodeRanges[];
extern const size_t kNumUnicodeRanges;
extern const char kUnicodeVersion[];

class CharClassTable {
 public:
  CharClassTable();
  uint8_t operator()(uint32_t cp) const {
    if (cp > 0x10FFFF) return 0;
    return blocks_[(static_cast<size_t>(index_[cp >> 8]) << 8) | (cp & 0xFF)];
  }
  // Same for an ASCII code point (c < 128), one load.
  uint8_t ascii(uint8_t c) const { return ascii_[c]; }

 private:
  std::vector<uint16_t> index_;  // [0x1100] block number per 256 code points
  std::vector<uint8_t> blocks_;  // [n_blocks * 256] class bits
  uint8_t ascii_[128] = {};      // class bits of U+0000..U+007F
};

}  // namespace gossamer::tok

// Random text for the tokenizer tests (header only, tests only).
#pragma once

#include <cstdint>
#include <cstdio>
#include <iterator>
#include <random>
#include <string>

#include "tokenizer/utf8.h"

namespace gossamer::tok {

inline uint32_t seed_from_device(const char* what) {
  const uint32_t seed = std::random_device{}();
  std::printf("%s seed = %u\n", what, seed);
  return seed;
}

// Random text from code points whose classes are identical in PCRE2's Unicode tables and
// Unicode 16 (long-assigned scripts), biased to the cases the regex distinguishes.
inline std::string random_text(std::mt19937& rng, size_t n_chars) {
  static constexpr uint32_t kPool[][2] = {
      {0x20, 0x7E},     {0x09, 0x0D},       {0x00, 0x1F},     {0xA0, 0x24F},     {0x300, 0x36F},
      {0x370, 0x3FF},   {0x400, 0x4FF},     {0x5D0, 0x5EA},   {0x600, 0x64A},    {0x900, 0x97F},
      {0xE00, 0xE3A},   {0x2000, 0x200A},   {0x2028, 0x2029}, {0x3000, 0x3002},  {0x4E00, 0x4FFF},
      {0xAC00, 0xAFFF}, {0x1F600, 0x1F64F}, {0x2160, 0x2188}, {0x1D400, 0x1D4FF}};
  static constexpr const char* kBits[] = {"'s",
                                          "'LL",
                                          "'Ve",
                                          "'T",
                                          "\r\n",
                                          "  ",
                                          "\n\n",
                                          "/",
                                          "123",
                                          "45678",
                                          "\n/",
                                          "\nx",
                                          " a b",
                                          "\n ",
                                          "x\n",
                                          "\n\xC3\xA9",
                                          "\n\xE3\x80\x80",
                                          "\xC5\xBF",
                                          "'\xC5\xBF",
                                          "\xC2\x85"};
  std::string s;
  for (size_t k = 0; k < n_chars; ++k) {
    const uint32_t r = rng() % 10;
    if (r < 3) {
      s += kBits[rng() % std::size(kBits)];
      continue;
    }
    const auto& range = kPool[rng() % std::size(kPool)];
    uint32_t cp = range[0] + rng() % (range[1] - range[0] + 1);
    if (r < 6) cp = 0x20 + rng() % 0x5F;
    utf8::append_code_point(&s, cp);
  }
  return s;
}

}  // namespace gossamer::tok

// The rmsnorm case table: drives rmsnorm_test and rmsnorm_bench.
#pragma once

namespace gossamer::kern {

struct RmsNormCase {
  const char* name;
  int rows, dim;
};

inline constexpr RmsNormCase kRmsNormCases[] = {
    {"tiny 3x64", 3, 64},      {"20b/120b decode 1x2880", 1, 2880},
    {"batch 8x2880", 8, 2880}, {"batch 64x2880", 64, 2880},
    {"odd 5x2884", 5, 2884},   {"wide 3x5120 (re-read path)", 3, 5120},
};

}  // namespace gossamer::kern

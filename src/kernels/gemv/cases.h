// The gemv case table (gpt-oss shapes): drives gemv_test and gemv_bench.
#pragma once

namespace gossamer::kern {

struct GemvCase {
  const char* name;
  int rows, cols, batch;
  bool accumulate, argmax;
  bool in_test;  // the lm_head-sized cases are bench-only (the fp64 CPU reference is slow)
};

inline constexpr GemvCase kGemvCases[] = {
    {"tiny 40x64 b1", 40, 64, 1, false, true, true},
    {"o_proj 120b 2880x4096 b1 +res", 2880, 4096, 1, true, false, true},
    {"o_proj 20b 2880x4096 b3 +res", 2880, 4096, 3, true, false, true},
    {"router 120b 128x2880 b1", 128, 2880, 1, false, false, true},
    {"router 20b 32x2880 b8", 32, 2880, 8, false, false, true},
    {"odd 1001x136 b13 argmax", 1001, 136, 13, false, true, true},
    {"odd 1001x160 b13 argmax", 1001, 160, 13, false, true, true},
    {"lm_head-like 5000x2880 b8 argmax", 5000, 2880, 8, false, true, true},
    {"lm_head-like 3001x2880 b16 argmax", 3001, 2880, 16, false, true, true},
    {"lm_head-like 2000x2880 b29 argmax", 2000, 2880, 29, false, true, true},
    {"o_proj 2880x4096 b40 +res", 2880, 4096, 40, true, false, true},
    {"router 20b 32x2880 b2 +res", 32, 2880, 2, true, false, true},
    {"o_proj 2880x4096 b2 +res", 2880, 4096, 2, true, false, true},
    {"o_proj 2880x4096 b64", 2880, 4096, 64, true, false, true},
    {"small 50x136 b1 +res", 50, 136, 1, true, false, true},
    // 9 rows per block on 132 SMs but only 5 fit in shared memory: the bulk ring wraps.
    {"wide 1200x16384 b1", 1200, 16384, 1, false, false, true},
    {"lm_head 201088x2880 b1 argmax", 201088, 2880, 1, false, true, false},
    {"lm_head 201088x2880 b8", 201088, 2880, 8, false, false, false},
    {"lm_head 201088x2880 b8 argmax", 201088, 2880, 8, false, true, false},
    {"lm_head 201088x2880 b16 argmax", 201088, 2880, 16, false, true, false},
    {"lm_head 201088x2880 b32 argmax", 201088, 2880, 32, false, true, false},
    {"lm_head 201088x2880 b4 argmax", 201088, 2880, 4, false, true, false},
    {"lm_head 201088x2880 b2 argmax", 201088, 2880, 2, false, true, false},
    {"o_proj 2880x4096 b4 +res (bench)", 2880, 4096, 4, true, false, false},
    {"o_proj 2880x4096 b8 +res (bench)", 2880, 4096, 8, true, false, false},
    {"lm_head 201088x2880 b1 (sampling)", 201088, 2880, 1, false, false, false},
};

}  // namespace gossamer::kern

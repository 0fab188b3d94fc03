// The gemm case table: drives gemm_test (in_test) and gemm_bench (all). Shapes are the prefill
// projections of gpt-oss (m = token rows): QKV (20b/120b: 5120 x 2880), O (2880 x 4096, with
// residual accumulate), router (E x 2880), plus odd shapes for the edges.
#pragma once

namespace gossamer::kern {

struct GemmCase {
  const char* name;
  int m, n, k;
  bool bias, accumulate, in_test;
};

inline constexpr GemmCase kGemmCases[] = {
    {"tiny 7x33x64 bias", 7, 33, 64, true, false, true},
    {"odd 300x136x200 bias+acc", 300, 136, 200, true, true, true},
    {"no bias 65x96x512", 65, 96, 512, false, false, true},
    {"router 517x32x2880 bias", 517, 32, 2880, true, false, true},
    {"qkv 300x5120x2880 bias", 300, 5120, 2880, true, false, true},
    {"o-proj 129x2880x4096 bias+acc", 129, 2880, 4096, true, true, true},
    {"qkv 2048x5120x2880 bias", 2048, 5120, 2880, true, false, false},
    {"o-proj 2048x2880x4096 bias+acc", 2048, 2880, 4096, true, true, false},
    {"router 2048x128x2880 bias", 2048, 128, 2880, true, false, false},
    {"qkv 16384x5120x2880 bias", 16384, 5120, 2880, true, false, false},
    {"o-proj 16384x2880x4096 bias+acc", 16384, 2880, 4096, true, true, false},
    {"ceiling 8192x8192x8192", 8192, 8192, 8192, false, false, false},
};

}  // namespace gossamer::kern

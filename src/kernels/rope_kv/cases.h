// The rope_kv case table: drives rope_kv_test and rope_kv_bench.
#pragma once

namespace gossamer::kern {

struct RopeKvCase {
  const char* name;
  int rows, seqs, n_heads, n_kv_heads;
  int pos0;  // first position of each sequence (rows are split evenly over seqs)
  bool in_test;
};

inline constexpr RopeKvCase kRopeKvCases[] = {
    {"tiny 5 rows 4/2", 5, 1, 4, 2, 0, true},
    {"2 seqs 70 rows 8/2 at 1000", 70, 2, 8, 2, 1000, true},
    {"20b 300 rows 64/8", 300, 1, 64, 8, 37, true},
    {"3 seqs 96 rows 16/1 at 131000", 96, 3, 16, 1, 131000, true},
    {"gpt-oss 2048 rows 64/8", 2048, 1, 64, 8, 0, false},
    {"gpt-oss 16384 rows 64/8", 16384, 1, 64, 8, 0, false},
};

}  // namespace gossamer::kern

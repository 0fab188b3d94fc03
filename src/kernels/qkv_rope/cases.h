// The qkv_rope case table: drives qkv_rope_test and qkv_rope_bench.
#pragma once

namespace gossamer::kern {

struct QkvRopeCase {
  const char* name;
  int batch, hidden, n_heads, n_kv_heads;
  int max_pos;  // positions drawn from [0, max_pos)
};

inline constexpr QkvRopeCase kQkvRopeCases[] = {
    {"tiny b1 h64 4/2", 1, 64, 4, 2, 40},
    {"120b b1 2880 64/8", 1, 2880, 64, 8, 131072},
    {"20b b3 2880 64/8", 3, 2880, 64, 8, 5000},
    {"120b b8 2880 64/8", 8, 2880, 64, 8, 3000},
    {"odd b2 96 3/1", 2, 96, 3, 1, 60},
    {"120b b2 2880 64/8", 2, 2880, 64, 8, 9000},
    {"odd b4 1024 12/4", 4, 1024, 12, 4, 700},
    {"batch b11 512 8/2", 11, 512, 8, 2, 300},
    {"batch b64 2880 64/8", 64, 2880, 64, 8, 1000},
    {"odd b1 1024 12/4", 1, 1024, 12, 4, 700},
    // 16 KB rows: the bulk kernel's 48 KB ring holds 2 of a block's 4 rows (the ring wraps).
    {"wide b1 8192 4/2", 1, 8192, 4, 2, 500},
};

}  // namespace gossamer::kern

// The attention case table: drives attention_test and attention_bench.
#pragma once

namespace gossamer::kern {

struct AttnCase {
  const char* name;
  int batch, n_heads, n_kv_heads, window;
  int ctx;     // positions drawn in [ctx/2, ctx) per row (bench: exactly ctx - 1)
  int splits;  // 0: attention_splits() for 132 SMs
  bool in_test;
};

inline constexpr AttnCase kAttnCases[] = {
    {"tiny b1 4/2 ctx 5", 1, 4, 2, 0, 5, 0, true},
    {"gpt-oss b1 64/8 ctx 300", 1, 64, 8, 0, 300, 0, true},
    {"gpt-oss b1 64/8 sliding 128 ctx 1000", 1, 64, 8, 128, 1000, 0, true},
    {"gpt-oss b3 64/8 ctx 2000 1 split", 3, 64, 8, 0, 2000, 1, true},
    {"b5 12/3 (G=4) ctx 700", 5, 12, 3, 0, 700, 7, true},
    {"b2 32/2 (G=16) sliding 64 ctx 500", 2, 32, 2, 64, 500, 0, true},
    {"b64 64/8 ctx 64", 64, 64, 8, 0, 64, 0, true},
    // Group sizes that are not powers of two, odd windows (held-out checkpoint shapes).
    {"b1 15/1 (G=15) sliding 29 ctx 76", 1, 15, 1, 29, 76, 0, true},
    {"b3 49/7 (G=7) sliding 11 ctx 186", 3, 49, 7, 11, 186, 0, true},
    {"b2 21/7 (G=3) ctx 300", 2, 21, 7, 0, 300, 0, true},
    {"gpt-oss b1 64/8 ctx 16384", 1, 64, 8, 0, 16384, 0, true},
    {"gpt-oss b8 64/8 sliding 128 ctx 5000", 8, 64, 8, 128, 5000, 0, true},
    {"gpt-oss b1 64/8 ctx 4096", 1, 64, 8, 0, 4096, 0, false},
    {"gpt-oss b8 64/8 ctx 4096", 8, 64, 8, 0, 4096, 0, false},
    {"gpt-oss b1 64/8 ctx 131072", 1, 64, 8, 0, 131072, 0, false},
    {"gpt-oss b8 64/8 ctx 16384", 8, 64, 8, 0, 16384, 0, false},
    {"gpt-oss b8 64/8 ctx 131072", 8, 64, 8, 0, 131072, 0, false},
    {"gpt-oss b1 64/8 sliding 128 ctx 16384", 1, 64, 8, 128, 16384, 0, false},
    {"gpt-oss b1 64/8 ctx 1024", 1, 64, 8, 0, 1024, 0, true},
    {"gpt-oss b64 64/8 ctx 2048", 64, 64, 8, 0, 2048, 0, false},
};

}  // namespace gossamer::kern

// The flash_attn case table: drives flash_attn_test (in_test) and flash_attn_bench.
#pragma once

namespace gossamer::kern {

struct FlashCase {
  const char* name;
  int seqs;    // sequences in the chunk (tokens of a sequence are contiguous rows)
  int tokens;  // new tokens per sequence (the chunk)
  int p0;      // cached positions before the chunk (test: per sequence drawn in [p0/2, p0])
  int n_heads, n_kv_heads, window;
  float q_amp;      // q uniform in [-q_amp, q_amp] (larger: peakier softmax)
  float sink_amp;   // sinks uniform in [-sink_amp, sink_amp]
  int splits;       // context splits (1: no combine)
  int variant;      // FlashAttnParams::variant (0 auto, 1 narrow, 2 wide)
  int check_every;  // test: compare every n-th token with the fp64 reference (+ the last one)
  bool in_test;
  int block_size = 16;  // paged KV block size (tokens); the engine allows 1..1024
};

inline constexpr FlashCase kFlashCases[] = {
    {"T1 64/8 p0 1000 full", 1, 1, 1000, 64, 8, 0, 2.f, 4.f, 1, 0, 1, true},
    {"T7 64/8 p0 150 sliding 128", 1, 7, 150, 64, 8, 128, 2.f, 4.f, 1, 0, 1, true},
    {"T7 64/8 p0 150 sliding 128 wide", 1, 7, 150, 64, 8, 128, 2.f, 4.f, 1, 2, 1, true},
    {"T64 64/8 p0 0 full", 1, 64, 0, 64, 8, 0, 2.f, 4.f, 1, 0, 1, true},
    {"T64 64/8 p0 0 full narrow", 1, 64, 0, 64, 8, 0, 2.f, 4.f, 1, 1, 1, true},
    {"T300 64/8 p0 200 sliding 128", 1, 300, 200, 64, 8, 128, 2.f, 4.f, 1, 0, 3, true},
    {"T300 8/8 (1:1) p0 100 full", 1, 300, 100, 8, 8, 0, 2.f, 4.f, 1, 0, 1, true},
    {"3 seqs x T100 64/8 p0 500 full", 3, 100, 500, 64, 8, 0, 2.f, 4.f, 1, 0, 3, true},
    {"5 seqs x T13 12/3 (G=4) sliding 64", 5, 13, 90, 12, 3, 64, 2.f, 4.f, 1, 0, 1, true},
    {"T300 64/8 big sinks +-30, q amp 8", 1, 300, 40, 64, 8, 0, 8.f, 30.f, 1, 0, 3, true},
    {"T40 64/8 p0 3000 full splits 7", 1, 40, 3000, 64, 8, 0, 2.f, 4.f, 7, 0, 1, true},
    {"T40 64/8 p0 3000 sliding 128 splits 5", 2, 40, 3000, 64, 8, 128, 2.f, 4.f, 5, 0, 1, true},
    {"T2048 64/8 p0 0 full", 1, 2048, 0, 64, 8, 0, 2.f, 4.f, 1, 0, 61, true},
    {"T2048 64/8 p0 1000 sliding 128", 1, 2048, 1000, 64, 8, 128, 2.f, 4.f, 1, 0, 61, true},
    {"T2048 8/1 (G=8) p0 300 full", 1, 2048, 300, 8, 1, 0, 2.f, 4.f, 1, 0, 17, true},
    {"T2048 64/8 p0 16384 full (depth)", 1, 2048, 16384, 64, 8, 0, 2.f, 4.f, 1, 0, 127, true},
    // Other paged block sizes: a K/V tile of 64 keys then spans 2 (32) or 13 (5) blocks, or one
    // block covers several tiles (128).
    {"3 seqs x T100 64/8 p0 500 full, blocks of 32", 3, 100, 500, 64, 8, 0, 2.f, 4.f, 1, 0, 3, true,
     32},
    {"2 seqs x T90 64/8 p0 300 sliding 128, blocks of 5", 2, 90, 300, 64, 8, 128, 2.f, 4.f, 1, 0, 3,
     true, 5},
    {"T600 64/8 p0 700 full, blocks of 128", 1, 600, 700, 64, 8, 0, 2.f, 4.f, 1, 0, 7, true, 128},
    // Group sizes that are not powers of two (held-out checkpoints: 15, 12, 7, 3, 5 query heads
    // per kv head) and odd windows.
    {"T76 15/1 (G=15) sliding 29", 1, 76, 0, 15, 1, 29, 2.f, 4.f, 1, 0, 1, true},
    {"2 seqs x T60 48/4 (G=12) p0 40 sliding 22", 2, 60, 40, 48, 4, 22, 2.f, 4.f, 1, 0, 1, true},
    {"T186 49/7 (G=7) sliding 11, blocks of 8", 1, 186, 0, 49, 7, 11, 2.f, 4.f, 1, 0, 1, true, 8},
    {"T120 21/7 (G=3) p0 70 full", 1, 120, 70, 21, 7, 0, 2.f, 4.f, 1, 0, 1, true},
    {"T90 5/1 (G=5) full splits 3", 1, 90, 500, 5, 1, 0, 2.f, 4.f, 3, 0, 1, true},
    {"T300 16/1 (G=16) full", 1, 300, 0, 16, 1, 0, 2.f, 4.f, 1, 0, 3, true},
    // Bench only (one gpt-oss layer: 64 q heads, 8 kv heads).
    {"T512 p0 0 full", 1, 512, 0, 64, 8, 0, 2.f, 4.f, 1, 0, 1, false},
    {"T512 p0 0 sliding 128", 1, 512, 0, 64, 8, 128, 2.f, 4.f, 1, 0, 1, false},
    {"T2048 p0 0 full", 1, 2048, 0, 64, 8, 0, 2.f, 4.f, 1, 0, 1, false},
    {"T2048 p0 0 sliding 128", 1, 2048, 0, 64, 8, 128, 2.f, 4.f, 1, 0, 1, false},
    {"T8192 p0 0 full", 1, 8192, 0, 64, 8, 0, 2.f, 4.f, 1, 0, 1, false},
    {"T8192 p0 0 sliding 128", 1, 8192, 0, 64, 8, 128, 2.f, 4.f, 1, 0, 1, false},
    {"T2048 p0 16384 full", 1, 2048, 16384, 64, 8, 0, 2.f, 4.f, 1, 0, 1, false},
    {"T512 p0 16384 full", 1, 512, 16384, 64, 8, 0, 2.f, 4.f, 1, 0, 1, false},
    {"T512 p0 16384 full splits 4", 1, 512, 16384, 64, 8, 0, 2.f, 4.f, 4, 0, 1, false},
};

}  // namespace gossamer::kern

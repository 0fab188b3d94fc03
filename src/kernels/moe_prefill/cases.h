// The MoE prefill case table (drives moe_prefill_test and moe_prefill_bench).
#pragma once

namespace gossamer::kern {

enum class Routing {
  kRandom,   // k distinct random experts per token
  kHot,      // slot 0 is always expert 0 (one expert gets every token), others random
  kInvalid,  // random, but ~10% of the ids are -1 or n_experts (dropped by the kernel)
};

struct MoePrefillCase {
  const char* name;
  int tokens, k, hidden, inter, n_experts;
  Routing routing;
  int check_tokens;  // tokens compared with the fp64 reference (0: all)
  bool in_test, in_bench;
};

inline constexpr MoePrefillCase kMoePrefillCases[] = {
    {"tiny T1 k2 64x32 E4", 1, 2, 64, 32, 4, Routing::kRandom, 0, true, false},
    {"T37 k4 96x160 E8 (partial tiles)", 37, 4, 96, 160, 8, Routing::kRandom, 0, true, false},
    {"T100 k4 256x128 E16 hot expert", 100, 4, 256, 128, 16, Routing::kHot, 0, true, false},
    {"T200 k2 128x64 E64 sparse", 200, 2, 128, 64, 64, Routing::kRandom, 0, true, false},
    {"T40 k4 128x96 E4 (40 rows per expert)", 40, 4, 128, 96, 4, Routing::kRandom, 0, true, false},
    {"T130 k4 64x96 E8 invalid ids", 130, 4, 64, 96, 8, Routing::kInvalid, 0, true, false},
    // Held-out shapes: top-1 / top-8, odd MX block counts (96 = 3 blocks), hidden 32.
    {"T77 k1 64x96 E32 top-1", 77, 1, 64, 96, 32, Routing::kRandom, 0, true, false},
    {"T50 k8 96x224 E27 top-8", 50, 8, 96, 224, 27, Routing::kRandom, 0, true, false},
    {"T60 k7 32x160 E26", 60, 7, 32, 160, 26, Routing::kRandom, 0, true, false},
    {"T45 k5 288x224 E10", 45, 5, 288, 224, 10, Routing::kRandom, 0, true, false},
    {"T300 k4 2880x2880 E8", 300, 4, 2880, 2880, 8, Routing::kRandom, 12, true, false},
    {"20b layer T8", 8, 4, 2880, 2880, 32, Routing::kRandom, 0, false, true},
    {"20b layer T16", 16, 4, 2880, 2880, 32, Routing::kRandom, 0, false, true},
    {"20b layer T32", 32, 4, 2880, 2880, 32, Routing::kRandom, 0, false, true},
    {"20b layer T64", 64, 4, 2880, 2880, 32, Routing::kRandom, 0, false, true},
    {"20b layer T128", 128, 4, 2880, 2880, 32, Routing::kRandom, 0, false, true},
    {"20b layer T512", 512, 4, 2880, 2880, 32, Routing::kRandom, 16, true, true},
    {"20b layer T2048", 2048, 4, 2880, 2880, 32, Routing::kRandom, 16, true, true},
    {"20b layer T8192", 8192, 4, 2880, 2880, 32, Routing::kRandom, 0, false, true},
    {"120b layer T8", 8, 4, 2880, 2880, 128, Routing::kRandom, 0, false, true},
    {"120b layer T16", 16, 4, 2880, 2880, 128, Routing::kRandom, 0, false, true},
    {"120b layer T32", 32, 4, 2880, 2880, 128, Routing::kRandom, 0, false, true},
    {"120b layer T64", 64, 4, 2880, 2880, 128, Routing::kRandom, 0, false, true},
    {"120b layer T128", 128, 4, 2880, 2880, 128, Routing::kRandom, 0, false, true},
    {"120b layer T512", 512, 4, 2880, 2880, 128, Routing::kRandom, 16, true, true},
    {"120b layer T1024", 1024, 4, 2880, 2880, 128, Routing::kRandom, 0, false, true},
    {"120b layer T2048", 2048, 4, 2880, 2880, 128, Routing::kRandom, 16, true, true},
    {"120b layer T8192", 8192, 4, 2880, 2880, 128, Routing::kRandom, 0, false, true},
};

}  // namespace gossamer::kern

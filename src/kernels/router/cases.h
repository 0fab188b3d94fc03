// The router top-k case table.
#pragma once

namespace gossamer::kern {

struct TopkCase {
  const char* name;
  int batch, n_experts, k;
};

inline constexpr TopkCase kTopkCases[] = {
    {"120b b1 128/4", 1, 128, 4}, {"20b b7 32/4", 7, 32, 4},  {"b64 128/4", 64, 128, 4},
    {"odd b3 5/2", 3, 5, 2},      {"k8 b2 256/8", 2, 256, 8},
};

// Fused norm + router + top-k cases (test and bench).
struct NormRouterCase {
  const char* name;
  int batch, hidden, n_experts, k;
};

inline constexpr NormRouterCase kNormRouterCases[] = {
    {"120b b1 2880/128/4", 1, 2880, 128, 4},
    {"20b b3 2880/32/4", 3, 2880, 32, 4},
    {"120b b8", 8, 2880, 128, 4},
    {"120b b13", 13, 2880, 128, 4},
    {"small b5 256/64/8", 5, 256, 64, 8},
    {"20b b1 2880/32/4", 1, 2880, 32, 4},
    {"120b b64", 64, 2880, 128, 4},
    {"20b b64", 64, 2880, 32, 4},
    {"odd b7 3072/8/2", 7, 3072, 8, 2},
};

// NormRouterParams::variant values the test and bench run (0 = auto is one of them).
inline constexpr int kNormRouterVariants[] = {1, 2, 3};

}  // namespace gossamer::kern

// The MoE case table (drives moe_test and moe_bench).
#pragma once

namespace gossamer::kern {

struct MoeCase {
  const char* name;
  int batch, k, hidden, inter, n_experts;
  bool in_test;
};

inline constexpr MoeCase kMoeCases[] = {
    {"tiny b1 k2 64x32 E4", 1, 2, 64, 32, 4, true},
    {"gpt-oss shapes b1 k4 2880x2880 E8", 1, 4, 2880, 2880, 8, true},
    {"b5 k4 2880x2880 E8", 5, 4, 2880, 2880, 8, true},
    {"odd b3 k3 96x160 E5", 3, 3, 96, 160, 5, true},
    {"b64 k4 256x128 E16", 64, 4, 256, 128, 16, true},
    {"odd b7 k2 1088x320 E6", 7, 2, 1088, 320, 6, true},
    {"top-1 b1 k1 64x96 E32", 1, 1, 64, 96, 32, true},
    {"top-8 b2 k8 32x224 E27", 2, 8, 32, 224, 27, true},
    {"120b layer b1 k4 E128", 1, 4, 2880, 2880, 128, false},
    {"120b layer b2 k4 E128", 2, 4, 2880, 2880, 128, false},
    {"120b layer b4 k4 E128", 4, 4, 2880, 2880, 128, false},
    {"120b layer b8 k4 E128", 8, 4, 2880, 2880, 128, false},
    {"120b layer b16 k4 E128", 16, 4, 2880, 2880, 128, false},
    {"120b layer b32 k4 E128", 32, 4, 2880, 2880, 128, false},
    {"120b layer b64 k4 E128", 64, 4, 2880, 2880, 128, false},
    {"20b layer b1 k4 E32", 1, 4, 2880, 2880, 32, false},
    {"20b layer b2 k4 E32", 2, 4, 2880, 2880, 32, false},
    {"20b layer b4 k4 E32", 4, 4, 2880, 2880, 32, false},
    {"20b layer b8 k4 E32", 8, 4, 2880, 2880, 32, false},
    {"20b layer b32 k4 E32", 32, 4, 2880, 2880, 32, false},
    {"20b layer b64 k4 E32", 64, 4, 2880, 2880, 32, false},
    {"20b layer b16 k4 E32", 16, 4, 2880, 2880, 32, false},
};

}  // namespace gossamer::kern

// The oproj_router case table (test and bench): gpt-oss shapes and small / odd ones.
#pragma once

namespace gossamer::kern {

struct OprojRouterCase {
  const char* name;
  int hidden, qdim, n_experts, k;
};

inline constexpr OprojRouterCase kOprojRouterCases[] = {
    {"120b 2880/4096/128/4", 2880, 4096, 128, 4}, {"20b 2880/4096/32/4", 2880, 4096, 32, 4},
    {"small 256/512/64/8", 256, 512, 64, 8},      {"tiny 64/128/8/2", 64, 128, 8, 2},
    {"odd 1000/776/5/3", 1000, 776, 5, 3},
};

}  // namespace gossamer::kern

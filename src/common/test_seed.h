// Test-only: the seed of a randomized test. A fresh one from std::random_device per run, or
// $GOSSAMER_SEED to replay a failure; printed as "[seed] WHAT: GOSSAMER_SEED=N" either way.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <string_view>

namespace gossamer::testing {

inline uint64_t fresh_seed(std::string_view what) {
  uint64_t seed = 0;
  if (const char* s = std::getenv("GOSSAMER_SEED")) {
    seed = std::strtoull(s, nullptr, 10);
  } else {
    std::random_device rd;
    seed = (static_cast<uint64_t>(rd()) << 32) ^ rd();
  }
  std::printf("[seed] %s: GOSSAMER_SEED=%llu\n", std::string(what).c_str(),
              static_cast<unsigned long long>(seed));
  return seed;
}

}  // namespace gossamer::testing

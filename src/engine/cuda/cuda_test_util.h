// Helpers shared by the CUDA runner's end-to-end tests (this folder's *_test.cpp files).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>

namespace gossamer::cudatest {

// A fresh seed per run (printed), or $GOSSAMER_SEED to replay one.
inline uint64_t fresh_seed(const char* what) {
  uint64_t s = (static_cast<uint64_t>(std::random_device{}()) << 32) ^ std::random_device{}();
  if (const char* e = std::getenv("GOSSAMER_SEED")) s = std::strtoull(e, nullptr, 10);
  std::printf("[seed] %s: GOSSAMER_SEED=%llu\n", what, static_cast<unsigned long long>(s));
  return s;
}

// ||a - b|| / ||b|| in double; any non-finite value in `a` gives infinity.
inline double rel_err(const float* a, const float* b, int64_t n) {
  double num = 0, den = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (!std::isfinite(a[i])) return INFINITY;
    num += (static_cast<double>(a[i]) - b[i]) * (static_cast<double>(a[i]) - b[i]);
    den += static_cast<double>(b[i]) * b[i];
  }
  return std::sqrt(num / std::max(den, 1e-300));
}

}  // namespace gossamer::cudatest

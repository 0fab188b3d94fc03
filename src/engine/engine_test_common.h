// Helpers shared by the CPU engine tests (engine_test.cpp, engine_runner_test.cpp): the
// replayable test seed and the relative error of two float vectors.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "common/test_seed.h"

namespace gossamer::enginetest {

using gossamer::testing::fresh_seed;  // common/test_seed.h ($GOSSAMER_SEED replays a run)

inline double rel_err(const std::vector<float>& a, const std::vector<float>& b, size_t off = 0,
                      size_t n = 0) {
  if (n == 0) n = b.size() - off;
  double num = 0, den = 0;
  for (size_t i = off; i < off + n; ++i) {
    num += (static_cast<double>(a[i]) - b[i]) * (static_cast<double>(a[i]) - b[i]);
    den += static_cast<double>(b[i]) * b[i];
  }
  return std::sqrt(num / den);
}

}  // namespace gossamer::enginetest

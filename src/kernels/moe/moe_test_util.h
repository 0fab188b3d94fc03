// Random MoE problems shared by moe_test.cpp and moe_grouped_test.cpp.
#pragma once

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <random>
#include <vector>

#include "kernels/common/testing.h"

namespace gossamer::kern::moetest {

// Distinct random experts per row and softmax-like positive weights. pool > 0: every row draws
// from the same random `pool` experts (k <= pool), so rows share experts.
inline void route(std::mt19937_64& rng, int batch, int k, int n_experts, std::vector<int32_t>* ids,
                  std::vector<float>* w, int pool = 0) {
  std::vector<int32_t> all(n_experts);
  std::iota(all.begin(), all.end(), 0);
  if (pool > 0) {
    std::shuffle(all.begin(), all.end(), rng);
    all.resize(pool);
  }
  for (int b = 0; b < batch; ++b) {
    std::shuffle(all.begin(), all.end(), rng);
    auto ws = testing::rand_f32(rng, k, 0.05f, 1.f);
    const float sum = std::accumulate(ws.begin(), ws.end(), 0.f);
    for (int j = 0; j < k; ++j) ids->push_back(all[j]), w->push_back(ws[j] / sum);
  }
}

// Scale bytes of a realistic spread; a fraction `extreme` of them replaced by bytes drawn from
// [ext_lo, ext_hi] (outside the tensor-core fast range: exercises the exact fallback).
inline std::vector<uint8_t> rand_scales(std::mt19937_64& rng, size_t n, double extreme, int ext_lo,
                                        int ext_hi) {
  auto s = testing::rand_bytes(rng, n, 110, 135);
  std::bernoulli_distribution pick(extreme);
  std::uniform_int_distribution<int> ext(ext_lo, ext_hi);
  for (auto& v : s)
    if (pick(rng)) v = static_cast<uint8_t>(ext(rng));
  return s;
}

// MXFP4 blocks of `rows` rows of `cols` values with ~1% all-zero rows.
inline std::vector<uint8_t> rand_blocks(std::mt19937_64& rng, size_t rows, int cols) {
  auto b = testing::rand_bytes(rng, rows * cols / 2, 0, 255);
  std::bernoulli_distribution zero(0.01);
  for (size_t r = 0; r < rows; ++r)
    if (zero(rng)) std::fill_n(b.begin() + r * cols / 2, cols / 2, uint8_t{0});
  return b;
}

}  // namespace gossamer::kern::moetest

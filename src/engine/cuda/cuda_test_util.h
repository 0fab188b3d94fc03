// Helpers shared by the CUDA runner's end-to-end tests (this folder's *_test.cpp files).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "common/npy.h"
#include "common/test_seed.h"
#include "model/config.h"
#include "model/synth.h"
#include "model/weights.h"

namespace gossamer::cudatest {

using gossamer::testing::fresh_seed;  // common/test_seed.h ($GOSSAMER_SEED replays a run)

// Writes a synthetic checkpoint of `cfg` (weights from `seed`) to `dir` and loads it back.
inline void synth_and_load(const ModelConfig& cfg, uint64_t seed, const std::string& dir,
                           std::shared_ptr<LoadedModel>* out) {
  SynthOptions so;
  so.config = cfg;
  so.seed = seed;
  so.out_dir = dir;
  ASSERT_TRUE(write_synth_checkpoint(so).ok());
  auto m = load_model(dir);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  *out = *m;
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

// Median / max of per-row relative errors and how many rows are within `bound`; printed as one
// line "<what>: N rows, median rel_err M, max X, K within B".
struct RowStats {
  double median = 0, max = 0;
  int within = 0, n = 0;
};
inline RowStats row_stats(std::vector<double> e, double bound, const char* what) {
  std::sort(e.begin(), e.end());
  RowStats s;
  s.n = static_cast<int>(e.size());
  for (double x : e) s.within += x <= bound;
  s.median = e.empty() ? 0 : e[e.size() / 2];
  s.max = e.empty() ? 0 : e.back();
  std::printf("%s: %d rows, median rel_err %.3g, max %.3g, %d within %.0e\n", what, s.n, s.median,
              s.max, s.within, bound);
  return s;
}

// A random small gpt-oss config with the kernels' constraints (head_dim 64) and the real
// structure (sliding / full / sliding layers, 8 experts top-4): 1-2 kv heads, GQA group
// 2^[0, group_log2_choices), hidden 64..192, intermediate 32..128, sliding window
// 8 << [0, window_log2_choices) (no draw for a single choice).
inline ModelConfig small_config(std::mt19937_64& rng, int group_log2_choices,
                                int window_log2_choices) {
  ModelConfig c = preset_config("tiny").value();
  const int kv_heads = 1 + static_cast<int>(rng() % 2);
  const int group = 1 << (rng() % static_cast<uint64_t>(group_log2_choices));
  c.vocab_size = 1000 + static_cast<int64_t>(rng() % 500);
  c.hidden_size = 64 * (1 + static_cast<int64_t>(rng() % 3));
  c.intermediate_size = 32 * (1 + static_cast<int64_t>(rng() % 4));
  c.num_hidden_layers = 3;
  c.num_key_value_heads = kv_heads;
  c.num_attention_heads = kv_heads * group;
  c.head_dim = 64;
  c.num_local_experts = 8;
  c.experts_per_token = 4;
  c.sliding_window =
      window_log2_choices > 1 ? 8 << (rng() % static_cast<uint64_t>(window_log2_choices)) : 8;
  c.layer_types = {LayerType::kSlidingAttention, LayerType::kFullAttention,
                   LayerType::kSlidingAttention};
  c.eos_token_ids = {1};
  c.pad_token_id = 0;
  return c;
}

// A random config over wider ranges than small_config (shapes a held-out checkpoint might
// have): 1-8 kv heads, 1-16 query heads per kv head, hidden and intermediate any multiple of 32
// up to 320 / 256 (odd MX block counts included), 2-32 experts with top-1..8, 1-4 layers of
// random types, sliding window 4..64.
inline ModelConfig wide_config(std::mt19937_64& rng) {
  ModelConfig c = preset_config("tiny").value();
  auto pick = [&](int lo, int hi) { return lo + static_cast<int>(rng() % (hi - lo + 1)); };
  c.vocab_size = pick(1000, 1500);
  c.hidden_size = 32 * pick(1, 10);
  c.intermediate_size = 32 * pick(1, 8);
  c.num_key_value_heads = pick(1, 8);
  c.num_attention_heads = c.num_key_value_heads * pick(1, 16);
  c.head_dim = 64;
  c.num_local_experts = pick(2, 32);
  c.experts_per_token = pick(1, static_cast<int>(std::min<int64_t>(8, c.num_local_experts)));
  c.num_hidden_layers = pick(1, 4);
  c.layer_types.clear();
  for (int64_t l = 0; l < c.num_hidden_layers; ++l)
    c.layer_types.push_back(rng() % 2 ? LayerType::kSlidingAttention : LayerType::kFullAttention);
  c.sliding_window = pick(4, 64);
  c.attention_bias = rng() % 4 != 0;  // without: the checkpoint's biases go unused (zeros)
  c.eos_token_ids = {1};
  c.pad_token_id = 0;
  return c;
}

// How near-tied the routing of `row` is in a CPU runner's dump of step `step`
// (CpuRunnerOptions::dump_dir): the smallest gap, over the layers, between the k-th and the
// (k+1)-th largest router logits of that row (a perturbation of that size can pick another
// expert there). Negative when the dump cannot be read.
inline double router_tie_gap(const std::string& dump_dir, int step, int layers, int row, int k) {
  double gap = INFINITY;
  for (int l = 0; l < layers; ++l) {
    char name[64];
    std::snprintf(name, sizeof name, "/s%d.L%02d.router_logits.npy", step, l);
    const auto a = read_npy_f32(dump_dir + name);
    if (!a.ok() || a->shape.size() != 2 || a->shape[0] <= row || a->shape[1] <= k) return -1;
    const int64_t E = a->shape[1];
    std::vector<float> v(a->data.begin() + row * E, a->data.begin() + (row + 1) * E);
    std::nth_element(v.begin(), v.begin() + k, v.end(), std::greater<float>());
    // v[k] is the (k+1)-th largest; v[0 .. k) are the k largest.
    gap = std::min(gap, static_cast<double>(*std::min_element(v.begin(), v.begin() + k) - v[k]));
  }
  return gap;
}

// A row `r` found `err` off a reference must be a routing flip: near-tied (gap < tie_gap) in the
// reference's dump at (step, row). Prints the finding; EXPECTs (gtest) on the gap.
inline void expect_near_tied_route(const std::string& dump, int step, int row, const ModelConfig& c,
                                   size_t r, double err, double tie_gap, const std::string& what) {
  const double gap = router_tie_gap(dump, step, static_cast<int>(c.num_hidden_layers), row,
                                    static_cast<int>(c.experts_per_token));
  std::printf("  %s: row %zu is %.3g off, a routing flip (reference gap %.3g)\n", what.c_str(), r,
              err, gap);
  EXPECT_GE(gap, 0) << "unreadable CPU router logits in " << dump;
  EXPECT_LT(gap, tie_gap) << what << ": row " << r << " is " << err
                          << " off but its routing is not near-tied in the reference";
}

// The index of the largest of v[0, n) (the lowest such index on ties).
inline int argmax(const float* v, int64_t n) {
  return static_cast<int>(std::max_element(v, v + n) - v);
}

// The first n entries of e (all of them when n >= e.size()).
inline std::vector<double> head(const std::vector<double>& e, size_t n) {
  return {e.begin(), e.begin() + static_cast<std::ptrdiff_t>(std::min(n, e.size()))};
}

}  // namespace gossamer::cudatest

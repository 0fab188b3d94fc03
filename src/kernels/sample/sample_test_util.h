// Helpers shared by the device sampler tests (device_sampler_test.cpp,
// device_sampler_greedy_test.cpp): one row's request for both samplers, one launch of the device
// sampler over given rows, and random logits rows of several shapes.
#pragma once

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <random>
#include <utility>
#include <vector>

#include "kernels/common/testing.h"
#include "kernels/sample/params.h"
#include "runtime/sampler.h"

namespace gossamer::kern::sampletest {

using testing::DevBuf;
inline constexpr int kV = 201088;

// One row's request for both samplers.
struct RowCase {
  SampleRowParams dev;
  std::vector<int32_t> generated;               // for the CPU sampler's penalties
  std::vector<std::pair<int32_t, float>> bias;  // logit_bias (distinct ids)
};

inline GenerationParams cpu_params(const RowCase& c) {
  const SampleRowParams& d = c.dev;
  GenerationParams p;
  p.logit_bias = c.bias;
  p.temperature = d.temperature;
  p.top_p = d.top_p;
  p.min_p = d.min_p;
  p.top_k = d.top_k;
  p.presence_penalty = d.presence;
  p.frequency_penalty = d.frequency;
  p.top_logprobs = d.top_logprobs;
  p.logprobs = d.top_logprobs > 0;
  p.vocab_limit = d.vocab_limit;
  return p;
}

struct DevResult {
  std::vector<SampleRowOut> out;
  std::vector<float> probs;  // debug probabilities [rows, V] (when asked)
};

// Runs rows = cases.size() rows of `logits` ([rows, V]) through one launch.
inline DevResult run_device(const std::vector<float>& logits, std::vector<RowCase> cases, int V,
                            bool debug) {
  const int rows = static_cast<int>(cases.size());
  std::vector<int32_t> toks, counts;
  std::vector<float> bias;  // aligned with toks
  std::vector<SampleRowParams> rp;
  for (auto& c : cases) {
    std::map<int32_t, std::pair<int32_t, float>> cnt;  // id -> (count, bias)
    for (int32_t t : c.generated) ++cnt[t].first;
    for (auto [t, b] : c.bias) cnt[t].second = b;
    c.dev.pen_offset = static_cast<int32_t>(toks.size());
    c.dev.pen_count = static_cast<int32_t>(cnt.size());
    for (auto [t, nb] : cnt)
      toks.push_back(t), counts.push_back(nb.first), bias.push_back(nb.second);
    EXPECT_TRUE(c.dev.validate(V).ok());
    rp.push_back(c.dev);
  }
  toks.push_back(0), counts.push_back(0), bias.push_back(0.f);  // never empty
  const bool any_bias =
      std::any_of(cases.begin(), cases.end(), [](auto& c) { return !c.bias.empty(); });
  DevBuf<float> dl(logits.size()), dp(debug ? logits.size() : 0), db(bias.size());
  DevBuf<SampleRowParams> drp(rows);
  DevBuf<int32_t> dt(toks.size()), dc(counts.size());
  DevBuf<SampleRowOut> dout(rows);
  dl.upload(logits), drp.upload(rp), dt.upload(toks), dc.upload(counts), db.upload(bias);
  dout.poison();
  DevBuf<uint8_t> ws(sample_workspace_bytes(rows));
  ws.poison();  // the kernels must not depend on its contents
  SampleParams p{dl.get(), drp.get(), dt.get(), dc.get(), dout.get(), dp.get(),
                 rows,     V,         V,        ws.get(), ws.bytes()};
  p.pen_bias = any_bias ? db.get() : nullptr;
  EXPECT_TRUE(launch_sample(p, 0).ok());
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  return {dout.download(), debug ? dp.download() : std::vector<float>{}};
}

enum class Shape { kNormal, kPeaked, kFlat, kTies, kPaddingMax };

inline std::vector<float> make_row(std::mt19937_64& rng, Shape s, int V) {
  std::normal_distribution<float> n(0.f, 3.f);
  std::vector<float> r(V);
  for (auto& x : r) x = n(rng);
  if (s == Shape::kPeaked) {
    for (int i = 0; i < 5; ++i) r[rng() % V] += 18.f + static_cast<float>(i);
  } else if (s == Shape::kFlat) {
    for (auto& x : r) x *= 0.003f;
  } else if (s == Shape::kTies) {
    for (auto& x : r) x = std::round(x);  // large groups of equal values
  } else if (s == Shape::kPaddingMax) {
    for (int i = 200019; i < V; ++i) r[i] = 40.f;  // must never be chosen (vocab_limit)
  }
  return r;
}

inline SampleRowParams rowp(float t, int k, float top_p, float min_p) {
  SampleRowParams d;
  d.temperature = t, d.top_k = k, d.top_p = top_p, d.min_p = min_p;
  return d;
}

}  // namespace gossamer::kern::sampletest

// CudaModelRunner device sampling (SeqChunk::sampling) against the runner's own logits rows:
// greedy = argmax, logprobs = log_softmax (computed here in double), top_k survivors, seeds,
// vocab_limit, mixed host/device chunks, bad requests. Label "gpu".
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <random>
#include <span>
#include <string>

#include "common/test_seed.h"
#include "engine/cuda/cuda_runner.h"

namespace gossamer {
namespace {

// The tiny preset (real 201088-row vocabulary) with the head_dim the CUDA kernels need.
ModelConfig small_config() {
  ModelConfig c = preset_config("tiny").value();
  c.head_dim = 64;
  c.hidden_size = 256;
  c.intermediate_size = 256;
  return c;
}

struct RunnerSetup {
  ModelConfig cfg;
  std::unique_ptr<CudaModelRunner> r;
  std::vector<int32_t> table0, table1;
};

RunnerSetup make_runner() {
  RunnerSetup s;
  s.cfg = small_config();
  CudaRunnerOptions o;
  o.max_seq_len = 256;
  o.max_seqs = 4;
  auto r = CudaModelRunner::create_synthetic(s.cfg, o, 11);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  if (r.ok()) s.r = std::move(*r);
  s.table0 = {0, 1, 2, 3};
  s.table1 = {4, 5, 6, 7};
  return s;
}

std::vector<double> log_softmax(std::span<const float> row, int64_t limit) {
  const auto z = row.first(static_cast<size_t>(limit));
  const double mx = *std::max_element(z.begin(), z.end());
  double sum = 0;
  for (float v : z) sum += std::exp(v - mx);
  std::vector<double> out(z.size());
  for (size_t i = 0; i < z.size(); ++i) out[i] = z[i] - mx - std::log(sum);
  return out;
}

TEST(CudaSampling, MatchesTheRunnersLogits) {
  RunnerSetup s = make_runner();
  ASSERT_TRUE(s.r);
  ASSERT_TRUE(s.r->samples_on_device());
  const int64_t V = s.cfg.vocab_size;
  std::vector<int32_t> p0 = {1, 2, 3, 4, 5}, p1 = {9, 8, 7};
  SeqChunk a{p0, 0, s.table0, s.table0, LogitsMode::kLast};
  SeqChunk b{p1, 0, s.table1, s.table1, LogitsMode::kLast};
  std::vector<SeqChunk> chunks = {a, b};
  StepOutput host;
  ASSERT_TRUE(s.r->step(chunks, &host).ok());
  ASSERT_EQ(host.rows, 2);
  ASSERT_TRUE(host.sampled.empty());
  // The same step again (same K/V writes), now sampled on the device: greedy with 5 logprobs
  // and vocab_limit for chunk 0; T = 1, top_k = 4 for chunk 1.
  DeviceSampling g, t;
  g.temperature = 0, g.top_logprobs = 5, g.vocab_limit = 200019;
  t.temperature = 1, t.top_k = 4, t.seed = 1234, t.counter = 7;
  chunks[0].sampling = &g;
  chunks[1].sampling = &t;
  StepOutput dev;
  ASSERT_TRUE(s.r->step(chunks, &dev).ok());
  EXPECT_EQ(dev.rows, 0);
  EXPECT_TRUE(dev.logits.empty());
  ASSERT_EQ(dev.sampled.size(), 2u);
  std::span<const float> row0(host.logits.data(), V), row1(host.logits.data() + V, V);
  const auto lp0 = log_softmax(row0, 200019);
  const int32_t want0 =
      static_cast<int32_t>(std::max_element(row0.begin(), row0.begin() + 200019) - row0.begin());
  EXPECT_EQ(dev.sampled[0].token, want0);
  EXPECT_NEAR(dev.sampled[0].logprob, lp0[want0], 1e-4 * std::max(1.0, std::abs(lp0[want0])));
  ASSERT_EQ(dev.sampled[0].top.size(), 5u);
  std::vector<int32_t> order(200019);
  std::iota(order.begin(), order.end(), 0);
  std::partial_sort(order.begin(), order.begin() + 5, order.end(),
                    [&](int32_t x, int32_t y) { return lp0[x] > lp0[y]; });
  for (int j = 0; j < 5; ++j) EXPECT_EQ(dev.sampled[0].top[j].token, order[j]) << j;
  std::vector<int32_t> top4(static_cast<size_t>(V));
  std::iota(top4.begin(), top4.end(), 0);
  std::partial_sort(top4.begin(), top4.begin() + 4, top4.end(),
                    [&](int32_t x, int32_t y) { return row1[x] > row1[y]; });
  top4.resize(4);
  EXPECT_NE(std::find(top4.begin(), top4.end(), dev.sampled[1].token), top4.end())
      << "T=1 top_k=4 drew " << dev.sampled[1].token;
  // Same seed and counter: same token. Mixed: chunk 0 on the host keeps its logits row.
  chunks[0].sampling = nullptr;
  StepOutput mixed;
  ASSERT_TRUE(s.r->step(chunks, &mixed).ok());
  ASSERT_EQ(mixed.rows, 1);
  ASSERT_EQ(mixed.sampled.size(), 1u);
  EXPECT_EQ(mixed.sampled[0].token, dev.sampled[1].token);
  double num = 0, den = 0;
  for (int64_t i = 0; i < V; ++i) {
    num += std::pow(double(mixed.logits[i]) - row0[i], 2), den += std::pow(double(row0[i]), 2);
  }
  EXPECT_LT(std::sqrt(num / den), 1e-6) << "the host row of a mixed step";
  // logit_bias lists: chunk 0 penalises its two best ids (no bias: zeros in the step's bias
  // array), chunk 1 lifts its worst id by 100 (count 0) after chunk 0's pairs.
  std::vector<int32_t> order0(static_cast<size_t>(V));
  std::iota(order0.begin(), order0.end(), 0);
  std::sort(order0.begin(), order0.end(), [&](int32_t x, int32_t y) {
    return row0[x] > row0[y] || (row0[x] == row0[y] && x < y);
  });
  std::vector<int32_t> pen_t = {std::min(order0[0], order0[1]), std::max(order0[0], order0[1])};
  std::vector<int32_t> pen_c = {1, 1}, bias_t = {0}, bias_c = {0};
  const auto worst1 = std::min_element(row1.begin(), row1.end()) - row1.begin();
  bias_t[0] = static_cast<int32_t>(worst1);
  std::vector<float> bias_v = {100.f};
  DeviceSampling pg, bg;
  pg.temperature = 0, pg.presence_penalty = 1000, pg.penalty_tokens = pen_t;
  pg.penalty_counts = pen_c;
  bg.temperature = 0, bg.penalty_tokens = bias_t, bg.penalty_counts = bias_c;
  bg.penalty_bias = bias_v;
  chunks[0].sampling = &pg, chunks[1].sampling = &bg;
  StepOutput biased;
  ASSERT_TRUE(s.r->step(chunks, &biased).ok());
  ASSERT_EQ(biased.sampled.size(), 2u);
  EXPECT_EQ(biased.sampled[0].token, order0[2]) << "penalties without a bias list";
  EXPECT_EQ(biased.sampled[1].token, worst1) << "logit_bias +100 on the lowest logit";
}

TEST(CudaSampling, RejectsBadRequests) {
  RunnerSetup s = make_runner();
  ASSERT_TRUE(s.r);
  std::vector<int32_t> p0 = {1, 2, 3};
  DeviceSampling d;
  SeqChunk c{p0, 0, s.table0, s.table0, LogitsMode::kNone};
  c.sampling = &d;
  StepOutput out;
  EXPECT_FALSE(s.r->step({&c, 1}, &out).ok()) << "sampling on a kNone chunk";
  c.logits = LogitsMode::kLast;
  d.top_p = 0;
  Status st = s.r->step({&c, 1}, &out);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("top_p"), std::string::npos) << st.ToString();
  d.top_p = 1;
  std::vector<int32_t> toks = {5, 999999}, counts = {1, 2};
  d.presence_penalty = 1, d.penalty_tokens = toks, d.penalty_counts = counts;
  st = s.r->step({&c, 1}, &out);
  EXPECT_NE(st.message().find("penalty token"), std::string::npos) << st.ToString();
}

// One scored row against the host's logits row: the target's log-probability (relative error,
// floor 1; -inf for a masked target) and the top-k alternatives (only a near-tie may swap two).
// Returns the logprob error.
double check_scored_row(const SampledToken& got, std::span<const float> logits, int64_t limit,
                        int32_t target, int64_t k, const std::string& where) {
  const auto lp = log_softmax(logits, limit);
  EXPECT_EQ(got.token, target) << where;
  double err = 0;
  if (target >= limit) {
    EXPECT_EQ(got.logprob, -INFINITY) << where;
  } else {
    err = std::abs(got.logprob - lp[target]) / std::max(1.0, std::abs(lp[target]));
    EXPECT_LT(err, 1e-4) << where;  // the rows themselves differ by the step's rounding (~1e-6)
  }
  EXPECT_EQ(got.top.size(), static_cast<size_t>(k)) << where;
  if (got.top.size() != static_cast<size_t>(k)) return err;
  std::vector<int32_t> order(static_cast<size_t>(limit));
  std::iota(order.begin(), order.end(), 0);
  std::partial_sort(order.begin(), order.begin() + k, order.end(),
                    [&](int32_t x, int32_t y) { return lp[x] > lp[y]; });
  for (int64_t i = 0; i < k; ++i) {
    if (got.top[i].token != order[i]) {
      EXPECT_NEAR(lp[got.top[i].token], lp[order[i]], 1e-5) << where << " top " << i;
    }
  }
  return err;
}

// Prompt scoring (SeqChunk::scoring) against the same rows copied to the host, over several
// forwards (max_logit_rows 16 < 40 rows), beside a device-sampled chunk in the same step.
TEST(CudaSampling, ScoredRowsMatchTheHostRows) {
  const ModelConfig cfg = small_config();
  CudaRunnerOptions o;
  o.max_seq_len = 256, o.max_seqs = 4, o.max_logit_rows = 16;
  std::mt19937_64 rng(testing::fresh_seed("cuda scored rows"));
  auto made = CudaModelRunner::create_synthetic(cfg, o, rng());
  ASSERT_TRUE(made.ok()) << made.status().ToString();
  CudaModelRunner& r = **made;
  const int64_t V = cfg.vocab_size, limit = 200019, k = 5;
  std::vector<int32_t> p0(40), p1 = {9, 8, 7}, t0 = {0, 1, 2, 3}, t1 = {4, 5, 6, 7};
  for (auto& t : p0) t = static_cast<int32_t>(rng() % limit);
  std::vector<SeqChunk> chunks = {{p0, 0, t0, t0, LogitsMode::kAll},
                                  {p1, 0, t1, t1, LogitsMode::kLast}};
  StepOutput host;
  ASSERT_TRUE(r.step(chunks, &host).ok());
  ASSERT_EQ(host.rows, 41);
  // Row j scores p0[j + 1]; the last row (-1) and row 5 (-1) stay host rows; chunk 1 greedy.
  std::vector<int32_t> targets(p0.size(), -1);
  for (size_t j = 0; j + 1 < p0.size(); ++j) targets[j] = p0[j + 1];
  targets[5] = -1;
  targets[7] = static_cast<int32_t>(limit + 3);  // masked: -inf
  DeviceScoring sc{targets, k, limit};
  DeviceSampling g;
  g.temperature = 0;
  chunks[0].scoring = &sc, chunks[1].sampling = &g;
  StepOutput dev;
  ASSERT_TRUE(r.step(chunks, &dev).ok());
  ASSERT_EQ(dev.rows, 2);
  ASSERT_EQ(dev.scored.size(), 38u);
  ASSERT_EQ(dev.sampled.size(), 1u);
  auto rel = [&](std::span<const float> a, std::span<const float> b) {
    double num = 0, den = 0;
    for (size_t i = 0; i < a.size(); ++i)
      num += std::pow(double(a[i]) - b[i], 2), den += b[i] * b[i];
    return std::sqrt(num / den);
  };
  std::span<const float> hl(host.logits), dl(dev.logits);
  EXPECT_LT(rel(dl.subspan(0, V), hl.subspan(5 * V, V)), 1e-6) << "host row 5";
  EXPECT_LT(rel(dl.subspan(V, V), hl.subspan(39 * V, V)), 1e-6) << "host row 39";
  size_t e = 0;
  double worst = 0;
  for (size_t j = 0; j + 1 < p0.size(); ++j) {
    if (targets[j] < 0) continue;
    const double err = check_scored_row(dev.scored[e++], hl.subspan(j * V, V), limit, targets[j], k,
                                        "row " + std::to_string(j));
    worst = std::max(worst, err);
  }
  std::printf("scored rows: worst logprob error %.2e (relative, floor 1)\n", worst);
  const int32_t want1 = static_cast<int32_t>(
      std::max_element(hl.begin() + 40 * V, hl.begin() + 41 * V) - (hl.begin() + 40 * V));
  EXPECT_EQ(dev.sampled[0].token, want1);
  // Misuse: targets of the wrong length, scoring on a kLast chunk.
  std::vector<int32_t> short_targets(3, 1);
  DeviceScoring bad{short_targets, 0, 0};
  chunks[0].scoring = &bad;
  Status st = r.step(chunks, &dev);
  EXPECT_NE(st.message().find("targets"), std::string::npos) << st.ToString();
  chunks[0].scoring = nullptr;
  chunks[1].sampling = nullptr;
  chunks[1].scoring = &sc;
  st = r.step(chunks, &dev);
  EXPECT_NE(st.message().find("scoring needs"), std::string::npos) << st.ToString();
}

// Not a pass/fail check: step() time of a 256-row scored prompt chunk (tiny model), rows copied
// to the host (the scheduler then reduces each one with score_token, not timed here) vs scored
// on the device (5 alternatives).
TEST(CudaSampling, StepTimeHostRowsVsDeviceScoring) {
  const ModelConfig cfg = small_config();
  CudaRunnerOptions o;
  o.max_seq_len = 512, o.max_seqs = 1;
  auto made = CudaModelRunner::create_synthetic(cfg, o, 3);
  ASSERT_TRUE(made.ok()) << made.status().ToString();
  std::vector<int32_t> toks(256), table(32);
  std::iota(table.begin(), table.end(), 0);
  for (size_t i = 0; i < toks.size(); ++i) toks[i] = static_cast<int32_t>(1 + 7 * i);
  std::vector<int32_t> targets(toks.begin() + 1, toks.end());
  targets.push_back(-1);
  DeviceScoring sc{targets, 5, 200019};
  for (bool device : {false, true}) {
    SeqChunk c{toks, 0, table, table, LogitsMode::kAll};
    if (device) c.scoring = &sc;
    double ms = 0;
    for (int rep = 0; rep < 6; ++rep) {
      StepOutput out;
      const auto t0 = std::chrono::steady_clock::now();
      ASSERT_TRUE((*made)->step({&c, 1}, &out).ok());
      const double t =
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      if (rep > 0) ms += t / 5;
      ASSERT_EQ(out.rows, device ? 1 : 256);
    }
    std::printf("256-row prompt chunk, tiny model: step() %.3f ms with %s\n", ms,
                device ? "the rows scored on the device" : "the rows copied to the host");
  }
}

// Not a pass/fail check: step() time with 64 decode rows, logits copied to the host vs sampled
// on the device (tiny model: the forward is cheap, the 64 x 804 KB copy is not).
TEST(CudaSampling, StepTimeHostLogitsVsDeviceSampling) {
  ModelConfig cfg = small_config();
  CudaRunnerOptions o;
  o.max_seq_len = 64;
  o.max_seqs = 64;
  auto r = CudaModelRunner::create_synthetic(cfg, o, 5);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const int S = 64, steps = 20;
  std::vector<std::vector<int32_t>> tables(S), toks(S);
  for (int s = 0; s < S; ++s) {
    tables[s] = {4 * s, 4 * s + 1, 4 * s + 2, 4 * s + 3};
    toks[s] = {s + 1};
  }
  DeviceSampling d;
  d.temperature = 1, d.top_p = 0.9, d.seed = 3;
  for (bool device : {false, true}) {
    double ms = 0;
    for (int step = 0; step < steps; ++step) {
      std::vector<SeqChunk> chunks;
      for (int s = 0; s < S; ++s) {
        chunks.push_back({std::span<const int32_t>(&toks[s].back(), 1), step, tables[s], tables[s],
                          LogitsMode::kLast, device ? &d : nullptr});
      }
      StepOutput out;
      const auto t0 = std::chrono::steady_clock::now();
      ASSERT_TRUE((*r)->step(chunks, &out).ok());
      if (step > 0) {
        ms += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0)
                  .count();
      }
      for (int s = 0; s < S; ++s) {
        int32_t t = 0;
        if (device) {
          t = out.sampled[s].token;
        } else {
          const float* row = out.logits.data() + static_cast<size_t>(s) * cfg.vocab_size;
          t = static_cast<int32_t>(std::max_element(row, row + cfg.vocab_size) - row);
        }
        ASSERT_TRUE(t >= 0 && t < cfg.vocab_size);
        toks[s].push_back(t);
      }
    }
    std::printf("64 decode rows, tiny model: step() %.3f ms with %s\n", ms / (steps - 1),
                device ? "device sampling (T=1, top_p 0.9)" : "logits copied to the host");
  }
}

}  // namespace
}  // namespace gossamer

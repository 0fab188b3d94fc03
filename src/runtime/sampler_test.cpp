// Sampler tests: hand-checked distributions, equivalences, and statistical checks of the draws.
#include "runtime/sampler.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <random>

#include "common/test_seed.h"

namespace gossamer {
namespace {

using testing::fresh_seed;  // common/test_seed.h

std::vector<float> logs(std::initializer_list<double> probs) {
  std::vector<float> v;
  for (double p : probs) v.push_back(static_cast<float>(std::log(p)));
  return v;
}

GenerationParams params(double temperature = 1.0) {
  GenerationParams p;
  p.temperature = temperature;
  return p;
}

void expect_dist(const SamplingDistribution& d, std::vector<int32_t> ids,
                 std::vector<double> probs) {
  ASSERT_EQ(d.ids, ids);
  ASSERT_EQ(d.probs.size(), probs.size());
  for (size_t i = 0; i < probs.size(); ++i) EXPECT_NEAR(d.probs[i], probs[i], 1e-6) << i;
}

TEST(Sampler, FiltersHandChecked) {
  const auto lg = logs({0.2, 0.5, 0.3});  // sorted: 1 (0.5), 2 (0.3), 0 (0.2)
  auto p = params();
  expect_dist(*sampling_distribution(lg, p, {}), {1, 2, 0}, {0.5, 0.3, 0.2});
  p.top_p = 0.7;  // 0.5 < 0.7 <= 0.8: keep two, renormalised
  expect_dist(*sampling_distribution(lg, p, {}), {1, 2}, {0.625, 0.375});
  p.top_p = 0.5;
  expect_dist(*sampling_distribution(lg, p, {}), {1}, {1.0});
  p = params();
  p.min_p = 0.5;  // keep p >= 0.25
  expect_dist(*sampling_distribution(lg, p, {}), {1, 2}, {0.625, 0.375});
  p = params();
  p.top_k = 2;
  p.top_p = 0.6;  // top-p over the renormalised top-2 {0.625, 0.375}: keep one
  expect_dist(*sampling_distribution(lg, p, {}), {1}, {1.0});
  p = params(2.0);  // probabilities ~ sqrt(p)
  const double s = std::sqrt(0.5) + std::sqrt(0.3) + std::sqrt(0.2);
  expect_dist(*sampling_distribution(lg, p, {}), {1, 2, 0},
              {std::sqrt(0.5) / s, std::sqrt(0.3) / s, std::sqrt(0.2) / s});
  expect_dist(*sampling_distribution(lg, params(0.0), {}), {1}, {1.0});
}

TEST(Sampler, PenaltiesHandChecked) {
  const std::vector<float> lg{1.0f, 1.0f, 1.0f};
  auto p = params(0.0);
  p.presence_penalty = 0.5;
  p.frequency_penalty = 0.25;
  p.logprobs = true;
  p.top_logprobs = 2;
  const std::vector<int32_t> gen{0, 0, 1};  // z = [1 - 0.5 - 0.5, 1 - 0.5 - 0.25, 1]
  std::mt19937_64 rng(1);
  auto t = sample_token(lg, p, gen, rng);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->token, 2);
  const double lse = std::log(std::exp(0.0) + std::exp(0.25) + std::exp(1.0));
  EXPECT_NEAR(t->logprob, 1.0 - lse, 1e-6);
  ASSERT_EQ(t->top.size(), 2u);
  EXPECT_EQ(t->top[0].token, 2);
  EXPECT_EQ(t->top[1].token, 1);
  EXPECT_NEAR(t->top[1].logprob, 0.25 - lse, 1e-6);
  p.presence_penalty = -2.0;  // negative penalties encourage repeats: z = [2.5, 2.75, 1]
  EXPECT_EQ(sample_token(lg, p, gen, rng)->token, 1);
}

TEST(Sampler, LogitBiasHandChecked) {
  const auto lg = logs({0.2, 0.5, 0.3});
  auto p = params(0.0);
  p.logprobs = true;
  p.logit_bias = {{0, static_cast<float>(std::log(4.0))}};  // z = log [0.8, 0.5, 0.3]
  std::mt19937_64 rng(1);
  auto t = sample_token(lg, p, {}, rng);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->token, 0);
  EXPECT_NEAR(t->logprob, std::log(0.8 / 1.6), 1e-6);  // logprobs see the bias
  p = params();
  p.logit_bias = {{1, -100.f}, {2, static_cast<float>(std::log(2.0))}};  // [0.2, ~0, 0.6]
  expect_dist(*sampling_distribution(lg, p, {}), {2, 0, 1}, {0.75, 0.25, 0.0});
  p.presence_penalty = static_cast<double>(static_cast<float>(std::log(2.0)));
  const std::vector<int32_t> gen{2};  // bias and penalty cancel on id 2: back to [0.2, 0.3]
  auto d = sampling_distribution(lg, p, gen);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->ids[0], 2);
  EXPECT_NEAR(d->probs[0], 0.6, 1e-6);
  p.logit_bias = {{3, 1.f}};  // an id beyond the row is ignored by the sampler (the scheduler
  EXPECT_TRUE(sampling_distribution(lg, p, {}).ok());  // rejects it at submission)
}

TEST(Sampler, TopK1IsGreedy) {
  std::mt19937_64 gen_rng(fresh_seed("Sampler.TopK1IsGreedy"));
  std::normal_distribution<float> nd(0.0f, 3.0f);
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<float> lg(50);
    for (auto& v : lg) v = nd(gen_rng);
    auto p = params(1.7);
    p.top_k = 1;
    const auto a = sample_token(lg, p, {}, gen_rng);
    const auto g = sample_token(lg, params(0.0), {}, gen_rng);
    ASSERT_TRUE(a.ok() && g.ok());
    ASSERT_EQ(a->token, g->token);
    ASSERT_EQ(g->token, std::max_element(lg.begin(), lg.end()) - lg.begin());
  }
}

// Empirical frequencies of 40000 draws match softmax(z / T) (Pearson chi-square, df = 5: the
// 1e-6 upper quantile is about 35.9), and top-p never draws outside its nucleus.
TEST(Sampler, FrequenciesMatchSoftmax) {
  std::mt19937_64 rng(fresh_seed("Sampler.Frequencies"));
  const std::vector<float> lg{0.3f, -1.0f, 2.0f, 0.0f, 1.2f, -0.4f};
  const double T = 0.8;
  std::vector<double> p(lg.size());
  double z = 0;
  for (size_t i = 0; i < lg.size(); ++i) z += (p[i] = std::exp(lg[i] / T));
  for (double& v : p) v /= z;
  const int n = 40000;
  std::vector<int> count(lg.size(), 0);
  for (int i = 0; i < n; ++i)
    ++count[static_cast<size_t>(sample_token(lg, params(T), {}, rng)->token)];
  double chi2 = 0;
  for (size_t i = 0; i < lg.size(); ++i) chi2 += std::pow(count[i] - n * p[i], 2) / (n * p[i]);
  std::printf("chi-square %.2f (df 5)\n", chi2);
  EXPECT_LT(chi2, 35.9);
  auto tp = params(T);
  tp.top_p = 0.8;  // sorted probs: id 2 0.609, id 4 0.224, ...: nucleus is {2, 4}
  const auto d = *sampling_distribution(lg, tp, {});
  ASSERT_EQ(d.ids, (std::vector<int32_t>{2, 4}));
  for (int i = 0; i < 2000; ++i) {
    const int32_t t = sample_token(lg, tp, {}, rng)->token;
    ASSERT_TRUE(t == 2 || t == 4) << t;
  }
}

TEST(Sampler, SeedReproducible) {
  const uint64_t seed = fresh_seed("Sampler.SeedReproducible");
  std::vector<float> lg(100);
  std::mt19937_64 g(seed);
  std::normal_distribution<float> nd;
  for (auto& v : lg) v = nd(g);
  auto run = [&](uint64_t s) {
    std::mt19937_64 rng = make_request_rng(s);
    std::vector<int32_t> out;
    for (int i = 0; i < 64; ++i) out.push_back(sample_token(lg, params(1.0), out, rng)->token);
    return out;
  };
  EXPECT_EQ(run(seed), run(seed));
  EXPECT_NE(run(seed), run(seed + 1));  // 64 draws over ~100 tokens: equal w.p. ~1e-100
}

TEST(Sampler, BadInputsAreErrors) {
  std::mt19937_64 rng(0);
  std::vector<float> lg{0.0f, NAN};
  auto r = sample_token(lg, params(), {}, rng);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("logits[1] is NaN"), std::string::npos);
  EXPECT_FALSE(sample_token({}, params(), {}, rng).ok());
  lg[1] = 1.0f;
  auto p = params(-1.0);
  EXPECT_NE(sample_token(lg, p, {}, rng).status().message().find("temperature"), std::string::npos);
  p = params();
  p.top_p = 0.0;
  EXPECT_NE(sample_token(lg, p, {}, rng).status().message().find("top_p"), std::string::npos);
  p = params();
  p.top_k = -3;
  EXPECT_FALSE(sample_token(lg, p, {}, rng).ok());
}

TEST(Sampler, VocabLimitMasksPaddingIds) {
  // ids 3 and 4 stand for the padding rows: the largest logits, never sampled.
  const auto lg = logs({0.1, 0.2, 0.1, 0.3, 0.3});
  auto p = params(0.0);
  p.vocab_limit = 3;
  p.logprobs = true;
  p.top_logprobs = 5;
  std::mt19937_64 rng(1);
  auto t = sample_token(lg, p, {}, rng);
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->token, 1);
  EXPECT_NEAR(t->logprob, std::log(0.5), 1e-6);  // renormalised over ids 0..2: 0.2 / 0.4
  ASSERT_EQ(t->top.size(), 3u);                  // only unmasked ids are reported
  EXPECT_EQ(t->top[0].token, 1);
  p.temperature = 1.0;
  expect_dist(*sampling_distribution(lg, p, {}), {1, 0, 2}, {0.5, 0.25, 0.25});
  for (int i = 0; i < 200; ++i) EXPECT_LT(sample_token(lg, p, {}, rng)->token, 3);
  p.vocab_limit = -1;
  EXPECT_NE(sample_token(lg, p, {}, rng).status().message().find("vocab_limit"), std::string::npos);
}

TEST(Sampler, NonFiniteRowsAreErrors) {
  std::mt19937_64 rng(0);
  std::vector<float> lg{0.0f, INFINITY};
  EXPECT_NE(sample_token(lg, params(), {}, rng).status().message().find("+inf"), std::string::npos);
  lg = {-INFINITY, -INFINITY};
  EXPECT_NE(sample_token(lg, params(), {}, rng).status().message().find("-inf"), std::string::npos);
  lg = {-INFINITY, 2.0f, -INFINITY};  // masked ids (a TokenConstraint) are fine
  auto t = sample_token(lg, params(), {}, rng);
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->token, 1);
  EXPECT_FLOAT_EQ(t->logprob, 0.f);
}

// Filters cut the order of z (ties to the lower id), not of the rounded probabilities. At
// T = 1e30 every probability rounds to 1/4; at T = 0.3 ids 1 and 3 both underflow to 0.
TEST(Sampler, FiltersOrderByLogitNotRoundedProbability) {
  auto p = params(1e30);
  p.top_k = 2;
  const std::vector<float> flat{-5.f, 1.f, 3.f, 2.f};
  expect_dist(*sampling_distribution(flat, p, {}), {2, 3}, {0.5, 0.5});
  p = params(0.3);
  p.top_k = 3;  // z / T: 33333.3, -33333.3, 33331.7, -33300: ids 0, 2, then 3 (not 1)
  const std::vector<float> huge{1e4f, -1e4f, 9999.5f, -9990.f};
  const double p2 = 1 / (1 + std::exp(0.5 / 0.3));
  expect_dist(*sampling_distribution(huge, p, {}), {0, 2, 3}, {1 - p2, p2, 0.0});
}

// A tiny temperature is greedy in the limit: z / T would overflow to +inf (NaN probabilities,
// and the least likely id drawn); the sampler divides z - max z.
TEST(Sampler, TinyTemperatureIsGreedy) {
  const std::vector<float> lg{1.f, 3.f, 2.f, -INFINITY};
  auto p = params(1e-320);
  expect_dist(*sampling_distribution(lg, p, {}), {1, 2, 0, 3}, {1.0, 0.0, 0.0, 0.0});
  p.top_p = 0.5, p.min_p = 0.1;
  expect_dist(*sampling_distribution(lg, p, {}), {1}, {1.0});
  std::mt19937_64 rng(1);
  for (int i = 0; i < 100; ++i) ASSERT_EQ(sample_token(lg, params(1e-320), {}, rng)->token, 1);
}

// Rounding can leave the running sum of the survivors' probabilities below u (u near 1; about
// one row in ten at u = 1 - 2^-53). The draw then takes the last survivor of positive
// probability, never a masked (-inf) id listed after it.
TEST(Sampler, DrawNeverTakesZeroProbabilitySurvivor) {
  std::mt19937_64 rng(fresh_seed("Sampler.DrawNeverTakesZeroProbabilitySurvivor"));
  std::normal_distribution<float> nd(0.0f, 2.0f);
  const double top = std::nextafter(1.0, 0.0);
  int short_sums = 0;
  for (int trial = 0; trial < 500; ++trial) {
    std::vector<float> lg(2 + rng() % 8);
    for (auto& v : lg) v = nd(rng);
    lg.push_back(-INFINITY);  // a TokenConstraint's mask: a survivor of probability 0
    const auto d = *sampling_distribution(lg, params(), {});
    ASSERT_EQ(d.ids.back(), static_cast<int32_t>(lg.size() - 1));
    double u = top;
    for (double q : d.probs) u -= q;
    short_sums += u >= 0;
    EXPECT_EQ(draw_token(d, top), d.ids[d.ids.size() - 2]) << trial;
    EXPECT_EQ(draw_token(d, 0.0), d.ids[0]);
    const double v = uniform01(rng);  // otherwise: the first id whose cumulative sum passes v
    double cum = 0;
    size_t i = 0;
    while (i + 2 < d.ids.size() && (cum += d.probs[i]) <= v) ++i;
    EXPECT_EQ(draw_token(d, v), d.ids[i]) << trial << " u " << v;
  }
  std::printf("%d of 500 rows: running sum below 1 - 2^-53\n", short_sums);
  EXPECT_GT(short_sums, 0);  // the case above was exercised
}

}  // namespace
}  // namespace gossamer

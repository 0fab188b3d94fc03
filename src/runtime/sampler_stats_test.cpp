// The sampler against an independent brute-force reference over the parameter grid
// (temperature x top_k x top_p x min_p, with ties, -inf, huge logits, logit_bias, penalties and
// vocab_limit), and the draws' frequencies against the reference distribution.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <random>
#include <vector>

#include "common/test_seed.h"
#include "runtime/sampler.h"

namespace gossamer {
namespace {

using testing::fresh_seed;  // common/test_seed.h

struct Case {
  std::vector<float> logits;
  GenerationParams p;
  std::vector<int32_t> generated;
};

struct Ref {
  std::vector<int32_t> ids;  // survivors, descending z (ties: lower id)
  std::vector<double> probs;
  std::vector<double> logprob;  // log_softmax(z) over the unmasked ids
  bool knife_edge = false;      // a top_p / min_p comparison within 1e-9 of its threshold
};

// The documented rule, written out directly: z over ids < vocab_limit, with bias, then
// penalties; a stable sort by z; the cuts one after another on that order.
Ref reference(const Case& c) {
  const GenerationParams& p = c.p;
  size_t n = c.logits.size();
  if (p.vocab_limit > 0) n = std::min(n, static_cast<size_t>(p.vocab_limit));
  std::vector<double> z(c.logits.begin(), c.logits.begin() + static_cast<std::ptrdiff_t>(n));
  for (const auto& [id, b] : p.logit_bias) {
    if (id >= 0 && static_cast<size_t>(id) < n) z[id] += b;
  }
  std::map<int32_t, int> count;
  for (int32_t t : c.generated) ++count[t];
  for (const auto& [t, k] : count) {
    if (t >= 0 && static_cast<size_t>(t) < n) z[t] -= p.presence_penalty + p.frequency_penalty * k;
  }
  Ref r;
  const double zmax = *std::max_element(z.begin(), z.end());
  double se = 0;
  for (double v : z) se += std::exp(v - zmax);
  for (double v : z) r.logprob.push_back(v - zmax - std::log(se));
  std::vector<int32_t> order(n);
  for (size_t i = 0; i < n; ++i) order[i] = static_cast<int32_t>(i);
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return z[a] > z[b]; });
  if (p.temperature == 0) return r.ids = {order[0]}, r.probs = {1.0}, r;
  std::vector<double> w(n);  // unnormalised softmax(z / T)
  for (size_t i = 0; i < n; ++i) w[i] = std::exp((z[i] - zmax) / p.temperature);
  size_t keep = p.top_k > 0 ? std::min(n, static_cast<size_t>(p.top_k)) : n;
  double mass = 0;
  for (size_t j = 0; j < keep; ++j) mass += w[order[j]];
  if (p.top_p < 1) {
    double cum = 0;
    size_t j = 0;
    for (; j < keep; ++j) {
      cum += w[order[j]] / mass;
      r.knife_edge |= std::abs(cum - p.top_p) < 1e-9;
      if (cum >= p.top_p) break;
    }
    keep = std::min(keep, j + 1);
  }
  for (size_t j = 1; j < keep && p.min_p > 0; ++j) {
    const double ratio = w[order[j]] / w[order[0]];
    r.knife_edge |= std::abs(ratio - p.min_p) < 1e-9;
    if (ratio < p.min_p) keep = j;
  }
  double total = 0;
  for (size_t j = 0; j < keep; ++j) total += w[order[j]];
  for (size_t j = 0; j < keep; ++j) {
    r.ids.push_back(order[j]);
    r.probs.push_back(w[order[j]] / total);
  }
  return r;
}

// Rows of kind 0: normal(0, 3); 1: small integers (many ties); 2: 40% -inf; 3: +-1e4 and
// near-1e4 values; 4: normal(0, 1e-6). Random vocab_limit, logit_bias and penalties on some.
Case random_case(std::mt19937_64& rng, int kind) {
  Case c;
  const int V = 8 + static_cast<int>(rng() % 57);
  std::normal_distribution<float> nd(0.f, 1.f);
  const float huge[] = {1e4f, -1e4f, 0.f, 9999.f, 9997.f, -9998.f};
  for (int i = 0; i < V; ++i) {
    if (kind == 0) c.logits.push_back(3 * nd(rng));
    if (kind == 1) c.logits.push_back(static_cast<float>(rng() % 6) - 3.f);
    if (kind == 2) c.logits.push_back(rng() % 5 < 2 ? -INFINITY : 2 * nd(rng));
    if (kind == 3) c.logits.push_back(huge[rng() % 6]);
    if (kind == 4) c.logits.push_back(1e-6f * nd(rng));
  }
  c.logits[rng() % V] = 1.f;  // a finite logit, also under vocab_limit when it is that id
  if (rng() % 4 == 0) c.p.vocab_limit = 1 + static_cast<int64_t>(rng() % V);
  if (c.p.vocab_limit > 0 && std::all_of(c.logits.begin(), c.logits.begin() + c.p.vocab_limit,
                                         [](float v) { return v == -INFINITY; })) {
    c.p.vocab_limit = 0;
  }
  if (rng() % 3 == 0) {
    for (int i = 0; i < 3; ++i)
      c.p.logit_bias.emplace_back(static_cast<int32_t>(rng() % V), 4 * nd(rng));
  }
  if (rng() % 3 == 0) {
    c.p.presence_penalty = std::abs(nd(rng)), c.p.frequency_penalty = 0.5 * nd(rng);
    for (int i = 0; i < 12; ++i) c.generated.push_back(static_cast<int32_t>(rng() % (V + 2)));
  }
  return c;
}

void expect_matches(const Case& c, const Ref& want, const SamplingDistribution& got) {
  ASSERT_EQ(got.ids, want.ids);
  for (size_t j = 0; j < want.ids.size(); ++j) {
    EXPECT_NEAR(got.probs[j], want.probs[j], 1e-12 + 1e-12 * want.probs[j]) << j;
  }
  std::mt19937_64 rng(1);
  GenerationParams p = c.p;
  p.logprobs = true, p.top_logprobs = 20;
  const auto t = sample_token(c.logits, p, c.generated, rng);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_NE(std::find(want.ids.begin(), want.ids.end(), t->token), want.ids.end());
  EXPECT_NEAR(t->logprob, want.logprob[t->token], 1e-6 * std::max(1.0, -want.logprob[t->token]));
  std::vector<int32_t> by_lp(want.logprob.size());
  for (size_t i = 0; i < by_lp.size(); ++i) by_lp[i] = static_cast<int32_t>(i);
  std::stable_sort(by_lp.begin(), by_lp.end(),
                   [&](int32_t a, int32_t b) { return want.logprob[a] > want.logprob[b]; });
  ASSERT_EQ(t->top.size(), std::min<size_t>(20, by_lp.size()));
  for (size_t j = 0; j < t->top.size(); ++j) EXPECT_EQ(t->top[j].token, by_lp[j]) << j;
}

const double kTemps[] = {0, 0.3, 1, 1.7};
const double kTopP[] = {0.1, 0.5, 0.9, 1};
const double kMinP[] = {0, 0.05, 0.5};

TEST(SamplerStats, GridMatchesReference) {
  std::mt19937_64 rng(fresh_seed("SamplerStats.GridMatchesReference"));
  int rows = 0, edges = 0;
  for (double T : kTemps) {
    for (int64_t k : {0, 1, 2, 50, -1}) {  // -1: the row's vocabulary
      for (double top_p : kTopP) {
        for (double min_p : kMinP) {
          for (int kind = 0; kind < 5; ++kind) {
            Case c = random_case(rng, kind);
            c.p.temperature = T, c.p.top_p = top_p, c.p.min_p = min_p;
            c.p.top_k = k >= 0 ? k : static_cast<int64_t>(c.logits.size());
            const Ref want = reference(c);
            const auto got = sampling_distribution(c.logits, c.p, c.generated);
            ASSERT_TRUE(got.ok()) << got.status().ToString();
            ++rows;
            if (want.knife_edge) {  // exact ties (kind 1) put cum on top_p: one id either way
              ++edges;
              const auto& [a, b] = std::minmax(
                  got->ids, want.ids, [](auto& x, auto& y) { return x.size() < y.size(); });
              ASSERT_LE(b.size() - a.size(), 1u);
              ASSERT_TRUE(std::equal(a.begin(), a.end(), b.begin()));
              continue;
            }
            SCOPED_TRACE(::testing::Message() << "T " << T << " top_k " << c.p.top_k << " top_p "
                                              << top_p << " min_p " << min_p << " kind " << kind);
            expect_matches(c, want, *got);
            if (HasFatalFailure()) return;
          }
        }
      }
    }
  }
  std::printf("%d rows checked, %d at a knife edge (set checked to one id)\n", rows, edges);
  EXPECT_LE(edges, rows / 20);
}

// 20000 draws for each of 12 random (row, parameters): every count within a Bernstein bound of
// n * p (union bound over every id of every case: false failure < 1e-6), none off the support.
TEST(SamplerStats, FilteredFrequenciesMatchReference) {
  std::mt19937_64 rng(fresh_seed("SamplerStats.FilteredFrequenciesMatchReference"));
  constexpr int kCases = 12, kDraws = 20000;
  const double L = std::log(2.0 * kCases * 64 / 1e-6);
  double worst = 0;  // the largest |count - n p| / bound
  for (int i = 0; i < kCases; ++i) {
    Case c = random_case(rng, i % 3);
    c.p.temperature = kTemps[1 + i % 3];
    c.p.top_k = std::vector<int64_t>{0, 2, 5, 50}[(i / 3) % 4];
    c.p.top_p = kTopP[rng() % 4];
    c.p.min_p = kMinP[rng() % 3];
    const Ref want = reference(c);
    std::vector<int> count(c.logits.size(), 0);
    for (int d = 0; d < kDraws; ++d) {
      const auto t = sample_token(c.logits, c.p, c.generated, rng);
      ASSERT_TRUE(t.ok());
      ++count[t->token];
    }
    std::vector<double> prob(c.logits.size(), 0.0);
    for (size_t j = 0; j < want.ids.size(); ++j) prob[want.ids[j]] = want.probs[j];
    for (size_t v = 0; v < count.size(); ++v) {
      const double np = kDraws * prob[v];
      const double bound = std::sqrt(2 * np * (1 - prob[v]) * L) + 2 * L / 3;
      if (prob[v] == 0) {
        ASSERT_EQ(count[v], 0) << "case " << i << " id " << v;
      }
      worst = std::max(worst, std::abs(count[v] - np) / bound);
      EXPECT_LE(std::abs(count[v] - np), bound) << "case " << i << " id " << v << " p " << prob[v];
    }
  }
  std::printf("worst |count - n p| / bound: %.3f\n", worst);
}

}  // namespace
}  // namespace gossamer

// Scoring rows (SampleRowParams::force_token) of the device sampler against the CPU scorer
// score_token (runtime/sampler.h, double precision): the forced id comes back with
// log_softmax(z)[id] (-inf at or past vocab_limit) and the top_logprobs alternatives, whatever
// the row's temperature or filters; a non-finite row is reported, not scored; out-of-range ids
// are refused by validate().
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "common/test_seed.h"
#include "kernels/sample/params.h"
#include "kernels/sample/sample_test_util.h"
#include "runtime/sampler.h"

namespace gossamer::kern {
namespace {

// Runs `rp.size()` rows of `logits` ([rows, V]) through one launch (no penalty lists).
std::vector<SampleRowOut> run_rows(const std::vector<float>& logits,
                                   const std::vector<SampleRowParams>& rp, int V) {
  std::vector<sampletest::RowCase> cases;
  for (const SampleRowParams& p : rp) cases.push_back({p, {}, {}});
  return sampletest::run_device(logits, std::move(cases), V, /*debug=*/false).out;
}

// Rows of one of four shapes; `t` the row's index.
std::vector<float> make_row(std::mt19937_64& rng, int V, int t) {
  std::normal_distribution<float> n(0.f, 2.5f);
  std::vector<float> r(V);
  for (auto& x : r) x = n(rng);
  if (t % 4 == 1) {
    for (int i = 0; i < 4; ++i) r[rng() % V] += 15.f;  // peaked
  } else if (t % 4 == 2) {
    for (auto& x : r) x = std::round(x);  // ties
  } else if (t % 4 == 3) {
    for (int i = V - 64; i < V; ++i) r[i] = 30.f;  // the masked tail holds the maximum
  }
  return r;
}

void check_scores(int V, int rows, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<float> logits;
  std::vector<SampleRowParams> rp(rows);
  for (int t = 0; t < rows; ++t) {
    const std::vector<float> r = make_row(rng, V, t);
    logits.insert(logits.end(), r.begin(), r.end());
    SampleRowParams& p = rp[t];
    // vocab_limit: off (0), or below V: 1..50 ids masked, or the 64 ids of the masked maximum.
    p.vocab_limit = t % 4 == 3 ? V - 64 : (t % 3 == 0 ? 0 : V - 1 - static_cast<int>(rng() % 50));
    p.top_logprobs = static_cast<int32_t>(rng() % (kMaxTopLogprobs + 1));
    // The target: any id, an id at / past the limit (-inf), or the row's argmax below it.
    const int lim = p.vocab_limit > 0 ? p.vocab_limit : V;
    p.force_token = static_cast<int32_t>(rng() % V);
    if (t % 5 == 1 && lim < V) p.force_token = lim + (V - 1 - lim) / 2;
    if (t % 5 == 2) {
      p.force_token =
          static_cast<int32_t>(std::max_element(r.begin(), r.begin() + lim) - r.begin());
    }
    // Temperature and filters must not matter to a forced row.
    if (t % 2) p.temperature = 0.7f, p.top_k = 40, p.top_p = 0.9f, p.seed = rng();
    ASSERT_TRUE(p.validate(V).ok()) << p.validate(V).ToString();
  }
  const std::vector<SampleRowOut> got = run_rows(logits, rp, V);
  double worst = 0;
  for (int t = 0; t < rows; ++t) {
    const std::string where = "row " + std::to_string(t) + " V " + std::to_string(V);
    std::span<const float> row(logits.data() + static_cast<size_t>(t) * V, V);
    auto want = score_token(row, rp[t].force_token, rp[t].top_logprobs, rp[t].vocab_limit);
    ASSERT_TRUE(want.ok()) << where;
    ASSERT_EQ(got[t].status, kSampleOk) << where;
    EXPECT_EQ(got[t].token, rp[t].force_token) << where;
    if (std::isinf(want->logprob)) {
      EXPECT_EQ(got[t].logprob, -INFINITY) << where;
    } else {
      const double e =
          std::abs(got[t].logprob - want->logprob) / std::max(1.0, std::abs(double(want->logprob)));
      worst = std::max(worst, e);
      EXPECT_LE(e, 2e-6) << where << ": " << got[t].logprob << " vs " << want->logprob;
    }
    ASSERT_EQ(got[t].n_top, static_cast<int>(want->top.size())) << where;
    for (int j = 0; j < got[t].n_top; ++j) {
      // Ids agree except where two logprobs tie within float rounding (ties: lower id first on
      // both sides, so exact ties agree too).
      const float a = want->top[j].logprob, b = got[t].top_logprobs[j];
      EXPECT_LE(std::abs(a - b), 2e-6 * std::max(1.f, std::abs(a))) << where << " top " << j;
      if (got[t].top_ids[j] != want->top[j].token) {
        EXPECT_EQ(row[got[t].top_ids[j]], row[want->top[j].token]) << where << " top " << j;
      }
    }
  }
  std::printf("V %d, %d rows: worst logprob error %.2e (relative, floor 1)\n", V, rows, worst);
}

TEST(DeviceScoring, ForcedRowsMatchScoreToken) {
  const uint64_t seed = gossamer::testing::fresh_seed("DeviceScoring.ForcedRowsMatchScoreToken");
  check_scores(201088, 24, seed);
  check_scores(5000, 40, seed ^ 0x9e37);  // 3 blocks, the last one partial
}

TEST(DeviceScoring, NonFiniteRowsAndBadTargets) {
  constexpr int V = 4096;
  std::vector<float> logits(2 * V, 0.5f);
  logits[V + 17] = NAN;
  std::vector<SampleRowParams> rp(2);
  rp[0].force_token = 3, rp[1].force_token = 3;
  rp[0].top_logprobs = 2;
  const std::vector<SampleRowOut> got = run_rows(logits, rp, V);
  EXPECT_EQ(got[0].status, kSampleOk);
  EXPECT_NEAR(got[0].logprob, -std::log(static_cast<double>(V)), 1e-5);
  EXPECT_EQ(got[0].n_top, 2);
  EXPECT_EQ(got[0].top_ids[0], 0);  // all equal: the lowest ids
  EXPECT_EQ(got[0].top_ids[1], 1);
  EXPECT_EQ(got[1].status, kSampleNonFinite);
  SampleRowParams bad;
  bad.force_token = V;
  EXPECT_NE(bad.validate(V).message().find("force_token"), std::string::npos);
  bad.force_token = -2;
  EXPECT_NE(bad.validate(V).message().find("force_token"), std::string::npos);
}

}  // namespace
}  // namespace gossamer::kern

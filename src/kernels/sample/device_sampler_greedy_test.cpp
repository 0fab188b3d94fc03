// Device sampler (launch_sample) against the reference CPU sampler (runtime/sampler.h): greedy,
// seeds, logprobs, penalties and logit_bias on full-vocabulary rows; non-finite and all-masked
// rows, bad params. Survivor sets and the chi-square of the draws: device_sampler_test.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "kernels/common/testing.h"
#include "kernels/sample/params.h"
#include "kernels/sample/sample_test_util.h"
#include "runtime/sampler.h"

namespace gossamer::kern {
namespace {

using sampletest::cpu_params;
using sampletest::DevResult;
using sampletest::kV;
using sampletest::make_row;
using sampletest::RowCase;
using sampletest::rowp;
using sampletest::run_device;
using sampletest::Shape;

TEST(DeviceSampler, GreedySeedsLogprobsPenalties) {
  std::mt19937_64 rng(testing::fresh_seed("device sampler greedy/logprobs"));
  std::vector<RowCase> cases;
  std::vector<float> logits;
  for (int i = 0; i < 12; ++i) {
    auto r = make_row(rng, i % 3 == 0 ? Shape::kTies : Shape::kNormal, kV);
    RowCase c{rowp(i < 6 ? 0.f : 1.f, 0, 1.f, 0.f), {}, {}};
    if (i == 8) c.dev.top_k = 40;  // filtered draws: the alternatives from the candidates
    if (i == 9) c.dev.top_p = 0.9f, c.dev.min_p = 0.05f;
    c.dev.top_logprobs = 1 + i % kMaxTopLogprobs;
    c.dev.seed = rng();
    if (i == 1) r[7] = r[9] = 1000.f;  // tie at the max: the lower id
    if (i == 2) {                      // the penalty demotes the maximum
      r[11] = 1000.f, r[12] = 999.f;
      c.dev.presence = 2.f, c.generated = {11};
    }
    if (i == 3) c.bias = {{kV - 1, 100.f}, {5, -100.f}};  // +100 wins over a normal row
    if (i == 10) c.bias = {{12345, 100.f}};               // also when sampling (T = 1)
    if (i == 4) {
      c.dev.frequency = 0.5f;
      for (int j = 0; j < 200; ++j) c.generated.push_back(static_cast<int32_t>(rng() % 1000));
    }
    logits.insert(logits.end(), r.begin(), r.end());
    cases.push_back(c);
  }
  const DevResult a = run_device(logits, cases, kV, false);
  const DevResult b = run_device(logits, cases, kV, false);
  std::vector<float> lp_dev;
  std::vector<double> lp_ref;
  for (size_t i = 0; i < cases.size(); ++i) {
    std::span<const float> row(logits.data() + i * kV, kV);
    const GenerationParams cp = cpu_params(cases[i]);
    std::mt19937_64 unused(0);
    auto ref = sample_token(row, cp, cases[i].generated, unused);
    ASSERT_TRUE(ref.ok());
    EXPECT_EQ(a.out[i].token, b.out[i].token) << "row " << i << ": same seed, other token";
    if (cases[i].dev.temperature == 0.f) {
      EXPECT_EQ(a.out[i].token, ref->token) << "row " << i;
    }
    if (i == 1) {
      EXPECT_EQ(a.out[i].token, 7);
    }
    if (i == 2) {
      EXPECT_EQ(a.out[i].token, 12);
    }
    if (i == 3) {
      EXPECT_EQ(a.out[i].token, kV - 1);
    }
    if (i == 10) {
      EXPECT_EQ(a.out[i].token, 12345);
    }
    // Logprob of the device's token and the top alternatives against CPU log_softmax.
    GenerationParams greedy = cp;
    greedy.temperature = 0;
    auto all = sampling_distribution(row, greedy, cases[i].generated);
    ASSERT_TRUE(all.ok());
    EXPECT_EQ(all->ids[0], ref->top[0].token);
    ASSERT_EQ(a.out[i].n_top, cases[i].dev.top_logprobs);
    ASSERT_EQ(ref->top.size(), static_cast<size_t>(a.out[i].n_top));
    for (int j = 0; j < a.out[i].n_top; ++j) {
      EXPECT_EQ(a.out[i].top_ids[j], ref->top[j].token) << "row " << i << " alt " << j;
      lp_dev.push_back(a.out[i].top_logprobs[j]);
      lp_ref.push_back(ref->top[j].logprob);
    }
    if (a.out[i].token == ref->token) {
      lp_dev.push_back(a.out[i].logprob);
      lp_ref.push_back(ref->logprob);
    }
  }
  const double e = testing::rel_err(lp_dev, lp_ref);
  std::printf("logprobs vs CPU log_softmax: relative error %.3g over %zu values\n", e,
              lp_ref.size());
  EXPECT_LT(e, 1e-5);
  // A different seed changes some draw (rows 6..11 sample at T = 1 from normal logits).
  for (auto& c : cases) c.dev.seed ^= 0x5555;
  const DevResult other = run_device(logits, cases, kV, false);
  int differ = 0;
  for (size_t i = 6; i < cases.size(); ++i) differ += other.out[i].token != a.out[i].token;
  EXPECT_GT(differ, 0);
}

TEST(DeviceSampler, NonFiniteRowsAndBadParams) {
  std::vector<float> logits(3 * 1000, 0.5f);
  logits[17] = NAN;
  logits[1000 + 5] = INFINITY;
  std::fill(logits.begin() + 2000, logits.end(), -INFINITY);
  std::vector<RowCase> cases(3, RowCase{rowp(1.f, 0, 1.f, 0.f), {}, {}});
  const DevResult d = run_device(logits, cases, 1000, true);
  EXPECT_EQ(d.out[0].status, kSampleNonFinite);
  EXPECT_EQ(d.out[1].status, kSampleNonFinite);
  EXPECT_EQ(d.out[2].status, kSampleAllMasked);
  for (const auto& o : d.out) EXPECT_EQ(o.token, -1);
  EXPECT_FALSE(SampleParams{}.validate().ok());
  SampleRowParams bad;
  bad.top_p = 0.f;
  EXPECT_FALSE(bad.validate(kV).ok());
  bad = {}, bad.temperature = -1.f;
  EXPECT_FALSE(bad.validate(kV).ok());
  bad = {}, bad.top_logprobs = 21;
  EXPECT_FALSE(bad.validate(kV).ok());
  bad = {}, bad.vocab_limit = kV + 1;
  EXPECT_FALSE(bad.validate(kV).ok());
  SampleParams small{reinterpret_cast<float*>(16),
                     &bad,
                     nullptr,
                     nullptr,
                     reinterpret_cast<SampleRowOut*>(16),
                     nullptr,
                     4,
                     kV,
                     kV,
                     reinterpret_cast<void*>(16),
                     sample_workspace_bytes(4) - 1};
  const Status st = small.validate();
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.ToString().find("workspace"), std::string::npos) << st.ToString();
  small.workspace_bytes += 1;
  EXPECT_TRUE(small.validate().ok());
  EXPECT_TRUE(SampleRowParams{}.validate(kV).ok());
}

}  // namespace
}  // namespace gossamer::kern

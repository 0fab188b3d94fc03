// Device sampler (launch_sample) against the reference CPU sampler (runtime/sampler.h):
// survivor sets and probabilities (penalties, logit_bias, vocab_limit) and chi-square of the
// draws. Greedy, seeds, logprobs, penalties and bad rows: device_sampler_greedy_test.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <random>
#include <span>
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
using testing::DevBuf;

// float (device) vs double (CPU) may legitimately move a top_p or min_p cut by one token when the
// CPU's value there is within 1e-6 of the threshold. True when `got` is `want` plus or minus
// one such boundary token.
bool boundary_flip(std::span<const float> row, const GenerationParams& p,
                   std::span<const int32_t> generated, const SamplingDistribution& want,
                   size_t got_size) {
  const size_t n = want.ids.size();
  if (got_size != n + 1 && got_size + 1 != n) return false;
  GenerationParams open = p;  // the same top-k set, ordered, before top_p / min_p
  open.top_p = 1.0, open.min_p = 0.0;
  auto all = sampling_distribution(row, open, generated);
  if (!all.ok()) return false;
  const size_t edge = std::min(n, got_size);  // the cut lies between edge - 1 and edge
  double cum = 0;
  for (size_t j = 0; j < edge; ++j) cum += all->probs[j];
  const bool top_p_edge =
      std::abs(cum - p.top_p) < 1e-6 || std::abs(cum - all->probs[edge - 1] - p.top_p) < 1e-6;
  const double ratio = edge < all->probs.size() ? all->probs[edge] / all->probs[0] : 0;
  const double ratio_in = all->probs[edge - 1] / all->probs[0];
  const bool min_p_edge = std::abs(ratio - p.min_p) < 1e-6 || std::abs(ratio_in - p.min_p) < 1e-6;
  std::printf("boundary token: top_p edge %d, min_p edge %d (cum %.9f)\n", top_p_edge, min_p_edge,
              cum);
  return top_p_edge || min_p_edge;
}

// Two rows with 40 random logit_bias ids in [-10, 10]: alone, and with penalties on 100 draws
// of those ids (bias and penalty on the same id).
std::vector<RowCase> biased_cases(std::mt19937_64& rng, int V) {
  RowCase biased{rowp(1.f, 0, 0.95f, 0.f), {}, {}};
  for (int i = 0; i < 40; ++i) {
    biased.bias.emplace_back(static_cast<int32_t>(i * (V / 40) + rng() % (V / 40)),
                             static_cast<float>(rng() % 2001) / 100.f - 10.f);
  }
  RowCase pen = biased;
  pen.dev.presence = 0.5f, pen.dev.frequency = 0.25f;
  for (int i = 0; i < 100; ++i) pen.generated.push_back(biased.bias[rng() % 40].first);
  return {biased, pen};
}

// Survivor sets and probabilities of many parameter sets and row shapes at vocabulary V (the
// device keeps at most kSampleCandidates candidates; flat rows and top_k 20000 need more and
// take the whole-row path).
void survivors_match_cpu(int V, const char* what) {
  std::mt19937_64 rng(testing::fresh_seed(what));
  std::vector<RowCase> cases;
  std::vector<Shape> shapes;
  const std::vector<SampleRowParams> params = {
      rowp(0.f, 0, 1.f, 0.f),     rowp(1.f, 0, 1.f, 0.f),       rowp(0.7f, 50, 1.f, 0.f),
      rowp(1.f, 0, 0.9f, 0.f),    rowp(1.f, 0, 1.f, 0.05f),     rowp(1.25f, 1000, 0.95f, 0.01f),
      rowp(0.5f, 1, 1.f, 0.f),    rowp(1.5f, 20000, 0.5f, 0.f), rowp(1.f, 0, 0.9f, 0.05f),
      rowp(0.7f, 0, 0.99f, 0.2f), rowp(0.9f, 200, 1.f, 0.3f),   rowp(2.f, 0, 0.3f, 0.f)};
  for (Shape s : {Shape::kNormal, Shape::kPeaked, Shape::kFlat, Shape::kTies}) {
    for (auto p : params) {
      p.top_logprobs = static_cast<int32_t>(cases.size() % 4 == 1 ? 5 : 0);
      cases.push_back({p, {}, {}}), shapes.push_back(s);
    }
  }
  RowCase pen{rowp(0.8f, 100, 0.97f, 0.f), {}, {}};  // penalties
  pen.dev.presence = 0.5f, pen.dev.frequency = 0.75f;
  for (int i = 0; i < 300; ++i) pen.generated.push_back(static_cast<int32_t>(rng() % 64) * 7);
  cases.push_back(pen), shapes.push_back(Shape::kPeaked);
  for (const RowCase& b : biased_cases(rng, V))
    cases.push_back(b), shapes.push_back(Shape::kNormal);
  if (V == kV) {
    RowCase lim{rowp(1.f, 0, 0.99f, 0.f), {}, {}};
    lim.dev.vocab_limit = 200019;
    cases.push_back(lim), shapes.push_back(Shape::kPaddingMax);
    lim.dev.temperature = 0.f;
    cases.push_back(lim), shapes.push_back(Shape::kPaddingMax);
    lim.dev.temperature = 1.f, lim.dev.top_p = 1.f;  // unfiltered draw, last block partial
    cases.push_back(lim), shapes.push_back(Shape::kPaddingMax);
  }
  std::vector<float> logits;
  for (Shape s : shapes) {
    auto r = make_row(rng, s, V);
    logits.insert(logits.end(), r.begin(), r.end());
  }
  const DevResult dev = run_device(logits, cases, V, true);
  double worst = 0;
  int flips = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    std::span<const float> row(logits.data() + i * V, V);
    const GenerationParams cp = cpu_params(cases[i]);
    auto want = sampling_distribution(row, cp, cases[i].generated);
    ASSERT_TRUE(want.ok()) << want.status().ToString();
    std::vector<int32_t> ids;
    std::vector<double> ref;
    std::vector<float> got;
    for (int v = 0; v < V; ++v) {
      if (dev.probs[i * V + v] >= 0.f) ids.push_back(v);
    }
    std::vector<int32_t> want_ids = want->ids;
    std::sort(want_ids.begin(), want_ids.end());
    if (ids != want_ids) {
      ASSERT_TRUE(boundary_flip(row, cp, cases[i].generated, *want, ids.size()))
          << "row " << i << ": " << ids.size() << " device survivors vs " << want_ids.size()
          << " CPU";
      ++flips;
      continue;
    }
    for (size_t j = 0; j < want->ids.size(); ++j) {
      ref.push_back(want->probs[j]);
      got.push_back(dev.probs[i * V + want->ids[j]]);
    }
    const double e = testing::rel_err(got, ref);
    worst = std::max(worst, e);
    EXPECT_LT(e, 1e-5) << "row " << i;
    EXPECT_EQ(dev.out[i].status, kSampleOk);
    EXPECT_TRUE(std::binary_search(want_ids.begin(), want_ids.end(), dev.out[i].token))
        << "row " << i << " drew " << dev.out[i].token << ", not a survivor";
  }
  std::printf(
      "V %d: survivor probabilities: worst relative error %.3g over %zu rows (%d boundary "
      "flips)\n",
      V, worst, cases.size(), flips);
  EXPECT_LE(flips, 4);
}

TEST(DeviceSampler, SurvivorsAndProbabilitiesMatchCpu) {
  survivors_match_cpu(kV, "device sampler survivors");
}

TEST(DeviceSampler, SurvivorsMatchCpuSmallVocab) {  // 3 blocks, the last one partial
  survivors_match_cpu(4099, "device sampler survivors V 4099");
}

// Chi-square critical value at p = 1e-4 (Wilson-Hilferty).
double chi2_crit(int df) {
  const double z = 3.719, k = 2.0 / (9.0 * df);
  return df * std::pow(1 - k + z * std::sqrt(k), 3);
}

TEST(DeviceSampler, DrawsFollowTheDistribution) {
  const uint64_t seed = testing::fresh_seed("device sampler chi-square");
  std::mt19937_64 rng(seed);
  constexpr int kRows = 2000, kLaunches = 10;  // 20k draws of one row (full vocab)
  const std::vector<float> row = make_row(rng, Shape::kNormal, kV);
  for (const SampleRowParams& base :
       {rowp(1.f, 40, 1.f, 0.f), rowp(0.9f, 0, 0.8f, 0.02f), rowp(1.f, 0, 1.f, 0.f)}) {
    const GenerationParams cp = cpu_params(RowCase{base, {}, {}});
    auto want = sampling_distribution(row, cp, {});
    ASSERT_TRUE(want.ok());
    // One upload of kRows copies of the row; launches differ only in the counters (no
    // penalties, so the logits stay untouched).
    DevBuf<float> dl(static_cast<size_t>(kRows) * kV);
    DevBuf<SampleRowParams> drp(kRows);
    DevBuf<SampleRowOut> dout(kRows);
    DevBuf<int32_t> dpen(1);
    DevBuf<uint8_t> ws(sample_workspace_bytes(kRows));
    for (int r = 0; r < kRows; ++r) {
      cudaMemcpy(dl.get() + static_cast<size_t>(r) * kV, row.data(), kV * sizeof(float),
                 cudaMemcpyHostToDevice);
    }
    std::map<int32_t, int64_t> hist;
    for (int l = 0; l < kLaunches; ++l) {
      std::vector<SampleRowParams> rp(kRows, base);
      for (int r = 0; r < kRows; ++r) {
        rp[r].seed = seed;
        rp[r].counter = static_cast<uint64_t>(l) * kRows + r;
      }
      drp.upload(rp);
      SampleParams p{dl.get(), drp.get(), dpen.get(), dpen.get(), dout.get(), nullptr,
                     kRows,    kV,        kV,         ws.get(),   ws.bytes()};
      ASSERT_TRUE(launch_sample(p, 0).ok());
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      for (const auto& o : dout.download()) ++hist[o.token];
    }
    // Bins: every token with expected count >= 5, the rest pooled.
    const double n = static_cast<double>(kRows) * kLaunches;
    double chi = 0, pooled_e = 0, pooled_o = 0;
    int bins = 0;
    for (size_t j = 0; j < want->ids.size(); ++j) {
      const double e = want->probs[j] * n;
      const double o = static_cast<double>(hist[want->ids[j]]);
      hist.erase(want->ids[j]);
      if (e >= 5) {
        chi += (o - e) * (o - e) / e, ++bins;
      } else {
        pooled_e += e, pooled_o += o;
      }
    }
    if (pooled_e >= 5) chi += (pooled_o - pooled_e) * (pooled_o - pooled_e) / pooled_e, ++bins;
    EXPECT_TRUE(hist.empty()) << hist.size() << " drawn tokens are not survivors";
    ASSERT_GE(bins, 2);
    std::printf("chi-square (T %.2f top_k %d top_p %.2f min_p %.2f): %.1f, df %d, crit %.1f\n",
                base.temperature, base.top_k, base.top_p, base.min_p, chi, bins - 1,
                chi2_crit(bins - 1));
    EXPECT_LT(chi, chi2_crit(bins - 1));
  }
}

}  // namespace
}  // namespace gossamer::kern

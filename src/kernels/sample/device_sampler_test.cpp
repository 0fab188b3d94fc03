// Device sampler (launch_sample) against the reference CPU sampler (runtime/sampler.h):
// survivor sets and probabilities, chi-square of the draws, greedy, seeds, logprobs, penalties,
// vocab_limit, bad rows.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>

#include "kernels/common/testing.h"
#include "kernels/sample/params.h"
#include "runtime/sampler.h"

namespace gossamer::kern {
namespace {

using testing::DevBuf;
constexpr int kV = 201088;

// One row's request for both samplers.
struct RowCase {
  SampleRowParams dev;
  std::vector<int32_t> generated;               // for the CPU sampler's penalties
  std::vector<std::pair<int32_t, float>> bias;  // logit_bias (distinct ids)
};

GenerationParams cpu_params(const RowCase& c) {
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
DevResult run_device(const std::vector<float>& logits, std::vector<RowCase> cases, int V,
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

std::vector<float> make_row(std::mt19937_64& rng, Shape s, int V) {
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

SampleRowParams rowp(float t, int k, float top_p, float min_p) {
  SampleRowParams d;
  d.temperature = t, d.top_k = k, d.top_p = top_p, d.min_p = min_p;
  return d;
}

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

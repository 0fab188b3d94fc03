// Scheduler sampling paths with the FakeRunner: a runner that "samples on the device" (it
// emulates the device with the reference CPU sampler on the row it would have kept) against the
// plain host path; seeds and counters; vocab_limit; TokenConstraint (host path, masks).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <random>

#include "common/test_seed.h"
#include "runtime/fake_runner.h"
#include "runtime/sampler.h"
#include "runtime/scheduler.h"

namespace gossamer {
namespace {

constexpr int64_t kVocab = 300;
constexpr int64_t kWindow = 24;

// Wraps a FakeRunner; chunks with SeqChunk::sampling are sampled here (greedy rule of the
// reference sampler on the penalised row, logprobs included) and logged; their rows are dropped
// from the logits, as a device-sampling runner does.
class DeviceFake final : public ModelRunner {
 public:
  DeviceFake(ModelConfig cfg, KvCacheSpec spec) : inner_(std::move(cfg), spec) {}
  const ModelConfig& config() const override { return inner_.config(); }
  const KvCacheSpec& kv_spec() const override { return inner_.kv_spec(); }
  std::string describe() const override { return "device-sampling fake"; }
  Status copy_block(bool s, int32_t a, int32_t b) override { return inner_.copy_block(s, a, b); }
  bool samples_on_device() const override { return true; }
  Status step(std::span<const SeqChunk> chunks, StepOutput* out) override {
    StepOutput raw;
    GS_RETURN_IF_ERROR(inner_.step(chunks, &raw));
    const int64_t V = inner_.config().vocab_size;
    out->logits.clear(), out->sampled.clear(), out->rows = 0;
    int64_t row = 0;
    for (const SeqChunk& c : chunks) {
      if (c.logits != LogitsMode::kLast) continue;
      std::span<const float> r(raw.logits.data() + row++ * V, V);
      if (!c.sampling) {
        out->logits.insert(out->logits.end(), r.begin(), r.end());
        ++out->rows;
        continue;
      }
      const DeviceSampling& d = *c.sampling;
      Logged l{d,
               {d.penalty_tokens.begin(), d.penalty_tokens.end()},
               {d.penalty_counts.begin(), d.penalty_counts.end()},
               {d.penalty_bias.begin(), d.penalty_bias.end()}};
      std::vector<int32_t> generated;  // the counts expanded back into a token list
      for (size_t i = 0; i < l.tokens.size(); ++i)
        generated.insert(generated.end(), l.counts[i], l.tokens[i]);
      GenerationParams p;
      p.temperature = 0;  // the emulation is greedy (exactly comparable)
      p.presence_penalty = d.presence_penalty, p.frequency_penalty = d.frequency_penalty;
      p.top_logprobs = d.top_logprobs, p.logprobs = d.top_logprobs > 0;
      p.vocab_limit = d.vocab_limit;
      for (size_t i = 0; i < l.bias.size(); ++i) {
        if (l.bias[i] != 0.f) p.logit_bias.emplace_back(l.tokens[i], l.bias[i]);
      }
      std::mt19937_64 rng(0);
      auto t = sample_token(r, p, generated, rng);
      GS_RETURN_IF_ERROR(t.status());
      if (fail_counter >= 0 && d.counter == static_cast<uint64_t>(fail_counter)) t->token = -1;
      out->sampled.push_back(*t);
      log.push_back(std::move(l));
    }
    return Status::Ok();
  }
  struct Logged {
    DeviceSampling d;
    std::vector<int32_t> tokens, counts;
    std::vector<float> bias;  // empty without logit_bias
  };
  std::vector<Logged> log;
  int64_t fail_counter = -1;  // report a non-finite row for this output index

 private:
  FakeRunner inner_;
};

class AllowList final : public TokenConstraint {
 public:
  AllowList(std::vector<int32_t> ids, int64_t steps) : ids_(std::move(ids)), steps_(steps) {}
  std::optional<std::vector<int32_t>> allowed(std::span<const int32_t> generated) override {
    if (static_cast<int64_t>(generated.size()) >= steps_) return std::nullopt;
    return ids_;
  }

 private:
  std::vector<int32_t> ids_;
  int64_t steps_;
};

struct RunOut {
  std::vector<std::vector<SampledToken>> tokens;
  std::vector<StreamChunk> ends;
};

RunOut run_all(ModelRunner& runner, SchedulerOptions o,
               const std::vector<std::vector<int32_t>>& prompts,
               const std::vector<GenerationParams>& params) {
  const ModelConfig cfg = fake_model_config(kVocab, kWindow, 4096);
  Scheduler sched(cfg, runner.kv_spec(), o, nullptr);
  auto sampler = make_default_sampler();
  std::vector<std::shared_ptr<RequestStream>> streams;
  for (size_t i = 0; i < prompts.size(); ++i) {
    auto r = std::make_unique<Request>();
    r->tokens = prompts[i];
    r->params = params[i];
    r->stream = std::make_shared<RequestStream>();
    streams.push_back(r->stream);
    EXPECT_TRUE(sched.add(std::move(r)).ok());
  }
  for (int guard = 0; sched.has_work() && guard < 100000; ++guard) {
    auto res = sched.step(runner, *sampler);
    EXPECT_TRUE(res.ok()) << res.status().ToString();
    if (!res.ok()) break;
  }
  RunOut out;
  for (auto& s : streams) {
    out.tokens.emplace_back();
    out.ends.emplace_back();
    StreamChunk c;
    while (s->wait(&c, std::chrono::milliseconds(0))) {
      for (auto& t : c.tokens) out.tokens.back().push_back(t);
      if (c.finished) out.ends.back() = c;
    }
  }
  return out;
}

std::vector<std::vector<int32_t>> random_prompts(std::mt19937_64& rng, int n) {
  std::vector<std::vector<int32_t>> p(n);
  for (auto& v : p) {
    v.resize(1 + rng() % 40);
    for (auto& t : v) t = static_cast<int32_t>(rng() % kVocab);
  }
  return p;
}

using testing::fresh_seed;  // common/test_seed.h

TEST(SchedulerSampling, DeviceAndHostPathsAgreeOnGreedy) {
  std::mt19937_64 rng(fresh_seed("device vs host greedy"));
  const auto prompts = random_prompts(rng, 24);
  std::vector<GenerationParams> params(prompts.size());
  for (size_t i = 0; i < params.size(); ++i) {
    params[i].temperature = 0;
    params[i].max_tokens = 5 + static_cast<int64_t>(rng() % 30);
    params[i].presence_penalty = (i % 3) * 0.7;
    params[i].frequency_penalty = (i % 4) * 0.4;
    params[i].logprobs = i % 2 == 0;
    params[i].top_logprobs = static_cast<int64_t>(i % 6);
    if (i % 4 == 1) {  // a few random biases (ids beyond vocab_limit included: still masked)
      for (int k = 0; k < 4; ++k) {
        const int32_t id = static_cast<int32_t>(k * 75 + rng() % 75);
        params[i].logit_bias.emplace_back(id, static_cast<float>(rng() % 2001) / 10.f - 100.f);
      }
    }
    if (i % 8 == 3) params[i].logit_bias = {{static_cast<int32_t>(rng() % 200), 100.f}};
  }
  SchedulerOptions o;
  o.max_num_batched_tokens = 64;
  o.vocab_limit = 200;  // of 300 fake logits rows
  const ModelConfig cfg = fake_model_config(kVocab, kWindow, 4096);
  const KvCacheSpec spec{8, 200, 200};
  FakeRunner host(cfg, spec);
  DeviceFake dev(cfg, spec);
  const RunOut a = run_all(host, o, prompts, params), b = run_all(dev, o, prompts, params);
  ASSERT_FALSE(dev.log.empty());
  int64_t tokens = 0;
  for (size_t i = 0; i < prompts.size(); ++i) {
    ASSERT_EQ(a.tokens[i].size(), b.tokens[i].size()) << "request " << i;
    for (size_t j = 0; j < a.tokens[i].size(); ++j) {
      EXPECT_EQ(a.tokens[i][j].token, b.tokens[i][j].token) << i << "/" << j;
      EXPECT_LT(a.tokens[i][j].token, 200) << "vocab_limit";
      if (i % 8 == 3) {  // +100 outweighs the fake logits (and any penalty): always that id
        EXPECT_EQ(a.tokens[i][j].token, params[i].logit_bias[0].first) << i << "/" << j;
      }
      EXPECT_FLOAT_EQ(a.tokens[i][j].logprob, b.tokens[i][j].logprob);
      ASSERT_EQ(a.tokens[i][j].top.size(), b.tokens[i][j].top.size());
      EXPECT_EQ(a.tokens[i][j].top.size(), params[i].logprobs ? params[i].top_logprobs : 0);
      ++tokens;
    }
    EXPECT_EQ(a.ends[i].reason, FinishReason::kLength);
  }
  // Every device request carries the request's params, the output index and distinct ids.
  int64_t biased = 0;
  for (const auto& l : dev.log) {
    EXPECT_EQ(l.d.vocab_limit, 200);
    std::vector<int32_t> sorted = l.tokens;
    std::sort(sorted.begin(), sorted.end());
    EXPECT_TRUE(std::adjacent_find(sorted.begin(), sorted.end()) == sorted.end());
    int64_t n = 0;
    for (int32_t c : l.counts) n += c;
    if (l.d.presence_penalty != 0 || l.d.frequency_penalty != 0) {
      EXPECT_EQ(n, static_cast<int64_t>(l.d.counter)) << "penalty counts = tokens generated";
    }
    if (!l.bias.empty()) ++biased;
    EXPECT_TRUE(l.bias.empty() || l.bias.size() == l.tokens.size());
  }
  EXPECT_GT(biased, 0) << "logit_bias reaches the device path";
  std::printf("%lld tokens identical on both paths, %zu device rows\n", (long long)tokens,
              dev.log.size());
}

TEST(SchedulerSampling, LogitBiasOutsideTheVocabularyIsRejected) {
  const ModelConfig cfg = fake_model_config(kVocab, kWindow, 4096);
  FakeRunner runner(cfg, KvCacheSpec{8, 200, 200});
  Scheduler sched(cfg, runner.kv_spec(), SchedulerOptions{}, nullptr);
  for (auto [bias, want] : std::vector<std::pair<std::pair<int32_t, float>, const char*>>{
           {{static_cast<int32_t>(kVocab), 1.f}, "outside the vocabulary"},
           {{-1, 1.f}, "negative"},
           {{5, 100.5f}, "[-100, 100]"},
           {{5, NAN}, "[-100, 100]"}}) {
    auto r = std::make_unique<Request>();
    r->tokens = {1, 2, 3};
    r->params.logit_bias = {bias};
    const Status st = sched.add(std::move(r));
    EXPECT_FALSE(st.ok());
    EXPECT_NE(st.message().find(want), std::string::npos) << st.message();
  }
  auto r = std::make_unique<Request>();
  r->tokens = {1, 2, 3};
  r->params.logit_bias = {{7, 1.f}, {7, 2.f}};
  EXPECT_NE(sched.add(std::move(r)).message().find("twice"), std::string::npos);
}

TEST(SchedulerSampling, SeedsAndCountersReachTheDevice) {
  std::mt19937_64 rng(fresh_seed("seeds"));
  const auto prompts = random_prompts(rng, 6);
  std::vector<GenerationParams> params(prompts.size());
  for (size_t i = 0; i < params.size(); ++i) {
    params[i].max_tokens = 6;
    if (i < 3) params[i].seed = 1000 + i;
  }
  const ModelConfig cfg = fake_model_config(kVocab, kWindow, 4096);
  DeviceFake dev(cfg, KvCacheSpec{8, 200, 200});
  run_all(dev, SchedulerOptions{}, prompts, params);
  std::map<uint64_t, std::vector<uint64_t>> counters;  // seed -> counters seen, in order
  for (const auto& l : dev.log) counters[l.d.seed].push_back(l.d.counter);
  ASSERT_EQ(counters.size(), prompts.size()) << "one seed per request (random when not given)";
  for (uint64_t s : {1000ull, 1001ull, 1002ull}) EXPECT_EQ(counters.count(s), 1u) << s;
  for (const auto& [s, c] : counters) {
    EXPECT_EQ(c, (std::vector<uint64_t>{0, 1, 2, 3, 4, 5})) << "seed " << s;
  }
}

TEST(SchedulerSampling, ConstraintTakesTheHostPathAndMasks) {
  std::mt19937_64 rng(fresh_seed("constraint"));
  const auto prompts = random_prompts(rng, 8);
  const std::vector<int32_t> allow = {5, 17, 42, 250};
  std::vector<GenerationParams> params(prompts.size());
  for (size_t i = 0; i < params.size(); ++i) {
    params[i].temperature = i % 2 ? 0.0 : 1.0;
    params[i].max_tokens = 8;
    params[i].logprobs = true;
    if (i < 4) params[i].constraint = std::make_shared<AllowList>(allow, 3);
  }
  params[7].constraint = std::make_shared<AllowList>(std::vector<int32_t>{-3, 9999}, 1);
  SchedulerOptions o;
  o.vocab_limit = 200;  // 250 is allowed by the constraint but outside the vocabulary
  const ModelConfig cfg = fake_model_config(kVocab, kWindow, 4096);
  for (bool on_device : {false, true}) {
    FakeRunner host(cfg, KvCacheSpec{8, 200, 200});
    DeviceFake dev(cfg, KvCacheSpec{8, 200, 200});
    const RunOut r =
        on_device ? run_all(dev, o, prompts, params) : run_all(host, o, prompts, params);
    for (size_t i = 0; i < 4; ++i) {
      ASSERT_EQ(r.tokens[i].size(), 8u);
      std::vector<int32_t> seq = prompts[i];
      for (size_t j = 0; j < 3; ++j) {  // constrained: one of 5, 17, 42 (250 is masked)
        const int32_t t = r.tokens[i][j].token;
        EXPECT_TRUE(t == 5 || t == 17 || t == 42) << "request " << i << " token " << t;
        std::vector<float> row(kVocab);
        fake_reference_logits(seq, kWindow, row);
        if (params[i].temperature == 0) {
          int32_t best = 5;
          for (int32_t c : {17, 42}) best = row[c] > row[best] ? c : best;
          EXPECT_EQ(t, best);
        }
        // Logprobs after the mask: the allowed ids' probabilities sum to 1.
        double z = 0;
        for (int32_t c : {5, 17, 42}) z += std::exp(row[c] - row[t]);
        EXPECT_NEAR(r.tokens[i][j].logprob, -std::log(z), 1e-4);
        seq.push_back(t);
      }
    }
    EXPECT_EQ(r.ends[7].reason, FinishReason::kError);
    EXPECT_NE(r.ends[7].error.find("constraint"), std::string::npos) << r.ends[7].error;
    if (on_device) {  // constrained rows never reached the device
      size_t constrained = 0;
      for (const auto& l : dev.log) constrained += l.d.counter < 3;
      EXPECT_EQ(constrained, 3u * 3u) << "only requests 4..6 sample their first 3 on the device";
    }
  }
}

TEST(SchedulerSampling, NonFiniteDeviceRowFailsOnlyThatRequest) {
  std::mt19937_64 rng(fresh_seed("non-finite"));
  const auto prompts = random_prompts(rng, 3);
  std::vector<GenerationParams> params(3);
  for (auto& p : params) p.max_tokens = 4;
  const ModelConfig cfg = fake_model_config(kVocab, kWindow, 4096);
  DeviceFake dev(cfg, KvCacheSpec{8, 200, 200});
  dev.fail_counter = 2;  // every request's third token
  const RunOut r = run_all(dev, SchedulerOptions{}, prompts, params);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(r.tokens[i].size(), 2u);
    EXPECT_EQ(r.ends[i].reason, FinishReason::kError);
    EXPECT_NE(r.ends[i].error.find("not finite"), std::string::npos) << r.ends[i].error;
  }
}

}  // namespace
}  // namespace gossamer

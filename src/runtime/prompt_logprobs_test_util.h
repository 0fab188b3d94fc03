// Test helpers of the prompt-logprobs tests (prompt_logprobs_test.cpp): a FakeRunner that logs
// every chunk and, in device mode, samples and scores rows itself as a device runner does; a
// harness that runs requests through the Scheduler; the double-precision references.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "runtime/fake_runner.h"
#include "runtime/sampler.h"
#include "runtime/scheduler.h"

namespace gossamer::plp_test {

inline constexpr int64_t kVocab = 300;
inline constexpr int64_t kWindow = 24;
inline constexpr int64_t kLimit = 290;  // SchedulerOptions::vocab_limit: ids >= it are masked

// Direct log_softmax over ids < limit, in double, no max shift (FakeRunner logits are in [0, 8)).
inline std::vector<double> ref_log_softmax(std::span<const float> row, int64_t limit) {
  double sum = 0;
  for (int64_t i = 0; i < limit; ++i) sum += std::exp(static_cast<double>(row[i]));
  std::vector<double> lp(static_cast<size_t>(limit));
  for (int64_t i = 0; i < limit; ++i) lp[i] = static_cast<double>(row[i]) - std::log(sum);
  return lp;
}

// Checks one reported entry against the row that predicts it.
inline void expect_entry(const SampledToken& got, std::span<const float> row, int32_t token,
                         int64_t k, int64_t limit, const std::string& where) {
  const std::vector<double> lp = ref_log_softmax(row, limit);
  EXPECT_EQ(got.token, token) << where;
  if (token >= limit) {
    EXPECT_EQ(got.logprob, -INFINITY) << where;
  } else {
    EXPECT_LE(std::abs(got.logprob - lp[token]), 1e-6 * std::abs(lp[token]) + 1e-12) << where;
  }
  std::vector<int32_t> idx(lp.size());
  std::iota(idx.begin(), idx.end(), 0);
  std::stable_sort(idx.begin(), idx.end(), [&](int32_t a, int32_t b) { return lp[a] > lp[b]; });
  ASSERT_EQ(got.top.size(), static_cast<size_t>(std::min<int64_t>(k, limit))) << where;
  for (size_t i = 0; i < got.top.size(); ++i) {
    EXPECT_EQ(got.top[i].token, idx[i]) << where << " top " << i;
    EXPECT_LE(std::abs(got.top[i].logprob - lp[idx[i]]), 1e-6 * std::abs(lp[idx[i]]) + 1e-12);
  }
}

// The logits rows of every position of `seq`: a fresh FakeRunner stepped once with kAll.
inline std::vector<float> kall_rows(const std::vector<int32_t>& seq) {
  const int64_t bs = 16, nb = (static_cast<int64_t>(seq.size()) + bs - 1) / bs;
  FakeRunner fr(fake_model_config(kVocab, kWindow, 4096), KvCacheSpec{bs, nb, nb});
  std::vector<int32_t> table(static_cast<size_t>(nb));
  std::iota(table.begin(), table.end(), 0);
  SeqChunk c{seq, 0, table, table, LogitsMode::kAll};
  StepOutput out;
  EXPECT_TRUE(fr.step({&c, 1}, &out).ok());
  EXPECT_EQ(out.rows, static_cast<int64_t>(seq.size()));
  return out.logits;
}

// Greedy continuation over ids < kLimit, from the plain token list.
inline std::vector<int32_t> ref_greedy(std::vector<int32_t> seq, int64_t n) {
  std::vector<int32_t> out;
  std::vector<float> row(kVocab);
  for (int64_t i = 0; i < n; ++i) {
    fake_reference_logits(seq, kWindow, row);
    const auto t =
        static_cast<int32_t>(std::max_element(row.begin(), row.begin() + kLimit) - row.begin());
    out.push_back(t);
    seq.push_back(t);
  }
  return out;
}

// A FakeRunner that logs every chunk and, when `device`, samples the chunks that ask for it
// (greedy, the reference sampler's rule) and scores the rows that ask for it (score_token), and
// drops their rows, as a device-sampling runner does.
class LoggingRunner final : public ModelRunner {
 public:
  struct Rec {
    int64_t pos0, n;
    LogitsMode mode;
    bool device;
    int64_t scored = 0;  // rows scored by the runner (SeqChunk::scoring)
  };
  LoggingRunner(KvCacheSpec spec, bool device)
      : inner_(fake_model_config(kVocab, kWindow, 4096), spec), device_(device) {}
  const ModelConfig& config() const override { return inner_.config(); }
  const KvCacheSpec& kv_spec() const override { return inner_.kv_spec(); }
  std::string describe() const override { return "logging fake"; }
  Status copy_block(bool s, int32_t a, int32_t b) override { return inner_.copy_block(s, a, b); }
  bool samples_on_device() const override { return device_; }
  Status step(std::span<const SeqChunk> chunks, StepOutput* out) override {
    auto& log = steps.emplace_back();
    for (const SeqChunk& c : chunks) {
      if (c.scoring && !device_) return InvalidArgument("scoring asked of a host runner");
      log.push_back({c.pos0, (int64_t)c.tokens.size(), c.logits, c.sampling != nullptr});
    }
    StepOutput raw;
    GS_RETURN_IF_ERROR(inner_.step(chunks, &raw));
    *out = StepOutput{};
    int64_t row = 0;
    for (const SeqChunk& c : chunks) {
      const int64_t n =
          c.logits == LogitsMode::kAll ? (int64_t)c.tokens.size() : c.logits == LogitsMode::kLast;
      Rec& rec = log[static_cast<size_t>(&c - chunks.data())];
      for (int64_t j = 0; j < n; ++j, ++row) {
        std::span<const float> r(raw.logits.data() + row * kVocab, kVocab);
        if (c.scoring && c.scoring->targets[static_cast<size_t>(j)] >= 0) {
          auto t = score_token(r, c.scoring->targets[static_cast<size_t>(j)],
                               c.scoring->top_logprobs, c.scoring->vocab_limit);
          GS_RETURN_IF_ERROR(t.status());
          out->scored.push_back(*t);
          ++rec.scored;
          continue;
        }
        if (!c.sampling) {
          out->logits.insert(out->logits.end(), r.begin(), r.end());
          ++out->rows;
          continue;
        }
        GenerationParams p;
        p.temperature = 0;
        p.vocab_limit = c.sampling->vocab_limit;
        std::mt19937_64 rng(0);
        auto t = sample_token(r, p, {}, rng);
        GS_RETURN_IF_ERROR(t.status());
        out->sampled.push_back(*t);
      }
    }
    return Status::Ok();
  }
  std::vector<std::vector<Rec>> steps;
  bool device() const { return device_; }

 private:
  FakeRunner inner_;
  bool device_;
};

struct Out {
  std::vector<int32_t> tokens;
  std::vector<SampledToken> prompt_lps;
  StreamChunk end;
};

struct Harness {
  SchedulerOptions o;
  LoggingRunner runner;
  Scheduler sched;
  std::unique_ptr<TokenSampler> sampler = make_default_sampler();
  std::vector<std::shared_ptr<RequestStream>> streams;
  int64_t preempted = 0;
  Harness(KvCacheSpec spec, SchedulerOptions opts, bool device = false)
      : o(opts), runner(spec, device), sched(runner.config(), spec, opts, nullptr) {}
  void add(std::vector<int32_t> prompt, GenerationParams p) {
    auto r = std::make_unique<Request>();
    r->tokens = std::move(prompt);
    r->params = std::move(p);
    r->stream = streams.emplace_back(std::make_shared<RequestStream>());
    r->arrival = Clock::now();
    ASSERT_TRUE(sched.add(std::move(r)).ok());
  }
  std::vector<Out> run() {
    for (int guard = 0; sched.has_work() && guard < 100000; ++guard) {
      auto res = sched.step(runner, *sampler);
      EXPECT_TRUE(res.ok()) << res.status().ToString();
      if (!res.ok()) break;
      preempted += res->preempted;
    }
    EXPECT_FALSE(sched.has_work());
    EXPECT_EQ(sched.blocks().stats().full_used, 0);
    std::vector<Out> outs;
    for (auto& s : streams) {
      Out& got = outs.emplace_back();
      StreamChunk c;
      while (s->wait(&c, std::chrono::milliseconds(0))) {
        if (!c.prompt_logprobs.empty()) {
          EXPECT_TRUE(got.tokens.empty()) << "a prompt logprob arrived after a generated token";
        }
        for (auto& t : c.tokens) got.tokens.push_back(t.token);
        got.prompt_lps.insert(got.prompt_lps.end(), c.prompt_logprobs.begin(),
                              c.prompt_logprobs.end());
        if (c.finished) got.end = c;
      }
    }
    return outs;
  }
  // Every step: kAll chunks hold at most prompt_logprob_rows rows, prompt_logprob_step_rows in
  // all; a device runner scores every row but the last prompt row's. Returns the kAll rows computed
  // over the run.
  int64_t check_row_caps() const {
    int64_t total = 0;
    for (const auto& step : runner.steps) {
      int64_t rows = 0;
      for (const auto& c : step) {
        if (c.mode != LogitsMode::kAll) continue;
        EXPECT_LE(c.n, o.prompt_logprob_rows);
        EXPECT_GE(c.scored, runner.device() ? c.n - 1 : 0);
        EXPECT_LE(c.scored, runner.device() ? c.n : 0);
        rows += c.n;
      }
      EXPECT_LE(rows, o.prompt_logprob_step_rows);
      total += rows;
    }
    return total;
  }
};

inline GenerationParams scoring(int64_t k, int64_t max_tokens) {
  GenerationParams p;
  p.temperature = 0;
  p.prompt_logprobs = k;
  p.max_tokens = max_tokens;
  return p;
}

// Checks a request's reports: one entry per prompt position >= 1, each against the kAll row.
inline void expect_prompt_logprobs(const Out& got, const std::vector<int32_t>& prompt, int64_t k,
                                   const std::string& where) {
  ASSERT_EQ(got.prompt_lps.size(), prompt.size() - 1) << where;
  const std::vector<float> rows = kall_rows(prompt);
  for (size_t p = 1; p < prompt.size(); ++p) {
    std::span<const float> row(rows.data() + (p - 1) * kVocab, kVocab);
    expect_entry(got.prompt_lps[p - 1], row, prompt[p], k, kLimit,
                 where + " position " + std::to_string(p));
  }
}

inline std::vector<int32_t> random_prompt(std::mt19937& rng, int64_t max_len) {
  std::vector<int32_t> p(1 + rng() % max_len);
  for (auto& t : p) t = static_cast<int32_t>(rng() % kVocab);  // some >= kLimit: -inf
  return p;
}

}  // namespace gossamer::plp_test

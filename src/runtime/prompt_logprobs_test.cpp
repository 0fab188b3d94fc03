// Prompt logprobs (GenerationParams::prompt_logprobs) with the FakeRunner: score_token against a
// direct double-precision log_softmax; the scheduler's per-position reports against the rows of
// a FakeRunner stepped with LogitsMode::kAll; row caps; max_tokens 0; the prefix cache;
// preemption mid-prompt; and requests without prompt logprobs left exactly as they were.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <random>

#include "common/test_seed.h"
#include "runtime/prompt_logprobs_test_util.h"

namespace gossamer {
namespace {

using namespace plp_test;  // NOLINT(google-build-using-namespace): test helpers

TEST(ScoreToken, MatchesDoubleLogSoftmaxAndTies) {
  std::mt19937 rng(
      static_cast<uint32_t>(testing::fresh_seed("ScoreToken.MatchesDoubleLogSoftmaxAndTies")));
  for (int trial = 0; trial < 50; ++trial) {
    std::vector<float> row(kVocab);
    for (auto& v : row) v = static_cast<float>(rng() % 64) / 8.0f;  // many ties
    const int64_t k = rng() % 21;
    const auto tok = static_cast<int32_t>(rng() % kVocab);
    auto got = score_token(row, tok, k, kLimit);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    expect_entry(*got, row, tok, k, kLimit, "trial " + std::to_string(trial));
    // The sampler's logprob of the same (greedy) token agrees bit for bit.
    GenerationParams p;
    p.temperature = 0, p.vocab_limit = kLimit, p.logprobs = true, p.top_logprobs = k;
    std::mt19937_64 r64(0);
    auto s = sample_token(row, p, {}, r64);
    ASSERT_TRUE(s.ok());
    auto again = score_token(row, s->token, k, kLimit);
    EXPECT_EQ(again->logprob, s->logprob);
    ASSERT_EQ(again->top.size(), s->top.size());
    for (size_t i = 0; i < s->top.size(); ++i) EXPECT_EQ(again->top[i].token, s->top[i].token);
  }
  std::vector<float> bad(8, 0.f);
  bad[3] = NAN;
  EXPECT_FALSE(score_token(bad, 0, 2, 0).ok());
  EXPECT_FALSE(score_token({}, 0, 2, 0).ok());
}

TEST(PromptLogprobs, ValidateAllowsMaxTokensZeroOnlyWhenScoring) {
  GenerationParams p = scoring(-1, 0);
  EXPECT_NE(p.validate().message().find("max_tokens"), std::string::npos);
  p.prompt_logprobs = 0;
  EXPECT_TRUE(p.validate().ok());
  p.prompt_logprobs = 21;
  EXPECT_NE(p.validate().message().find("prompt_logprobs"), std::string::npos);
}

// Host scoring (rows copied out) and device scoring (SeqChunk::scoring) report the same entries.
class PromptLogprobsBoth : public ::testing::TestWithParam<bool> {};
INSTANTIATE_TEST_SUITE_P(HostAndDevice, PromptLogprobsBoth, ::testing::Bool());

TEST_P(PromptLogprobsBoth, MatchKAllRowsInCappedChunks) {
  std::mt19937 rng(
      static_cast<uint32_t>(testing::fresh_seed("PromptLogprobs.MatchKAllRowsInCappedChunks")));
  SchedulerOptions o;
  o.vocab_limit = kLimit;
  o.max_num_batched_tokens = 32 + rng() % 400;
  Harness run(KvCacheSpec{16, 400, 400}, o, GetParam());
  std::vector<std::vector<int32_t>> prompts;
  std::vector<int64_t> ks, max_toks;
  for (int i = 0; i < 12; ++i) {
    prompts.push_back(random_prompt(rng, 300));
    ks.push_back(rng() % 21);
    max_toks.push_back(rng() % 4);  // 0: score only
    run.add(prompts.back(), scoring(ks.back(), max_toks.back()));
  }
  std::vector<Out> outs = run.run();
  int64_t needed = 0;
  for (size_t i = 0; i < prompts.size(); ++i) {
    const std::string where = "request " + std::to_string(i);
    expect_prompt_logprobs(outs[i], prompts[i], ks[i], where);
    EXPECT_EQ(outs[i].tokens, ref_greedy(prompts[i], max_toks[i])) << where;
    EXPECT_EQ(outs[i].end.reason, FinishReason::kLength) << where;
    EXPECT_EQ(outs[i].end.cached_tokens, 0) << where;
    needed += static_cast<int64_t>(prompts[i].size()) - 1;
  }
  // Every owed row is computed with logits once; the last prompt row only when it falls in a
  // scored chunk (one-token prompts have no row to score).
  const int64_t rows = run.check_row_caps();
  EXPECT_GE(rows, needed);
  EXPECT_LE(rows, needed + static_cast<int64_t>(prompts.size()));
}

TEST(PromptLogprobs, MaxTokensZeroAndOneTokenPrompts) {
  SchedulerOptions o;
  o.vocab_limit = kLimit;
  Harness run(KvCacheSpec{16, 64, 64}, o);
  run.add({7}, scoring(3, 0));
  run.add({7}, scoring(3, 2));
  run.add({7, 8}, scoring(0, 0));
  std::vector<Out> outs = run.run();
  EXPECT_TRUE(outs[0].prompt_lps.empty() && outs[0].tokens.empty());
  EXPECT_EQ(outs[0].end.reason, FinishReason::kLength);
  EXPECT_EQ(outs[0].end.prompt_tokens, 1);
  EXPECT_TRUE(outs[1].prompt_lps.empty());
  EXPECT_EQ(outs[1].tokens, ref_greedy({7}, 2));
  expect_prompt_logprobs(outs[2], {7, 8}, 0, "two-token prompt");
  EXPECT_TRUE(outs[2].tokens.empty());
}

TEST(PromptLogprobs, PrefixCacheDoesNotHidePositions) {
  std::mt19937 rng(
      static_cast<uint32_t>(testing::fresh_seed("PromptLogprobs.PrefixCacheDoesNotHidePositions")));
  SchedulerOptions o;
  o.vocab_limit = kLimit;
  std::vector<int32_t> prompt = random_prompt(rng, 200);
  prompt.resize(std::max<size_t>(prompt.size(), 40), 5);
  Harness run(KvCacheSpec{8, 200, 200}, o);
  run.add(prompt, scoring(-1, 3));  // fills the prefix cache
  run.add(prompt, scoring(2, 3));   // same prompt, scored: every position, no cache hit
  run.add(prompt, scoring(-1, 3));  // an ordinary request still hits the cache
  std::vector<Out> a = run.run();   // requests are admitted together: run them again, one by one
  Harness seq(KvCacheSpec{8, 200, 200}, o);
  std::vector<Out> outs;
  for (const auto& p : {scoring(-1, 3), scoring(2, 3), scoring(-1, 3), scoring(2, 0)}) {
    seq.streams.clear();
    seq.add(prompt, p);
    outs.push_back(seq.run()[0]);
  }
  expect_prompt_logprobs(a[1], prompt, 2, "batched");
  expect_prompt_logprobs(outs[1], prompt, 2, "after a cached run");
  expect_prompt_logprobs(outs[3], prompt, 2, "max_tokens 0 after a cached run");
  EXPECT_EQ(outs[1].end.cached_tokens, 0);
  EXPECT_GT(outs[2].end.cached_tokens, 0);
  for (int i : {0, 1, 2}) EXPECT_EQ(outs[i].tokens, ref_greedy(prompt, 3));
}

TEST_P(PromptLogprobsBoth, PreemptionMidPromptNeitherDuplicatesNorDrops) {
  std::mt19937 rng(static_cast<uint32_t>(
      testing::fresh_seed("PromptLogprobs.PreemptionMidPromptNeitherDuplicatesNorDrops")));
  for (bool caching : {false, true}) {
    SchedulerOptions o;
    o.vocab_limit = kLimit;
    o.prefix_caching = caching;
    o.prompt_logprob_rows = 8 + rng() % 24;
    o.prompt_logprob_step_rows = 5 * o.prompt_logprob_rows;
    o.max_num_batched_tokens = 8 + o.prompt_logprob_step_rows;
    // A decoding request and 5 scoring ones are admitted in the first step; the prompts (>= 500
    // tokens) cannot all fit in 40 blocks of 8, so scoring requests (the most recently
    // admitted) are preempted while their prompts are being scored, and recomputed later.
    Harness run(KvCacheSpec{8, 40, 64}, o, GetParam());
    std::vector<std::vector<int32_t>> prompts = {random_prompt(rng, 8)};
    std::vector<int64_t> ks = {-1}, max_toks = {250};
    run.add(prompts[0], scoring(-1, 250));
    for (int i = 0; i < 5; ++i) {
      prompts.push_back(random_prompt(rng, 200));
      prompts.back().resize(std::max<size_t>(prompts.back().size(), 100), 3);
      ks.push_back(rng() % 6);
      max_toks.push_back(1 + rng() % 8);
      run.add(prompts.back(), scoring(ks.back(), max_toks.back()));
    }
    std::vector<Out> outs = run.run();
    EXPECT_GT(run.preempted, 0);
    // A chunk without logits (kNone) followed in a later step by a kAll chunk that starts where
    // it ended: a recomputation of reported positions, then scoring resumed.
    std::vector<std::pair<size_t, int64_t>> recomputed;  // (step, end)
    int64_t resumed = 0;
    for (size_t s = 0; s < run.runner.steps.size(); ++s) {
      for (const auto& c : run.runner.steps[s]) {
        if (c.mode == LogitsMode::kNone) recomputed.emplace_back(s, c.pos0 + c.n);
        if (c.mode != LogitsMode::kAll) continue;
        for (const auto& [s0, end] : recomputed) resumed += s0 < s && end == c.pos0;
      }
    }
    if (!caching) {
      EXPECT_GT(resumed, 0) << "no preemption mid-prompt";
    }
    for (size_t i = 0; i < prompts.size(); ++i) {
      const std::string where = "request " + std::to_string(i) + (caching ? " cached" : "");
      if (i > 0) expect_prompt_logprobs(outs[i], prompts[i], ks[i], where);
      EXPECT_EQ(outs[i].tokens, ref_greedy(prompts[i], max_toks[i])) << where;
    }
    std::printf("caching %d: preemptions %lld, resumed %lld\n", caching, (long long)run.preempted,
                (long long)resumed);
    run.check_row_caps();
  }
}

TEST(PromptLogprobs, OtherRequestsKeepTheirChunksAndDeviceSampling) {
  std::mt19937 rng(static_cast<uint32_t>(
      testing::fresh_seed("PromptLogprobs.OtherRequestsKeepTheirChunksAndDeviceSampling")));
  SchedulerOptions o;
  o.vocab_limit = kLimit;
  const std::vector<int32_t> plain = random_prompt(rng, 300);
  const int64_t plain_max = 1 + rng() % 20;
  // Alone.
  Harness alone(KvCacheSpec{16, 200, 200}, o, /*device=*/true);
  alone.add(plain, scoring(-1, plain_max));
  const std::vector<Out> a = alone.run();
  // Admitted first, then a scoring request: the plain request is chunk 0 of every step.
  Harness both(KvCacheSpec{16, 200, 200}, o, /*device=*/true);
  both.add(plain, scoring(-1, plain_max));
  std::vector<int32_t> scored = random_prompt(rng, 300);
  // Its last prompt row falls in a scored (kAll) chunk unless the rows to score end exactly at
  // a chunk end (then it is an ordinary kLast row): keep (length - 1) off the chunk size.
  if ((scored.size() - 1) % o.prompt_logprob_rows == 0) scored.push_back(1);
  both.add(scored, scoring(5, 4));
  const std::vector<Out> b = both.run();
  EXPECT_EQ(a[0].tokens, ref_greedy(plain, plain_max));
  EXPECT_EQ(b[0].tokens, a[0].tokens);
  ASSERT_LE(alone.runner.steps.size(), both.runner.steps.size());
  for (size_t s = 0; s < alone.runner.steps.size(); ++s) {
    const auto& x = alone.runner.steps[s][0];
    const auto& y = both.runner.steps[s][0];
    EXPECT_EQ(x.pos0, y.pos0) << "step " << s;
    EXPECT_EQ(x.n, y.n) << "step " << s;
    EXPECT_EQ(x.mode, y.mode) << "step " << s;
    EXPECT_EQ(x.device, y.device) << "step " << s;
    EXPECT_NE(x.mode, LogitsMode::kAll);
  }
  // The scoring request samples its first token from a kAll row on the host; later tokens on
  // the device.
  expect_prompt_logprobs(b[1], scored, 5, "scored");
  EXPECT_EQ(b[1].tokens, ref_greedy(scored, 4));
  bool host_first = false;
  for (const auto& step : both.runner.steps) {
    for (const auto& c : step) {
      if (c.mode == LogitsMode::kAll) {
        EXPECT_FALSE(c.device);
      }
      if (c.mode == LogitsMode::kAll && c.pos0 + c.n == (int64_t)scored.size()) host_first = true;
    }
  }
  EXPECT_TRUE(host_first);
}

}  // namespace
}  // namespace gossamer

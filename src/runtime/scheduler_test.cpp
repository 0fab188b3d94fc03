// Scheduler + engine with the FakeRunner: batch independence, preemption, the per-step token
// budget invariant, prefix-cache reuse, cancellation and admission checks.
#include "runtime/scheduler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <random>

#include "common/test_seed.h"
#include "runtime/engine.h"
#include "runtime/fake_runner.h"

namespace gossamer {
namespace {

constexpr int64_t kVocab = 300;
constexpr int64_t kWindow = 24;

// Independent reference: greedy decoding straight from the token list.
std::vector<int32_t> reference_greedy(std::vector<int32_t> seq, int64_t max_tokens,
                                      const std::vector<int32_t>& stops) {
  std::vector<int32_t> out;
  std::vector<float> row(kVocab);
  for (int64_t i = 0; i < max_tokens; ++i) {
    fake_reference_logits(seq, kWindow, row);
    const int32_t t = static_cast<int32_t>(std::max_element(row.begin(), row.end()) - row.begin());
    out.push_back(t);
    seq.push_back(t);
    if (std::find(stops.begin(), stops.end(), t) != stops.end()) break;
  }
  return out;
}

struct Fixture {
  ModelConfig cfg = fake_model_config(kVocab, kWindow, 4096);
  KvCacheSpec spec;
  FakeRunner runner;
  Metrics metrics;
  Scheduler sched;
  std::unique_ptr<TokenSampler> sampler = make_default_sampler();
  Fixture(KvCacheSpec s, SchedulerOptions o)
      : spec(s), runner(cfg, s), sched(cfg, s, o, &metrics) {}

  std::shared_ptr<RequestStream> add(std::vector<int32_t> prompt, GenerationParams p) {
    auto r = std::make_unique<Request>();
    r->tokens = std::move(prompt);
    r->params = p;
    r->stream = std::make_shared<RequestStream>();
    r->arrival = Clock::now();
    auto s = r->stream;
    EXPECT_TRUE(sched.add(std::move(r)).ok());
    return s;
  }
  // Runs steps until idle, checking the invariants of every step.
  void run(const SchedulerOptions& o, int64_t* preemptions) {
    for (int guard = 0; sched.has_work() && guard < 100000; ++guard) {
      auto res = sched.step(runner, *sampler);
      ASSERT_TRUE(res.ok()) << res.status().ToString();
      EXPECT_LE(res->scheduled_tokens, o.max_num_batched_tokens);
      EXPECT_LE(sched.num_running(), o.max_num_seqs);
      *preemptions += res->preempted;
    }
    EXPECT_FALSE(sched.has_work());
  }
};

std::vector<int32_t> drain(RequestStream& s, StreamChunk* end) {
  std::vector<int32_t> out;
  StreamChunk c;
  while (s.wait(&c, std::chrono::milliseconds(0))) {
    for (auto& t : c.tokens) out.push_back(t.token);
    if (c.finished) *end = c;
  }
  return out;
}

GenerationParams greedy(int64_t max_tokens) {
  GenerationParams p;
  p.temperature = 0;
  p.max_tokens = max_tokens;
  return p;
}

TEST(Scheduler, BatchOf64MatchesAloneWithPreemption) {
  std::mt19937 rng(
      static_cast<uint32_t>(testing::fresh_seed("Scheduler.BatchOf64MatchesAloneWithPreemption")));
  std::vector<std::vector<int32_t>> prompts(64);
  std::vector<int64_t> max_toks(64);
  for (size_t i = 0; i < prompts.size(); ++i) {
    prompts[i].resize(1 + rng() % 90);
    for (auto& t : prompts[i]) t = static_cast<int32_t>(rng() % kVocab);
    if (i % 8 == 3) prompts[i] = prompts[i - 1];  // shared prefixes for the cache
    max_toks[i] = 1 + rng() % 40;
  }
  // Small pools and budget: chunked prefills, sliding releases and preemptions all happen.
  SchedulerOptions o;
  o.max_num_seqs = 64;
  o.max_num_batched_tokens = 48;
  Fixture f(KvCacheSpec{8, 60, 70}, o);
  std::vector<std::shared_ptr<RequestStream>> streams;
  for (size_t i = 0; i < prompts.size(); ++i)
    streams.push_back(f.add(prompts[i], greedy(max_toks[i])));
  int64_t preemptions = 0;
  f.run(o, &preemptions);
  EXPECT_GT(preemptions, 0) << "the pool was meant to be too small for 64 sequences";
  int mismatches = 0;
  for (size_t i = 0; i < prompts.size(); ++i) {
    StreamChunk end;
    auto got = drain(*streams[i], &end);
    EXPECT_EQ(end.reason, FinishReason::kLength);
    if (got != reference_greedy(prompts[i], max_toks[i], {})) ++mismatches;
  }
  EXPECT_EQ(mismatches, 0);
  EXPECT_EQ(f.sched.blocks().stats().full_used, 0);
  EXPECT_EQ(f.sched.blocks().stats().sliding_used, 0);
  std::printf("preemptions %lld, steps %lld\n", (long long)preemptions,
              (long long)f.runner.steps());
}

TEST(Scheduler, PrefixCacheSkipsSharedPrefill) {
  SchedulerOptions o;
  Fixture f(KvCacheSpec{16, 64, 64}, o);
  std::vector<int32_t> system(70);
  for (size_t i = 0; i < system.size(); ++i) system[i] = static_cast<int32_t>((i * 7) % kVocab);
  auto a = f.add(system, greedy(5));
  int64_t pre = 0;
  f.run(o, &pre);
  StreamChunk end_a;
  auto out_a = drain(*a, &end_a);
  EXPECT_EQ(end_a.cached_tokens, 0);
  // Second turn: the first conversation + its answer + a new user message.
  std::vector<int32_t> turn2 = system;
  turn2.insert(turn2.end(), out_a.begin(), out_a.end());
  for (int i = 0; i < 20; ++i) turn2.push_back(i + 1);
  auto b = f.add(turn2, greedy(6));
  f.run(o, &pre);
  StreamChunk end_b;
  auto out_b = drain(*b, &end_b);
  // 75 computed tokens of a: 4 full blocks of 16 = 64 shared tokens.
  EXPECT_EQ(end_b.cached_tokens, 64);
  EXPECT_EQ(end_b.prompt_tokens, (int64_t)turn2.size());
  EXPECT_EQ(out_b, reference_greedy(turn2, 6, {}));
  const auto st = f.sched.blocks().stats();
  EXPECT_EQ(st.prefix_hits, 64);
}

TEST(Scheduler, StopTokenAndCancellationFreeBlocks) {
  SchedulerOptions o;
  Fixture f(KvCacheSpec{16, 64, 64}, o);
  std::vector<int32_t> prompt = {1, 2, 3, 4, 5};
  auto ref = reference_greedy(prompt, 10, {});
  GenerationParams p = greedy(10);
  p.stop_token_ids = {ref[3]};
  auto s1 = f.add(prompt, p);
  auto s2 = f.add({9, 8, 7}, greedy(1000));
  for (int i = 0; i < 8; ++i) ASSERT_TRUE(f.sched.step(f.runner, *f.sampler).ok());
  StreamChunk end1;
  auto out1 = drain(*s1, &end1);
  const auto stop_at = std::find(ref.begin(), ref.end(), ref[3]) - ref.begin();
  EXPECT_EQ(out1, std::vector<int32_t>(ref.begin(), ref.begin() + stop_at + 1));
  EXPECT_EQ(end1.reason, FinishReason::kStop);
  EXPECT_EQ(end1.stop_token, ref[3]);
  EXPECT_GT(f.sched.blocks().stats().full_used, 0);
  s2->cancel();
  ASSERT_TRUE(f.sched.step(f.runner, *f.sampler).ok());
  EXPECT_FALSE(f.sched.has_work());
  EXPECT_EQ(f.sched.blocks().stats().full_used, 0);
  StreamChunk end2;
  drain(*s2, &end2);
  EXPECT_EQ(end2.reason, FinishReason::kCancelled);
}

// A consumer that ends a request on a stop string (RequestStream::stop_early) frees its blocks
// like a cancel, but the request counts as finished with reason stop, not cancelled.
TEST(Scheduler, StopEarlyCountsAsStopAndFreesBlocks) {
  std::mt19937 rng(
      static_cast<uint32_t>(testing::fresh_seed("Scheduler.StopEarlyCountsAsStopAndFreesBlocks")));
  SchedulerOptions o;
  o.max_num_batched_tokens = 1 + static_cast<int64_t>(rng() % 64);
  Fixture f(KvCacheSpec{8, 64, 64}, o);
  std::vector<std::shared_ptr<RequestStream>> streams;
  for (int i = 0; i < 12; ++i) {
    std::vector<int32_t> prompt(1 + rng() % 40);
    for (auto& t : prompt) t = static_cast<int32_t>(rng() % kVocab);
    streams.push_back(f.add(prompt, greedy(400)));
  }
  int64_t stopped = 0, cancelled = 0;
  for (int guard = 0; f.sched.has_work() && guard < 100000; ++guard) {
    ASSERT_TRUE(f.sched.step(f.runner, *f.sampler).ok());
    for (size_t i = 0; i < streams.size(); ++i) {  // each ends once, stop or cancel
      if (!streams[i] || rng() % 8 != 0) continue;
      (i % 2 == 0 ? ++stopped : ++cancelled);
      i % 2 == 0 ? streams[i]->stop_early() : streams[i]->cancel();
      streams[i] = nullptr;
    }
  }
  EXPECT_FALSE(f.sched.has_work());
  EXPECT_EQ(f.sched.blocks().stats().full_used, 0);
  EXPECT_EQ(f.sched.blocks().stats().sliding_used, 0);
  const MetricsSnapshot m = f.metrics.snapshot();
  EXPECT_EQ(m.finished_stop, stopped);
  EXPECT_EQ(m.finished_cancelled, cancelled);
  EXPECT_EQ(stopped + cancelled, 12);
}

TEST(Scheduler, RejectsRequestsThatCannotFit) {
  SchedulerOptions o;
  o.max_model_len = 100;
  Fixture f(KvCacheSpec{16, 4, 8}, o);
  std::vector<int32_t> p(50, 1);
  Status st = f.sched.check(p, greedy(60));
  EXPECT_EQ(st.code(), StatusCode::kOutOfRange);  // the server's context_length_exceeded
  EXPECT_NE(st.message().find("maximum context length is 100"), std::string::npos);
  st = f.sched.check(p, greedy(30));  // 80 tokens > 4 blocks of 16
  EXPECT_EQ(st.code(), StatusCode::kOutOfRange);
  EXPECT_NE(st.message().find("KV cache"), std::string::npos) << st.message();
  EXPECT_FALSE(f.sched.check({}, greedy(1)).ok());
  EXPECT_FALSE(f.sched.check({(int32_t)kVocab}, greedy(1)).ok());
  EXPECT_TRUE(f.sched.check({1, 2}, greedy(10)).ok());
}

TEST(Engine, ConcurrentSubmittersMatchReference) {
  ModelConfig cfg = fake_model_config(kVocab, kWindow, 4096);
  KvCacheSpec spec{16, 200, 200};
  EngineOptions o;
  o.sched.max_num_batched_tokens = 64;
  auto eng = Engine::start(std::make_unique<FakeRunner>(cfg, spec), nullptr, o);
  ASSERT_TRUE(eng.ok());
  std::vector<std::thread> ts;
  std::atomic<int> bad{0};
  for (int i = 0; i < 16; ++i) {
    ts.emplace_back([&, i] {
      std::vector<int32_t> prompt(5 + i * 3, static_cast<int32_t>(i + 1));
      auto s = (*eng)->submit(prompt, greedy(12));
      if (!s.ok()) {
        ++bad;
        return;
      }
      std::vector<int32_t> got;
      StreamChunk c;
      for (bool done = false; !done;) {
        if (!(*s)->wait(&c, std::chrono::milliseconds(5000))) break;
        for (auto& t : c.tokens) got.push_back(t.token);
        done = c.finished;
      }
      if (got != reference_greedy(prompt, 12, {})) ++bad;
    });
  }
  for (auto& t : ts) t.join();
  EXPECT_EQ(bad.load(), 0);
  (*eng)->stop();
}

TEST(Engine, QueueLimitRejectsWithResourceExhausted) {
  ModelConfig cfg = fake_model_config(kVocab, kWindow, 4096);
  EngineOptions o;
  o.max_queue = 2;
  o.sched.max_num_seqs = 1;
  auto eng = Engine::start(
      std::make_unique<FakeRunner>(cfg, KvCacheSpec{16, 64, 64}, std::chrono::milliseconds(20)),
      nullptr, o);
  ASSERT_TRUE(eng.ok());
  int rejected = 0;
  std::vector<std::shared_ptr<RequestStream>> keep;
  for (int i = 0; i < 10; ++i) {
    auto s = (*eng)->submit({1, 2, 3}, greedy(50));
    if (!s.ok()) {
      EXPECT_EQ(s.status().code(), StatusCode::kResourceExhausted);
      ++rejected;
    } else {
      keep.push_back(*s);
    }
  }
  EXPECT_GT(rejected, 0);
  (*eng)->stop();
  for (auto& s : keep) EXPECT_TRUE(s->finished());
}

}  // namespace
}  // namespace gossamer

// Batch independence on the real CPU backend: a tiny synthetic gpt-oss (random weights, small
// vocabulary) decoded greedily, each request alone vs all 64 in one continuously batched run
// with a KV pool small enough to force chunked prefill, sliding-window releases, prefix sharing
// and preemption. The token sequences must be identical.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <random>

#include "common/test_seed.h"
#include "engine/cpu_runner.h"
#include "model/synth.h"
#include "model/weights.h"
#include "runtime/scheduler.h"

namespace gossamer {
namespace {

std::shared_ptr<LoadedModel> tiny_model() {
  auto cfg = preset_config("tiny");
  EXPECT_TRUE(cfg.ok());
  SynthOptions o;
  o.config = *cfg;
  o.config.vocab_size = 512;
  o.config.eos_token_ids = {};
  o.config.pad_token_id = -1;
  o.seed = 7;
  o.threads = 1;
  o.out_dir = (std::filesystem::temp_directory_path() /
               ("gossamer_sched_cpu_" + std::to_string(::getpid())))
                  .string();
  Status st = write_synth_checkpoint(o);
  EXPECT_TRUE(st.ok()) << st.ToString();
  auto m = load_model(o.out_dir);
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  return m.ok() ? *m : nullptr;
}

std::vector<std::vector<int32_t>> run(std::shared_ptr<LoadedModel> model, KvCacheSpec spec,
                                      SchedulerOptions so,
                                      const std::vector<std::vector<int32_t>>& prompts,
                                      int64_t max_tokens, bool one_at_a_time, int64_t* preempt) {
  auto runner = make_cpu_runner(model, spec, 1);
  EXPECT_TRUE(runner.ok()) << runner.status().ToString();
  Scheduler sched(model->config, spec, so, nullptr);
  auto sampler = make_default_sampler();
  std::vector<std::shared_ptr<RequestStream>> streams;
  auto drain = [&] {
    while (sched.has_work()) {
      auto r = sched.step(**runner, *sampler);
      EXPECT_TRUE(r.ok()) << r.status().ToString();
      if (!r.ok()) return;
      *preempt += r->preempted;
    }
  };
  for (const auto& p : prompts) {
    auto req = std::make_unique<Request>();
    req->tokens = p;
    req->params.temperature = 0;
    req->params.max_tokens = max_tokens;
    req->stream = std::make_shared<RequestStream>();
    streams.push_back(req->stream);
    EXPECT_TRUE(sched.add(std::move(req)).ok());
    if (one_at_a_time) drain();
  }
  drain();
  std::vector<std::vector<int32_t>> out;
  for (auto& s : streams) {
    std::vector<int32_t> toks;
    StreamChunk c;
    while (s->wait(&c, std::chrono::milliseconds(0))) {
      for (auto& t : c.tokens) toks.push_back(t.token);
    }
    out.push_back(toks);
  }
  return out;
}

TEST(SchedulerCpu, GreedyAloneEqualsBatchOf64) {
  auto model = tiny_model();
  ASSERT_TRUE(model);
  std::mt19937 rng(
      static_cast<uint32_t>(testing::fresh_seed("SchedulerCpu.GreedyAloneEqualsBatchOf64")));
  std::vector<std::vector<int32_t>> prompts(64);
  for (size_t i = 0; i < prompts.size(); ++i) {
    prompts[i].resize(1 + rng() % 40);
    for (auto& t : prompts[i]) t = static_cast<int32_t>(rng() % 512);
    if (i % 4 == 1) {  // shared prefixes
      prompts[i] = prompts[i - 1];
      prompts[i].push_back(static_cast<int32_t>(rng() % 512));
    }
  }
  SchedulerOptions alone_opts;
  int64_t pre_alone = 0, pre_batch = 0;
  auto alone = run(model, KvCacheSpec{16, 64, 64}, alone_opts, prompts, 12, true, &pre_alone);
  SchedulerOptions batch_opts;
  batch_opts.max_num_batched_tokens = 40;
  auto batch = run(model, KvCacheSpec{16, 16, 20}, batch_opts, prompts, 12, false, &pre_batch);
  int mismatches = 0;
  for (size_t i = 0; i < prompts.size(); ++i) {
    EXPECT_EQ(alone[i].size(), 12u);
    if (alone[i] != batch[i]) ++mismatches;
  }
  std::printf("mismatches %d / 64, preemptions in the batch run %lld\n", mismatches,
              (long long)pre_batch);
  EXPECT_EQ(mismatches, 0);
  EXPECT_GT(pre_batch, 0);
  std::filesystem::remove_all(model->dir);
}

}  // namespace
}  // namespace gossamer

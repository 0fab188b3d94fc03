// GPU tests of CudaModelRunner beyond the random small models (cuda_runner_test.cpp): the real
// gpt-oss-120b shapes against the CPU reference, chunks the runner must refuse, and the synthetic
// bench decode. Label "gpu".
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "engine/cuda/cuda_runner.h"
#include "engine/cuda/cuda_runner_test_util.h"
#include "engine/cuda/cuda_test_util.h"

namespace gossamer {
namespace {

using cudatest::fresh_seed;
using cudatest::rel_err;
using cudatest::row_stats;
using cudatest::runner::expect_rows_match_bf16kv;
using cudatest::runner::Fixture;
using cudatest::runner::make_fixture;
using cudatest::runner::small_config;

// The real gpt-oss-120b shapes (hidden 2880, 64/8 heads, 128 experts top-4, vocab 201088,
// YaRN) with two layers (sliding + full): a 9-token prefill and 4 decode steps on the GPU
// against the CPU runner with bf16 K/V (and the fp32 one, reported), MXFP4 experts as stored.
TEST(CudaRunner, RealShapes120bTwoLayers) {
  const uint64_t seed = fresh_seed("cuda runner 120b shapes");
  ModelConfig cfg = preset_config("120b").value();
  cfg.num_hidden_layers = 2;
  cfg.layer_types = {LayerType::kSlidingAttention, LayerType::kFullAttention};
  Fixture f;
  make_fixture(&f, cfg, seed, 64);
  if (HasFatalFailure()) return;
  const int64_t V = cfg.vocab_size;
  std::mt19937_64 rng(seed + 1);
  std::vector<int32_t> toks(9);
  for (auto& t : toks) t = static_cast<int32_t>(rng() % V);
  std::vector<int32_t> table = {5, 2};
  std::vector<double> e16, e32;
  for (int step = 0; step < 5; ++step) {
    const int64_t pos0 = step == 0 ? 0 : 8 + step;
    std::span<const int32_t> in =
        step == 0 ? std::span<const int32_t>(toks) : std::span<const int32_t>(&toks[step], 1);
    SeqChunk c{in, pos0, table, table, step == 0 ? LogitsMode::kAll : LogitsMode::kLast};
    StepOutput oc, ob, og;
    ASSERT_TRUE(f.cpu->step({&c, 1}, &oc).ok());
    ASSERT_TRUE(f.cpu_bf16->step({&c, 1}, &ob).ok());
    ASSERT_TRUE(f.gpu->step({&c, 1}, &og).ok());
    ASSERT_EQ(og.rows, ob.rows);
    for (int64_t r = 0; r < og.rows; ++r) {
      e16.push_back(rel_err(&og.logits[r * V], &ob.logits[r * V], V));
      e32.push_back(rel_err(&og.logits[r * V], &oc.logits[r * V], V));
    }
  }
  expect_rows_match_bf16kv(e16, "120b shapes, 2 layers vs cpu (bf16 K/V)");
  // Against fp32 K/V: reported only. With 128 experts a near-tied top-4 choice at an early
  // position flips under the bf16 rounding of K/V, changes that position's layer-1 K/V, and every
  // later row attends to it: measured median 1.8e-3 on one seed and 3.6e-2 on another (H200),
  // while the GPU agreed with the bf16-K/V CPU runner to 1.4e-4 / 1.8e-4 on both.
  row_stats(e32, 1e-2, "120b shapes, 2 layers vs cpu (fp32, reported)");
}

TEST(CudaRunner, RejectsBadChunks) {
  const uint64_t seed = fresh_seed("cuda runner errors");
  std::mt19937_64 rng(seed);
  Fixture f;
  make_fixture(&f, small_config(rng), rng(), 64);
  if (HasFatalFailure()) return;
  std::vector<int32_t> toks = {1, 2, 3};
  std::vector<int32_t> table = {0};
  StepOutput out;
  SeqChunk c{toks, 14, table, table, LogitsMode::kLast};  // positions 14..16 need 2 blocks
  Status s = f.gpu->step({&c, 1}, &out);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("block table"), std::string::npos) << s.message();
  std::vector<int32_t> bad = {1, 1 << 30};
  SeqChunk c2{bad, 0, table, table, LogitsMode::kLast};
  s = f.gpu->step({&c2, 1}, &out);
  EXPECT_NE(s.message().find("token 1"), std::string::npos) << s.message();
  std::vector<int32_t> t2 = {99};
  SeqChunk c3{toks, 0, t2, t2, LogitsMode::kLast};
  s = f.gpu->step({&c3, 1}, &out);
  EXPECT_NE(s.message().find("outside"), std::string::npos) << s.message();
  EXPECT_FALSE(f.gpu->copy_block(false, 0, 1000).ok());
}

TEST(CudaRunner, SyntheticBenchDecodeRuns) {
  ModelConfig c = preset_config("tiny").value();
  c.head_dim = 64;
  c.hidden_size = 256;
  c.intermediate_size = 256;
  CudaRunnerOptions o;
  o.max_seq_len = 1024;
  o.max_seqs = 2;
  auto r = CudaModelRunner::create_synthetic(c, o, 7);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_TRUE((*r)->fill_kv_random(3).ok());
  auto d = (*r)->bench_decode(2, 500, 16);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_GT(d->ms, 0);
  for (int32_t t : d->last_tokens) EXPECT_TRUE(t >= 0 && t < c.vocab_size);
  std::printf("%s\n", (*r)->describe().c_str());
}

}  // namespace
}  // namespace gossamer

// GPU tests of the prefill path's limits: CudaRunnerOptions the runner must refuse, and a long
// prompt on gpt-oss-20b shapes (finite logits, memory). The comparisons on random small models:
// prefill_test.cpp. Label "gpu".
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "engine/cuda/cuda_runner.h"
#include "engine/cuda/cuda_test_util.h"

namespace gossamer {
namespace {

using cudatest::argmax;

TEST(CudaPrefill, RejectsBadOptions) {
  ModelConfig c = preset_config("tiny").value();
  c.head_dim = 64;
  CudaRunnerOptions o;
  o.max_step_tokens = 16385;
  auto r = CudaModelRunner::create_synthetic(c, o, 1);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("max_step_tokens"), std::string::npos);
  o.max_step_tokens = 64;
  o.max_logit_rows = 0;
  EXPECT_FALSE(CudaModelRunner::create_synthetic(c, o, 1).ok());
  o.max_logit_rows = 256;
  o.prefill_flash_variant = kMaxPrefillFlashVariant + 1;
  r = CudaModelRunner::create_synthetic(c, o, 1);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("prefill_flash_variant"), std::string::npos);
}

// A long prompt on gpt-oss-20b shapes (2 layers: sliding + full, real hidden/heads/experts/
// vocab), prefilled in chunks of 8192 rows: the last logits row must be finite, and the device
// memory the runner holds must match the model of weights + KV pools + workspace within 10%.
// GOSSAMER_LONG_PROMPT overrides the length (default 32768).
TEST(CudaPrefill, LongPromptOn20bShapesIsFinite) {
  int64_t len = 32768;
  if (const char* e = std::getenv("GOSSAMER_LONG_PROMPT")) len = std::atoll(e);
  ModelConfig c = preset_config("20b").value();
  c.num_hidden_layers = 2;
  c.layer_types = {LayerType::kSlidingAttention, LayerType::kFullAttention};
  CudaRunnerOptions o;
  o.max_seq_len = len + 16;
  o.max_seqs = 1;
  o.max_step_tokens = 8192;
  size_t free0 = 0, total = 0;
  ASSERT_EQ(cudaMemGetInfo(&free0, &total), cudaSuccess);
  auto r = CudaModelRunner::create_synthetic(c, o, 5);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  size_t free1 = 0;
  ASSERT_EQ(cudaMemGetInfo(&free1, &total), cudaSuccess);
  std::vector<int32_t> toks(len), table((len + 15) / 16 + 1);
  std::mt19937 rng(3);
  for (auto& t : toks) t = static_cast<int32_t>(rng() % c.vocab_size);
  for (size_t i = 0; i < table.size(); ++i) table[i] = static_cast<int32_t>(i);
  SeqChunk ch{toks, 0, table, table, LogitsMode::kLast};
  StepOutput out;
  const auto t0 = std::chrono::steady_clock::now();
  const Status s = (*r)->step({&ch, 1}, &out);
  const double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_TRUE(s.ok()) << s.ToString();
  ASSERT_EQ(out.rows, 1);
  int finite = 0;
  for (float v : out.logits) finite += std::isfinite(v);
  const double used = static_cast<double>(free0 - free1) / (1 << 30);
  // Model: weights + 2 KV pools (K and V, bf16) + workspace rows of ~ (4 x f32 H-wide, q, attn,
  // part_o: 3 x f32 QD-wide, qkv, act k x I f32, bf16 copy) per row of max_step_tokens.
  const double H = 2880, QD = 4096, QKV = 5120, I = 2880, K = 4, E = 32, V = 201088;
  const double w = 2 * V * H * 2 + 2 * (QKV * H * 2 + H * QD * 2 + E * H * 2 +
                                        E * 3 * I * H * 17.0 / 32 + E * (3 * I) * 4);
  // 2 layers x (K, V) x tokens x 8 kv heads x 64 x bf16 (each layer has its own pool).
  const double kvb = 2.0 * 2 * static_cast<double>(o.max_seq_len) * 8 * 64 * 2;
  // Per row: x, xn, q, attn, attention partials, qkv, expert activations (f32), bf16 copy;
  // plus 256 logits rows. The grouped-MoE workspace (when built) and the CUDA / cuBLASLt
  // context come on top: the check allows 2.5 GiB above the model.
  const double wsb =
      8192.0 * (2 * H * 4 + 3 * QD * 4 + QKV * 4 + K * I * 4 + QD * 2) + 256.0 * V * 4;
  const double model = (w + kvb + wsb) / (1 << 30);
  std::printf(
      "long prompt %lld tokens (20b shapes, 2 layers): %.2f s, %d/%lld finite logits, "
      "argmax %d, device memory held %.2f GiB (model %.2f GiB)\n",
      static_cast<long long>(len), sec, finite, static_cast<long long>(c.vocab_size),
      argmax(out.logits.data(), c.vocab_size), used, model);
  EXPECT_EQ(finite, c.vocab_size);
  EXPECT_GE(used, 0.95 * model);
  EXPECT_LE(used, model + 2.5);
}

}  // namespace
}  // namespace gossamer

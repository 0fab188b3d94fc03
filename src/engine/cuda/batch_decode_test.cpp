// Large decode batches (>= prefill_min_rows sequences, one token each) run as a CUDA graph of the
// prefill path (cuBLASLt projections, grouped MoE, flash attention) with the lm_head as a split
// bf16 GEMM + argmax (lm_head.cpp). Checked on a random small checkpoint against (a) the same
// runner without graphs (eager launches of the same kernels: bitwise equal), (b) the CPU
// reference with bf16 K/V, and (c) the runner's own greedy tokens vs the argmax of its logits.
// Label "gpu".
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <random>

#include "engine/cpu_runner.h"
#include "engine/cuda/cuda_runner.h"
#include "engine/cuda/cuda_test_util.h"
#include "model/synth.h"

namespace gossamer {
namespace {

namespace fs = std::filesystem;
using cudatest::fresh_seed;
using cudatest::rel_err;

constexpr int kMaxSeqs = 24, kBs = 16, kBlocksPerSeq = 4, kMaxSeq = kBs * kBlocksPerSeq;

struct TmpDir {
  fs::path p;
  ~TmpDir() {
    std::error_code ec;
    fs::remove_all(p, ec);
  }
};

Result<std::unique_ptr<CudaModelRunner>> runner(const LoadedModel& m, bool graphs, bool split,
                                                int prefill_min_rows = 17, bool grouped = true) {
  CudaRunnerOptions o;
  o.kv = KvCacheSpec{kBs, kMaxSeqs * kBlocksPerSeq, kMaxSeqs * kBlocksPerSeq};
  o.max_seq_len = kMaxSeq;
  o.max_seqs = kMaxSeqs;
  o.max_step_tokens = 256;
  o.prefill_min_rows = prefill_min_rows;
  o.use_graphs = graphs;
  o.prefill_split_bf16 = split;
  o.grouped_moe_small = grouped;
  return CudaModelRunner::create(m, o);
}

// The CPU reference with bf16 K/V (as the GPU cache).
Result<std::unique_ptr<ModelRunner>> cpu_runner(const std::shared_ptr<LoadedModel>& model) {
  CpuRunnerOptions co;
  co.threads = 2;
  co.kv_bf16 = true;
  return make_cpu_runner(model,
                         KvCacheSpec{kBs, kMaxSeqs * kBlocksPerSeq, kMaxSeqs * kBlocksPerSeq}, co);
}

// Prompts of 3..42 random tokens for n_seqs sequences, then `steps` decode steps of one random
// token each through every runner; logits[step][runner] = that step's [n_seqs, V] logits.
void run_batches(std::mt19937_64& rng, int64_t V, int n_seqs, int steps,
                 const std::vector<ModelRunner*>& all,
                 std::vector<std::vector<std::vector<float>>>* logits,
                 const std::function<void(int)>& after_step = {}) {
  std::vector<std::vector<int32_t>> tables(n_seqs), prompts(n_seqs);
  std::vector<int> len(n_seqs);
  for (int s = 0; s < n_seqs; ++s) {
    for (int i = 0; i < kBlocksPerSeq; ++i)
      tables[s].push_back((kMaxSeqs - 1 - s) * kBlocksPerSeq + i);
    len[s] = 3 + static_cast<int>(rng() % 40);
    for (int i = 0; i < len[s]; ++i) prompts[s].push_back(static_cast<int32_t>(rng() % V));
    SeqChunk c{prompts[s], 0, tables[s], tables[s], LogitsMode::kNone};
    for (ModelRunner* r : all) {
      StepOutput o;
      ASSERT_TRUE(r->step({&c, 1}, &o).ok());
    }
  }
  for (int step = 0; step < steps; ++step) {
    std::vector<std::vector<int32_t>> one(n_seqs);
    std::vector<SeqChunk> chunks;
    for (int s = 0; s < n_seqs; ++s) {
      one[s] = {static_cast<int32_t>(rng() % V)};
      chunks.push_back(SeqChunk{one[s], len[s] + step, tables[s], tables[s], LogitsMode::kLast});
    }
    logits->emplace_back();
    for (ModelRunner* r : all) {
      StepOutput out;
      const Status st = r->step(chunks, &out);
      ASSERT_TRUE(st.ok()) << st.ToString();
      ASSERT_EQ(out.rows, n_seqs);
      logits->back().push_back(std::move(out.logits));
    }
    if (after_step) after_step(step);
  }
}

TEST(CudaBatchDecode, LargeBatchGraphMatchesEagerCpuAndArgmax) {
  const uint64_t seed = fresh_seed("cuda batch decode");
  std::mt19937_64 rng(seed);
  const ModelConfig cfg = cudatest::small_config(rng, 4, 4);
  TmpDir dir{fs::temp_directory_path() / ("gossamer_batch_decode_" + std::to_string(seed))};
  std::shared_ptr<LoadedModel> model;
  ASSERT_NO_FATAL_FAILURE(cudatest::synth_and_load(cfg, rng(), dir.p.string(), &model));
  auto cpu = cpu_runner(model);
  ASSERT_TRUE(cpu.ok()) << cpu.status().ToString();
  auto graph = runner(*model, true, false), eager = runner(*model, false, false),
       split = runner(*model, true, true);
  ASSERT_TRUE(graph.ok() && eager.ok() && split.ok());
  const std::vector<ModelRunner*> all = {cpu->get(), graph->get(), eager->get(), split->get()};
  const int64_t V = cfg.vocab_size;
  std::vector<std::vector<std::vector<float>>> logits;
  std::vector<double> e_cpu, e_split;
  int bitwise_rows = 0, rows = 0;
  ASSERT_NO_FATAL_FAILURE(run_batches(rng, V, kMaxSeqs, 4, all, &logits, [&](int step) {
    const auto& out = logits.back();
    auto greedy = (*graph)->last_greedy_tokens();
    ASSERT_TRUE(greedy.ok());
    ASSERT_EQ(static_cast<int>(greedy->size()), kMaxSeqs);
    for (int s = 0; s < kMaxSeqs; ++s) {
      const float* g = &out[1][s * V];
      ++rows;
      bitwise_rows += std::equal(g, g + V, &out[2][s * V]);
      e_cpu.push_back(rel_err(g, &out[0][s * V], V));
      e_split.push_back(rel_err(&out[3][s * V], &out[0][s * V], V));
      EXPECT_EQ((*greedy)[s], std::max_element(g, g + V) - g) << "step " << step << " seq " << s;
    }
  }));
  std::printf("graph vs eager: %d of %d rows bitwise equal\n", bitwise_rows, rows);
  EXPECT_EQ(bitwise_rows, rows);
  // Bounds as in prefill_test.cpp: plain bf16 GEMM activations (loose: median <= 3e-2), split
  // bf16 (median <= 1e-2); a wrong row, slot or position gives O(1) errors.
  const auto bf16 =
      cudatest::row_stats(e_cpu, 1e-2, "batch decode (graph, bf16) vs cpu (bf16 K/V)");
  EXPECT_LE(bf16.median, 3e-2);
  EXPECT_LE(bf16.max, 0.5);
  const auto sp = cudatest::row_stats(e_split, 1e-2, "batch decode (graph, split bf16) vs cpu");
  EXPECT_LE(sp.median, 1e-2);
  EXPECT_LE(sp.max, 0.5);
}

// Prefill-path forwards of at most E / k rows take the expert-grouped decode MoE kernels
// (CudaRunnerOptions::grouped_moe_small): 12-row decode batches (and prompts of 8..16 tokens) of a
// 32-expert top-2 model, against moe_prefill (the same runner with the option off) and the CPU.
TEST(CudaBatchDecode, SmallPrefillPathBatchesUseGroupedMoe) {
  const uint64_t seed = fresh_seed("cuda grouped moe batch");
  std::mt19937_64 rng(seed);
  ModelConfig cfg = cudatest::small_config(rng, 4, 4);
  cfg.num_local_experts = 32;
  cfg.experts_per_token = 2;
  cfg.intermediate_size = 64 * (1 + static_cast<int64_t>(rng() % 2));  // MX blocks even
  TmpDir dir{fs::temp_directory_path() / ("gossamer_grouped_moe_" + std::to_string(seed))};
  std::shared_ptr<LoadedModel> model;
  ASSERT_NO_FATAL_FAILURE(cudatest::synth_and_load(cfg, rng(), dir.p.string(), &model));
  auto cpu = cpu_runner(model);
  auto on = runner(*model, true, false, 8, true), off = runner(*model, true, false, 8, false);
  ASSERT_TRUE(cpu.ok() && on.ok() && off.ok());
  constexpr int kSeqs = 12;
  EXPECT_NE((*on)->kernel_path(kSeqs).find("moe_gate_up_grouped_mxfp4w_f32a"), std::string::npos)
      << (*on)->kernel_path(kSeqs);
  EXPECT_EQ((*off)->kernel_path(kSeqs).find("grouped_mxfp4w"), std::string::npos);
  const int64_t V = cfg.vocab_size;
  std::vector<std::vector<std::vector<float>>> logits;
  ASSERT_NO_FATAL_FAILURE(
      run_batches(rng, V, kSeqs, 3, {cpu->get(), on->get(), off->get()}, &logits));
  std::vector<double> e_on, e_off;
  int differ = 0;
  for (const auto& out : logits) {
    for (int s = 0; s < kSeqs; ++s) {
      e_on.push_back(rel_err(&out[1][s * V], &out[0][s * V], V));
      e_off.push_back(rel_err(&out[2][s * V], &out[0][s * V], V));
      differ += !std::equal(&out[1][s * V], &out[1][(s + 1) * V], &out[2][s * V]);
    }
  }
  const auto a = cudatest::row_stats(e_on, 1e-2, "12-row batches, grouped MoE vs cpu");
  const auto b = cudatest::row_stats(e_off, 1e-2, "12-row batches, moe_prefill vs cpu");
  // A row may move by up to ~1 where a near-tied top-2-of-32 choice flips under the bf16
  // activations of the prefill path: H100 2026-11-28, GOSSAMER_SEED=13493965426009767260, one row
  // at 0.529 with the grouped kernels and with moe_prefill alike (the flip bound of
  // prefill_test_bounds.h). A wrong kernel moves most rows (the medians).
  EXPECT_LE(a.median, 3e-2);
  EXPECT_LE(a.max, 1.0);
  EXPECT_LE(b.median, 3e-2);
  EXPECT_GT(differ, 0) << "the option changed nothing: the grouped kernels did not run";
}

}  // namespace
}  // namespace gossamer

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

constexpr int kSeqs = 24, kBs = 16, kBlocksPerSeq = 4, kMaxSeq = kBs * kBlocksPerSeq;

struct TmpDir {
  fs::path p;
  ~TmpDir() {
    std::error_code ec;
    fs::remove_all(p, ec);
  }
};

Result<std::unique_ptr<CudaModelRunner>> runner(const LoadedModel& m, bool graphs, bool split) {
  CudaRunnerOptions o;
  o.kv = KvCacheSpec{kBs, kSeqs * kBlocksPerSeq, kSeqs * kBlocksPerSeq};
  o.max_seq_len = kMaxSeq;
  o.max_seqs = kSeqs;
  o.max_step_tokens = 256;
  o.prefill_min_rows = 17;
  o.use_graphs = graphs;
  o.prefill_split_bf16 = split;
  return CudaModelRunner::create(m, o);
}

TEST(CudaBatchDecode, LargeBatchGraphMatchesEagerCpuAndArgmax) {
  const uint64_t seed = fresh_seed("cuda batch decode");
  std::mt19937_64 rng(seed);
  const ModelConfig cfg = cudatest::small_config(rng, 4, 4);
  TmpDir dir{fs::temp_directory_path() / ("gossamer_batch_decode_" + std::to_string(seed))};
  std::shared_ptr<LoadedModel> model;
  ASSERT_NO_FATAL_FAILURE(cudatest::synth_and_load(cfg, rng(), dir.p.string(), &model));
  CpuRunnerOptions co;
  co.threads = 2;
  co.kv_bf16 = true;
  auto cpu =
      make_cpu_runner(model, KvCacheSpec{kBs, kSeqs * kBlocksPerSeq, kSeqs * kBlocksPerSeq}, co);
  ASSERT_TRUE(cpu.ok()) << cpu.status().ToString();
  auto graph = runner(*model, true, false), eager = runner(*model, false, false),
       split = runner(*model, true, true);
  ASSERT_TRUE(graph.ok() && eager.ok() && split.ok());
  ModelRunner* all[4] = {cpu->get(), graph->get(), eager->get(), split->get()};
  const int64_t V = cfg.vocab_size;
  std::vector<std::vector<int32_t>> tables(kSeqs), prompts(kSeqs);
  std::vector<int> len(kSeqs);
  for (int s = 0; s < kSeqs; ++s) {
    for (int i = 0; i < kBlocksPerSeq; ++i)
      tables[s].push_back((kSeqs - 1 - s) * kBlocksPerSeq + i);
    len[s] = 3 + static_cast<int>(rng() % 40);
    for (int i = 0; i < len[s]; ++i) prompts[s].push_back(static_cast<int32_t>(rng() % V));
    SeqChunk c{prompts[s], 0, tables[s], tables[s], LogitsMode::kNone};
    for (ModelRunner* r : all) {
      StepOutput o;
      ASSERT_TRUE(r->step({&c, 1}, &o).ok());
    }
  }
  std::vector<double> e_cpu, e_split;
  int bitwise_rows = 0, rows = 0;
  for (int step = 0; step < 4; ++step) {
    std::vector<std::vector<int32_t>> one(kSeqs);
    std::vector<SeqChunk> chunks;
    for (int s = 0; s < kSeqs; ++s) {
      one[s] = {static_cast<int32_t>(rng() % V)};
      chunks.push_back(SeqChunk{one[s], len[s] + step, tables[s], tables[s], LogitsMode::kLast});
    }
    StepOutput out[4];
    for (int i = 0; i < 4; ++i) {
      const Status st = all[i]->step(chunks, &out[i]);
      ASSERT_TRUE(st.ok()) << st.ToString();
      ASSERT_EQ(out[i].rows, kSeqs);
    }
    auto greedy = (*graph)->last_greedy_tokens();
    ASSERT_TRUE(greedy.ok());
    ASSERT_EQ(static_cast<int>(greedy->size()), kSeqs);
    for (int s = 0; s < kSeqs; ++s) {
      const float* g = &out[1].logits[s * V];
      ++rows;
      bitwise_rows += std::equal(g, g + V, &out[2].logits[s * V]);
      e_cpu.push_back(rel_err(g, &out[0].logits[s * V], V));
      e_split.push_back(rel_err(&out[3].logits[s * V], &out[0].logits[s * V], V));
      EXPECT_EQ((*greedy)[s], std::max_element(g, g + V) - g) << "step " << step << " seq " << s;
    }
  }
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

}  // namespace
}  // namespace gossamer

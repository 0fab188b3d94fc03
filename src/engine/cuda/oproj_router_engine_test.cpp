// CudaRunnerOptions::fuse_oproj_router (kernels/router/oproj_router.h): decode steps of 1..4
// sequences with the fused O-proj + router kernel must give logits bitwise equal to the unfused
// path (gemv + norm_router_topk), with graphs and eagerly; the fused kernel is bit-identical, so
// any difference is an integration bug (wrong buffer, missing wait, stale ids). Label "gpu".
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <random>

#include "engine/cuda/cuda_runner.h"
#include "engine/cuda/cuda_test_util.h"
#include "kernels/router/oproj_router.h"
#include "model/synth.h"

namespace gossamer {
namespace {

namespace fs = std::filesystem;

constexpr int kSeqs = 4, kBs = 16, kBlocksPerSeq = 4;

struct TmpDir {
  fs::path p;
  ~TmpDir() {
    std::error_code ec;
    fs::remove_all(p, ec);
  }
};

Result<std::unique_ptr<CudaModelRunner>> runner(const LoadedModel& m, bool fuse, bool graphs) {
  CudaRunnerOptions o;
  o.kv = KvCacheSpec{kBs, kSeqs * kBlocksPerSeq, kSeqs * kBlocksPerSeq};
  o.max_seq_len = kBs * kBlocksPerSeq;
  o.max_seqs = kSeqs;
  o.max_step_tokens = 64;
  o.prefill_min_rows = 0;  // every forward through the decode kernels
  o.use_graphs = graphs;
  o.fuse_oproj_router = fuse;
  return CudaModelRunner::create(m, o);
}

TEST(CudaOprojRouter, FusedDecodeLogitsBitwiseEqualUnfused) {
  const uint64_t seed = cudatest::fresh_seed("cuda oproj_router");
  std::mt19937_64 rng(seed);
  const ModelConfig cfg = cudatest::small_config(rng, 3, 2);
  TmpDir dir{fs::temp_directory_path() / ("gossamer_oproj_router_" + std::to_string(seed))};
  SynthOptions so;
  so.config = cfg;
  so.seed = rng();
  so.out_dir = dir.p.string();
  ASSERT_TRUE(write_synth_checkpoint(so).ok());
  auto model = load_model(dir.p.string());
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  // The shape must be one the fused kernel takes, or the comparison below would be vacuous.
  kern::OprojRouterParams shape;
  alignas(16) static const float dummy[4] = {};  // alignment / non-null checks only
  shape.wo = shape.norm_w = shape.router_w = reinterpret_cast<const uint16_t*>(dummy);
  shape.attn = dummy;
  shape.x = shape.xn = shape.logits = shape.weights = const_cast<float*>(dummy);
  shape.ids = reinterpret_cast<int32_t*>(const_cast<float*>(dummy));
  shape.sync = reinterpret_cast<unsigned*>(const_cast<float*>(dummy));
  shape.hidden = static_cast<int>(cfg.hidden_size);
  shape.qd = static_cast<int>(cfg.num_attention_heads * 64);
  shape.n_experts = static_cast<int>(cfg.num_local_experts);
  shape.k = static_cast<int>(cfg.experts_per_token);
  for (int b = 1; b <= kSeqs; ++b) {
    shape.batch = b;
    auto ok = kern::oproj_router_supported(shape);
    ASSERT_TRUE(ok.ok() && *ok) << "batch " << b;
  }
  auto base = runner(**model, false, true), fused = runner(**model, true, true),
       eager = runner(**model, true, false);
  ASSERT_TRUE(base.ok() && fused.ok() && eager.ok());
  ModelRunner* all[3] = {base->get(), fused->get(), eager->get()};
  const int64_t V = cfg.vocab_size;
  std::vector<std::vector<int32_t>> tables(kSeqs);
  std::vector<int> len(kSeqs);
  for (int s = 0; s < kSeqs; ++s) {
    for (int i = 0; i < kBlocksPerSeq; ++i) tables[s].push_back(s * kBlocksPerSeq + i);
    len[s] = 2 + static_cast<int>(rng() % 20);
    std::vector<int32_t> prompt(len[s]);
    for (auto& t : prompt) t = static_cast<int32_t>(rng() % V);
    SeqChunk c{prompt, 0, tables[s], tables[s], LogitsMode::kNone};
    for (ModelRunner* r : all) {
      StepOutput o;
      ASSERT_TRUE(r->step({&c, 1}, &o).ok());
    }
  }
  int rows = 0, equal_fused = 0, equal_eager = 0;
  for (int step = 0; step < 8; ++step) {
    const int nseq = 1 + step % kSeqs;  // batches 1, 2, 3, 4, 1, ...
    std::vector<std::vector<int32_t>> one(nseq);
    std::vector<SeqChunk> chunks;
    for (int s = 0; s < nseq; ++s) {
      one[s] = {static_cast<int32_t>(rng() % V)};
      chunks.push_back(SeqChunk{one[s], len[s], tables[s], tables[s], LogitsMode::kLast});
      ++len[s];
    }
    StepOutput out[3];
    for (int i = 0; i < 3; ++i) {
      const Status st = all[i]->step(chunks, &out[i]);
      ASSERT_TRUE(st.ok()) << st.ToString();
      ASSERT_EQ(out[i].rows, nseq);
    }
    for (int s = 0; s < nseq; ++s) {
      const float* b = &out[0].logits[s * V];
      ++rows;
      equal_fused += std::equal(b, b + V, &out[1].logits[s * V]);
      equal_eager += std::equal(b, b + V, &out[2].logits[s * V]);
    }
  }
  std::printf("fused vs unfused: %d of %d rows bitwise equal (graph), %d (eager)\n", equal_fused,
              rows, equal_eager);
  EXPECT_EQ(equal_fused, rows);
  EXPECT_EQ(equal_eager, rows);
}

}  // namespace
}  // namespace gossamer

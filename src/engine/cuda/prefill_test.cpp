// End-to-end GPU tests of the prefill path (prefill_forward.cpp: cuBLASLt GEMMs, rope_kv,
// grouped MoE / flash attention when built) on random small gpt-oss checkpoints written by
// `synth`: prefill in one step and in chunks, then greedy decode, against (a) the CPU reference
// with bf16 K/V (CpuRunnerOptions::kv_bf16) and (b) the GPU fed one token at a time (decode
// kernels only). Bad options and the 20b long prompt: prefill_limits_test.cpp. Label "gpu".
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "engine/cpu_runner.h"
#include "engine/cuda/cuda_runner.h"
#include "engine/cuda/cuda_test_util.h"
#include "engine/cuda/prefill_test_bounds.h"
#include "model/synth.h"

namespace gossamer {
namespace {

namespace fs = std::filesystem;

using cudatest::argmax;
using cudatest::fresh_seed;
using cudatest::head;
using cudatest::rel_err;
using cudatest::row_stats;
using cudatest::synth_and_load;
using prefilltest::expect_close;
using prefilltest::expect_issue;
using prefilltest::expect_loose;
using prefilltest::expect_mid;

ModelConfig small_config(std::mt19937_64& rng) {
  return cudatest::small_config(rng, 4, 4);
}

// GPU runners over one checkpoint, all with a 512-token KV cache.
enum Runner {
  kDefault,
  kChunked,
  kBf16Router,
  kDecodeMoe,
  kSplit,
  kSplitFallback,
  kTokenAtATime,
  kRunners
};
constexpr const char* kRunnerNames[kRunners] = {
    "prefill bf16 (one step)",   "prefill bf16 (chunked steps, forwards <= 64 rows)",
    "prefill bf16, bf16 router", "prefill bf16, decode MoE kernels",
    "prefill split bf16",        "prefill split bf16, decode attention + MoE kernels",
    "gpu one token at a time"};

struct Fixture {
  fs::path dir;
  std::string cpu_dump;  // the CPU runner's activations (router logits: flip_row)
  std::shared_ptr<LoadedModel> model;
  std::unique_ptr<ModelRunner> cpu;
  std::unique_ptr<CudaModelRunner> gpu[kRunners];
  int bs = 16;  // paged KV block size of every runner
  ~Fixture() {
    cpu.reset();
    for (auto& g : gpu) g.reset();
    model.reset();
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
};

constexpr int kMaxSeq = 512;

// bs: paged KV block size (tokens), a divisor of kMaxSeq.
Result<std::unique_ptr<CudaModelRunner>> gpu_runner(const LoadedModel& m, Runner which, int bs) {
  CudaRunnerOptions o;
  o.kv = KvCacheSpec{bs, kMaxSeq / bs, kMaxSeq / bs};
  o.max_seq_len = kMaxSeq;
  o.max_seqs = 2;
  o.max_step_tokens = which == kChunked ? 64 : 512;
  o.max_logit_rows = 100;  // a 300-row kAll prefill needs several forwards
  o.prefill_min_rows = which == kTokenAtATime ? 0 : 17;
  o.prefill_split_bf16 = which == kSplit || which == kSplitFallback;
  o.prefill_split_router = which != kBf16Router;
  o.prefill_grouped_moe = which != kSplitFallback && which != kDecodeMoe;
  o.prefill_flash_attn = which != kSplitFallback;
  return CudaModelRunner::create(m, o);
}

void make_fixture(Fixture* f, const ModelConfig& cfg, uint64_t seed, int bs) {
  f->bs = bs;
  f->dir = fs::temp_directory_path() / ("gossamer_prefill_test_" + std::to_string(seed));
  ASSERT_NO_FATAL_FAILURE(synth_and_load(cfg, seed, f->dir.string(), &f->model));
  CpuRunnerOptions co;
  co.threads = 2;
  co.kv_bf16 = true;
  // The CPU runner's per-layer activations (.npy): its router logits tell which prompt rows are
  // near-tied (flip_row). GOSSAMER_TEST_CPU_DUMP=dir keeps them for diagnosis.
  const char* keep = std::getenv("GOSSAMER_TEST_CPU_DUMP");
  co.dump_dir = keep ? std::string(keep) + "/vocab" + std::to_string(cfg.vocab_size)
                     : (f->dir / "cpu_dump").string();
  fs::create_directories(co.dump_dir);
  f->cpu_dump = co.dump_dir;
  auto cpu = make_cpu_runner(f->model, KvCacheSpec{bs, kMaxSeq / bs, kMaxSeq / bs}, co);
  ASSERT_TRUE(cpu.ok()) << cpu.status().ToString();
  f->cpu = std::move(*cpu);
  for (int i = 0; i < kRunners; ++i) {
    auto g = gpu_runner(*f->model, static_cast<Runner>(i), bs);
    ASSERT_TRUE(g.ok()) << kRunnerNames[i] << ": " << g.status().ToString();
    f->gpu[i] = std::move(*g);
  }
}

// All logits rows of the prompt on one runner: one kAll step (kDefault, kSplit*), steps of
// 17..120 tokens (kChunked), or one step per token (kTokenAtATime).
void prefill(ModelRunner& r, Runner which, std::span<const int32_t> prompt,
             std::span<const int32_t> table, std::mt19937_64& rng, std::vector<float>* logits) {
  const int len = static_cast<int>(prompt.size());
  for (int p0 = 0; p0 < len;) {
    int n = len - p0;
    if (which == kChunked) n = std::min(n, 17 + static_cast<int>(rng() % 104));
    if (which == kTokenAtATime) n = 1;
    SeqChunk c{prompt.subspan(p0, n), p0, table, table,
               which == kTokenAtATime ? LogitsMode::kLast : LogitsMode::kAll};
    StepOutput o;
    const Status s = r.step({&c, 1}, &o);
    ASSERT_TRUE(s.ok()) << s.ToString();
    ASSERT_EQ(o.rows, which == kTokenAtATime ? 1 : n);
    logits->insert(logits->end(), o.logits.begin(), o.logits.end());
    p0 += n;
  }
}

// Split mode (prefill_split_bf16) vs the CPU. My GEMMs + rope_kv with the decode attention /
// MoE kernels (kSplitFallback) must be as close as the decode path; with flash_attn + moe_prefill
// (kSplit: bf16 x / act inside the grouped MoE) a little less (expect_mid).
//
// Routing flips: the first prompt row more than kFlip off the CPU is a flipped top-k choice,
// which is legitimate only where the reference itself is near-tied on that row: its k-th and
// (k+1)-th router logits less than kTieGap apart in some layer (router_tie_gap on the CPU
// runner's dump; the median gap is ~0.22, and the 30 flips of 11 seeds on the H100 on
// 2026-11-26 all sat on rows with gaps of 1.1e-4 .. 5.7e-3, e.g. 3.8e-3 in layer 2 with the
// decode kernels, where a flip has no later layer to spread through). A flip moves the rows
// after it through their attention by more than a fixed fraction of rows absorbs (H100
// 2026-11-26, GOSSAMER_SEED=2238263853816740776, config 3: hidden 192, 16/2 heads, window 64;
// prompt row 14 flipped (0.167) in both split runners, gap 2.4e-4 in layer 0, and 52 of 162
// prompt rows ended beyond 1e-2). So a mode's bound applies to the rows before its first flip,
// every row gets expect_loose, and the decode rows (which attend to the whole prompt) keep their
// bound only when the prompt had no flip.
constexpr double kFlip = 0.05, kTieGap = 1e-2;

// The first row beyond kFlip (e.size() if none), which must be near-tied in the reference.
size_t flip_row(const Fixture& f, const std::vector<double>& e, const std::string& what) {
  size_t r = 0;
  while (r < e.size() && e[r] <= kFlip) ++r;
  if (r == e.size()) return r;
  cudatest::expect_near_tied_route(f.cpu_dump, 0, static_cast<int>(r), f.model->config, r, e[r],
                                   kTieGap, what);
  return r;
}

void check_split(const Fixture& f, const std::vector<double>& fb_pre,
                 const std::vector<double>& fb_dec, const std::vector<double>& sp_pre,
                 const std::vector<double>& sp_dec) {
  const std::string fb = std::string(kRunnerNames[kSplitFallback]) + " vs cpu";
  const std::string sp = std::string(kRunnerNames[kSplit]) + " vs cpu";
  const size_t cut_fb = flip_row(f, fb_pre, "prompt rows, " + fb);
  if (cut_fb > 0)
    expect_close(head(fb_pre, cut_fb), ("prompt rows before a flip, " + fb).c_str(), 2e-3);
  expect_loose(fb_pre, ("prompt rows, " + fb).c_str());
  // Decode rows: 12 per config; a flip on one of them also perturbs the later ones through its
  // K/V (H100 2026-11-22, hidden 128 / inter 96 / heads 2/2: one flip (0.232), median 2.84e-3),
  // hence the default 5e-3 median bound.
  if (cut_fb == fb_pre.size()) expect_close(fb_dec, ("decode rows, " + fb).c_str());
  expect_loose(fb_dec, ("decode rows, " + fb).c_str());
  const size_t cut_sp = flip_row(f, sp_pre, "prompt rows, " + sp);
  expect_loose(sp_pre, ("prompt rows, " + sp).c_str());
  // Prompt + decode rows together: after a prompt flip the decode rows all move with it (H100
  // 2026-11-22, GOSSAMER_SEED=4759485612258890870: 3 of 60 prompt rows flipped (0.158), then 10
  // of 12 decode rows 1e-2 .. 0.157 off), so they count only when the prompt had none. The
  // issue's bound (median <= 1e-2) is asserted on the same rows, per config in split mode (the
  // default bf16 mode: pooled over the test's configs by the caller, see expect_issue).
  std::vector<double> both = head(sp_pre, cut_sp);
  if (cut_sp == sp_pre.size()) both.insert(both.end(), sp_dec.begin(), sp_dec.end());
  if (both.empty()) return;
  expect_mid(both, ("prompt + decode rows (mid bound), " + sp).c_str());
  expect_issue(both, {}, ("prompt + decode rows, " + sp).c_str());
}

// Row errors of the default bf16 prefill (prompt + decode rows) pooled over a test's configs.
struct Pooled {
  std::vector<double> vs_cpu, vs_token_at_a_time;
};

struct CaseErrs {  // [runner i][vs the CPU (0) or vs the default GPU prefill (1)]
  std::vector<double> pre[kRunners][2], dec[kRunners][2];
};

// One random prompt through the CPU and every GPU runner, then `decode_steps` greedy steps
// (the CPU's token fed to all); check_case compares the logits rows as described above.
void collect_case(Fixture& f, std::mt19937_64& rng, int prompt_len, int decode_steps, CaseErrs* e) {
  const int64_t V = f.model->config.vocab_size;
  std::vector<int32_t> prompt(prompt_len);
  for (auto& t : prompt) t = static_cast<int32_t>(rng() % V);
  std::vector<int32_t> table(kMaxSeq / f.bs);
  for (size_t i = 0; i < table.size(); ++i) table[i] = static_cast<int32_t>(table.size() - 1 - i);
  SeqChunk c{prompt, 0, table, table, LogitsMode::kAll};
  StepOutput oc;
  ASSERT_TRUE(f.cpu->step({&c, 1}, &oc).ok());
  std::vector<float> rows[kRunners];
  for (int i = 0; i < kRunners; ++i) {
    SCOPED_TRACE(kRunnerNames[i]);
    prefill(*f.gpu[i], static_cast<Runner>(i), prompt, table, rng, &rows[i]);
    if (::testing::Test::HasFatalFailure()) return;
  }
  auto& pre = e->pre;
  auto& dec = e->dec;
  for (int i = 0; i < kRunners; ++i)
    for (int r = 0; r < prompt_len; ++r) {
      pre[i][0].push_back(rel_err(&rows[i][r * V], &oc.logits[r * V], V));
      pre[i][1].push_back(rel_err(&rows[i][r * V], &rows[kDefault][r * V], V));
    }
  int32_t tok = argmax(&oc.logits[(prompt_len - 1) * V], V);
  for (int st = 0; st < decode_steps; ++st) {
    std::vector<int32_t> one = {tok};
    SeqChunk d{one, prompt_len + st, table, table, LogitsMode::kLast};
    StepOutput a, g[kRunners];
    ASSERT_TRUE(f.cpu->step({&d, 1}, &a).ok());
    for (int i = 0; i < kRunners; ++i) ASSERT_TRUE(f.gpu[i]->step({&d, 1}, &g[i]).ok());
    for (int i = 0; i < kRunners; ++i) {
      dec[i][0].push_back(rel_err(g[i].logits.data(), a.logits.data(), V));
      dec[i][1].push_back(rel_err(g[i].logits.data(), g[kDefault].logits.data(), V));
    }
    tok = argmax(a.logits.data(), V);
  }
}

void check_case(Fixture& f, const CaseErrs& e, Pooled* pooled) {
  const auto& pre = e.pre;
  const auto& dec = e.dec;
  char what[160];
  auto name = [&](const char* kind, int i, const char* vs) {
    std::snprintf(what, sizeof(what), "%s, %s vs %s", kind, kRunnerNames[i], vs);
    return what;
  };
  // The decode path itself (reference for how close the GPU can be).
  expect_close(pre[kTokenAtATime][0], name("prompt rows", kTokenAtATime, "cpu"), 2e-3);
  expect_close(dec[kTokenAtATime][0], name("decode rows", kTokenAtATime, "cpu"), 2e-3);
  check_split(f, pre[kSplitFallback][0], dec[kSplitFallback][0], pre[kSplit][0], dec[kSplit][0]);
  for (int i : {kDefault, kChunked}) {
    expect_loose(pre[i][0], name("prompt rows", i, "cpu"));
    expect_loose(dec[i][0], name("decode rows", i, "cpu"));
    std::vector<double> all = pre[i][0];
    all.insert(all.end(), dec[i][0].begin(), dec[i][0].end());
    row_stats(all, 1e-2, name("prompt + decode rows", i, "cpu"));
    if (i == kDefault) pooled->vs_cpu.insert(pooled->vs_cpu.end(), all.begin(), all.end());
  }
  // Diagnostics (printed, loose bounds): the default with the old bf16 router GEMM, and with
  // the decode MoE kernels (f32 activations) instead of moe_prefill (bf16 x / act). The old
  // bf16 router flips near-tied top-4 choices (docs/moe-prefill.md): its prompt-row median
  // reached 3.27e-2 on one H100 config (hidden 128, inter 32, 4/2 heads, 35-token prompt,
  // session 7; 1.25e-2 was the worst of nine before), so it gets 5e-2.
  expect_loose(pre[kBf16Router][0], name("prompt rows", kBf16Router, "cpu"), 5e-2);
  expect_loose(dec[kBf16Router][0], name("decode rows", kBf16Router, "cpu"), 5e-2);
  expect_loose(pre[kDecodeMoe][0], name("prompt rows", kDecodeMoe, "cpu"));
  expect_loose(dec[kDecodeMoe][0], name("decode rows", kDecodeMoe, "cpu"));
  // Vs one token at a time on the GPU: loose per config (printed), the issue's bound on the
  // rows of all configs pooled by the caller (as for the CPU comparison).
  expect_loose(pre[kTokenAtATime][1], name("prompt rows", kTokenAtATime, "bf16 prefill"));
  expect_loose(dec[kTokenAtATime][1], name("decode rows", kTokenAtATime, "bf16 prefill"));
  for (const auto* v : {&pre[kTokenAtATime][1], &dec[kTokenAtATime][1]})
    pooled->vs_token_at_a_time.insert(pooled->vs_token_at_a_time.end(), v->begin(), v->end());
  // Chunking changes the bf16 path only through summation order (forwards of other row counts
  // may get other cuBLASLt kernels and attention split counts), which flips an occasional bf16
  // rounding of an activation: prompt rows measured bitwise equal in most configs, else median
  // 2-3e-3 (H200, H100). The decode rows after the prompt attend to the whole cached prefix, and
  // one flipped near-tied top-4-of-8 routing choice there moves a row by 5-25%: seen on the H100
  // (hidden 64, 4/2 heads, 81-token prompt: the one-step rows 5 of 12 within 1e-2 of the CPU,
  // the chunked ones 12 of 12), so they get the loose bound. Since session 4 the grouped MoE
  // picks its tile shape from the rows per expert (docs/moe-prefill.md), so forwards of <= 64
  // rows and the one-step forward also differ there; a routing flip early in a long prompt then
  // moves the later prompt rows too: H100 2026-11-22, hidden 64 / inter 32 / heads 2/2, 244-token
  // prompt: 201 of 244 rows within 1e-2, median 3.7e-3, max 0.196. Hence the middle bound (a
  // chunking bug, e.g. a wrong cached K/V block, gives O(1) errors on most rows).
  expect_mid(pre[kChunked][1], name("prompt rows", kChunked, "one-step bf16 prefill"));
  expect_loose(dec[kChunked][1], name("decode rows", kChunked, "one-step bf16 prefill"));
}

void run_case(Fixture& f, std::mt19937_64& rng, int prompt_len, int decode_steps, Pooled* pooled) {
  CaseErrs e;
  collect_case(f, rng, prompt_len, decode_steps, &e);
  if (::testing::Test::HasFatalFailure()) return;
  check_case(f, e, pooled);
}

TEST(CudaPrefill, MatchesCpuAndTokenAtATimeOnRandomSmallModels) {
  const uint64_t seed = fresh_seed("cuda prefill vs cpu");
  std::mt19937_64 rng(seed);
  Pooled pooled;  // default bf16 prefill, all configs
  for (int trial = 0; trial < 3; ++trial) {
    const ModelConfig cfg = small_config(rng);
    const int len = 30 + static_cast<int>(rng() % 271);
    // KV block size: 16 (the default) in the first trial, then one of 8, 32, 64 (a K/V tile of
    // the attention kernels spans several blocks or less than one).
    // GOSSAMER_TEST_KV_BS=N forces N in every trial (diagnosis: same seed, other block size).
    constexpr int kOtherBs[] = {8, 32, 64};
    int bs = trial == 0 ? 16 : kOtherBs[rng() % 3];
    if (const char* e = std::getenv("GOSSAMER_TEST_KV_BS")) bs = std::atoi(e);
    std::printf(
        "config: hidden %lld inter %lld heads %lld/%lld vocab %lld window %lld, prompt %d, kv "
        "blocks of %d\n",
        static_cast<long long>(cfg.hidden_size), static_cast<long long>(cfg.intermediate_size),
        static_cast<long long>(cfg.num_attention_heads),
        static_cast<long long>(cfg.num_key_value_heads), static_cast<long long>(cfg.vocab_size),
        static_cast<long long>(cfg.sliding_window), len, bs);
    Fixture f;
    make_fixture(&f, cfg, rng(), bs);
    if (HasFatalFailure()) return;
    run_case(f, rng, len, 12, &pooled);
    if (HasFatalFailure()) return;
  }
  expect_issue(pooled.vs_cpu, {},
               "prompt + decode rows of every config, prefill bf16 (one step) vs cpu");
  expect_issue(pooled.vs_token_at_a_time, {},
               "prompt + decode rows of every config, gpu one token at a time vs bf16 prefill");
}

}  // namespace
}  // namespace gossamer

// `gossamer bench`: llama-bench style throughput of the CUDA backend.
//   gossamer bench --synthetic 120b -p 512 -n 128 -d 0,16384 -r 3 --json out.json
//   gossamer bench -m DIR ...
// Tests: ppN = one prefill of N tokens at depth d (tokens/s = N / time); tgN = N greedy decode
// steps at depth d, one CUDA graph replay each (tokens/s = N * batch / GPU time). Depth d is
// emulated by filling the KV cache with random values (attention reads the same bytes as after
// a real prefill). Each result: mean +- stddev over -r repetitions, the byte model of a decode
// step (weights + KV read), achieved GB/s and % of the device-to-device copy bandwidth measured
// at start-up. --kernel-profile: after each test, a few more iterations traced with CUPTI and a
// per-kernel table (docs/kernel-profile.md).
#include <CLI/CLI.hpp>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "engine/cuda/cuda_runner.h"  // no CUDA includes: options and their bounds
#include "model/config.h"
#include "model/weights.h"
#ifdef GOSSAMER_HAVE_CUDA
#include "engine/cuda/kernel_profile.h"
#endif

namespace gossamer::cli {
namespace {

struct BenchArgs {
  std::string model_dir, synthetic, json_path;
  std::vector<int64_t> p = {512}, n = {128}, d = {0};
  int reps = 3, batch = 1;
  int flash_variant = 0;         // CudaRunnerOptions::prefill_flash_variant
  int64_t chunk = 8192;          // prefill rows per forward (max_step_tokens)
  int64_t prefill_min_rows = 8;  // CudaRunnerOptions default; also the decode-batch path
  bool no_graph = false, prefill_split = false;
  bool no_pdl = false;
  bool no_grouped_moe = false;  // CudaRunnerOptions::grouped_moe_small off
  bool kernel_profile = false;  // CUPTI per-kernel breakdown after each test
};

#ifdef GOSSAMER_HAVE_CUDA
std::pair<double, double> mean_sd(const std::vector<double>& v) {
  double m = 0, s = 0;
  for (double x : v) m += x;
  m /= static_cast<double>(v.size());
  for (double x : v) s += (x - m) * (x - m);
  return {m, v.size() > 1 ? std::sqrt(s / static_cast<double>(v.size() - 1)) : 0.0};
}

Result<std::unique_ptr<CudaModelRunner>> make_runner(const BenchArgs& a, std::string* name) {
  int64_t maxp = 0, maxn = 0, maxd = 0;
  for (auto v : a.p) maxp = std::max(maxp, v);
  for (auto v : a.n) maxn = std::max(maxn, v);
  for (auto v : a.d) maxd = std::max(maxd, v);
  CudaRunnerOptions o;
  o.max_seq_len = maxd + std::max(maxp, maxn) + 64;
  o.max_seqs = a.batch;
  o.max_step_tokens = std::max<int64_t>({256, a.batch, std::min(maxp, a.chunk)});
  o.use_graphs = !a.no_graph;
  o.prefill_split_bf16 = a.prefill_split;
  o.prefill_min_rows = a.prefill_min_rows;
  o.pdl = !a.no_pdl;
  o.grouped_moe_small = !a.no_grouped_moe;
  o.prefill_flash_variant = a.flash_variant;
  std::unique_ptr<CudaModelRunner> r;
  if (!a.synthetic.empty()) {
    GS_ASSIGN_OR_RETURN(ModelConfig cfg, preset_config(a.synthetic));
    GS_ASSIGN_OR_RETURN(r, CudaModelRunner::create_synthetic(cfg, o, 1));
    *name = "gpt-oss-" + a.synthetic + " (synthetic)";
  } else {
    GS_ASSIGN_OR_RETURN(auto m, load_model(a.model_dir));
    GS_ASSIGN_OR_RETURN(r, CudaModelRunner::create(*m, o));
    *name = a.model_dir;
  }
  GS_RETURN_IF_ERROR(r->fill_kv_random(2));
  return r;
}

// ppN at depth d: one prefill step of N tokens per repetition (wall time); one untimed warm-up
// step first (cuBLASLt plans are made on first use) unless N > 16384. TFLOP/s from
// CudaModelRunner::prefill_flops, % against the GEMM ceiling measured at start.
Status bench_pp(CudaModelRunner& r, const BenchArgs& a, int64_t d, int64_t p, double gemm_ceil,
                const std::string& name, KernelTracer* tracer, nlohmann::json* results) {
  std::vector<double> tps, ms;
  if (p <= 16384) GS_RETURN_IF_ERROR(r.bench_prefill(p, d).status());
  for (int i = 0; i < a.reps; ++i) {
    GS_ASSIGN_OR_RETURN(double t, r.bench_prefill(p, d));
    ms.push_back(t);
    tps.push_back(static_cast<double>(p) / (t * 1e-3));
  }
  auto [m, sd] = mean_sd(tps);
  const double flops = r.prefill_flops(p, d), tflops = flops / (mean_sd(ms).first * 1e-3) / 1e12;
  auto mem = CudaModelRunner::device_mem_used_gib(0);
  std::printf("| %s | pp%lld | %lld | 1 | %.1f ± %.1f | %.2f | - | - | - | %.1f | %.1f%% |\n",
              name.c_str(), static_cast<long long>(p), static_cast<long long>(d), m, sd,
              mean_sd(ms).first, tflops, 100.0 * tflops / gemm_ceil);
  results->push_back({{"test", "pp" + std::to_string(p)},
                      {"depth", d},
                      {"batch", 1},
                      {"tps_mean", m},
                      {"tps_sd", sd},
                      {"ms_mean", mean_sd(ms).first},
                      {"flops_model", flops},
                      {"TFLOPs", tflops},
                      {"pct_of_gemm_ceiling", 100.0 * tflops / gemm_ceil},
                      {"device_mem_used_GiB", mem.ok() ? *mem : -1.0}});
  if (tracer) {  // 2 more prefills, traced
    GS_ASSIGN_OR_RETURN(KernelProfile kp,
                        profile_prefill(r, *tracer, p, d, 2, mean_sd(ms).first * 1e3));
    std::printf("\n%s\n",
                format_kernel_profile(kp, "kernel profile: pp" + std::to_string(p) + " depth " +
                                              std::to_string(d) + " (CUPTI, per prefill)")
                    .c_str());
    results->back()["kernel_profile"] = kernel_profile_json(kp);
  }
  return Status::Ok();
}

// tgN at depth d: N graph-replayed greedy decode steps per repetition (GPU time).
Status bench_tg(CudaModelRunner& r, const BenchArgs& a, int64_t d, int64_t n, double ceil,
                const std::string& name, KernelTracer* tracer, nlohmann::json* results) {
  std::vector<double> tps, ms;
  double bytes = 0;
  for (int i = 0; i < a.reps; ++i) {
    GS_ASSIGN_OR_RETURN(DecodeBenchResult t, r.bench_decode(a.batch, d, static_cast<int>(n)));
    ms.push_back(t.ms);
    bytes = t.bytes_per_token;
    tps.push_back(static_cast<double>(n) * a.batch / (t.ms * 1e-3));
  }
  auto [m, sd] = mean_sd(tps);
  const double gbs = bytes * (m / a.batch) / 1e9;  // model bytes of one step x steps/s
  std::printf("| %s | tg%lld | %lld | %d | %.1f ± %.1f | %.2f | %.3g | %.0f | %.1f%% | - | - |\n",
              name.c_str(), static_cast<long long>(n), static_cast<long long>(d), a.batch, m, sd,
              mean_sd(ms).first, bytes, gbs, 100.0 * gbs / ceil);
  results->push_back({{"test", "tg" + std::to_string(n)},
                      {"depth", d},
                      {"batch", a.batch},
                      {"tps_mean", m},
                      {"tps_sd", sd},
                      {"ms_mean", mean_sd(ms).first},
                      {"bytes_per_step_model", bytes},
                      {"GBps", gbs},
                      {"pct_of_copy_ceiling", 100.0 * gbs / ceil}});
  // min(n, 32) more decode steps, traced. bench_decode always replays the decode graph; kernels
  // without a graph id would be aggregated over the whole trace instead of per replay.
  if (tracer) {
    const int steps = static_cast<int>(std::min<int64_t>(n, 32));
    GS_ASSIGN_OR_RETURN(KernelProfile kp,
                        profile_decode(r, *tracer, a.batch, d, steps, /*graph=*/true,
                                       mean_sd(ms).first * 1e3 / static_cast<double>(n)));
    std::printf("\n%s\n",
                format_kernel_profile(kp, "kernel profile: tg" + std::to_string(n) + " depth " +
                                              std::to_string(d) + " batch " +
                                              std::to_string(a.batch) + " (CUPTI, per decode step)")
                    .c_str());
    results->back()["kernel_profile"] = kernel_profile_json(kp);
  }
  return Status::Ok();
}

int run_bench(const BenchArgs& a) {
  auto fail = [](const Status& s) {
    std::fprintf(stderr, "gossamer bench: %s\n", s.ToString().c_str());
    return 1;
  };
  auto info = CudaModelRunner::device_info(0);
  if (!info.ok()) return fail(info.status());
  std::unique_ptr<KernelTracer> tracer;  // libcupti is loaded only here
  if (a.kernel_profile) {
    auto t = KernelTracer::create();
    if (!t.ok()) return fail(t.status().With("--kernel-profile"));
    tracer = std::move(*t);
  }
  auto ceil = CudaModelRunner::measure_copy_gbs(0);
  if (!ceil.ok()) return fail(ceil.status());
  auto gemm_ceil = CudaModelRunner::measure_gemm_tflops(0);
  if (!gemm_ceil.ok()) return fail(gemm_ceil.status());
  std::string name;
  auto r = make_runner(a, &name);
  if (!r.ok()) return fail(r.status());
  const std::string path = (*r)->kernel_path(a.batch);
  nlohmann::json meta = {
      {"git_sha", gossamer_git_sha()},
      {"gpu", info->name},
      {"sm_count", info->sm_count},
      {"driver", info->driver},
      {"cuda_runtime", info->cuda_runtime},
      {"max_sm_clock_mhz", info->sm_clock_mhz},
      {"max_mem_clock_mhz", info->mem_clock_mhz},
      {"flags", "cuda graphs " + std::string(a.no_graph ? "off" : "on") + ", pdl " +
                    std::string(a.no_pdl ? "off" : "on") + ", batch " + std::to_string(a.batch) +
                    (a.no_grouped_moe ? ", no grouped MoE for small forwards" : "") +
                    ", sm_90a, cudart static, depth = random KV fill"},
      {"copy_ceiling_GBps", *ceil},
      {"gemm_ceiling_TFLOPs", *gemm_ceil},
      {"prefill_chunk", a.chunk},
      {"prefill_min_rows", a.prefill_min_rows},
      {"kernel_path", path},
      {"prefill_path", (*r)->prefill_path()},
      {"flash_variant", a.flash_variant},
      {"model", name}};
  std::printf(
      "gossamer bench | git %s | %s (%d SMs, %s, CUDA runtime %s, max clocks SM %d / "
      "mem %d MHz)\ncopy ceiling (cudaMemcpy D2D, read+write): %.0f GB/s\n"
      "bf16 GEMM ceiling (cuBLASLt 8192^3, kernels/gemm): %.0f TFLOP/s\n"
      "kernel path: %s\nprefill path (chunks of %lld rows): %s\n\n",
      gossamer_git_sha(), info->name.c_str(), info->sm_count, info->driver.c_str(),
      info->cuda_runtime.c_str(), info->sm_clock_mhz, info->mem_clock_mhz, *ceil, *gemm_ceil,
      path.c_str(), static_cast<long long>(a.chunk), (*r)->prefill_path().c_str());
  std::printf(
      "| model | test | depth | batch | t/s | ms | bytes/step (model) | GB/s | %% of copy | "
      "TFLOP/s | %% of GEMM |\n"
      "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n");
  nlohmann::json results = nlohmann::json::array();
  for (int64_t d : a.d) {
    for (int64_t p : a.p) {
      if (Status s = p > 0 ? bench_pp(**r, a, d, p, *gemm_ceil, name, tracer.get(), &results)
                           : Status::Ok();
          !s.ok()) {
        return fail(s);
      }
    }
    for (int64_t n : a.n) {
      if (Status s =
              n > 0 ? bench_tg(**r, a, d, n, *ceil, name, tracer.get(), &results) : Status::Ok();
          !s.ok()) {
        return fail(s);
      }
    }
  }
  if (!a.json_path.empty()) {
    std::ofstream f(a.json_path);
    f << nlohmann::json{{"metadata", meta}, {"results", results}}.dump(2) << "\n";
    if (!f) return fail(IoError("cannot write " + a.json_path));
  }
  return 0;
}
#else
int run_bench(const BenchArgs&) {
  std::fprintf(stderr, "gossamer bench: this build has no CUDA backend (nvcc was not found)\n");
  return 1;
}
#endif

}  // namespace

void add_bench_command(CLI::App& app, int* exit_code) {
  auto args = std::make_shared<BenchArgs>();
  auto* cmd = app.add_subcommand("bench", "Throughput of the CUDA backend (llama-bench style)");
  cmd->add_option("-m,--model", args->model_dir, "checkpoint directory");
  cmd->add_option("--synthetic", args->synthetic, "random real-shape weights on the GPU: 20b|120b");
  cmd->add_option("-p,--n-prompt", args->p, "prompt sizes (comma list, 0 = none)")->delimiter(',');
  cmd->add_option("-n,--n-gen", args->n, "generation sizes (comma list, 0 = none)")->delimiter(',');
  cmd->add_option("-d,--depth", args->d, "KV depths (comma list)")->delimiter(',');
  cmd->add_option("-r,--repetitions", args->reps, "repetitions")->check(CLI::Range(1, 100));
  cmd->add_option("-b,--batch", args->batch, "decode batch (sequences)")->check(CLI::Range(1, 64));
  cmd->add_flag("--no-graph", args->no_graph, "decode without CUDA graphs");
  cmd->add_flag("--no-pdl", args->no_pdl, "decode without programmatic dependent launch");
  cmd->add_flag("--no-grouped-moe", args->no_grouped_moe,
                "prefill-path forwards of <= n_experts / k rows (decode batches of 8..32 for 120b) "
                "on moe_prefill instead of the expert-grouped decode MoE kernels");
  cmd->add_option("--chunk", args->chunk, "prefill rows per forward (longer prompts are chunked)")
      ->check(CLI::Range(1, 16384));
  cmd->add_option("--prefill-min-rows", args->prefill_min_rows,
                  "forwards (and decode batches) of at least this many rows take the prefill "
                  "path (cuBLASLt GEMMs, grouped MoE); 0 = never")
      ->check(CLI::Range(0, 16384));
  cmd->add_flag("--prefill-split-bf16", args->prefill_split,
                "prefill GEMM activations as bf16 hi + lo (2 GEMMs each, ~fp32 accuracy)");
  cmd->add_option("--flash-variant", args->flash_variant,
                  "prefill flash-attention CTA shape (kernels/flash_attn/params.h); 0 = auto")
      ->check(CLI::Range(0, kMaxPrefillFlashVariant));
  cmd->add_flag("--kernel-profile", args->kernel_profile,
                "after each test, trace a few more iterations with CUPTI (libcupti, loaded only "
                "then) and print a per-kernel time table");
  cmd->add_option("--json", args->json_path, "write results + metadata as JSON");
  cmd->callback([args, exit_code] {
    if (args->model_dir.empty() == args->synthetic.empty()) {
      std::fprintf(stderr,
                   "gossamer bench: give exactly one of --model DIR or --synthetic 20b|120b\n");
      *exit_code = 2;
      return;
    }
    *exit_code = run_bench(*args);
  });
}

}  // namespace gossamer::cli

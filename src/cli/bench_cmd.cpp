// `gossamer bench`: llama-bench style throughput of the CUDA backend.
//   gossamer bench --synthetic 120b -p 512 -n 128 -d 0,16384 -r 3 --json out.json
//   gossamer bench -m DIR ...
// Tests: ppN = one prefill of N tokens at depth d (tokens/s = N / time); tgN = N greedy decode
// steps at depth d, one CUDA graph replay each (tokens/s = N * batch / GPU time). Depth d is
// emulated by filling the KV cache with random values (attention reads the same bytes as after
// a real prefill). Each result: mean +- stddev over -r repetitions, the byte model of a decode
// step (weights + KV read), achieved GB/s and % of the device-to-device copy bandwidth measured
// at start-up.
#include <CLI/CLI.hpp>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "model/config.h"
#include "model/weights.h"
#ifdef GOSSAMER_HAVE_CUDA
#include "engine/cuda/cuda_runner.h"
#endif

namespace gossamer::cli {
namespace {

struct BenchArgs {
  std::string model_dir, synthetic, json_path;
  std::vector<int64_t> p = {512}, n = {128}, d = {0};
  int reps = 3, batch = 1;
  bool no_graph = false;
};

std::pair<double, double> mean_sd(const std::vector<double>& v) {
  double m = 0, s = 0;
  for (double x : v) m += x;
  m /= static_cast<double>(v.size());
  for (double x : v) s += (x - m) * (x - m);
  return {m, v.size() > 1 ? std::sqrt(s / static_cast<double>(v.size() - 1)) : 0.0};
}

#ifdef GOSSAMER_HAVE_CUDA
int run_bench(const BenchArgs& a) {
  auto fail = [](const Status& s) {
    std::fprintf(stderr, "gossamer bench: %s\n", s.ToString().c_str());
    return 1;
  };
  auto info = CudaModelRunner::device_info(0);
  if (!info.ok()) return fail(info.status());
  auto ceil = CudaModelRunner::measure_copy_gbs(0);
  if (!ceil.ok()) return fail(ceil.status());
  int64_t maxp = 0, maxn = 0, maxd = 0;
  for (auto v : a.p) maxp = std::max(maxp, v);
  for (auto v : a.n) maxn = std::max(maxn, v);
  for (auto v : a.d) maxd = std::max(maxd, v);
  CudaRunnerOptions o;
  o.max_seq_len = maxd + std::max(maxp, maxn) + 64;
  o.max_seqs = a.batch;
  o.max_step_tokens = std::max(256, a.batch);
  o.use_graphs = !a.no_graph;
  std::unique_ptr<CudaModelRunner> r;
  std::string model_name;
  if (!a.synthetic.empty()) {
    auto cfg = preset_config(a.synthetic);
    if (!cfg.ok()) return fail(cfg.status());
    auto rr = CudaModelRunner::create_synthetic(*cfg, o, 1);
    if (!rr.ok()) return fail(rr.status());
    r = std::move(*rr);
    model_name = "gpt-oss-" + a.synthetic + " (synthetic)";
  } else {
    auto m = load_model(a.model_dir);
    if (!m.ok()) return fail(m.status());
    auto rr = CudaModelRunner::create(**m, o);
    if (!rr.ok()) return fail(rr.status());
    r = std::move(*rr);
    model_name = a.model_dir;
  }
  if (Status s = r->fill_kv_random(2); !s.ok()) return fail(s);
  nlohmann::json meta = {{"git_sha", gossamer_git_sha()},
                         {"gpu", info->name},
                         {"sm_count", info->sm_count},
                         {"driver", info->driver},
                         {"cuda_runtime", info->cuda_runtime},
                         {"max_sm_clock_mhz", info->sm_clock_mhz},
                         {"max_mem_clock_mhz", info->mem_clock_mhz},
                         {"flags", "cuda graphs " + std::string(a.no_graph ? "off" : "on") +
                                       ", batch " + std::to_string(a.batch) + ", sm_90a, cudart static"},
                         {"copy_ceiling_GBps", *ceil},
                         {"kernel_path", r->kernel_path(a.batch)},
                         {"model", model_name}};
  std::printf("gossamer bench | git %s | %s (%d SMs, %s, CUDA runtime %s, max clocks SM %d / mem %d MHz)\n",
              gossamer_git_sha(), info->name.c_str(), info->sm_count, info->driver.c_str(),
              info->cuda_runtime.c_str(), info->sm_clock_mhz, info->mem_clock_mhz);
  std::printf("copy ceiling (cudaMemcpy D2D, read+write): %.0f GB/s\nkernel path: %s\n\n", *ceil,
              r->kernel_path(a.batch).c_str());
  std::printf("| model | test | depth | batch | t/s | ms | bytes/token (model) | GB/s | %% of copy |\n");
  std::printf("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n");
  nlohmann::json results = nlohmann::json::array();
  for (int64_t d : a.d) {
    for (int64_t p : a.p) {
      if (p <= 0) continue;
      std::vector<double> tps, ms;
      for (int i = 0; i < a.reps; ++i) {
        auto t = r->bench_prefill(p, d);
        if (!t.ok()) return fail(t.status());
        ms.push_back(*t);
        tps.push_back(static_cast<double>(p) / (*t * 1e-3));
      }
      auto [m, sd] = mean_sd(tps);
      std::printf("| %s | pp%lld | %lld | 1 | %.1f ± %.1f | %.2f | - | - | - |\n", model_name.c_str(),
                  static_cast<long long>(p), static_cast<long long>(d), m, sd, mean_sd(ms).first);
      results.push_back({{"test", "pp" + std::to_string(p)}, {"depth", d}, {"batch", 1},
                         {"tps_mean", m}, {"tps_sd", sd}, {"ms_mean", mean_sd(ms).first}});
    }
    for (int64_t n : a.n) {
      if (n <= 0) continue;
      std::vector<double> tps, ms;
      double bytes = 0;
      for (int i = 0; i < a.reps; ++i) {
        auto t = r->bench_decode(a.batch, d, static_cast<int>(n));
        if (!t.ok()) return fail(t.status());
        ms.push_back(t->ms);
        bytes = t->bytes_per_token;
        tps.push_back(static_cast<double>(n) * a.batch / (t->ms * 1e-3));
      }
      auto [m, sd] = mean_sd(tps);
      const double steps_per_s = m / a.batch;
      const double gbs = bytes * steps_per_s / 1e9;  // batch 1: bytes per step
      std::printf("| %s | tg%lld | %lld | %d | %.1f ± %.1f | %.2f | %.3g | %.0f | %.1f%% |\n",
                  model_name.c_str(), static_cast<long long>(n), static_cast<long long>(d), a.batch,
                  m, sd, mean_sd(ms).first, bytes, gbs, 100.0 * gbs / *ceil);
      results.push_back({{"test", "tg" + std::to_string(n)}, {"depth", d}, {"batch", a.batch},
                         {"tps_mean", m}, {"tps_sd", sd}, {"ms_mean", mean_sd(ms).first},
                         {"bytes_per_step_model", bytes}, {"GBps", gbs},
                         {"pct_of_copy_ceiling", 100.0 * gbs / *ceil}});
    }
  }
  if (!a.json_path.empty()) {
    std::ofstream f(a.json_path);
    f << nlohmann::json{{"metadata", meta}, {"results", results}}.dump(2) << "\n";
    if (!f) {
      std::fprintf(stderr, "gossamer bench: cannot write %s\n", a.json_path.c_str());
      return 1;
    }
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
  cmd->add_option("--json", args->json_path, "write results + metadata as JSON");
  cmd->callback([args, exit_code] {
    if (args->model_dir.empty() == args->synthetic.empty()) {
      std::fprintf(stderr, "gossamer bench: give exactly one of --model DIR or --synthetic 20b|120b\n");
      *exit_code = 2;
      return;
    }
    *exit_code = run_bench(*args);
  });
}

}  // namespace gossamer::cli

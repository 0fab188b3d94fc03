// `gossamer serve`: the OpenAI-compatible HTTP server over the CPU backend (or the built-in demo
// model when no --model is given).
#include <pthread.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>

#include "cli/commands.h"
#include "cli/demo_model.h"
#include "common/file_util.h"
#include "engine/cpu_runner.h"
#include "model/config.h"
#include "model/synth.h"
#include "model/weights.h"
#include "runtime/engine.h"
#include "runtime/fake_runner.h"
#include "server/generation_config.h"
#include "server/server.h"
#include "tokenizer/tokenizer.h"
#ifdef GOSSAMER_HAVE_CUDA
#include "engine/cuda/cuda_runner.h"  // plain C++ header: no CUDA includes
#endif

namespace gossamer::cli {
namespace {

namespace fs = std::filesystem;

struct ServeArgs {
  std::string model, tokenizer, host = "127.0.0.1", api_key, served_name, backend = "cpu", date;
  std::vector<std::string> allowed_origins;
  int port = 8000;
  int64_t max_num_seqs = 64, max_num_batched_tokens = 2048, kv_blocks = 0, block_size = 16;
  int64_t max_queue = 256, request_timeout = 600, max_model_len = 0, max_body = 8 << 20;
  int64_t default_max_tokens = -1;
  int64_t responses_store_max = 1024, responses_store_mib = 64;
  double kv_cache_gib = 1.0, shutdown_grace = 5.0;
  int threads = 0;
  bool no_prefix_caching = false;
  bool prefill_split_bf16 = false;  // --backend cuda: ~fp32 prefill GEMM activations
};

struct Backend {
  std::unique_ptr<ModelRunner> runner;
  std::shared_ptr<const Tokenizer> tok;
  std::string name;
  std::vector<int32_t> generation_eos;  // generation_config.json's eos_token_id
};

// The context limit: --max-model-len, else 4096 for the demo model, else the model's (0).
int64_t context_limit(const ServeArgs& a, bool demo) {
  return a.max_model_len > 0 ? a.max_model_len : (demo ? 4096 : 0);
}

KvCacheSpec size_kv(const ServeArgs& a, const ModelConfig& cfg) {
  KvCacheSpec spec;
  spec.block_size = a.block_size;
  int64_t full = a.kv_blocks;
  if (full <= 0) {
    const int64_t per = std::max<int64_t>(1, cpu_kv_bytes_per_block(cfg, a.block_size, false));
    full = static_cast<int64_t>(a.kv_cache_gib * double(int64_t{1} << 30)) / per;
    const int64_t cap = (cfg.max_position_embeddings + a.block_size - 1) / a.block_size *
                        std::max<int64_t>(4, a.max_num_seqs / 4);
    full = std::clamp<int64_t>(full, 64, std::max<int64_t>(64, cap));
  }
  const int64_t win_blocks = cfg.sliding_window / a.block_size + 3;
  const int64_t sliding = a.max_num_seqs * win_blocks + a.max_num_batched_tokens / a.block_size + 2;
  spec.num_blocks_full = full;
  spec.num_blocks_sliding = std::min(full, sliding);
  bool any_full = false, any_sliding = false;
  for (LayerType t : cfg.layer_types)
    (t == LayerType::kFullAttention ? any_full : any_sliding) = true;
  if (!any_full) spec.num_blocks_full = 0;
  if (!any_sliding) spec.num_blocks_sliding = 0;
  return spec;
}

Result<Backend> make_backend(const ServeArgs& a, bool* demo) {
  Backend b;
  std::string dir = a.model;
  *demo = dir.empty();
  if (*demo) {
    GS_ASSIGN_OR_RETURN(dir, demo_model_dir(a.tokenizer, "gossamer serve"));
  }
  // DIR/tokenizer.json, or for DIR/original the snapshot's.
  std::string tok_path = model_dir_file(dir, "tokenizer.json");
  std::error_code ec;  // an unreadable directory: the loaders below name it
  if (!a.tokenizer.empty() || !fs::exists(tok_path, ec)) {
    GS_ASSIGN_OR_RETURN(tok_path, find_tokenizer(a.tokenizer));
  }
  GS_ASSIGN_OR_RETURN(b.tok, Tokenizer::load(tok_path));
  b.name = a.served_name.empty() ? (*demo ? "gossamer-demo" : model_dir_name(dir)) : a.served_name;
  if (a.backend == "fake") {  // weights-free hash model (load tests); config from the dir
    GS_ASSIGN_OR_RETURN(ModelConfig cfg, load_config(dir));
    GS_ASSIGN_OR_RETURN(b.generation_eos, server::read_generation_eos(dir, cfg.vocab_size));
    b.runner = std::make_unique<FakeRunner>(cfg, size_kv(a, cfg));
    return b;
  }
  if (a.backend != "cpu" && a.backend != "cuda") {
    return InvalidArgument("--backend must be cpu, cuda or fake (got '" + a.backend + "')");
  }
  GS_ASSIGN_OR_RETURN(std::shared_ptr<LoadedModel> model, load_model(dir));
  GS_ASSIGN_OR_RETURN(b.generation_eos, server::read_generation_eos(dir, model->config.vocab_size));
  const KvCacheSpec spec = size_kv(a, model->config);
  if (a.backend == "cuda") {
#ifdef GOSSAMER_HAVE_CUDA
    CudaRunnerOptions o;
    o.kv = spec;
    o.max_seqs = a.max_num_seqs;
    const int64_t limit = context_limit(a, *demo);
    o.max_seq_len = limit > 0 ? limit : model->config.max_position_embeddings;
    // One forward per scheduler step: the step's token budget is the forward's row count (the
    // prefill path's GEMMs want many rows; docs/prefill.md).
    o.max_step_tokens = std::clamp<int64_t>(a.max_num_batched_tokens, 1, 16384);
    o.prefill_split_bf16 = a.prefill_split_bf16;
    o.progress = true;
    GS_ASSIGN_OR_RETURN(b.runner, CudaModelRunner::create(*model, o));
    return b;
#else
    return Unsupported("--backend cuda: this gossamer was built without CUDA (nvcc not found)");
#endif
  }
  GS_ASSIGN_OR_RETURN(b.runner, make_cpu_runner(model, spec, a.threads));
  return b;
}

// What only shows once model and tokenizer are loaded: that they belong together, and that the
// flags fit the model (else every request would fail, or worse).
Status check_backend(const ServeArgs& a, const Backend& b) {
  const ModelConfig& cfg = b.runner->config();
  if (b.tok->vocab_size() > cfg.vocab_size) {
    return InvalidArgument("the tokenizer's ids go up to " +
                           std::to_string(b.tok->vocab_size() - 1) +
                           ", beyond the model's vocab_size " + std::to_string(cfg.vocab_size) +
                           " (a tokenizer of another model? --tokenizer)");
  }
  for (const char* s : {"<|start|>", "<|channel|>", "<|message|>", "<|end|>", "<|return|>",
                        "<|call|>", "<|constrain|>"}) {
    if (!b.tok->special_id(s)) {
      return InvalidArgument(std::string("the tokenizer has no harmony special token ") + s +
                             " (the chat endpoints need gpt-oss's tokenizer)");
    }
  }
  if (a.max_model_len > cfg.max_position_embeddings) {
    return InvalidArgument("--max-model-len " + std::to_string(a.max_model_len) +
                           " is beyond the model's max_position_embeddings " +
                           std::to_string(cfg.max_position_embeddings));
  }
  if (!std::isfinite(a.kv_cache_gib) || !std::isfinite(a.shutdown_grace)) {
    return InvalidArgument("--kv-cache-gib and --shutdown-grace must be finite numbers");
  }
  return Status::Ok();
}

// SIGINT/SIGTERM: new generation requests get 503 while the ones in flight (streams too) get
// `grace` seconds; then the rest are cancelled (each ends with an error, 503 /
// server_shutting_down) and, once they have been answered, the listener closes. Returns at once
// if `done` (run() returned for another reason) when a signal comes.
void stop_on_signal(server::Server& srv, Engine& engine, double grace, std::atomic<bool>& done) {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  int sig = 0;
  sigwait(&set, &sig);
  if (done) return;
  std::fprintf(stderr, "gossamer serve: signal %d, shutting down (%lld requests in flight)\n", sig,
               (long long)srv.in_flight());
  srv.begin_shutdown();
  const auto wait_idle = [&](std::chrono::milliseconds limit) {
    const auto until = std::chrono::steady_clock::now() + limit;
    while (srv.in_flight() > 0 && std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  };
  wait_idle(std::chrono::milliseconds(int64_t(grace * 1000)));
  engine.stop();
  wait_idle(std::chrono::milliseconds(2000));  // the cancelled ones write their errors
  // Again until run() has returned: a signal during start-up can come before it listens, when
  // a stop would be lost.
  while (!done) {
    srv.stop();
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

int serve(const ServeArgs& a) {
  bool demo = false;
  Result<Backend> be = make_backend(a, &demo);
  Status st = be.ok() ? check_backend(a, *be) : be.status();
  if (!st.ok()) {
    std::fprintf(stderr, "gossamer serve: %s\n", st.ToString().c_str());
    return 1;
  }
  EngineOptions eo;
  eo.sched.max_num_seqs = a.max_num_seqs;
  eo.sched.max_num_batched_tokens = a.max_num_batched_tokens;
  eo.sched.prefix_caching = !a.no_prefix_caching;
  eo.sched.max_model_len = context_limit(a, demo);
  eo.sched.vocab_limit = be->tok->vocab_size();  // never sample the padding logits rows
  eo.max_queue = a.max_queue;
  const std::string describe = be->runner->describe();
  auto engine = Engine::start(std::move(be->runner), nullptr, eo);
  if (!engine.ok()) {
    std::fprintf(stderr, "gossamer serve: %s\n", engine.status().ToString().c_str());
    return 1;
  }
  server::ServerOptions so;
  so.host = a.host;
  so.port = a.port;
  so.api_key = a.api_key;
  so.allowed_origins = a.allowed_origins;
  so.model_name = be->name;
  so.max_body_bytes = a.max_body;
  so.request_timeout = std::chrono::seconds(a.request_timeout);
  so.default_max_tokens = a.default_max_tokens >= 0 ? a.default_max_tokens : (demo ? 512 : 0);
  so.http_threads = static_cast<int>(std::min<int64_t>(2048, a.max_num_seqs + a.max_queue + 16));
  so.render.date = a.date;
  so.extra_stop_ids = be->generation_eos;
  so.responses_store_max = a.responses_store_max;
  so.responses_store_bytes = a.responses_store_mib << 20;
  server::Server srv(engine->get(), be->tok, so);
  if (Status bound = srv.bind(); !bound.ok()) {
    std::fprintf(stderr, "gossamer serve: %s\n", bound.ToString().c_str());
    return 1;
  }
  std::atomic<bool> done{false};
  std::thread waiter([&] { stop_on_signal(srv, **engine, a.shutdown_grace, done); });
  std::fprintf(stderr,
               "gossamer serve: model '%s' (%s), max_model_len %lld, listening on http://%s:%d\n",
               so.model_name.c_str(), describe.c_str(), (long long)(*engine)->max_model_len(),
               a.host.c_str(), srv.port());
  std::printf("listening on %s:%d\n", a.host.c_str(), srv.port());
  std::fflush(stdout);
  srv.run();
  done = true;
  (*engine)->stop();
  pthread_kill(waiter.native_handle(), SIGTERM);  // wakes sigwait if no signal came
  waiter.join();
  std::fprintf(stderr, "gossamer serve: stopped\n");
  return 0;
}

}  // namespace

void add_serve_command(CLI::App& app, int* exit_code) {
  auto args = std::make_shared<ServeArgs>();
  auto* cmd = app.add_subcommand("serve", "OpenAI-compatible HTTP server");
  cmd->add_option("--model", args->model, "model dir (HF layout); default: the built-in demo");
  cmd->add_option("--tokenizer", args->tokenizer, "tokenizer.json (default: the model dir's)");
  cmd->add_option("--host", args->host, "bind address")->capture_default_str();
  cmd->add_option("--port", args->port, "port (0: any free port)")->capture_default_str();
  cmd->add_option("--api-key", args->api_key, "require 'Authorization: Bearer KEY'");
  cmd->add_option("--allowed-origin", args->allowed_origins,
                  "origin whose browser pages may call the server (CORS; repeatable; '*' = any)");
  cmd->add_option("--served-model-name", args->served_name, "model id in the API");
  cmd->add_option("--max-num-seqs", args->max_num_seqs, "running requests at most")
      ->capture_default_str();
  cmd->add_option("--max-num-batched-tokens", args->max_num_batched_tokens,
                  "tokens per step at most")
      ->capture_default_str();
  cmd->add_option("--kv-blocks", args->kv_blocks,
                  "full-attention KV blocks (0: from --kv-cache-gib)")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 24));
  cmd->add_option("--kv-cache-gib", args->kv_cache_gib, "KV memory for --kv-blocks=0")
      ->capture_default_str()
      ->check(CLI::Range(1.0 / 1024, 1024.0));
  cmd->add_option("--block-size", args->block_size, "tokens per KV block")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{1024}));
  cmd->add_option("--max-queue", args->max_queue, "waiting requests at most (then 429)")
      ->capture_default_str();
  cmd->add_option("--request-timeout", args->request_timeout, "seconds per request")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{30} * 24 * 3600));
  cmd->add_option("--max-model-len", args->max_model_len, "context limit (0: the model's)")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 31));
  cmd->add_option("--default-max-tokens", args->default_max_tokens,
                  "max_tokens when a request gives none (-1: context limit; demo: 512)");
  cmd->add_option("--max-body-bytes", args->max_body, "request body limit (413)")
      ->capture_default_str();
  cmd->add_option("--threads", args->threads, "CPU backend threads (0: all cores)");
  cmd->add_option("--backend", args->backend, "cpu | cuda | fake (weights-free, for load tests)")
      ->capture_default_str();
  cmd->add_option("--date", args->date, "fixed 'Current date' for prompts (YYYY-MM-DD)");
  cmd->add_option("--shutdown-grace", args->shutdown_grace, "seconds in-flight requests get")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 24.0 * 3600));
  cmd->add_option("--responses-store-max", args->responses_store_max,
                  "stored /v1/responses results at most (LRU; 0: never store)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 30));
  cmd->add_option("--responses-store-mib", args->responses_store_mib,
                  "MiB of stored /v1/responses JSON at most (LRU)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 20));
  cmd->add_flag("--no-prefix-caching", args->no_prefix_caching, "disable prefix caching");
  cmd->add_flag("--prefill-split-bf16", args->prefill_split_bf16,
                "--backend cuda: prefill GEMM activations as bf16 hi + lo (~fp32 accuracy, "
                "~8% slower prefill; docs/prefill.md)");
  cmd->callback([args, exit_code] {
    // Block the stop signals in every thread; the waiter thread receives them with sigwait.
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set, nullptr);
    std::signal(SIGPIPE, SIG_IGN);
    *exit_code = serve(*args);
  });
}

}  // namespace gossamer::cli

// `gossamer run` (incremental generation on the CPU reference engine, streaming to stdout) and
// `gossamer logits` (float32 logits [T, vocab] of every position of a token sequence, as .npy).
#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/demo_model.h"
#include "common/file_util.h"
#include "common/npy.h"
#include "engine/cpu_runner.h"
#include "model/weights.h"
#include "runtime/sampler.h"
#include "tokenizer/tokenizer.h"

namespace gossamer::cli {
namespace {

using Clock = std::chrono::steady_clock;

struct RunArgs {
  std::string model, prompt, tokens, tokenizer, dump_dir, out;
  int64_t n = 32;
  int threads = 0;
  double temperature = 1.0, top_p = 1.0, min_p = 0.0, presence = 0.0, frequency = 0.0;
  int64_t top_k = 0;
  int64_t seed = -1;
  bool ids = false, ignore_eos = false;
};

Result<std::vector<int32_t>> parse_tokens(const std::string& s) {
  std::vector<int32_t> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    size_t used = 0;
    long long v = 0;
    try {
      v = std::stoll(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != item.size() || v < 0 || v > INT32_MAX) {
      return InvalidArgument("--tokens: '" + item + "' is not a token id (comma-separated ids)");
    }
    out.push_back(static_cast<int32_t>(v));
  }
  if (out.empty()) return InvalidArgument("--tokens: no token ids given");
  return out;
}

// A runner whose pools hold `max_tokens` positions for one sequence, with identity block tables.
struct Session {
  std::shared_ptr<LoadedModel> model;
  std::unique_ptr<ModelRunner> runner;
  std::vector<int32_t> table;
};

Result<Session> open_session(const RunArgs& a, int64_t max_tokens) {
  Session s;
  GS_ASSIGN_OR_RETURN(s.model, load_model(a.model));
  KvCacheSpec spec;
  spec.block_size = 16;
  const int64_t blocks = (max_tokens + spec.block_size - 1) / spec.block_size;
  spec.num_blocks_full = spec.num_blocks_sliding = blocks;
  CpuRunnerOptions o;
  o.threads = a.threads;
  o.dump_dir = a.dump_dir;
  GS_ASSIGN_OR_RETURN(s.runner, make_cpu_runner(s.model, spec, o));
  for (int32_t b = 0; b < blocks; ++b) s.table.push_back(b);
  return s;
}

Status run_logits(const RunArgs& a) {
  GS_ASSIGN_OR_RETURN(std::vector<int32_t> toks, parse_tokens(a.tokens));
  GS_ASSIGN_OR_RETURN(Session s, open_session(a, static_cast<int64_t>(toks.size())));
  SeqChunk ch{toks, 0, s.table, s.table, LogitsMode::kAll};
  StepOutput out;
  GS_RETURN_IF_ERROR(s.runner->step({&ch, 1}, &out));
  return write_npy_f32(a.out, out.logits.data(), {out.rows, s.model->config.vocab_size});
}

Result<std::shared_ptr<const Tokenizer>> find_tokenizer(const RunArgs& a, bool required) {
  std::string path = a.tokenizer;
  if (path.empty()) {
    // MODEL/tokenizer.json, or for MODEL/original the snapshot's.
    path = model_dir_file(a.model, "tokenizer.json");
    std::error_code ec;  // unreadable: the model loader names the problem
    if (!std::filesystem::exists(path, ec)) path.clear();
  }
  if (path.empty()) {
    if (required)
      return NotFound(
          "--prompt needs a tokenizer: none in the model dir, pass "
          "--tokenizer PATH");
    return std::shared_ptr<const Tokenizer>();
  }
  return Tokenizer::load(path);
}

// Streams one token: its text (through the incremental decoder) or its id.
Status emit(int32_t id, IncrementalDecoder* dec, bool first) {
  if (dec == nullptr) {
    std::printf(first ? "%d" : " %d", id);
  } else {
    GS_ASSIGN_OR_RETURN(std::string text, dec->push(id));
    std::fwrite(text.data(), 1, text.size(), stdout);
  }
  std::fflush(stdout);
  return Status::Ok();
}

Result<GenerationParams> sampling_params(const RunArgs& a) {
  GenerationParams p;
  p.temperature = a.temperature;
  p.top_p = a.top_p;
  p.top_k = a.top_k;
  p.min_p = a.min_p;
  p.presence_penalty = a.presence;
  p.frequency_penalty = a.frequency;
  if (a.seed >= 0) p.seed = static_cast<uint64_t>(a.seed);
  GS_RETURN_IF_ERROR(check_sampling_params(p));
  return p;
}

Status run_generate(RunArgs a) {
  if (a.model.empty()) {  // the built-in demo model (says loudly that its text is noise)
    GS_ASSIGN_OR_RETURN(a.model, demo_model_dir(a.tokenizer, "gossamer run"));
  }
  if (a.prompt.empty() == a.tokens.empty()) {
    return InvalidArgument("give exactly one of --prompt and --tokens");
  }
  if (a.n < 0) return InvalidArgument("-n must be >= 0");
  GS_ASSIGN_OR_RETURN(GenerationParams params, sampling_params(a));
  GS_ASSIGN_OR_RETURN(auto tok, find_tokenizer(a, !a.prompt.empty()));
  // As `gossamer serve`: never sample the padding logits rows past the tokenizer's ids (gpt-oss:
  // 201088 rows, 200019 ids), so a seeded run draws what the server draws for the same request.
  if (tok) params.vocab_limit = tok->vocab_size();
  std::vector<int32_t> prompt;
  if (!a.prompt.empty()) {
    prompt = tok->encode(a.prompt, /*allow_special=*/true);
    if (prompt.empty()) return InvalidArgument("--prompt encodes to no tokens");
  } else {
    GS_ASSIGN_OR_RETURN(prompt, parse_tokens(a.tokens));
  }
  const auto t_load = Clock::now();
  GS_ASSIGN_OR_RETURN(Session s, open_session(a, static_cast<int64_t>(prompt.size()) + a.n));
  const double load_s = std::chrono::duration<double>(Clock::now() - t_load).count();
  std::mt19937_64 rng = make_request_rng(params.seed);
  std::unique_ptr<IncrementalDecoder> dec;
  if (tok && !a.ids) dec = std::make_unique<IncrementalDecoder>(tok);
  std::vector<int32_t> generated;
  StepOutput out;
  const auto t0 = Clock::now();
  SeqChunk ch{prompt, 0, s.table, s.table, LogitsMode::kLast};
  GS_RETURN_IF_ERROR(s.runner->step({&ch, 1}, &out));
  const auto t1 = Clock::now();
  const auto& eos = s.model->config.eos_token_ids;
  for (int64_t i = 0; i < a.n; ++i) {
    if (i > 0) {
      const int32_t last = generated.back();
      SeqChunk d{std::span<const int32_t>(&last, 1),
                 static_cast<int64_t>(prompt.size() + generated.size()) - 1, s.table, s.table,
                 LogitsMode::kLast};
      GS_RETURN_IF_ERROR(s.runner->step({&d, 1}, &out));
    }
    GS_ASSIGN_OR_RETURN(SampledToken t, sample_token(out.logits, params, generated, rng));
    generated.push_back(t.token);
    GS_RETURN_IF_ERROR(emit(t.token, dec.get(), i == 0));
    if (!a.ignore_eos && std::find(eos.begin(), eos.end(), t.token) != eos.end()) break;
  }
  if (dec) {
    const std::string rest = dec->flush();
    std::fwrite(rest.data(), 1, rest.size(), stdout);
  }
  std::printf("\n");
  const double pre_s = std::chrono::duration<double>(t1 - t0).count();
  const double gen_s = std::chrono::duration<double>(Clock::now() - t1).count();
  std::fprintf(stderr,
               "[gossamer run] %s | load %.2fs | prompt %zu tok %.3fs (%.1f tok/s) | generated "
               "%zu tok %.3fs (%.2f tok/s)\n",
               s.runner->describe().c_str(), load_s, prompt.size(), pre_s,
               static_cast<double>(prompt.size()) / pre_s, generated.size(), gen_s,
               gen_s > 0 ? static_cast<double>(generated.size()) / gen_s : 0.0);
  return Status::Ok();
}

void finish(const char* name, const Status& st, int* exit_code) {
  if (st.ok()) return;
  std::fprintf(stderr, "gossamer %s: %s\n", name, st.ToString().c_str());
  *exit_code = 1;
}

}  // namespace

void add_run_commands(CLI::App& app, int* exit_code) {
  auto a = std::make_shared<RunArgs>();
  auto* run =
      app.add_subcommand("run", "Generate with the CPU reference engine (streams to stdout)");
  run->add_option("--model", a->model,
                  "Checkpoint directory (config.json + *.safetensors); default: the built-in "
                  "demo model (random weights, noise)");
  run->add_option("--prompt", a->prompt, "Prompt text (needs a tokenizer)");
  run->add_option("--tokens", a->tokens, "Prompt as comma-separated token ids");
  run->add_option("-n,--max-tokens", a->n, "Tokens to generate")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 31));
  run->add_option("--temperature", a->temperature, "0 = greedy")->capture_default_str();
  run->add_option("--top-p", a->top_p, "Nucleus mass (1 = off)")->capture_default_str();
  run->add_option("--top-k", a->top_k, "Keep the k most likely (0 = off)")->capture_default_str();
  run->add_option("--min-p", a->min_p, "Keep p >= min_p * max p (0 = off)")->capture_default_str();
  run->add_option("--presence-penalty", a->presence, "OpenAI presence penalty");
  run->add_option("--frequency-penalty", a->frequency, "OpenAI frequency penalty");
  run->add_option("--seed", a->seed, "Sampling seed (default: random)");
  run->add_option("--threads", a->threads, "Worker threads (0 = all cores)");
  run->add_option("--tokenizer", a->tokenizer, "tokenizer.json (default: MODEL/tokenizer.json)");
  run->add_flag("--ids", a->ids, "Print token ids instead of text");
  run->add_flag("--ignore-eos", a->ignore_eos, "Do not stop at the config's eos tokens");
  run->add_option("--dump-dir", a->dump_dir, "Write per-layer activations of every step (.npy)");
  run->callback([a, exit_code] { finish("run", run_generate(*a), exit_code); });

  auto* lg =
      app.add_subcommand("logits", "Write float32 logits [T, vocab] of every position (.npy)");
  lg->add_option("--model", a->model, "Checkpoint directory")->required();
  lg->add_option("--tokens", a->tokens, "Comma-separated token ids")->required();
  lg->add_option("--out", a->out, "Output .npy path")->required();
  lg->add_option("--threads", a->threads, "Worker threads (0 = all cores)");
  lg->add_option("--dump-dir", a->dump_dir, "Write per-layer activations (.npy)");
  lg->callback([a, exit_code] { finish("logits", run_logits(*a), exit_code); });
}

}  // namespace gossamer::cli

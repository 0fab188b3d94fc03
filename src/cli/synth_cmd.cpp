// `gossamer synth`: writes a synthetic gpt-oss checkpoint (random weights, real layout).
#include <CLI/CLI.hpp>
#include <cctype>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>

#include "cli/commands.h"
#include "model/config.h"
#include "model/synth.h"

namespace gossamer::cli {
namespace {

struct SynthArgs {
  std::string preset = "tiny";
  std::string out;
  uint64_t seed = 0;
  std::string expert_format = "mxfp4";
  std::string tokenizer;
  std::string shard_size = "4G";
  int threads = 0;
  bool quiet = false;
  // Overrides (applied only when given on the command line).
  int64_t layers = 0, experts = 0, experts_per_token = 0, hidden = 0, intermediate = 0, heads = 0,
          kv_heads = 0, head_dim = 0, vocab = 0, sliding_window = 0;
};

// "123", "64K", "500M", "4G" (binary multiples) -> bytes.
Result<int64_t> parse_size(const std::string& s) {
  size_t digits = 0;
  while (digits < s.size() && std::isdigit(static_cast<unsigned char>(s[digits]))) ++digits;
  const std::string suffix = s.substr(digits);
  int shift = 0;
  if (suffix == "K" || suffix == "KiB")
    shift = 10;
  else if (suffix == "M" || suffix == "MiB")
    shift = 20;
  else if (suffix == "G" || suffix == "GiB")
    shift = 30;
  else if (!suffix.empty())
    digits = 0;
  if (digits == 0 || digits > 12) {
    return InvalidArgument("--shard-size: cannot parse '" + s + "' (e.g. 1073741824, 500M, 4G)");
  }
  const int64_t v = std::stoll(s.substr(0, digits));
  if (v <= 0) return InvalidArgument("--shard-size must be > 0");
  return v << shift;
}

void alternate_layer_types(ModelConfig* c) {
  c->layer_types.clear();
  for (int64_t i = 0; i < c->num_hidden_layers; ++i) {
    c->layer_types.push_back(i % 2 == 0 ? LayerType::kSlidingAttention : LayerType::kFullAttention);
  }
}

// Preset + command-line overrides -> options.
Result<SynthOptions> make_options(const CLI::App& cmd, const SynthArgs& a) {
  SynthOptions o;
  GS_ASSIGN_OR_RETURN(o.config, preset_config(a.preset));
  ModelConfig& c = o.config;
  const std::pair<const char*, std::pair<int64_t*, int64_t>> overrides[] = {
      {"--layers", {&c.num_hidden_layers, a.layers}},
      {"--experts", {&c.num_local_experts, a.experts}},
      {"--experts-per-token", {&c.experts_per_token, a.experts_per_token}},
      {"--hidden", {&c.hidden_size, a.hidden}},
      {"--intermediate", {&c.intermediate_size, a.intermediate}},
      {"--heads", {&c.num_attention_heads, a.heads}},
      {"--kv-heads", {&c.num_key_value_heads, a.kv_heads}},
      {"--head-dim", {&c.head_dim, a.head_dim}},
      {"--vocab", {&c.vocab_size, a.vocab}},
      {"--sliding-window", {&c.sliding_window, a.sliding_window}},
  };
  for (const auto& [flag, field] : overrides) {
    if (cmd.count(flag) > 0) *field.first = field.second;
  }
  alternate_layer_types(&c);
  // Token ids the vocabulary cannot hold are dropped (small --vocab overrides).
  std::erase_if(c.eos_token_ids, [&](int64_t id) { return id >= c.vocab_size; });
  if (c.pad_token_id >= c.vocab_size) c.pad_token_id = -1;
  if (a.expert_format == "mxfp4") {
    c.expert_format = ExpertFormat::kMxfp4;
  } else if (a.expert_format == "bf16") {
    c.expert_format = ExpertFormat::kBf16;
  } else {
    return InvalidArgument("--expert-format must be mxfp4 or bf16, got '" + a.expert_format + "'");
  }
  o.seed = a.seed;
  o.out_dir = a.out;
  o.tokenizer_path = a.tokenizer;
  GS_ASSIGN_OR_RETURN(o.shard_bytes, parse_size(a.shard_size));
  o.threads = a.threads;
  o.progress = !a.quiet;
  GS_RETURN_IF_ERROR(o.validate());
  return o;
}

}  // namespace

void add_synth_command(CLI::App& app, int* exit_code) {
  auto* cmd = app.add_subcommand(
      "synth", "Write a synthetic gpt-oss checkpoint (HF layout, deterministic random weights)");
  auto args = std::make_shared<SynthArgs>();
  cmd->add_option("--preset", args->preset, "tiny | 20b | 120b")->capture_default_str();
  cmd->add_option("--out", args->out, "Output directory")->required();
  cmd->add_option("--seed", args->seed, "Random seed")->capture_default_str();
  cmd->add_option("--expert-format", args->expert_format,
                  "mxfp4 (packed blocks+scales) | bf16 (exact dequantized HF layout)")
      ->capture_default_str();
  cmd->add_option("--tokenizer", args->tokenizer,
                  "tokenizer.json to copy in (tokenizer_config.json beside it is copied too)");
  cmd->add_option("--shard-size", args->shard_size, "Max bytes per shard (e.g. 500M, 4G)")
      ->capture_default_str();
  cmd->add_option("--threads", args->threads, "Generator threads (0: all cores)");
  cmd->add_flag("--quiet", args->quiet, "No progress output");
  cmd->add_option("--layers", args->layers, "Override num_hidden_layers");
  cmd->add_option("--experts", args->experts, "Override num_local_experts");
  cmd->add_option("--experts-per-token", args->experts_per_token, "Override experts_per_token");
  cmd->add_option("--hidden", args->hidden, "Override hidden_size");
  cmd->add_option("--intermediate", args->intermediate, "Override intermediate_size");
  cmd->add_option("--heads", args->heads, "Override num_attention_heads");
  cmd->add_option("--kv-heads", args->kv_heads, "Override num_key_value_heads");
  cmd->add_option("--head-dim", args->head_dim, "Override head_dim");
  cmd->add_option("--vocab", args->vocab, "Override vocab_size");
  cmd->add_option("--sliding-window", args->sliding_window, "Override sliding_window");
  cmd->callback([cmd, args, exit_code] {
    Result<SynthOptions> opts = make_options(*cmd, *args);
    if (!opts.ok()) {
      std::fprintf(stderr, "gossamer synth: %s\n", opts.status().ToString().c_str());
      *exit_code = 2;
      return;
    }
    const Status s = write_synth_checkpoint(*opts);
    if (!s.ok()) {
      std::fprintf(stderr, "gossamer synth: %s\n", s.ToString().c_str());
      *exit_code = 1;
      return;
    }
    if (!args->quiet) std::fprintf(stderr, "gossamer synth: wrote %s\n", args->out.c_str());
  });
}

}  // namespace gossamer::cli

// `gossamer inspect PATH`: validates a checkpoint (a model directory with config.json, a
// directory of *.safetensors, or one .safetensors file) and prints its tensors as JSON.
// With --dump DIR, every tensor's raw bytes are written to DIR/<i>.bin (i = index in the
// printed list), which lets tests compare against other safetensors implementations.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "model/safetensors.h"
#include "model/weights.h"

namespace gossamer::cli {
namespace {

using json = nlohmann::json;
namespace fs = std::filesystem;

struct InspectArgs {
  std::string path;
  std::string dump_dir;
};

json model_summary(const LoadedModel& m) {
  const ModelConfig& c = m.config;
  return {{"layout", m.layout},
          {"vocab_size", c.vocab_size},
          {"hidden_size", c.hidden_size},
          {"intermediate_size", c.intermediate_size},
          {"num_hidden_layers", c.num_hidden_layers},
          {"num_local_experts", c.num_local_experts},
          {"experts_per_token", c.experts_per_token},
          {"expert_format", c.expert_format == ExpertFormat::kMxfp4 ? "mxfp4" : "bf16"},
          {"tie_word_embeddings", c.tie_word_embeddings}};
}

// Store tensors that load_model bound to nothing (unknown names, biases with attention_bias
// false, lm_head with tied embeddings): accepted, and listed, as transformers' load report lists
// them as UNEXPECTED.
std::vector<std::string> unused_tensors(const LoadedModel& m) {
  std::set<const void*> bound;
  auto add = [&](std::initializer_list<const TensorRef*> ts) {
    for (const TensorRef* t : ts) bound.insert(t->data);
  };
  add({&m.weights.embed, &m.weights.final_norm, &m.weights.lm_head});
  for (const LayerWeights& l : m.weights.layers) {
    add({&l.attn_norm, &l.mlp_norm, &l.sinks, &l.q_w, &l.q_b, &l.k_w, &l.k_b, &l.v_w, &l.v_b});
    add({&l.o_w, &l.o_b, &l.router_w, &l.router_b, &l.gate_up_b, &l.down_b});
    add({&l.gate_up.blocks, &l.gate_up.scales, &l.gate_up.dense});
    add({&l.down.blocks, &l.down.scales, &l.down.dense});
  }
  std::vector<std::string> out;
  for (const std::string& name : m.store->names()) {
    auto t = m.store->get(name);
    if (t.ok() && (t->numel() == 0 || bound.count(t->data) == 0)) out.push_back(name);
  }
  return out;
}

Status dump_tensor(const TensorRef& t, const fs::path& file) {
  std::ofstream out(file, std::ios::binary);
  out.write(static_cast<const char*>(t.data),
            static_cast<std::streamsize>(t.numel() * dtype_size(t.dtype)));
  if (!out) return IoError(file.string() + ": write failed");
  return Status::Ok();
}

Status inspect(const InspectArgs& a) {
  std::error_code ec;
  std::shared_ptr<const TensorStore> store;
  json out;
  if (fs::is_directory(a.path, ec) && fs::exists(fs::path(a.path) / "config.json", ec)) {
    GS_ASSIGN_OR_RETURN(std::shared_ptr<LoadedModel> m, load_model(a.path));
    out["model"] = model_summary(*m);
    const std::vector<std::string> unused = unused_tensors(*m);
    out["model"]["unused_tensors"] = unused;
    if (!unused.empty()) {
      std::fprintf(stderr,
                   "gossamer inspect: note: %zu tensor(s) not used by the model, e.g. '%s'\n",
                   unused.size(), unused[0].c_str());
    }
    store = m->store;
  } else if (fs::is_directory(a.path, ec)) {
    GS_ASSIGN_OR_RETURN(store, TensorStore::open_dir(a.path));
  } else {
    GS_ASSIGN_OR_RETURN(store, TensorStore::open_file(a.path));
  }
  if (!a.dump_dir.empty()) {
    fs::create_directories(a.dump_dir, ec);
    if (ec) return IoError(a.dump_dir + ": cannot create: " + ec.message());
  }
  out["files"] = store->files();
  out["metadata"] = json::array();
  for (size_t i = 0; i < store->files().size(); ++i) out["metadata"].push_back(store->metadata(i));
  out["tensors"] = json::array();
  size_t index = 0;
  for (const std::string& name : store->names()) {
    GS_ASSIGN_OR_RETURN(TensorRef t, store->get(name));
    json e = {{"name", name},
              {"dtype", dtype_name(t.dtype)},
              {"shape", t.shape},
              {"file", store->file_of(name)}};
    if (!a.dump_dir.empty()) {
      const fs::path f = fs::path(a.dump_dir) / (std::to_string(index) + ".bin");
      GS_RETURN_IF_ERROR(dump_tensor(t, f));
      e["dump"] = f.string();
    }
    out["tensors"].push_back(std::move(e));
    ++index;
  }
  std::printf("%s\n", out.dump(1).c_str());
  return Status::Ok();
}

}  // namespace

void add_inspect_command(CLI::App& app, int* exit_code) {
  auto args = std::make_shared<InspectArgs>();
  CLI::App* cmd = app.add_subcommand(
      "inspect", "Validate a checkpoint (model dir, *.safetensors dir or file); print its tensors");
  // --model as in every other subcommand (and the README); or positional.
  cmd->add_option("path,--model", args->path, "model directory or .safetensors file")->required();
  cmd->add_option("--dump", args->dump_dir, "write each tensor's raw bytes to DIR/<i>.bin");
  cmd->callback([args, exit_code] {
    const Status s = inspect(*args);
    if (!s.ok()) {
      std::fprintf(stderr, "gossamer inspect: %s\n", s.ToString().c_str());
      *exit_code = 1;
    }
  });
}

}  // namespace gossamer::cli

#include "cli/demo_model.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "model/synth.h"

namespace gossamer::cli {

namespace fs = std::filesystem;

namespace {

std::string exe_dir() {
  std::error_code ec;
  fs::path p = fs::read_symlink("/proc/self/exe", ec);
  return ec ? std::string() : p.parent_path().string();
}

std::string read_text(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// The dir holds a complete demo checkpoint of the current demo config.
bool is_current_demo(const std::string& dir) {
  std::error_code ec;  // not readable: not current (the demo is made again, or fails clearly)
  return fs::exists(dir + "/tokenizer.json", ec) && fs::exists(dir + "/config.json", ec) &&
         read_text(dir + "/config.json") == config_to_json(demo_config());
}

}  // namespace

ModelConfig demo_config() {
  ModelConfig c = preset_config("tiny").value();
  c.head_dim = 64;
  c.num_attention_heads = 4;
  c.num_key_value_heads = 2;
  return c;
}

Result<std::string> find_tokenizer(const std::string& given) {
  if (!given.empty()) {
    std::error_code ec;
    if (!fs::exists(given, ec)) {
      return NotFound("--tokenizer: " + given +
                      (ec ? " cannot be read (" + ec.message() + ")" : " does not exist"));
    }
    return given;
  }
  const std::string rel = "shared/tokenizer/tokenizer.json";
  for (fs::path base : {fs::path(exe_dir()), fs::current_path()}) {
    for (int up = 0; up < 4 && !base.empty(); ++up, base = base.parent_path()) {
      std::error_code ec;
      if (fs::exists(base / rel, ec)) return (base / rel).string();
      if (base == base.parent_path()) break;
    }
  }
  return NotFound("no tokenizer.json: pass --tokenizer PATH (looked for ../" + rel +
                  " beside the repository)");
}

Result<std::string> demo_model_dir(const std::string& tokenizer_arg, const std::string& who) {
  std::string cache;
  if (const char* c = std::getenv("GOSSAMER_CACHE"); c && *c) {
    cache = c;
  } else if (const char* h = std::getenv("HOME"); h && *h) {
    cache = std::string(h) + "/.cache/gossamer";
  } else {
    return NotFound("neither $GOSSAMER_CACHE nor $HOME is set: pass --model DIR");
  }
  const std::string dir = cache + "/demo";
  std::fprintf(stderr,
               "%s: WARNING: no --model given; using the built-in DEMO model (tiny, head_dim 64, "
               "RANDOM weights; CPU and CUDA backends): its output text is NOISE. Model dir: %s\n",
               who.c_str(), dir.c_str());
  if (is_current_demo(dir)) return dir;
  GS_ASSIGN_OR_RETURN(std::string tok, find_tokenizer(tokenizer_arg));
  SynthOptions o;
  o.config = demo_config();
  o.seed = 0;
  o.out_dir = dir + ".tmp." + std::to_string(getpid());
  o.tokenizer_path = tok;
  std::fprintf(stderr, "%s: synthesising the demo model into %s ...\n", who.c_str(), dir.c_str());
  GS_RETURN_IF_ERROR(write_synth_checkpoint(o));
  std::error_code ec;
  if (is_current_demo(dir)) {  // another process finished first
    fs::remove_all(o.out_dir, ec);
    return dir;
  }
  fs::remove_all(dir, ec);
  fs::rename(o.out_dir, dir, ec);
  if (ec) return IoError("cannot move " + o.out_dir + " to " + dir + ": " + ec.message());
  return dir;
}

}  // namespace gossamer::cli

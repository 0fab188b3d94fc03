// Helpers shared by the synth tests (synth_test.cpp, synth_mxfp4_test.cpp): a scratch
// directory, seeds, a small config, tensor bytes and a synth call with explicit sizes.
#pragma once

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <random>
#include <string>

#include "common/status.h"
#include "model/config.h"
#include "model/safetensors.h"
#include "model/synth.h"

namespace gossamer::synthtest {

// Per-test scratch directory, removed afterwards.
class TempDir {
 public:
  TempDir() {
    std::random_device rd;
    path_ =
        std::filesystem::temp_directory_path() / ("gossamer_synth_test_" + std::to_string(rd()));
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  std::filesystem::path operator/(const std::string& s) const { return path_ / s; }

 private:
  std::filesystem::path path_;
};

inline uint64_t fresh_seed() {
  std::random_device rd;
  const uint64_t seed = (static_cast<uint64_t>(rd()) << 32) | rd();
  std::printf("synth seed: %llu\n", static_cast<unsigned long long>(seed));
  return seed;
}

// Small but complete: real structure, small vocab so each write is ~1 MB.
inline ModelConfig small_config(ExpertFormat fmt) {
  ModelConfig c = preset_config("tiny").value();
  c.vocab_size = 1000;
  c.num_hidden_layers = 3;
  c.layer_types = {LayerType::kSlidingAttention, LayerType::kFullAttention,
                   LayerType::kSlidingAttention};
  c.eos_token_ids = {999};
  c.pad_token_id = 998;
  c.expert_format = fmt;
  return c;
}

inline std::string tensor_bytes(const TensorStore& st, const std::string& name) {
  const TensorRef r = st.get(name).value();
  return std::string(static_cast<const char*>(r.data),
                     static_cast<size_t>(r.numel() * dtype_size(r.dtype)));
}

inline Status synth_to(const std::filesystem::path& dir, const ModelConfig& cfg, uint64_t seed,
                       int64_t shard, int64_t chunk, int threads) {
  SynthOptions o;
  o.config = cfg;
  o.seed = seed;
  o.out_dir = dir.string();
  o.shard_bytes = shard;
  o.chunk_bytes = chunk;
  o.threads = threads;
  return write_synth_checkpoint(o);
}

}  // namespace gossamer::synthtest

// Helpers shared by the synth tests (synth_test.cpp, synth_mxfp4_test.cpp, finite_check_test.cpp):
// a small config, tensor bytes and a synth call with explicit sizes. (Scratch directories:
// testing::TempDir of st_test_util.h; seeds: common/test_seed.h.)
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

#include "common/status.h"
#include "model/config.h"
#include "model/safetensors.h"
#include "model/synth.h"

namespace gossamer::synthtest {

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

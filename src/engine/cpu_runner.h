// The CPU reference backend: an fp32 gpt-oss forward over a paged KV cache (ModelRunner).
// Weights stay in the checkpoint's format (bf16 / MXFP4, usually mmapped) and are converted row by
// row as they are used; only the chosen experts are dequantized.
#pragma once

#include <memory>
#include <string>

#include "common/status.h"
#include "engine/model_runner.h"
#include "model/weights.h"

namespace gossamer {

struct CpuRunnerOptions {
  int threads = 0;       // <= 0: hardware concurrency
  std::string dump_dir;  // non-empty: every step writes per-layer activations there (.npy)
  // Round K/V to bf16 (nearest-even) as they are written to the cache, the way the CUDA backend
  // stores them: with it, CPU and GPU differ only by summation order (tests of the GPU path).
  bool kv_bf16 = false;
};

// Validates the weights against the config and allocates both KV pools
// (K and V: [num_blocks][layers of that kind][block_size][kv_heads][head_dim] fp32).
Result<std::unique_ptr<ModelRunner>> make_cpu_runner(std::shared_ptr<LoadedModel> model,
                                                     KvCacheSpec spec, int threads);
Result<std::unique_ptr<ModelRunner>> make_cpu_runner(std::shared_ptr<LoadedModel> model,
                                                     KvCacheSpec spec,
                                                     const CpuRunnerOptions& options);

// Bytes of KV cache one block of each pool takes (K and V together) for this config.
int64_t cpu_kv_bytes_per_block(const ModelConfig& cfg, int64_t block_size, bool sliding);

}  // namespace gossamer

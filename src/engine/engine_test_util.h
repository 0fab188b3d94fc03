// Test helpers: a tiny random gpt-oss model held in memory (TensorRefs over owned vectors) and a
// naive, cache-free fp32 reference forward written independently of engine/cpu_forward.cpp.
#pragma once

#include <cstdint>
#include <memory>
#include <random>
#include <vector>

#include "model/weights.h"

namespace gossamer::testing {

struct TinyModel {
  std::shared_ptr<LoadedModel> model;
  std::vector<std::shared_ptr<std::vector<uint16_t>>> bf16_store;  // owns the bf16 data
  std::vector<std::shared_ptr<std::vector<uint8_t>>> u8_store;     // owns the MXFP4 data
  std::vector<std::shared_ptr<std::vector<float>>> f32_store;      // owns the f32 data
};

struct TinySpec {
  int64_t vocab = 64, hidden = 64, intermediate = 32, layers = 2, heads = 4, kv_heads = 2;
  int64_t head_dim = 16, experts = 4, top_k = 2, sliding_window = 4;
  bool mxfp4 = true;
  double yarn_factor = 8.0;
  int64_t original_max_pos = 8;
};

// Random weights (bf16 dense, MXFP4 or bf16 experts); layer 0 sliding, the rest alternate.
TinyModel make_tiny_model(const TinySpec& s, std::mt19937_64& rng);

// Logits [T, vocab] for a whole sequence, computed directly (no KV cache, no paging): the same
// math written as plainly as possible with double accumulators.
std::vector<float> naive_forward(const LoadedModel& m, const std::vector<int32_t>& tokens);

}  // namespace gossamer::testing

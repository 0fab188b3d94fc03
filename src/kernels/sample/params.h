// Greedy sampling on the GPU, without copying logits to the host:
//  argmax_f32: keys[b] = max over v of (logits[b, v], lowest index on ties) as a packed 64-bit
//    key (the same key the lm_head GEMV's fused argmax produces; see gemv/params.h);
//  greedy_finalize: tokens[b] = index(keys[b]); optionally feeds the next decode step on the
//    device (next_tokens[b] = tokens[b], pos[b] += 1) and clears the keys for the next step.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

#include "common/status.h"

namespace gossamer::kern {

struct ArgmaxParams {
  const float* logits = nullptr;       // [batch, ld] f32 (first `vocab` columns used)
  unsigned long long* keys = nullptr;  // [batch], zeroed before the launch
  int batch = 0, vocab = 0, ld = 0;
  Status validate() const;
};

struct GreedyFinalizeParams {
  unsigned long long* keys = nullptr;  // [batch] (cleared to 0 after reading)
  int32_t* tokens = nullptr;           // [batch] out
  int32_t* next_tokens = nullptr;      // [batch] or null: the next step's input tokens
  int32_t* pos = nullptr;              // [batch] or null: incremented
  int batch = 0;
  Status validate() const;
};

Status launch_argmax(const ArgmaxParams& p, cudaStream_t stream);  // kernel argmax_f32
Status launch_greedy_finalize(const GreedyFinalizeParams& p, cudaStream_t stream);

std::vector<int32_t> argmax_ref(const std::vector<float>& logits, int batch, int vocab);

}  // namespace gossamer::kern

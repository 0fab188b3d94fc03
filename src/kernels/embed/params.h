// Token embedding lookup: x[b, :] = float(embed[tokens[b], :]) (bf16 table, fp32 output).
// Out-of-range tokens produce zeros and set *error to the first offending row + 1.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "common/status.h"

namespace gossamer::kern {

struct EmbedParams {
  const uint16_t* table = nullptr;  // [vocab, hidden] bf16
  const int32_t* tokens = nullptr;  // [batch]
  float* x = nullptr;               // [batch, hidden] f32
  int32_t* error = nullptr;         // optional: set to row+1 of a bad token id
  int batch = 0, vocab = 0, hidden = 0;
  bool pdl = false;  // programmatic dependent launch (common/pdl.h)
  Status validate() const;
};

Status launch_embed(const EmbedParams& p, cudaStream_t stream);  // kernel embed_bf16_f32

}  // namespace gossamer::kern

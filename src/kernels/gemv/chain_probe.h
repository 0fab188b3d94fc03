// Measurement probe (gemv_bench "persistent chain", docs/decode-budget.md): M dependent batch-1
// GEMVs y_m = W_m x_m with x_{m+1} = y_m[0 : cols_{m+1}], run either as M PDL launches of
// gemv_bulk_bf16w_f32a or as ONE persistent kernel (gemv_chain_probe_bf16w_f32a) whose producer
// thread streams the rows of every step into one shared-memory ring without stopping at the step
// boundaries, while the consumers wait for the previous step at a grid-wide counter. It answers
// "what would a persistent decode kernel buy over a PDL chain", not a production path.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "common/status.h"

namespace gossamer::kern {

struct GemvChainProbe {
  const uint16_t* const* w = nullptr;  // [steps] device pointers to [rows_m, cols_m] bf16
  const int* rows = nullptr;           // [steps] host arrays (copied into the launch)
  const int* cols = nullptr;
  int steps = 0;                 // <= kChainProbeMaxSteps
  float* act = nullptr;          // [2][act_len] f32: step m reads act[m & 1], writes the other
  int act_len = 0;               // >= every rows_m and cols_m
  unsigned* counters = nullptr;  // [steps + 1], zero before every launch
  int ring_bytes = 0;            // shared-memory ring (whole rows)
  Status validate() const;
};
inline constexpr int kChainProbeMaxSteps = 64;

Status launch_gemv_chain_probe(const GemvChainProbe& p, cudaStream_t stream);
// The same steps as `steps` PDL launches of gemv_bulk_bf16w_f32a (counters and ring_bytes unused).
Status launch_gemv_chain_pdl(const GemvChainProbe& p, cudaStream_t stream);

}  // namespace gossamer::kern

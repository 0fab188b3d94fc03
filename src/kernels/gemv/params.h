// Dense GEMV with bf16 weights and fp32 activations, for a few activation rows (batch 1..64):
//   y[b, r] (+)= sum_c W[r, c] * x[b, c] + bias[r]
// Used for the O-projection (accumulate = residual add), the router and the lm_head (optionally
// with a fused argmax over rows for greedy sampling).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

#include "common/status.h"

namespace gossamer::kern {

struct GemvParams {
  const uint16_t* w = nullptr;  // [rows, cols] bf16, 16-byte aligned
  const float* bias = nullptr;  // [rows] f32 or null
  const float* x = nullptr;     // [batch, cols] f32, 16-byte aligned
  float* y = nullptr;           // [batch, ldy] f32 (may be null when only argmax is wanted)
  int rows = 0, cols = 0, batch = 0, ldy = 0;
  bool accumulate = false;  // y += result (residual add) instead of y = result
  // [batch] packed (value, row) keys; reset to 0 before the launch. Null: no argmax.
  unsigned long long* argmax = nullptr;
  bool pdl = false;  // programmatic dependent launch (common/pdl.h)
  Status validate() const;
};

// Kernel gemv_bf16w_f32a<BT>: picks the batch tile BT in {1,2,4,8} from `batch`.
Status launch_gemv(const GemvParams& p, cudaStream_t stream);
// Name of the kernel variant launch_gemv uses for this batch (kernel-path report).
const char* gemv_variant(int batch);

// Decodes an argmax key (from GemvParams::argmax) into the row index.
int argmax_key_to_index(unsigned long long key);

// fp64 reference: x [batch, cols], w bf16 [rows, cols], bias [rows] (may be empty), y0 [batch,
// rows] initial y for accumulate (may be empty) -> y [batch, rows].
std::vector<double> gemv_ref(const std::vector<uint16_t>& w, const std::vector<float>& bias,
                             const std::vector<float>& x, const std::vector<float>& y0, int rows,
                             int cols, int batch);

}  // namespace gossamer::kern

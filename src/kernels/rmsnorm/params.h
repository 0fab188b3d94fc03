// RMSNorm over rows of an fp32 activation matrix with a bf16 weight:
//   y[i, :] = x[row(i), :] / sqrt(mean(x[row(i), :]^2) + eps) * w
// where row(i) = rows_index[i] when rows_index is set (gathers the rows that need logits), else i.
// Optionally also (or only) as bf16 GEMM inputs for the prefill: yb = bf16_rne(y) and, in split
// mode, yb_lo = bf16_rne(y - yb) (bit-identical to rmsnorm + kernels/gemm cvt_f32_bf16).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

#include "common/status.h"

namespace gossamer::kern {

struct RmsNormParams {
  const float* x = nullptr;             // [*, dim] f32, row stride dim
  const uint16_t* w = nullptr;          // [dim] bf16
  const int32_t* rows_index = nullptr;  // [rows] or null (device)
  float* y = nullptr;                   // [rows, dim] f32, or null if yb is set
  int rows = 0, dim = 0;
  float eps = 1e-5f;
  bool pdl = false;           // programmatic dependent launch (common/pdl.h)
  uint16_t* yb = nullptr;     // [rows, dim] bf16 copy of y (RNE), or null; 8-byte aligned
  uint16_t* yb_lo = nullptr;  // [rows, dim] bf16 of y - yb (split hi + lo), or null; needs yb
  Status validate() const;
};

// Kernel rmsnorm_f32a_bf16w: one block per output row.
Status launch_rmsnorm(const RmsNormParams& p, cudaStream_t stream);

// CPU reference in fp64: x [rows, dim], w [dim] as bf16 bits -> y [rows, dim].
std::vector<double> rmsnorm_ref(const std::vector<float>& x, const std::vector<uint16_t>& w,
                                int rows, int dim, float eps);

}  // namespace gossamer::kern

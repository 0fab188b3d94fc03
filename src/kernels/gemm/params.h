// Dense prefill GEMM through cuBLASLt (tensor cores), bf16 inputs, fp32 output:
//   d[m, n] (+)= sum_k a[m, k] * w[n, k] + bias[n]
// a: activations [M, K] bf16 row-major; w: a weight [N, K] bf16 row-major (nn.Linear layout),
// so this is A x W^T. The bias is a cuBLASLt epilogue; `accumulate` adds into d (beta = 1: the
// residual add of the O-projection). Plus the small conversion kernel the prefill needs:
// fp32 rows -> bf16 rows (GEMM inputs).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "common/status.h"

namespace gossamer::kern {

struct GemmParams {
  const uint16_t* a = nullptr;  // [m, lda] bf16 (first k columns used), 16-byte aligned
  const uint16_t* w = nullptr;  // [n, ldw] bf16 (first k columns used), 16-byte aligned
  const float* bias = nullptr;  // [n] f32 or null
  float* d = nullptr;           // [m, ldd] f32 (first n columns written), 16-byte aligned
  int m = 0, n = 0, k = 0;
  int lda = 0, ldw = 0, ldd = 0;  // row strides in elements; 0 = k, k, n
  bool accumulate = false;        // d += result instead of d = result
  Status validate() const;
};

// Owns a cuBLASLt handle, a device workspace (allocated once) and a cache of plans (layouts +
// the heuristic's algorithm) per shape, so that run() allocates nothing. Not thread-safe: one
// context per stream owner.
class GemmContext {
 public:
  static Result<std::unique_ptr<GemmContext>> create(size_t workspace_bytes = size_t{32} << 20);
  ~GemmContext();
  GemmContext(const GemmContext&) = delete;
  GemmContext& operator=(const GemmContext&) = delete;
  // Enqueues the GEMM on `stream` (no sync). Errors name the shape.
  Status run(const GemmParams& p, cudaStream_t stream);
  size_t workspace_bytes() const;
  struct Impl;

 private:
  explicit GemmContext(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Kernel cvt_f32_bf16: y[i] = bf16_rne(x[i]) for i < n (n % 4 == 0, 16-byte aligned x).
// With lo != null (split mode): y[i] = hi = bf16_rne(x[i]) and lo[i] = bf16_rne(x[i] - hi), so
// hi + lo carries ~16 significant bits: two GEMMs (hi, then lo accumulated) give near-fp32
// activations at twice the GEMM cost (CudaRunnerOptions::prefill_split_bf16). `pdl`: launched
// with programmatic dependent launch (common/pdl.h; x is read after pdl_wait()).
Status launch_f32_to_bf16(const float* x, uint16_t* y, size_t n, cudaStream_t stream,
                          uint16_t* lo = nullptr, bool pdl = false);

// fp64 reference: a [m, k] bf16, w [n, k] bf16, bias [n] (may be empty), d0 [m, n] initial d
// for accumulate (may be empty) -> d [m, n].
std::vector<double> gemm_ref(const std::vector<uint16_t>& a, const std::vector<uint16_t>& w,
                             const std::vector<float>& bias, const std::vector<float>& d0, int m,
                             int n, int k);

}  // namespace gossamer::kern

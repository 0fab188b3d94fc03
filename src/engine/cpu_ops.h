// fp32 building blocks of the CPU reference forward: weight views that convert bf16 / MXFP4 to
// fp32 on the fly (no fp32 copy of a weight matrix is ever kept), batched matmuls split over a
// ThreadPool, RMSNorm, the gpt-oss SwiGLU and sink attention for one query.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "common/status.h"
#include "common/thread_pool.h"
#include "model/weights.h"

namespace gossamer::cpu {

// A dense row-major weight matrix W[rows, cols] in bf16 or f32 (a view into the checkpoint).
struct MatView {
  const void* data = nullptr;
  DType dtype = DType::kBF16;
  int64_t rows = 0, cols = 0;
  // Converts row r (cols values) to fp32 into out[cols].
  void row_f32(int64_t r, float* out) const;
};

// Checks that `t` is a 2-D bf16/f32 tensor of shape [rows, cols]; the message names `name`.
Result<MatView> mat_view(const TensorRef& t, int64_t rows, int64_t cols, const std::string& name);

// Reads a 1-D (or flattened) bf16/f32 tensor with exactly `n` elements into fp32.
Result<std::vector<float>> vec_f32(const TensorRef& t, int64_t n, const std::string& name);

// Checks an ExpertMatrix against the shapes documented in model/weights.h for `experts`.
Status check_expert_matrix(const ExpertMatrix& m, int64_t experts, int64_t rows, int64_t cols,
                           const std::string& name);

// Dot product of two fp32 vectors of length n (8 partial sums: fixed, reproducible order).
float dot(const float* a, const float* b, int64_t n);

// y[t, r] = sum_c x[t, c] * W[r, c] + bias[r] for t < T.  x: [T, cols], y: [T, rows].
// bias may be empty. Each weight row is converted once and used for all T tokens. Split over rows.
void linear(ThreadPool& pool, const MatView& w, std::span<const float> bias, const float* x,
            int64_t T, float* y);

// out[n] = x[n] / sqrt(mean(x^2) + eps) * w[n] (fp32).
void rmsnorm(const float* x, const float* w, int64_t n, float eps, float* out);

// gpt-oss SwiGLU on interleaved gate/up: gu [2I] -> y [I]:
// gate = min(gu[2j], limit); up = clamp(gu[2j+1], -limit, limit);
// y[j] = (up + 1) * gate * sigmoid(1.702 * gate).
void swiglu(const float* gu, int64_t I, float limit, float* y);

// One expert's share of an MoE matmul: y[n, rows] = x[n, cols] * W_e^T + bias_e.
struct ExpertBatch {
  int64_t expert = 0;
  const float* x = nullptr;  // [n, cols]
  int64_t n = 0;
  float* y = nullptr;  // [n, rows]
};

// Runs every batch of `batches` through expert matrix `m` (MXFP4 dequantized row by row, or the
// bf16 [E, cols, rows] layout read in column tiles); `bias` is the [E, rows] bias tensor.
// Only the experts named in the batches are touched. One parallel_for over (batch, row tile).
void expert_matmul(ThreadPool& pool, const ExpertMatrix& m, const TensorRef& bias,
                   std::span<const ExpertBatch> batches);

// Dequantizes row r of expert e of an MXFP4 ExpertMatrix into out[cols].
void mxfp4_row(const ExpertMatrix& m, int64_t e, int64_t r, float* out);

// Attention of one query head over n keys/values given as pointer lists (each [head_dim]):
// softmax over [q.k_j * scale for j < n, sink], the sink column dropped; out[head_dim].
// scratch must hold n floats.
void sink_attention(const float* q, const float* const* keys, const float* const* values, int64_t n,
                    int64_t head_dim, float scale, float sink, float* scratch, float* out);

}  // namespace gossamer::cpu

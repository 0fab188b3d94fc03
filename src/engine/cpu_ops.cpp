#include "engine/cpu_ops.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "common/numerics.h"

namespace gossamer::cpu {
namespace {

std::string shape_str(const std::vector<int64_t>& s) {
  std::ostringstream os;
  os << "[";
  for (size_t i = 0; i < s.size(); ++i) os << (i ? ", " : "") << s[i];
  os << "]";
  return os.str();
}

// Local names (model/weights.h's dtype_name lives in the model library; keep ops standalone).
const char* dtype_str(DType d) {
  switch (d) {
    case DType::kBF16:
      return "bf16";
    case DType::kF16:
      return "f16";
    case DType::kF32:
      return "f32";
    case DType::kU8:
      return "u8";
    default:
      return "an unsupported dtype";
  }
}

int64_t numel_of(const std::vector<int64_t>& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

Status expect_shape(const TensorRef& t, const std::vector<int64_t>& want, const std::string& name) {
  if (t.data == nullptr) return InvalidArgument("tensor " + name + " is missing (null data)");
  if (t.shape != want) {
    return InvalidArgument("tensor " + name + ": expected shape " + shape_str(want) + ", found " +
                           shape_str(t.shape));
  }
  return Status::Ok();
}

bool float_dtype(DType d) {
  return d == DType::kBF16 || d == DType::kF16 || d == DType::kF32;
}

void to_f32(const void* data, DType dtype, int64_t offset, int64_t n, float* out) {
  if (dtype == DType::kF32) {
    const float* p = static_cast<const float*>(data) + offset;
    std::copy(p, p + n, out);
    return;
  }
  const uint16_t* p = static_cast<const uint16_t*>(data) + offset;
  if (dtype == DType::kF16) {
    for (int64_t i = 0; i < n; ++i) out[i] = f16_to_float(p[i]);
    return;
  }
  for (int64_t i = 0; i < n; ++i) out[i] = bf16_to_float(p[i]);
}

// Element i of a bf16/f16/f32 tensor (dtype checked by the callers' validation).
float elem_f32(const TensorRef& t, int64_t i) {
  float v;
  to_f32(t.data, t.dtype, i, 1, &v);
  return v;
}

constexpr int64_t kDenseTile = 64;  // output columns per work item for the bf16 expert layout

}  // namespace

void MatView::row_f32(int64_t r, float* out) const {
  to_f32(data, dtype, r * cols, cols, out);
}

Result<MatView> mat_view(const TensorRef& t, int64_t rows, int64_t cols, const std::string& name) {
  GS_RETURN_IF_ERROR(expect_shape(t, {rows, cols}, name));
  if (!float_dtype(t.dtype)) {
    return InvalidArgument("tensor " + name + ": expected bf16, f16 or f32, found " +
                           dtype_str(t.dtype));
  }
  return MatView{t.data, t.dtype, rows, cols};
}

Result<std::vector<float>> vec_f32(const TensorRef& t, int64_t n, const std::string& name) {
  if (t.data == nullptr) return InvalidArgument("tensor " + name + " is missing (null data)");
  if (numel_of(t.shape) != n) {
    return InvalidArgument("tensor " + name + ": expected " + std::to_string(n) +
                           " elements, found shape " + shape_str(t.shape));
  }
  if (!float_dtype(t.dtype)) {
    return InvalidArgument("tensor " + name + ": expected bf16, f16 or f32, found " +
                           dtype_str(t.dtype));
  }
  std::vector<float> v(static_cast<size_t>(n));
  to_f32(t.data, t.dtype, 0, n, v.data());
  return v;
}

Status check_expert_matrix(const ExpertMatrix& m, int64_t experts, int64_t rows, int64_t cols,
                           const std::string& name) {
  if (m.rows != rows || m.cols != cols) {
    return InvalidArgument("expert matrix " + name + ": expected rows x cols " +
                           std::to_string(rows) + "x" + std::to_string(cols) + ", found " +
                           std::to_string(m.rows) + "x" + std::to_string(m.cols));
  }
  if (m.format == ExpertFormat::kMxfp4) {
    if (cols % 32 != 0) {
      return InvalidArgument("expert matrix " + name +
                             ": MXFP4 needs cols % 32 == 0, cols=" + std::to_string(cols));
    }
    GS_RETURN_IF_ERROR(expect_shape(m.blocks, {experts, rows, cols / 32, 16}, name + ".blocks"));
    GS_RETURN_IF_ERROR(expect_shape(m.scales, {experts, rows, cols / 32}, name + ".scales"));
    if (m.blocks.dtype != DType::kU8 || m.scales.dtype != DType::kU8) {
      return InvalidArgument("expert matrix " + name + ": MXFP4 blocks/scales must be u8");
    }
    return Status::Ok();
  }
  GS_RETURN_IF_ERROR(expect_shape(m.dense, {experts, cols, rows}, name));
  if (!float_dtype(m.dense.dtype)) {
    return InvalidArgument("expert matrix " + name + ": expected bf16, f16 or f32, found " +
                           dtype_str(m.dense.dtype));
  }
  return Status::Ok();
}

float dot(const float* a, const float* b, int64_t n) {
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int l = 0; l < 8; ++l) acc[l] += a[i + l] * b[i + l];
  }
  for (; i < n; ++i) acc[0] += a[i] * b[i];
  return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

void linear(ThreadPool& pool, const MatView& w, std::span<const float> bias, const float* x,
            int64_t T, float* y) {
  pool.parallel_for(w.rows, [&](int64_t r0, int64_t r1) {
    std::vector<float> row(static_cast<size_t>(w.cols));
    for (int64_t r = r0; r < r1; ++r) {
      w.row_f32(r, row.data());
      const float b = bias.empty() ? 0.0f : bias[static_cast<size_t>(r)];
      for (int64_t t = 0; t < T; ++t)
        y[t * w.rows + r] = dot(row.data(), x + t * w.cols, w.cols) + b;
    }
  });
}

void rmsnorm(const float* x, const float* w, int64_t n, float eps, float* out) {
  double ss = 0;  // accumulate in double: one pass, no cancellation
  for (int64_t i = 0; i < n; ++i) ss += static_cast<double>(x[i]) * x[i];
  const float inv = static_cast<float>(1.0 / std::sqrt(ss / static_cast<double>(n) + eps));
  for (int64_t i = 0; i < n; ++i) out[i] = w[i] * (x[i] * inv);
}

void swiglu(const float* gu, int64_t I, float limit, float* y) {
  for (int64_t j = 0; j < I; ++j) {
    const float gate = std::min(gu[2 * j], limit);
    const float up = std::clamp(gu[2 * j + 1], -limit, limit);
    const float glu = gate / (1.0f + std::exp(-1.702f * gate));
    y[j] = (up + 1.0f) * glu;
  }
}

namespace {

// Byte -> its two E2M1 values (low nibble first), built at compile time.
struct PairLut {
  float v[256][2];
  constexpr PairLut() : v() {
    constexpr float kMag[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
    for (int b = 0; b < 256; ++b) {
      const int lo = b & 0xf, hi = b >> 4;
      v[b][0] = (lo & 8) ? -kMag[lo & 7] : kMag[lo & 7];
      v[b][1] = (hi & 8) ? -kMag[hi & 7] : kMag[hi & 7];
    }
  }
};
constexpr PairLut kPairLut;

}  // namespace

void mxfp4_row(const ExpertMatrix& m, int64_t e, int64_t r, float* out) {
  const int64_t nb = m.cols / 32;
  const int64_t row_index = e * m.rows + r;
  const uint8_t* blocks = m.blocks.u8() + row_index * nb * 16;
  const uint8_t* scales = m.scales.u8() + row_index * nb;
  for (int64_t b = 0; b < nb; ++b) {
    const float s = e8m0_to_float(scales[b]);
    const uint8_t* p = blocks + b * 16;
    float* o = out + b * 32;
    for (int i = 0; i < 16; ++i) {
      o[2 * i] = kPairLut.v[p[i]][0] * s;
      o[2 * i + 1] = kPairLut.v[p[i]][1] * s;
    }
  }
}

namespace {

// MXFP4: rows [r0, r1) of one batch; each row dequantized once, used for all n tokens.
void expert_rows_mxfp4(const ExpertMatrix& m, const TensorRef& bias, const ExpertBatch& b,
                       int64_t r0, int64_t r1, float* row) {
  for (int64_t r = r0; r < r1; ++r) {
    mxfp4_row(m, b.expert, r, row);
    const float bb = elem_f32(bias, b.expert * m.rows + r);
    for (int64_t t = 0; t < b.n; ++t) b.y[t * m.rows + r] = dot(row, b.x + t * m.cols, m.cols) + bb;
  }
}

// Dense [E, cols, rows]: output columns [r0, r1) accumulated over the input dim c.
void expert_rows_dense(const ExpertMatrix& m, const TensorRef& bias, const ExpertBatch& b,
                       int64_t r0, int64_t r1, float* wtile) {
  const int64_t w = r1 - r0;
  for (int64_t t = 0; t < b.n; ++t) {
    for (int64_t r = r0; r < r1; ++r) b.y[t * m.rows + r] = 0.0f;
  }
  const int64_t base = b.expert * m.cols * m.rows;
  for (int64_t c = 0; c < m.cols; ++c) {
    to_f32(m.dense.data, m.dense.dtype, base + c * m.rows + r0, w, wtile);
    for (int64_t t = 0; t < b.n; ++t) {
      const float xv = b.x[t * m.cols + c];
      float* yr = b.y + t * m.rows + r0;
      for (int64_t k = 0; k < w; ++k) yr[k] += xv * wtile[k];
    }
  }
  for (int64_t t = 0; t < b.n; ++t) {
    for (int64_t r = r0; r < r1; ++r) b.y[t * m.rows + r] += elem_f32(bias, b.expert * m.rows + r);
  }
}

}  // namespace

void expert_matmul(ThreadPool& pool, const ExpertMatrix& m, const TensorRef& bias,
                   std::span<const ExpertBatch> batches) {
  const bool mx = m.format == ExpertFormat::kMxfp4;
  const int64_t tile = mx ? 8 : kDenseTile;
  const int64_t tiles_per = (m.rows + tile - 1) / tile;
  const int64_t n_items = tiles_per * static_cast<int64_t>(batches.size());
  pool.parallel_for(n_items, [&](int64_t i0, int64_t i1) {
    std::vector<float> scratch(static_cast<size_t>(std::max(m.cols, kDenseTile)));
    for (int64_t i = i0; i < i1; ++i) {
      const ExpertBatch& b = batches[static_cast<size_t>(i / tiles_per)];
      const int64_t r0 = (i % tiles_per) * tile, r1 = std::min(m.rows, r0 + tile);
      if (mx) {
        expert_rows_mxfp4(m, bias, b, r0, r1, scratch.data());
      } else {
        expert_rows_dense(m, bias, b, r0, r1, scratch.data());
      }
    }
  });
}

void sink_attention(const float* q, const float* const* keys, const float* const* values, int64_t n,
                    int64_t head_dim, float scale, float sink, float* scratch, float* out) {
  float mx = sink;
  for (int64_t j = 0; j < n; ++j) {
    scratch[j] = dot(q, keys[j], head_dim) * scale;
    mx = std::max(mx, scratch[j]);
  }
  float denom = std::exp(sink - mx);
  for (int64_t j = 0; j < n; ++j) {
    scratch[j] = std::exp(scratch[j] - mx);
    denom += scratch[j];
  }
  const float inv = 1.0f / denom;
  std::fill(out, out + head_dim, 0.0f);
  for (int64_t j = 0; j < n; ++j) {
    const float p = scratch[j] * inv;
    const float* v = values[j];
    for (int64_t d = 0; d < head_dim; ++d) out[d] += p * v[d];
  }
}

}  // namespace gossamer::cpu

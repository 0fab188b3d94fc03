#include <cmath>
#include <string>

#include "common/numerics.h"
#include "kernels/moe/params.h"

namespace gossamer::kern {
namespace {

Status check_shape(const char* op, int batch, int k, int hidden, int inter, int n_experts) {
  const std::string ctx = std::string(op) + ": ";
  if (batch <= 0 || k <= 0 || n_experts <= 0 || k > n_experts) {
    return InvalidArgument(ctx + "need batch > 0 and 0 < k <= experts");
  }
  if (hidden <= 0 || inter <= 0 || hidden % 32 != 0 || inter % 32 != 0) {
    return InvalidArgument(ctx + "hidden and intermediate must be positive multiples of 32, got " +
                           std::to_string(hidden) + ", " + std::to_string(inter));
  }
  return Status::Ok();
}

// Row r of expert e of an MXFP4 matrix with `cols` inputs, dotted with x (fp64).
double mx_row_dot(const std::vector<uint8_t>& blocks, const std::vector<uint8_t>& scales,
                  size_t row, int cols, const float* x) {
  const int nb = cols / 32;
  double s = 0;
  float v[32];
  for (int c = 0; c < nb; ++c) {
    dequant_mxfp4_block(&blocks[(row * nb + c) * 16], scales[row * nb + c], v);
    for (int i = 0; i < 32; ++i) s += static_cast<double>(v[i]) * x[c * 32 + i];
  }
  return s;
}

}  // namespace

Status MoeGateUpParams::validate() const {
  if (!blocks || !scales || !bias || !x || !ids || !act) {
    return InvalidArgument("moe_gate_up: null pointer argument");
  }
  if (decode != 0 && decode != 1) return InvalidArgument("moe_gate_up: decode must be 0 or 1");
  if (pipe < 0 || pipe > 8) return InvalidArgument("moe_gate_up: pipe must be in 0..8");
  if (stream_groups < 0 || stream_groups > 8) {
    return InvalidArgument("moe_gate_up: stream_groups must be in 0..8");
  }
  return check_shape("moe_gate_up", batch, k, hidden, inter, n_experts);
}

Status MoeDownParams::validate() const {
  if (!blocks || !scales || !bias || !act || !ids || !weights || !resid) {
    return InvalidArgument("moe_down: null pointer argument");
  }
  if (decode != 0 && decode != 1) return InvalidArgument("moe_down: decode must be 0 or 1");
  if (pipe < 0 || pipe > 8) return InvalidArgument("moe_down: pipe must be in 0..8");
  if (stream_groups < 0 || stream_groups > 8) {
    return InvalidArgument("moe_down: stream_groups must be in 0..8");
  }
  return check_shape("moe_down", batch, k, hidden, inter, n_experts);
}

std::vector<double> moe_gate_up_ref(const std::vector<uint8_t>& blocks,
                                    const std::vector<uint8_t>& scales,
                                    const std::vector<float>& bias, const std::vector<float>& x,
                                    const std::vector<int32_t>& ids, const MoeGateUpParams& s) {
  const int I = s.inter, H = s.hidden;
  std::vector<double> act(static_cast<size_t>(s.batch) * s.k * I);
  for (int b = 0; b < s.batch; ++b) {
    for (int j = 0; j < s.k; ++j) {
      const size_t e = static_cast<size_t>(ids[static_cast<size_t>(b) * s.k + j]);
      for (int i = 0; i < I; ++i) {
        const size_t rg = e * 2 * I + 2 * i, ru = rg + 1;
        double g = mx_row_dot(blocks, scales, rg, H, &x[static_cast<size_t>(b) * H]) + bias[rg];
        double u = mx_row_dot(blocks, scales, ru, H, &x[static_cast<size_t>(b) * H]) + bias[ru];
        g = std::fmin(g, s.limit);
        u = std::fmax(std::fmin(u, s.limit), -s.limit);
        act[(static_cast<size_t>(b) * s.k + j) * I + i] =
            (u + 1) * g / (1 + std::exp(-s.alpha * g));
      }
    }
  }
  return act;
}

std::vector<double> moe_down_ref(const std::vector<uint8_t>& blocks,
                                 const std::vector<uint8_t>& scales, const std::vector<float>& bias,
                                 const std::vector<float>& act, const std::vector<int32_t>& ids,
                                 const std::vector<float>& weights,
                                 const std::vector<float>& resid0, const MoeDownParams& s) {
  const int I = s.inter, H = s.hidden;
  std::vector<double> out(resid0.begin(), resid0.end());
  for (int b = 0; b < s.batch; ++b) {
    for (int j = 0; j < s.k; ++j) {
      const size_t bj = static_cast<size_t>(b) * s.k + j;
      const size_t e = static_cast<size_t>(ids[bj]);
      for (int r = 0; r < H; ++r) {
        const double y = mx_row_dot(blocks, scales, e * H + r, I, &act[bj * I]) + bias[e * H + r];
        out[static_cast<size_t>(b) * H + r] += weights[bj] * y;
      }
    }
  }
  return out;
}

}  // namespace gossamer::kern

#include <cmath>
#include <cstdint>
#include <string>

#include "common/numerics.h"
#include "kernels/rmsnorm/params.h"

namespace gossamer::kern {

Status RmsNormParams::validate() const {
  if (!x || !w || (!y && !yb)) return InvalidArgument("rmsnorm: null x, w or both y and yb");
  if (yb_lo && !yb) return InvalidArgument("rmsnorm: yb_lo needs yb");
  if ((reinterpret_cast<uintptr_t>(yb) | reinterpret_cast<uintptr_t>(yb_lo)) % 8 != 0)
    return InvalidArgument("rmsnorm: yb and yb_lo must be 8-byte aligned");
  if (rows <= 0 || dim <= 0) {
    return InvalidArgument("rmsnorm: rows and dim must be > 0, got " + std::to_string(rows) +
                           " x " + std::to_string(dim));
  }
  if (dim % 4 != 0)
    return InvalidArgument("rmsnorm: dim must be a multiple of 4, got " + std::to_string(dim));
  if (!(eps > 0)) return InvalidArgument("rmsnorm: eps must be > 0");
  return Status::Ok();
}

std::vector<double> rmsnorm_ref(const std::vector<float>& x, const std::vector<uint16_t>& w,
                                int rows, int dim, float eps) {
  std::vector<double> y(static_cast<size_t>(rows) * dim);
  for (int r = 0; r < rows; ++r) {
    const float* xr = x.data() + static_cast<size_t>(r) * dim;
    double ss = 0;
    for (int i = 0; i < dim; ++i) ss += static_cast<double>(xr[i]) * xr[i];
    const double inv = 1.0 / std::sqrt(ss / dim + eps);
    for (int i = 0; i < dim; ++i) {
      y[static_cast<size_t>(r) * dim + i] = xr[i] * inv * bf16_to_float(w[i]);
    }
  }
  return y;
}

}  // namespace gossamer::kern

#include <string>

#include "common/numerics.h"
#include "kernels/gemv/params.h"

namespace gossamer::kern {

Status GemvParams::validate() const {
  const std::string ctx = "gemv (" + std::to_string(rows) + "x" + std::to_string(cols) +
                          ", batch " + std::to_string(batch) + "): ";
  if (!w || !x || (!y && !argmax)) return InvalidArgument(ctx + "null w, x or (y and argmax)");
  if (rows <= 0 || cols <= 0 || batch <= 0) return InvalidArgument(ctx + "sizes must be > 0");
  if (cols % 8 != 0) return InvalidArgument(ctx + "cols must be a multiple of 8");
  if (y && ldy < rows) return InvalidArgument(ctx + "ldy < rows");
  if (variant < 0 || variant > 3) {
    return InvalidArgument(ctx + "variant " + std::to_string(variant) +
                           " does not exist (0 = auto, 1 = warp GEMV, 2 = bulk, 3 = mma)");
  }
  if ((reinterpret_cast<uintptr_t>(w) | reinterpret_cast<uintptr_t>(x)) % 16 != 0) {
    return InvalidArgument(ctx + "w and x must be 16-byte aligned");
  }
  return Status::Ok();
}

int argmax_key_to_index(unsigned long long key) {
  return static_cast<int>(0xffffffffu - static_cast<uint32_t>(key & 0xffffffffu));
}

std::vector<double> gemv_ref(const std::vector<uint16_t>& w, const std::vector<float>& bias,
                             const std::vector<float>& x, const std::vector<float>& y0, int rows,
                             int cols, int batch) {
  std::vector<double> y(static_cast<size_t>(batch) * rows);
  for (int b = 0; b < batch; ++b) {
    for (int r = 0; r < rows; ++r) {
      double s = bias.empty() ? 0.0 : bias[r];
      for (int c = 0; c < cols; ++c) {
        s += static_cast<double>(bf16_to_float(w[static_cast<size_t>(r) * cols + c])) *
             x[static_cast<size_t>(b) * cols + c];
      }
      if (!y0.empty()) s += y0[static_cast<size_t>(b) * rows + r];
      y[static_cast<size_t>(b) * rows + r] = s;
    }
  }
  return y;
}

}  // namespace gossamer::kern

// fp64 dot product of one MXFP4 weight row with a vector: the core of the CPU references of the
// MoE kernels (kernels/moe/ref.cpp, kernels/moe_prefill/ref.cpp). Host only.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "common/numerics.h"

namespace gossamer::kern {

// Row `row` of an MXFP4 matrix with `cols` inputs (cols % 32 == 0; blocks [rows][cols/32][16],
// low nibble first, scales [rows][cols/32] E8M0; rows of all experts counted together) dotted
// with x[0..cols), accumulated in fp64 in element order. T: float or double. abs_sum (optional)
// receives sum |w_i x_i|, the scale of the rounding error of any fp32 evaluation of the dot.
template <typename T>
double mxfp4_row_dot(const std::vector<uint8_t>& blocks, const std::vector<uint8_t>& scales,
                     size_t row, int cols, const T* x, double* abs_sum = nullptr) {
  const int nb = cols / 32;
  double s = 0, a = 0;
  float v[32];
  for (int c = 0; c < nb; ++c) {
    dequant_mxfp4_block(&blocks[(row * nb + c) * 16], scales[row * nb + c], v);
    for (int i = 0; i < 32; ++i) {
      const double p = static_cast<double>(v[i]) * static_cast<double>(x[c * 32 + i]);
      s += p;
      a += std::fabs(p);
    }
  }
  if (abs_sum) *abs_sum = a;
  return s;
}

}  // namespace gossamer::kern

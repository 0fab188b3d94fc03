#include <string>

#include "common/numerics.h"
#include "kernels/gemm/params.h"

namespace gossamer::kern {

Status GemmParams::validate() const {
  const std::string ctx =
      "gemm " + std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(k) + ": ";
  if (!a || !w || !d) return InvalidArgument(ctx + "null a, w or d");
  if (m <= 0 || n <= 0 || k <= 0) return InvalidArgument(ctx + "m, n and k must be > 0");
  const int la = lda ? lda : k, lw = ldw ? ldw : k, ld = ldd ? ldd : n;
  if (la < k || lw < k || ld < n) return InvalidArgument(ctx + "a row stride below k or n");
  if (la % 8 != 0 || lw % 8 != 0) {
    return InvalidArgument(ctx + "lda and ldw must be multiples of 8 (16-byte rows)");
  }
  const auto addr = reinterpret_cast<uintptr_t>(a) | reinterpret_cast<uintptr_t>(w) |
                    reinterpret_cast<uintptr_t>(d) | reinterpret_cast<uintptr_t>(bias);
  if (addr % 16 != 0) return InvalidArgument(ctx + "a, w, d and bias must be 16-byte aligned");
  return Status::Ok();
}

std::vector<double> gemm_ref(const std::vector<uint16_t>& a, const std::vector<uint16_t>& w,
                             const std::vector<float>& bias, const std::vector<float>& d0, int m,
                             int n, int k) {
  std::vector<double> af(a.size()), wf(w.size());
  for (size_t i = 0; i < a.size(); ++i) af[i] = bf16_to_float(a[i]);
  for (size_t i = 0; i < w.size(); ++i) wf[i] = bf16_to_float(w[i]);
  std::vector<double> d(static_cast<size_t>(m) * n);
  for (int i = 0; i < m; ++i) {
    const double* ar = &af[static_cast<size_t>(i) * k];
    for (int j = 0; j < n; ++j) {
      const double* wr = &wf[static_cast<size_t>(j) * k];
      double acc = bias.empty() ? 0.0 : bias[j];
      for (int c = 0; c < k; ++c) acc += ar[c] * wr[c];
      const size_t o = static_cast<size_t>(i) * n + j;
      d[o] = acc + (d0.empty() ? 0.0 : d0[o]);
    }
  }
  return d;
}

}  // namespace gossamer::kern

// NormRouterParams::validate and the fp64 reference of the fused norm + router GEMV.
#include <cmath>
#include <string>

#include "common/numerics.h"
#include "kernels/router/params.h"

namespace gossamer::kern {

Status NormRouterParams::validate() const {
  if (!x || !norm_w || !w || !ids || !weights) {
    return InvalidArgument("norm_router_topk: null pointer argument (x, norm_w, w, ids, weights)");
  }
  if (batch <= 0 || hidden <= 0 || hidden % 8 != 0) {
    return InvalidArgument(
        "norm_router_topk: need batch > 0 and hidden > 0, hidden % 8 == 0; got "
        "batch " +
        std::to_string(batch) + " hidden " + std::to_string(hidden));
  }
  if (n_experts <= 0 || n_experts % 8 != 0 || n_experts > 128 || k <= 0 || k > 8 || k > n_experts) {
    return InvalidArgument(
        "norm_router_topk: need n_experts % 8 == 0, n_experts <= 128, 0 < k <= min(8, experts); "
        "got experts " +
        std::to_string(n_experts) + " k " + std::to_string(k));
  }
  if (reinterpret_cast<uintptr_t>(w) % 16 != 0 || reinterpret_cast<uintptr_t>(x) % 16 != 0 ||
      reinterpret_cast<uintptr_t>(norm_w) % 16 != 0 ||
      (xn && reinterpret_cast<uintptr_t>(xn) % 16 != 0)) {
    return InvalidArgument("norm_router_topk: w, x, norm_w and xn must be 16-byte aligned");
  }
  if (variant < 0 || variant > 3) {
    return InvalidArgument("norm_router_topk: variant must be 0..3, got " +
                           std::to_string(variant));
  }
  if (variant >= 2 && hidden > 3072) {
    return InvalidArgument("norm_router_topk: the wide variants need hidden <= 3072, got " +
                           std::to_string(hidden));
  }
  return Status::Ok();
}

void norm_router_ref(const std::vector<float>& x, const std::vector<uint16_t>& norm_w,
                     const std::vector<uint16_t>& w, const std::vector<float>& bias, int batch,
                     int hidden, int n_experts, float eps, std::vector<double>* xn,
                     std::vector<double>* logits) {
  const size_t H = static_cast<size_t>(hidden);
  xn->assign(static_cast<size_t>(batch) * H, 0.0);
  logits->assign(static_cast<size_t>(batch) * n_experts, 0.0);
  for (int b = 0; b < batch; ++b) {
    double ss = 0;
    for (size_t c = 0; c < H; ++c) ss += static_cast<double>(x[b * H + c]) * x[b * H + c];
    const double inv = 1.0 / std::sqrt(ss / static_cast<double>(hidden) + eps);
    for (size_t c = 0; c < H; ++c)
      (*xn)[b * H + c] = x[b * H + c] * inv * static_cast<double>(bf16_to_float(norm_w[c]));
    for (int e = 0; e < n_experts; ++e) {
      double acc = bias.empty() ? 0.0 : bias[e];
      for (size_t c = 0; c < H; ++c)
        acc += static_cast<double>(bf16_to_float(w[e * H + c])) * (*xn)[b * H + c];
      (*logits)[static_cast<size_t>(b) * n_experts + e] = acc;
    }
  }
}

}  // namespace gossamer::kern

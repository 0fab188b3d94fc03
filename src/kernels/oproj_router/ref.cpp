// OprojRouterParams::validate and the fp64 reference (O-projection + residual, then the
// router's fp64 reference on the updated residual).
#include <string>

#include "common/numerics.h"
#include "kernels/oproj_router/params.h"
#include "kernels/router/params.h"

namespace gossamer::kern {
namespace {

bool misaligned(const void* p) {
  return reinterpret_cast<uintptr_t>(p) % 16 != 0;
}

}  // namespace

Status OprojRouterParams::validate() const {
  if (!wo || !attn || !x || !norm_w || !wr || !xn || !ids || !weights || !part || !ticket) {
    return InvalidArgument(
        "oproj_router: null pointer argument (wo, attn, x, norm_w, wr, xn, ids, weights, part, "
        "ticket)");
  }
  if (hidden <= 0 || hidden % 8 != 0 || qdim <= 0 || qdim % 8 != 0 || qdim > kOprojRouterMaxCols) {
    return InvalidArgument("oproj_router: need hidden % 8 == 0, qdim % 8 == 0, 0 < qdim <= " +
                           std::to_string(kOprojRouterMaxCols) + "; got hidden " +
                           std::to_string(hidden) + " qdim " + std::to_string(qdim));
  }
  if (n_experts <= 0 || n_experts > kOprojRouterMaxExperts || k <= 0 || k > kOprojRouterMaxK ||
      k > n_experts) {
    return InvalidArgument(
        "oproj_router: need 0 < n_experts <= 128 and 0 < k <= min(8, experts); "
        "got experts " +
        std::to_string(n_experts) + " k " + std::to_string(k));
  }
  if (misaligned(wo) || misaligned(attn) || misaligned(x) || misaligned(xn) || misaligned(norm_w) ||
      misaligned(part)) {
    return InvalidArgument(
        "oproj_router: wo, attn, x, xn, norm_w and part must be 16-byte aligned");
  }
  if (ring_bytes < 0) return InvalidArgument("oproj_router: ring_bytes must be >= 0");
  return Status::Ok();
}

size_t oproj_router_scratch_floats(int grid, int n_experts) {
  return static_cast<size_t>(grid) * ((n_experts + 1 + 3) / 4 * 4);  // rows of pad4(E + 1)
}

void oproj_router_ref(const std::vector<uint16_t>& wo, const std::vector<float>& bo,
                      const std::vector<float>& attn, const std::vector<float>& x,
                      const std::vector<uint16_t>& norm_w, const std::vector<uint16_t>& wr,
                      const std::vector<float>& br, int hidden, int qdim, int n_experts, float eps,
                      std::vector<double>* x_out, std::vector<double>* xn,
                      std::vector<double>* logits) {
  x_out->assign(hidden, 0.0);
  std::vector<float> xf(hidden);
  for (int h = 0; h < hidden; ++h) {
    double acc = bo.empty() ? 0.0 : bo[h];
    for (int c = 0; c < qdim; ++c) {
      acc += static_cast<double>(bf16_to_float(wo[static_cast<size_t>(h) * qdim + c])) * attn[c];
    }
    (*x_out)[h] = x[h] + acc;
    // The router reference takes f32 input; the kernel's x is f32 too, so the fp64 router
    // reference on the rounded x differs from one on the exact x by ~1e-8 (far below the checks).
    xf[h] = static_cast<float>((*x_out)[h]);
  }
  norm_router_ref(xf, norm_w, wr, br, 1, hidden, n_experts, eps, xn, logits);
}

}  // namespace gossamer::kern

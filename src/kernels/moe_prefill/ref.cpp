// Parameter validation, workspace size and the fp64 CPU reference of the MoE prefill.
#include <cmath>
#include <limits>
#include <string>

#include "kernels/common/mxfp4_ref.h"
#include "kernels/moe_prefill/kernels.h"
#include "kernels/moe_prefill/layout.h"
#include "kernels/moe_prefill/params.h"

namespace gossamer::kern {
namespace {

Status check_shape(int tokens, int k, int hidden, int inter, int n_experts) {
  if (tokens <= 0 || k <= 0 || n_experts <= 0 || k > n_experts) {
    return InvalidArgument("moe_prefill: need tokens > 0 and 0 < k <= n_experts, got tokens " +
                           std::to_string(tokens) + ", k " + std::to_string(k) + ", experts " +
                           std::to_string(n_experts));
  }
  if (n_experts > moe_prefill::kMaxExperts) {
    return InvalidArgument("moe_prefill: at most " + std::to_string(moe_prefill::kMaxExperts) +
                           " experts, got " + std::to_string(n_experts));
  }
  if (hidden <= 0 || inter <= 0 || hidden % 32 != 0 || inter % 32 != 0) {
    return InvalidArgument(
        "moe_prefill: hidden and intermediate must be positive multiples of 32, got " +
        std::to_string(hidden) + ", " + std::to_string(inter));
  }
  const int64_t pairs = static_cast<int64_t>(tokens) * k;
  if (pairs > std::numeric_limits<int32_t>::max() / 2) {
    return InvalidArgument("moe_prefill: tokens x k too large: " + std::to_string(pairs));
  }
  return Status::Ok();
}

bool aligned(const void* p, uintptr_t a) {
  return reinterpret_cast<uintptr_t>(p) % a == 0;
}

}  // namespace

Status MoePrefillParams::validate() const {
  if (!gu_blocks || !gu_scales || !gu_bias || !dn_blocks || !dn_scales || !dn_bias || !x || !ids ||
      !weights || !resid || !workspace) {
    return InvalidArgument("moe_prefill: null pointer argument");
  }
  GS_RETURN_IF_ERROR(check_shape(tokens, k, hidden, inter, n_experts));
  if (!aligned(gu_blocks, 16) || !aligned(dn_blocks, 16) || !aligned(x, 16) ||
      !aligned(resid, 16)) {
    return InvalidArgument(
        "moe_prefill: gu_blocks, dn_blocks, x and resid must be 16-byte aligned");
  }
  if (!aligned(workspace, 256)) {
    return InvalidArgument("moe_prefill: workspace must be 256-byte aligned");
  }
  const size_t need = moe_prefill_workspace_bytes(tokens, k, hidden, inter, n_experts);
  if (workspace_bytes < need) {
    return InvalidArgument("moe_prefill: workspace of " + std::to_string(workspace_bytes) +
                           " bytes, need " + std::to_string(need) + " for " +
                           std::to_string(tokens) + " tokens");
  }
  if (!std::isfinite(alpha) || !std::isfinite(limit) || limit <= 0) {
    return InvalidArgument("moe_prefill: alpha and limit must be finite, limit > 0");
  }
  if (gemm_variant < -1 || gemm_variant >= moe_prefill::kVariants) {
    return InvalidArgument("moe_prefill: gemm_variant must be -1 or 0.." +
                           std::to_string(moe_prefill::kVariants - 1) + ", got " +
                           std::to_string(gemm_variant));
  }
  return Status::Ok();
}

size_t moe_prefill_workspace_bytes(int max_tokens, int k, int hidden, int inter, int n_experts) {
  if (!check_shape(max_tokens, k, hidden, inter, n_experts).ok()) return 0;
  return moe_prefill::make_layout(max_tokens, k, hidden, inter, n_experts).total;
}

std::vector<double> moe_prefill_ref(const MoePrefillHost& h, const MoePrefillParams& s,
                                    const std::vector<int>& tokens_to_check) {
  const int H = s.hidden, I = s.inter;
  std::vector<double> out;
  out.reserve(tokens_to_check.size() * H);
  std::vector<double> xt(H), act(I);
  for (const int t : tokens_to_check) {
    const size_t t0 = static_cast<size_t>(t) * H;
    for (int c = 0; c < H; ++c) xt[c] = (*h.x)[t0 + c];
    std::vector<double> o(h.resid0->begin() + t0, h.resid0->begin() + t0 + H);
    for (int j = 0; j < s.k; ++j) {
      const size_t tj = static_cast<size_t>(t) * s.k + j;
      const int32_t id = (*h.ids)[tj];
      if (id < 0 || id >= s.n_experts) continue;
      const size_t e = static_cast<size_t>(id);
      for (int i = 0; i < I; ++i) {
        const size_t rg = e * 2 * I + 2 * i, ru = rg + 1;
        double g = mxfp4_row_dot(*h.gu_blocks, *h.gu_scales, rg, H, xt.data()) + (*h.gu_bias)[rg];
        double u = mxfp4_row_dot(*h.gu_blocks, *h.gu_scales, ru, H, xt.data()) + (*h.gu_bias)[ru];
        g = std::fmin(g, s.limit);
        u = std::fmax(std::fmin(u, s.limit), -s.limit);
        act[i] = (u + 1) * g / (1 + std::exp(-s.alpha * g));
      }
      const double w = (*h.weights)[tj];
      for (int r = 0; r < H; ++r) {
        const size_t row = e * H + r;
        o[r] +=
            w * (mxfp4_row_dot(*h.dn_blocks, *h.dn_scales, row, I, act.data()) + (*h.dn_bias)[row]);
      }
    }
    out.insert(out.end(), o.begin(), o.end());
  }
  return out;
}

}  // namespace gossamer::kern

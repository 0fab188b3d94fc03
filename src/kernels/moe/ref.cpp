#include <cmath>
#include <string>

#include "kernels/common/mxfp4_ref.h"
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

// The pipes launch_moe_* still has (session 4 removed the experiments 1, 3, 4, 5, 7, 8).
Status check_pipe(const char* op, int pipe, bool has_pipe2) {
  if (pipe == 0 || pipe == 6 || pipe == 9 || (has_pipe2 && pipe == 2)) return Status::Ok();
  return InvalidArgument(std::string(op) + ": pipe " + std::to_string(pipe) +
                         " does not exist (removed in session 4, docs/moe-decode.md); use " +
                         (has_pipe2 ? "6 (default), 9, 2 or 0" : "6 (default), 9 or 0"));
}

}  // namespace

Status MoeGateUpParams::validate() const {
  if (!blocks || !scales || !bias || !x || !ids || !act) {
    return InvalidArgument("moe_gate_up: null pointer argument");
  }
  GS_RETURN_IF_ERROR(check_pipe("moe_gate_up", pipe, false));
  return check_shape("moe_gate_up", batch, k, hidden, inter, n_experts);
}

Status MoeDownParams::validate() const {
  if (!blocks || !scales || !bias || !act || !ids || !weights || !resid) {
    return InvalidArgument("moe_down: null pointer argument");
  }
  GS_RETURN_IF_ERROR(check_pipe("moe_down", pipe, true));
  return check_shape("moe_down", batch, k, hidden, inter, n_experts);
}

std::vector<double> moe_gate_up_ref(const std::vector<uint8_t>& blocks,
                                    const std::vector<uint8_t>& scales,
                                    const std::vector<float>& bias, const std::vector<float>& x,
                                    const std::vector<int32_t>& ids, const MoeGateUpParams& s,
                                    std::vector<double>* kappa) {
  const int I = s.inter, H = s.hidden;
  std::vector<double> act(static_cast<size_t>(s.batch) * s.k * I);
  if (kappa) kappa->assign(act.size(), 0.0);
  for (int b = 0; b < s.batch; ++b) {
    const float* xb = &x[static_cast<size_t>(b) * H];
    for (int j = 0; j < s.k; ++j) {
      const size_t e = static_cast<size_t>(ids[static_cast<size_t>(b) * s.k + j]);
      for (int i = 0; i < I; ++i) {
        const size_t rg = e * 2 * I + 2 * i, ru = rg + 1,
                     o = (static_cast<size_t>(b) * s.k + j) * I + i;
        double sg = 0, su = 0;  // sum |w x| of the two rows
        double g = mxfp4_row_dot(blocks, scales, rg, H, xb, &sg) + bias[rg];
        double u = mxfp4_row_dot(blocks, scales, ru, H, xb, &su) + bias[ru];
        const bool g_free = g < s.limit, u_free = std::fabs(u) < s.limit;
        g = std::fmin(g, s.limit);
        u = std::fmax(std::fmin(u, s.limit), -s.limit);
        const double sig = 1 / (1 + std::exp(-s.alpha * g));
        act[o] = (u + 1) * g * sig;
        if (kappa) {
          const double dg = g_free ? std::fabs((u + 1) * (sig + s.alpha * g * sig * (1 - sig))) : 0;
          const double du = u_free ? std::fabs(g * sig) : 0;
          (*kappa)[o] = dg * (sg + std::fabs(bias[rg])) + du * (su + std::fabs(bias[ru])) +
                        8 * std::fabs(act[o]);
        }
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
        const double y =
            mxfp4_row_dot(blocks, scales, e * H + r, I, &act[bj * I]) + bias[e * H + r];
        out[static_cast<size_t>(b) * H + r] += weights[bj] * y;
      }
    }
  }
  return out;
}

}  // namespace gossamer::kern

#include <cmath>
#include <string>

#include "common/numerics.h"
#include "kernels/qkv_rope/params.h"

namespace gossamer::kern {

Status QkvRopeParams::validate() const {
  const std::string ctx = "qkv_rope: ";
  if (!w || !x || !pos || !block_table || !q || !k_cache || !v_cache) {
    return InvalidArgument(ctx + "null pointer argument");
  }
  if (batch <= 0 || hidden <= 0 || n_heads <= 0 || n_kv_heads <= 0) {
    return InvalidArgument(ctx + "batch, hidden, heads and kv heads must be > 0");
  }
  if (hidden % 8 != 0)
    return InvalidArgument(ctx + "hidden must be a multiple of 8, got " + std::to_string(hidden));
  if (block_size <= 0 || max_blocks <= 0 || num_blocks <= 0) {
    return InvalidArgument(ctx + "block_size, max_blocks and num_blocks must be > 0");
  }
  if ((reinterpret_cast<uintptr_t>(w) | reinterpret_cast<uintptr_t>(x) |
       reinterpret_cast<uintptr_t>(norm_w)) %
          16 !=
      0) {
    return InvalidArgument(ctx + "w, x and norm_w must be 16-byte aligned");
  }
  if (variant < 0 || variant > 3) {
    return InvalidArgument(ctx + "variant " + std::to_string(variant) +
                           " does not exist (0 = auto, 1 = warp GEMV, 2 = bulk, 3 = mma)");
  }
  return Status::Ok();
}

std::vector<double> qkv_rope_ref(const std::vector<uint16_t>& w, const std::vector<float>& bias,
                                 const std::vector<float>& x, const std::vector<int32_t>& pos,
                                 const QkvRopeParams& s, std::vector<double>* k_out,
                                 std::vector<double>* v_out) {
  const int units = s.n_heads + 2 * s.n_kv_heads, D = kHeadDim, H = s.hidden;
  std::vector<double> q(static_cast<size_t>(s.batch) * s.n_heads * D);
  k_out->assign(static_cast<size_t>(s.batch) * s.n_kv_heads * D, 0.0);
  v_out->assign(k_out->size(), 0.0);
  std::vector<double> head(D);
  for (int b = 0; b < s.batch; ++b) {
    for (int u = 0; u < units; ++u) {
      for (int d = 0; d < D; ++d) {
        const size_t row = static_cast<size_t>(u) * D + d;
        double acc = bias.empty() ? 0.0 : bias[row];
        for (int c = 0; c < H; ++c) {
          acc += static_cast<double>(bf16_to_float(w[row * H + c])) *
                 x[static_cast<size_t>(b) * H + c];
        }
        head[d] = acc;
      }
      if (u < s.n_heads + s.n_kv_heads) {  // rotate q and k
        for (int i = 0; i < D / 2; ++i) {
          const double a = static_cast<double>(pos[b]) * s.inv_freq[i];
          const double c = std::cos(a) * s.rope_scale, sn = std::sin(a) * s.rope_scale;
          const double x1 = head[i], x2 = head[i + D / 2];
          head[i] = x1 * c - x2 * sn;
          head[i + D / 2] = x2 * c + x1 * sn;
        }
      }
      double* dst =
          u < s.n_heads ? &q[(static_cast<size_t>(b) * s.n_heads + u) * D]
          : u < s.n_heads + s.n_kv_heads
              ? &(*k_out)[(static_cast<size_t>(b) * s.n_kv_heads + u - s.n_heads) * D]
              : &(*v_out)[(static_cast<size_t>(b) * s.n_kv_heads + u - s.n_heads - s.n_kv_heads) *
                          D];
      for (int d = 0; d < D; ++d) dst[d] = head[d];
    }
  }
  return q;
}

}  // namespace gossamer::kern

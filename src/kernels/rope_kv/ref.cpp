#include <cmath>
#include <string>

#include "kernels/rope_kv/params.h"

namespace gossamer::kern {

Status RopeKvParams::validate() const {
  const std::string ctx = "rope_kv: ";
  if (!qkv || !pos || !block_table || !k_cache || !v_cache || (!q && !q_bf16)) {
    return InvalidArgument(ctx + "null pointer argument");
  }
  if (rows <= 0 || n_heads <= 0 || n_kv_heads <= 0)
    return InvalidArgument(ctx + "rows, heads and kv heads must be > 0");
  if (ld < (n_heads + 2 * n_kv_heads) * 64) {
    return InvalidArgument(ctx + "row stride " + std::to_string(ld) + " < (nh + 2 kvh) * 64 = " +
                           std::to_string((n_heads + 2 * n_kv_heads) * 64));
  }
  if (block_size <= 0 || max_blocks <= 0 || num_blocks <= 0)
    return InvalidArgument(ctx + "block_size, max_blocks and num_blocks must be > 0");
  return Status::Ok();
}

std::vector<double> rope_kv_ref(const std::vector<float>& qkv, const std::vector<int32_t>& pos,
                                const RopeKvParams& s, std::vector<double>* k_out,
                                std::vector<double>* v_out) {
  const int D = 64, units = s.n_heads + 2 * s.n_kv_heads;
  std::vector<double> q(static_cast<size_t>(s.rows) * s.n_heads * D);
  k_out->assign(static_cast<size_t>(s.rows) * s.n_kv_heads * D, 0.0);
  v_out->assign(k_out->size(), 0.0);
  std::vector<double> head(D);
  for (int r = 0; r < s.rows; ++r) {
    for (int u = 0; u < units; ++u) {
      for (int d = 0; d < D; ++d) head[d] = qkv[static_cast<size_t>(r) * s.ld + u * D + d];
      if (u < s.n_heads + s.n_kv_heads) {
        for (int i = 0; i < D / 2; ++i) {
          const double a = static_cast<double>(pos[r]) * s.inv_freq[i];
          const double c = std::cos(a) * s.rope_scale, sn = std::sin(a) * s.rope_scale;
          const double x1 = head[i], x2 = head[i + D / 2];
          head[i] = x1 * c - x2 * sn;
          head[i + D / 2] = x2 * c + x1 * sn;
        }
      }
      double* dst;
      if (u < s.n_heads) {
        dst = &q[(static_cast<size_t>(r) * s.n_heads + u) * D];
      } else if (u < s.n_heads + s.n_kv_heads) {
        dst = &(*k_out)[(static_cast<size_t>(r) * s.n_kv_heads + u - s.n_heads) * D];
      } else {
        dst = &(*v_out)[(static_cast<size_t>(r) * s.n_kv_heads + u - s.n_heads - s.n_kv_heads) * D];
      }
      for (int d = 0; d < D; ++d) dst[d] = head[d];
    }
  }
  return q;
}

}  // namespace gossamer::kern

#include <algorithm>
#include <cmath>
#include <string>

#include "common/numerics.h"
#include "kernels/attention/params.h"

namespace gossamer::kern {

Status AttnParams::validate() const {
  const std::string ctx = "attention: ";
  if (!q || !k_cache || !v_cache || !block_table || !pos || !sinks || !part_o || !part_ml || !out) {
    return InvalidArgument(ctx + "null pointer argument");
  }
  if (batch <= 0 || n_heads <= 0 || n_kv_heads <= 0 || n_heads % n_kv_heads != 0) {
    return InvalidArgument(ctx + "need batch > 0 and heads a positive multiple of kv heads, got " +
                           std::to_string(n_heads) + "/" + std::to_string(n_kv_heads));
  }
  if (n_heads / n_kv_heads > 16) return InvalidArgument(ctx + "at most 16 query heads per kv head");
  if (block_size <= 0 || max_blocks <= 0 || num_blocks <= 0 || window < 0) {
    return InvalidArgument(ctx + "block_size, max_blocks, num_blocks must be > 0, window >= 0");
  }
  if (splits <= 0 || splits > 1024) return InvalidArgument(ctx + "splits must be in [1, 1024]");
  if (kernel < 0 || kernel > 2) return InvalidArgument(ctx + "kernel must be 0, 1 or 2");
  if (split_tiles < 0) return InvalidArgument(ctx + "split_tiles must be >= 0");
  if (stages != 0 && (stages < 2 || stages > 4)) {
    return InvalidArgument(ctx + "stages must be 0 (default) or 2..4");
  }
  return Status::Ok();
}

std::string attention_variant(int batch, int splits, bool one_kernel) {
  if (one_kernel && batch <= 64) {
    return "attn_decode_mma_bf16kv_f32q(splits<=" + std::to_string(splits) + ")";
  }
  return std::string("flash_attn_paged_bf16kv_f32q(splits=") + std::to_string(splits) + ")" +
         (splits > 1 ? "+flash_attn_combine_f32" : "");
}

int attention_splits(int batch, int n_kv_heads, int num_sms, int max_splits) {
  const int want = (4 * num_sms + batch * n_kv_heads - 1) / (batch * n_kv_heads);
  return std::clamp(want, 1, max_splits);
}

std::vector<double> attention_ref(const std::vector<float>& q, const std::vector<uint16_t>& kc,
                                  const std::vector<uint16_t>& vc,
                                  const std::vector<int32_t>& table,
                                  const std::vector<int32_t>& pos, const std::vector<float>& sinks,
                                  const AttnParams& s) {
  const int D = 64, G = s.n_heads / s.n_kv_heads;
  std::vector<double> out(static_cast<size_t>(s.batch) * s.n_heads * D, 0.0);
  for (int b = 0; b < s.batch; ++b) {
    const int lo = s.window > 0 ? std::max(0, pos[b] - s.window + 1) : 0;
    for (int h = 0; h < s.n_heads; ++h) {
      const int kh = h / G;
      std::vector<double> sc;
      std::vector<size_t> off;
      for (int t = lo; t <= pos[b]; ++t) {
        const int blk = table[static_cast<size_t>(b) * s.max_blocks + t / s.block_size];
        const size_t o =
            ((static_cast<size_t>(blk) * s.n_kv_heads + kh) * s.block_size + t % s.block_size) * D;
        double d = 0;
        for (int i = 0; i < D; ++i) {
          d += static_cast<double>(q[(static_cast<size_t>(b) * s.n_heads + h) * D + i]) *
               bf16_to_float(kc[o + i]);
        }
        sc.push_back(d * s.scale);
        off.push_back(o);
      }
      double m = sinks[h];
      for (double v : sc) m = std::max(m, v);
      double den = std::exp(sinks[h] - m);
      for (double& v : sc) den += (v = std::exp(v - m));
      double* o = &out[(static_cast<size_t>(b) * s.n_heads + h) * D];
      for (size_t j = 0; j < sc.size(); ++j)
        for (int i = 0; i < D; ++i) o[i] += sc[j] / den * bf16_to_float(vc[off[j] + i]);
    }
  }
  return out;
}

}  // namespace gossamer::kern

// Host side of flash_attn: params validation and the pair count used for FLOP accounting. The
// fp64 reference is the decode kernel's attention_ref (kernels/attention), used by the test.
#include <algorithm>
#include <string>

#include "kernels/flash_attn/params.h"

namespace gossamer::kern {

Status FlashAttnParams::validate() const {
  const std::string ctx = "flash_attn: ";
  if (!q || !k_cache || !v_cache || !block_table || !pos || !sinks || !out) {
    return InvalidArgument(ctx +
                           "null pointer argument (q, k_cache, v_cache, block_table, pos, "
                           "sinks and out are required)");
  }
  if (tokens <= 0 || n_heads <= 0 || n_kv_heads <= 0 || n_heads % n_kv_heads != 0) {
    return InvalidArgument(ctx + "need tokens > 0 and heads a positive multiple of kv heads, got " +
                           std::to_string(n_heads) + "/" + std::to_string(n_kv_heads));
  }
  if (n_heads / n_kv_heads > 16) return InvalidArgument(ctx + "at most 16 query heads per kv head");
  if (block_size <= 0 || max_blocks <= 0 || num_blocks <= 0 || window < 0) {
    return InvalidArgument(ctx + "block_size, max_blocks, num_blocks must be > 0, window >= 0");
  }
  if (splits <= 0 || splits > 1024) return InvalidArgument(ctx + "splits must be in [1, 1024]");
  if (splits > 1 && (!part_o || !part_ml)) {
    return InvalidArgument(ctx + "splits > 1 needs the part_o and part_ml scratch buffers");
  }
  if (!(scale > 0.f)) return InvalidArgument(ctx + "scale must be > 0");
  if (variant < 0 || variant > kFlashAttnMaxVariant) {
    return InvalidArgument(ctx + "variant must be in [0, " + std::to_string(kFlashAttnMaxVariant) +
                           "]");
  }
  if (precise && variant >= 8) return InvalidArgument(ctx + "variants 8..10 (wgmma) are bf16 only");
  if (stages != 0 && (stages < 2 || stages > 5)) {
    return InvalidArgument(ctx + "stages must be 0 (default) or 2..5");
  }
  if (static_cast<int64_t>(tokens) * n_heads > (int64_t{1} << 31) / 64) {
    return InvalidArgument(ctx + "tokens * n_heads * 64 must fit in 31 bits");
  }
  return Status::Ok();
}

double flash_attn_pairs(int64_t p0, int64_t tokens, int64_t window) {
  double pairs = 0;
  for (int64_t t = p0; t < p0 + tokens; ++t) {
    const int64_t lo = window > 0 ? std::max<int64_t>(0, t - window + 1) : 0;
    pairs += static_cast<double>(t - lo + 1);
  }
  return pairs;
}

}  // namespace gossamer::kern

#include <algorithm>
#include <cmath>
#include <string>

#include "kernels/sample/params.h"

namespace gossamer::kern {

Status ArgmaxParams::validate() const {
  if (!logits || !keys) return InvalidArgument("argmax: null logits or keys");
  if (batch <= 0 || vocab <= 0 || ld < vocab)
    return InvalidArgument("argmax: need batch, vocab > 0 and ld >= vocab");
  return Status::Ok();
}

Status GreedyFinalizeParams::validate() const {
  if (!keys || !tokens) return InvalidArgument("greedy_finalize: null keys or tokens");
  if (batch <= 0) return InvalidArgument("greedy_finalize: batch must be > 0");
  return Status::Ok();
}

std::vector<int32_t> argmax_ref(const std::vector<float>& logits, int batch, int vocab) {
  std::vector<int32_t> out(batch);
  for (int b = 0; b < batch; ++b) {
    auto first = logits.begin() + static_cast<size_t>(b) * vocab;
    out[b] = static_cast<int32_t>(std::max_element(first, first + vocab) - first);
  }
  return out;
}

}  // namespace gossamer::kern

namespace gossamer::kern {

Status SampleRowParams::validate(int vocab) const {
  const std::string ctx = "sample row: ";
  if (!(temperature >= 0.f) || !std::isfinite(temperature))
    return InvalidArgument(ctx + "temperature must be a finite number >= 0");
  if (!(top_p > 0.f && top_p <= 1.f)) return InvalidArgument(ctx + "top_p must be in (0, 1]");
  if (!(min_p >= 0.f && min_p <= 1.f)) return InvalidArgument(ctx + "min_p must be in [0, 1]");
  if (!std::isfinite(presence) || !std::isfinite(frequency))
    return InvalidArgument(ctx + "presence / frequency penalties must be finite");
  if (top_k < 0) return InvalidArgument(ctx + "top_k must be >= 0");
  if (top_logprobs < 0 || top_logprobs > kMaxTopLogprobs)
    return InvalidArgument(ctx + "top_logprobs must be in [0, 20]");
  if (vocab_limit < 0 || vocab_limit > vocab)
    return InvalidArgument(ctx + "vocab_limit " + std::to_string(vocab_limit) +
                           " outside [0, vocab " + std::to_string(vocab) + "]");
  if (pen_offset < 0 || pen_count < 0)
    return InvalidArgument(ctx + "negative penalty list offset or count");
  if (force_token < -1 || force_token >= vocab)
    return InvalidArgument(ctx + "force_token " + std::to_string(force_token) +
                           " outside [-1, vocab " + std::to_string(vocab) + ")");
  return Status::Ok();
}

Status SampleParams::validate() const {
  if (!logits || !row || !out) return InvalidArgument("sample: null logits, row or out");
  if (rows <= 0 || vocab <= 0 || ld < vocab)
    return InvalidArgument("sample: need rows, vocab > 0 and ld >= vocab");
  if (vocab > (1 << 18)) return InvalidArgument("sample: vocab must be <= 262144 (18-bit ids)");
  if (!workspace || workspace_bytes < sample_workspace_bytes(rows)) {
    return InvalidArgument("sample: workspace of " + std::to_string(workspace_bytes) +
                           " bytes, need sample_workspace_bytes(" + std::to_string(rows) +
                           ") = " + std::to_string(sample_workspace_bytes(rows)));
  }
  return Status::Ok();
}

}  // namespace gossamer::kern

#include <algorithm>

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

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>

#include "kernels/router/params.h"

namespace gossamer::kern {

Status TopkParams::validate() const {
  if (!logits || !ids || !weights) return InvalidArgument("topk_softmax: null pointer argument");
  if (batch <= 0 || n_experts <= 0 || n_experts > 256 || k <= 0 || k > 8 || k > n_experts) {
    return InvalidArgument(
        "topk_softmax: need batch > 0, 0 < k <= min(8, experts), experts <= 256; got experts " +
        std::to_string(n_experts) + " k " + std::to_string(k));
  }
  return Status::Ok();
}

void topk_softmax_ref(const std::vector<float>& logits, int batch, int n, int k,
                      std::vector<int32_t>* ids, std::vector<double>* weights) {
  ids->clear();
  weights->clear();
  for (int b = 0; b < batch; ++b) {
    const float* l = logits.data() + static_cast<size_t>(b) * n;
    std::vector<int> idx(n);
    std::iota(idx.begin(), idx.end(), 0);
    std::stable_sort(idx.begin(), idx.end(), [&](int a, int c) { return l[a] > l[c]; });
    double m = l[idx[0]], den = 0;
    for (int j = 0; j < k; ++j) den += std::exp(static_cast<double>(l[idx[j]]) - m);
    for (int j = 0; j < k; ++j) {
      ids->push_back(idx[j]);
      weights->push_back(std::exp(static_cast<double>(l[idx[j]]) - m) / den);
    }
  }
}

}  // namespace gossamer::kern

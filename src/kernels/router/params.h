// MoE routing after the router GEMV (gemv/ with bias): per row, the top-k experts by logit
// (ties -> lower index, sorted descending, as torch.topk) and the softmax over the chosen k.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

#include "common/status.h"

namespace gossamer::kern {

struct TopkParams {
  const float* logits = nullptr;  // [batch, n_experts] f32
  int32_t* ids = nullptr;         // [batch, k]
  float* weights = nullptr;       // [batch, k]
  int batch = 0, n_experts = 0, k = 0;
  Status validate() const;
};

// Kernel topk_softmax_f32: one warp per row.
Status launch_topk_softmax(const TopkParams& p, cudaStream_t stream);

// Reference: ids and weights (fp64) per row.
void topk_softmax_ref(const std::vector<float>& logits, int batch, int n_experts, int k,
                      std::vector<int32_t>* ids, std::vector<double>* weights);

}  // namespace gossamer::kern

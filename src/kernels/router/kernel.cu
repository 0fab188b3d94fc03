// topk_softmax_f32: one warp per row (4 rows per 128-thread block), see router/topk.cuh.
#include "kernels/common/cuda_check.h"
#include "kernels/common/pdl.cuh"
#include "kernels/common/pdl.h"
#include "kernels/router/params.h"
#include "kernels/router/topk.cuh"

namespace gossamer::kern {
namespace {

constexpr int kRowsPerBlock = 4;

__global__ void __launch_bounds__(32 * kRowsPerBlock) topk_softmax_f32(TopkParams p) {
  const int row = blockIdx.x * kRowsPerBlock + (threadIdx.x >> 5);
  pdl_wait();  // logits come from the router GEMV
  pdl_trigger();
  if (row >= p.batch) return;
  const size_t o = static_cast<size_t>(row) * p.k;
  warp_topk_softmax(p.logits + static_cast<size_t>(row) * p.n_experts, p.n_experts, p.k, p.ids + o,
                    p.weights + o);
}

}  // namespace

Status launch_topk_softmax(const TopkParams& p, cudaStream_t s) {
  GS_RETURN_IF_ERROR(p.validate());
  return launch_pdl(p.pdl, "topk_softmax_f32", topk_softmax_f32,
                    dim3((p.batch + kRowsPerBlock - 1) / kRowsPerBlock), dim3(32 * kRowsPerBlock),
                    0, s, p);
}

}  // namespace gossamer::kern

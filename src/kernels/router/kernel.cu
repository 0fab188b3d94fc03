// topk_softmax_f32: one warp per row (4 rows per 128-thread block). Lane l holds logits
// l, l+32, ... (up to 8); k rounds of a warp arg-max (value, then lower index) remove the
// winner; lane 0 writes ids and the softmax over the k chosen logits.
#include <cfloat>

#include "kernels/common/cuda_check.h"
#include "kernels/common/device.cuh"
#include "kernels/router/params.h"

namespace gossamer::kern {
namespace {

constexpr int kMaxPerLane = 8, kMaxK = 8, kRowsPerBlock = 4;

__global__ void __launch_bounds__(32 * kRowsPerBlock) topk_softmax_f32(TopkParams p) {
  const int row = blockIdx.x * kRowsPerBlock + (threadIdx.x >> 5), lane = threadIdx.x & 31;
  if (row >= p.batch) return;
  const float* l = p.logits + static_cast<size_t>(row) * p.n_experts;
  float v[kMaxPerLane];
#pragma unroll
  for (int j = 0; j < kMaxPerLane; ++j) {
    const int e = lane + 32 * j;
    v[j] = e < p.n_experts ? l[e] : -FLT_MAX;
  }
  float top_v[kMaxK];
  int top_i[kMaxK];
  for (int r = 0; r < p.k; ++r) {
    float bv = -FLT_MAX;
    int bi = 0x7fffffff;
#pragma unroll
    for (int j = 0; j < kMaxPerLane; ++j) {
      const int e = lane + 32 * j;
      if (e < p.n_experts && (v[j] > bv || (v[j] == bv && e < bi))) bv = v[j], bi = e;
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
      const float ov = __shfl_xor_sync(0xffffffffu, bv, o);
      const int oi = __shfl_xor_sync(0xffffffffu, bi, o);
      if (ov > bv || (ov == bv && oi < bi)) bv = ov, bi = oi;
    }
#pragma unroll
    for (int j = 0; j < kMaxPerLane; ++j)
      if (lane + 32 * j == bi) v[j] = -FLT_MAX;  // removed from later rounds
    top_v[r] = bv;
    top_i[r] = bi;
  }
  if (lane != 0) return;
  float den = 0.f;
  for (int r = 0; r < p.k; ++r) den += __expf(top_v[r] - top_v[0]);
  for (int r = 0; r < p.k; ++r) {
    p.ids[static_cast<size_t>(row) * p.k + r] = top_i[r];
    p.weights[static_cast<size_t>(row) * p.k + r] = __expf(top_v[r] - top_v[0]) / den;
  }
}

}  // namespace

Status launch_topk_softmax(const TopkParams& p, cudaStream_t s) {
  GS_RETURN_IF_ERROR(p.validate());
  topk_softmax_f32<<<(p.batch + kRowsPerBlock - 1) / kRowsPerBlock, 32 * kRowsPerBlock, 0, s>>>(p);
  return launch_status("topk_softmax_f32");
}

}  // namespace gossamer::kern

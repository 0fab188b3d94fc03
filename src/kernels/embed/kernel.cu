// embed_bf16_f32: one 256-thread block per row, 4 values (8 bytes) per thread per step.
#include "kernels/common/cuda_check.h"
#include "kernels/common/device.cuh"
#include "kernels/common/pdl.cuh"
#include "kernels/common/pdl.h"
#include "kernels/embed/params.h"

namespace gossamer::kern {
namespace {

__global__ void __launch_bounds__(256) embed_bf16_f32(EmbedParams p) {
  const int b = blockIdx.x;
  pdl_wait();  // tokens may be written by the previous step's sampler
  pdl_trigger();
  const int tok = p.tokens[b];
  float4* x = reinterpret_cast<float4*>(p.x + static_cast<size_t>(b) * p.hidden);
  const bool ok = tok >= 0 && tok < p.vocab;
  if (!ok && threadIdx.x == 0 && p.error) atomicCAS(p.error, 0, b + 1);
  const uint2* row =
      reinterpret_cast<const uint2*>(p.table + static_cast<size_t>(ok ? tok : 0) * p.hidden);
  for (int i = threadIdx.x; i < p.hidden / 4; i += blockDim.x) {
    const uint2 w = row[i];
    x[i] = ok ? make_float4(bf16_lo(w.x), bf16_hi(w.x), bf16_lo(w.y), bf16_hi(w.y))
              : make_float4(0.f, 0.f, 0.f, 0.f);
  }
}

}  // namespace

Status launch_embed(const EmbedParams& p, cudaStream_t s) {
  GS_RETURN_IF_ERROR(p.validate());
  return launch_pdl(p.pdl, "embed_bf16_f32", embed_bf16_f32, dim3(p.batch), dim3(256), 0, s, p);
}

}  // namespace gossamer::kern

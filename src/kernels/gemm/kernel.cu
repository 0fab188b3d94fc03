// cvt_f32_bf16: grid-stride loop, each thread converts 4 floats (one 16-byte load, one 8-byte
// store; split mode a second 8-byte store of the residuals), round to nearest even
// (common/device.cuh f32_to_bf16).
#include "kernels/common/cuda_check.h"
#include "kernels/common/device.cuh"
#include "kernels/common/pdl.cuh"
#include "kernels/common/pdl.h"
#include "kernels/gemm/params.h"

namespace gossamer::kern {
namespace {

__global__ void __launch_bounds__(256)
    cvt_f32_bf16(const float4* x, uint2* y, uint2* lo, size_t n4) {
  pdl_wait();  // x comes from the previous kernel (attention)
  pdl_trigger();
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n4;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    store_bf16x4(x[i], y + i, lo ? lo + i : nullptr);
  }
}

}  // namespace

Status launch_f32_to_bf16(const float* x, uint16_t* y, size_t n, cudaStream_t s, uint16_t* lo,
                          bool pdl) {
  if (!x || !y || n == 0 || n % 4 != 0) {
    return InvalidArgument("f32_to_bf16: null pointer or n = " + std::to_string(n) +
                           " not a positive multiple of 4");
  }
  if ((reinterpret_cast<uintptr_t>(x) % 16) |
      ((reinterpret_cast<uintptr_t>(y) | reinterpret_cast<uintptr_t>(lo)) % 8)) {
    return InvalidArgument("f32_to_bf16: x must be 16-byte and y, lo 8-byte aligned");
  }
  const size_t n4 = n / 4;
  const int blocks = static_cast<int>(std::min<size_t>((n4 + 255) / 256, 132 * 16));
  return launch_pdl(pdl, "cvt_f32_bf16", cvt_f32_bf16, dim3(blocks), dim3(256), 0, s,
                    reinterpret_cast<const float4*>(x), reinterpret_cast<uint2*>(y),
                    reinterpret_cast<uint2*>(lo), n4);
}

}  // namespace gossamer::kern

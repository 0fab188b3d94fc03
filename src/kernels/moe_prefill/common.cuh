// Device helpers shared by the moe_prefill GEMMs (gemm.cu: mma.sync, wgmma.cu: wgmma). Internal.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/moe_prefill/bits.h"

namespace gossamer::kern::moe_prefill {

// 16-byte cp.async of which the first `bytes` (0..16) come from src, the rest is zero-filled.
__device__ __forceinline__ void cp_async16(void* dst, const void* src, int bytes) {
  const auto s = static_cast<uint32_t>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(src), "r"(bytes));
}
__device__ __forceinline__ void cp_commit() {
  asm volatile("cp.async.commit_group;\n" ::);
}
template <int N>
__device__ __forceinline__ void cp_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

__device__ __forceinline__ uint32_t bf16x2_mul(uint32_t a, uint32_t b) {
  uint32_t r;
  asm("mul.rn.bf16x2 %0, %1, %2;\n" : "=r"(r) : "r"(a), "r"(b));
  return r;
}
// bf16x2 multiplier 2^(s - 1) for an E8M0 scale byte s (s > 128 overflows to inf): the biased
// exponent e = min(s, 129) + 126 placed at bits 7 and 23, as one multiply-add ((e << 7) | (e << 23)
// == e * 0x00800080 since the two fields do not overlap).
__device__ __forceinline__ uint32_t scale_mul(uint32_t s) {
  return min(s, 129u) * 0x00800080u + 126u * 0x00800080u;
}

__device__ __forceinline__ float swiglu(float gate, float up, float alpha, float limit) {
  gate = fminf(gate, limit);
  up = fminf(fmaxf(up, -limit), limit);
  return (up + 1.f) * gate / (1.f + expf(-alpha * gate));
}

}  // namespace gossamer::kern::moe_prefill

// Pseudo-random device fills for synthetic weights and KV caches: element i gets
// splitmix64(seed ^ i * golden) mapped to the range. Grid-stride loop, 256 threads.
#include "engine/cuda/runner_impl.h"
#include "kernels/common/cuda_check.h"
#include "kernels/common/device.cuh"

namespace gossamer::cudarun {
namespace {

__device__ __forceinline__ uint64_t mix(uint64_t z) {
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
__device__ __forceinline__ float unit(uint64_t seed, size_t i) {
  return static_cast<float>(mix(seed ^ (i * 0x632be59bd9b4e019ull)) >> 40) * (1.0f / 16777216.0f);
}

__global__ void fill_bf16_k(uint16_t* p, size_t n, uint64_t seed, float lo, float hi) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n;
       i += size_t{gridDim.x} * blockDim.x)
    p[i] = kern::f32_to_bf16(lo + (hi - lo) * unit(seed, i));
}
__global__ void fill_f32_k(float* p, size_t n, uint64_t seed, float lo, float hi) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n;
       i += size_t{gridDim.x} * blockDim.x)
    p[i] = lo + (hi - lo) * unit(seed, i);
}
__global__ void fill_u8_k(uint8_t* p, size_t n, uint64_t seed, int lo, int hi) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n;
       i += size_t{gridDim.x} * blockDim.x)
    p[i] =
        static_cast<uint8_t>(lo + static_cast<int>(unit(seed, i) * (hi - lo + 1)) % (hi - lo + 1));
}

constexpr int kBlocks = 4096, kThreads = 256;

}  // namespace

Status fill_bf16(uint16_t* p, size_t n, uint64_t seed, float lo, float hi, cudaStream_t s) {
  fill_bf16_k<<<kBlocks, kThreads, 0, s>>>(p, n, seed, lo, hi);
  return kern::launch_status("fill_bf16");
}
Status fill_f32(float* p, size_t n, uint64_t seed, float lo, float hi, cudaStream_t s) {
  fill_f32_k<<<kBlocks, kThreads, 0, s>>>(p, n, seed, lo, hi);
  return kern::launch_status("fill_f32");
}
Status fill_u8(uint8_t* p, size_t n, uint64_t seed, int lo, int hi, cudaStream_t s) {
  fill_u8_k<<<kBlocks, kThreads, 0, s>>>(p, n, seed, lo, hi);
  return kern::launch_status("fill_u8");
}

}  // namespace gossamer::cudarun

#include "kernels/common/testing.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "common/numerics.h"

namespace gossamer::kern::testing {

void sync_or_die(const std::string& what) {
  const cudaError_t e = cudaDeviceSynchronize();
  if (e == cudaSuccess) return;
  std::fprintf(stderr, "FATAL: %s: %s (%s); the CUDA context is unusable, stopping the test\n",
               what.c_str(), cudaGetErrorName(e), cudaGetErrorString(e));
  std::fflush(nullptr);
  std::exit(1);
}

std::vector<float> rand_f32(std::mt19937_64& rng, size_t n, float lo, float hi) {
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

std::vector<uint16_t> rand_bf16(std::mt19937_64& rng, size_t n, float lo, float hi) {
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<uint16_t> v(n);
  for (auto& x : v) x = float_to_bf16(d(rng));
  return v;
}

std::vector<uint8_t> rand_bytes(std::mt19937_64& rng, size_t n, int lo, int hi) {
  std::uniform_int_distribution<int> d(lo, hi);
  std::vector<uint8_t> v(n);
  for (auto& x : v) x = static_cast<uint8_t>(d(rng));
  return v;
}

double rel_err(const float* a, const double* ref, size_t n) {
  double num = 0, den = 0;
  for (size_t i = 0; i < n; ++i) {
    if (!std::isfinite(a[i])) return INFINITY;
    const double d = static_cast<double>(a[i]) - ref[i];
    num += d * d;
    den += ref[i] * ref[i];
  }
  return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
}

double rel_err(const std::vector<float>& a, const std::vector<double>& ref) {
  if (a.size() != ref.size()) return INFINITY;
  return rel_err(a.data(), ref.data(), a.size());
}

double time_ms(const std::function<void()>& fn, int iters, int warmup) {
  for (int i = 0; i < warmup; ++i) fn();
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  cudaEventRecord(e0);
  for (int i = 0; i < iters; ++i) fn();
  cudaEventRecord(e1);
  cudaEventSynchronize(e1);
  float ms = 0;
  cudaEventElapsedTime(&ms, e0, e1);
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  return ms / iters;
}

double graph_ms(const std::function<bool(cudaStream_t, int)>& launch, int launches, int reps) {
  cudaStream_t st = nullptr;
  cudaGraph_t g = nullptr;
  cudaGraphExec_t ge = nullptr;
  if (cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking) != cudaSuccess) return -1;
  bool ok = cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal) == cudaSuccess;
  for (int i = 0; ok && i < launches; ++i) ok = launch(st, i);
  ok = cudaStreamEndCapture(st, &g) == cudaSuccess && ok;
  ok = ok && cudaGraphInstantiate(&ge, g, 0) == cudaSuccess;
  double ms = -1;
  if (ok) {
    cudaEvent_t e0, e1;
    cudaEventCreate(&e0);
    cudaEventCreate(&e1);
    cudaGraphLaunch(ge, st);
    cudaEventRecord(e0, st);
    for (int i = 0; i < reps; ++i) cudaGraphLaunch(ge, st);
    cudaEventRecord(e1, st);
    cudaEventSynchronize(e1);
    float t = 0;
    cudaEventElapsedTime(&t, e0, e1);
    ms = t / (static_cast<double>(reps) * launches);
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
  }
  if (ge) cudaGraphExecDestroy(ge);
  if (g) cudaGraphDestroy(g);
  cudaStreamDestroy(st);
  cudaGetLastError();  // a failed capture must not poison the next case
  return ms;
}

double copy_ceiling_gbs() {
  const size_t n = size_t{256} << 20;
  DevBuf<uint8_t> a(n), b(n);
  if (!a.get() || !b.get()) return 0;
  const double ms = time_ms([&] { cudaMemcpy(b.get(), a.get(), n, cudaMemcpyDeviceToDevice); }, 20);
  return 2.0 * static_cast<double>(n) / (ms * 1e-3) / 1e9;
}

void print_bench_line(const std::string& name, double bytes, double ms, double ceiling_gbs) {
  const double gbs = bytes / (ms * 1e-3) / 1e9;
  std::printf("| %-44s | %10.1f KB | %8.2f us | %7.0f GB/s | %5.1f%% |\n", name.c_str(),
              bytes / 1e3, ms * 1e3, gbs, ceiling_gbs > 0 ? 100.0 * gbs / ceiling_gbs : 0.0);
}

}  // namespace gossamer::kern::testing

// Host-side helpers for the kernel tests and benches: seeded random inputs, device buffers,
// relative error against fp64 references, CUDA-event timing and the copy-bandwidth ceiling.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "common/test_seed.h"

namespace gossamer::kern::testing {

// fresh_seed: common/test_seed.h ($GOSSAMER_SEED replays a run).
using gossamer::testing::fresh_seed;

// cudaDeviceSynchronize(); on an error, prints `what` and the error and exits with status 1. A
// kernel fault is sticky (every later launch and copy of the process fails), so going on would
// only report later, innocent cases; this names the launch that faulted.
void sync_or_die(const std::string& what);

// Owning device buffer of n elements of T (cudaMalloc; aborts the test on failure).
template <class T>
class DevBuf {
 public:
  DevBuf() = default;
  explicit DevBuf(size_t n) : n_(n) {
    if (n > 0 && cudaMalloc(&p_, n * sizeof(T)) != cudaSuccess) p_ = nullptr;
  }
  DevBuf(const DevBuf&) = delete;
  DevBuf& operator=(const DevBuf&) = delete;
  DevBuf(DevBuf&& o) noexcept : p_(o.p_), n_(o.n_) { o.p_ = nullptr, o.n_ = 0; }
  DevBuf& operator=(DevBuf&& o) noexcept {
    if (this != &o) {
      cudaFree(p_);
      p_ = o.p_, n_ = o.n_;
      o.p_ = nullptr, o.n_ = 0;
    }
    return *this;
  }
  ~DevBuf() { cudaFree(p_); }
  T* get() const { return p_; }
  size_t size() const { return n_; }
  size_t bytes() const { return n_ * sizeof(T); }
  void upload(const std::vector<T>& h) {
    cudaMemcpy(p_, h.data(), bytes(), cudaMemcpyHostToDevice);
  }
  // On a failed copy (e.g. after a kernel fault) the result is all 0xff bytes (NaN for floats),
  // never zeros that a relative-error check would read as a plain mismatch.
  std::vector<T> download() const {
    std::vector<T> h(n_);
    if (cudaMemcpy(h.data(), p_, bytes(), cudaMemcpyDeviceToHost) != cudaSuccess) {
      std::memset(static_cast<void*>(h.data()), 0xff, bytes());
    }
    return h;
  }
  // Fills with 0xff bytes: NaN for floats, so unwritten outputs are caught.
  void poison() { cudaMemset(p_, 0xff, bytes()); }

 private:
  T* p_ = nullptr;
  size_t n_ = 0;
};

std::vector<float> rand_f32(std::mt19937_64& rng, size_t n, float lo, float hi);
// Random bf16 bits for values uniform in [lo, hi] (rounded to bf16).
std::vector<uint16_t> rand_bf16(std::mt19937_64& rng, size_t n, float lo, float hi);
// Random MXFP4 data: n_blocks x 16 packed bytes (any nibble) and scales in [smin, smax].
std::vector<uint8_t> rand_bytes(std::mt19937_64& rng, size_t n, int lo, int hi);

// ||a - ref|| / ||ref|| over n values (a NaN anywhere gives +inf).
double rel_err(const float* a, const double* ref, size_t n);
double rel_err(const std::vector<float>& a, const std::vector<double>& ref);

// Mean time in ms of fn() over `iters` runs (after `warmup` runs) with CUDA events on stream 0.
double time_ms(const std::function<void()>& fn, int iters, int warmup = 3);

// Mean ms per launch when `launches` calls launch(stream, i) are captured in one CUDA graph (as
// the decode step runs them) and the graph is replayed `reps` times after one warm-up replay;
// < 0 when a launch returns false or the capture fails (the error is cleared).
double graph_ms(const std::function<bool(cudaStream_t, int)>& launch, int launches, int reps);

// Device-to-device copy bandwidth in GB/s counting bytes read and written (256 MiB buffers).
double copy_ceiling_gbs();

// One bench line: name, bytes moved per call, time; prints GB/s and % of `ceiling_gbs`.
void print_bench_line(const std::string& name, double bytes, double ms, double ceiling_gbs);

}  // namespace gossamer::kern::testing

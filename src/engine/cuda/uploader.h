// Host -> device weight upload at disk/PCIe speed: a ring of pinned staging buffers, so the copy
// of chunk i+1 from the (mmapped) checkpoint into pinned memory overlaps the DMA of chunk i; the
// host copy itself is split over a few threads (page faults of a cold mmap read in parallel).
// Optional progress lines on stderr. CUDA-aware: included by this folder's .cpp files only.
#pragma once

#include <cuda_runtime.h>

#include <array>
#include <chrono>
#include <cstddef>
#include <string>

#include "common/status.h"
#include "common/thread_pool.h"
#include "model/weights.h"

namespace gossamer::cudarun {

class Uploader {
 public:
  // total_bytes: what the whole upload will copy (for progress); progress: print to stderr.
  Uploader(cudaStream_t s, size_t total_bytes, bool progress);
  ~Uploader();
  Uploader(const Uploader&) = delete;
  Uploader& operator=(const Uploader&) = delete;

  // Enqueues the copy of `bytes` from `src` to device `dst` (src must stay valid until finish()).
  Status copy(void* dst, const void* src, size_t bytes, const std::string& what);
  // Small vector (bf16/f16/f32 tensor of n elements) -> fp32 on the device.
  Status vec_f32(float* dst, const TensorRef& t, size_t n, const std::string& what);
  // `bytes` zero bytes at `dst` (a bias the config says the model has not).
  Status zeros(void* dst, size_t bytes, const std::string& what);
  // A tensor's raw bytes (size checked against `bytes`).
  Status raw(void* dst, const TensorRef& t, size_t bytes, const std::string& what);
  // Waits for every DMA; prints the final progress line (bytes, seconds, GB/s).
  Status finish();

 private:
  static constexpr int kSlots = 3;
  static constexpr size_t kChunk = size_t{32} << 20;
  Status next_slot(int* slot);
  void report(bool last);

  cudaStream_t s_;
  size_t total_, done_ = 0;
  bool progress_;
  std::array<void*, kSlots> buf_{};
  std::array<cudaEvent_t, kSlots> ev_{};
  std::array<bool, kSlots> busy_{};
  int next_ = 0;
  ThreadPool pool_;
  std::chrono::steady_clock::time_point start_, last_report_;
};

}  // namespace gossamer::cudarun

#include "engine/cuda/uploader.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <vector>

#include "common/mapped_read.h"
#include "kernels/common/cuda_check.h"

namespace gossamer::cudarun {

Uploader::Uploader(cudaStream_t s, size_t total_bytes, bool progress)
    : s_(s), total_(total_bytes), progress_(progress), pool_(4) {
  start_ = last_report_ = std::chrono::steady_clock::now();
}

Uploader::~Uploader() {
  for (int i = 0; i < kSlots; ++i) {
    if (ev_[i]) {
      cudaEventSynchronize(ev_[i]);
      cudaEventDestroy(ev_[i]);
    }
    if (buf_[i]) cudaFreeHost(buf_[i]);
  }
}

// The next staging slot, waiting until the DMA that last used it has finished.
Status Uploader::next_slot(int* slot) {
  const int i = next_;
  next_ = (next_ + 1) % kSlots;
  if (!buf_[i]) {
    GS_CUDA_RETURN(cudaMallocHost(&buf_[i], kChunk));
    GS_CUDA_RETURN(cudaEventCreateWithFlags(&ev_[i], cudaEventDisableTiming));
  }
  if (busy_[i]) GS_CUDA_RETURN(cudaEventSynchronize(ev_[i]));
  busy_[i] = false;
  *slot = i;
  return Status::Ok();
}

Status Uploader::copy(void* dst, const void* src, size_t bytes, const std::string& what) {
  if (!src) return InvalidArgument("cuda runner: tensor " + what + " has no data");
  for (size_t off = 0; off < bytes; off += kChunk) {
    const size_t n = std::min(kChunk, bytes - off);
    int i = 0;
    GS_RETURN_IF_ERROR(next_slot(&i));
    char* stage = static_cast<char*>(buf_[i]);
    const char* from = static_cast<const char*>(src) + off;
    constexpr size_t kPart = size_t{4} << 20;  // host copy split in 4 MiB parts over the pool
    const int64_t parts = static_cast<int64_t>((n + kPart - 1) / kPart);
    std::atomic<bool> faulted{false};  // the mapped checkpoint shrank under the copy
    pool_.parallel_for(parts, [&](int64_t lo, int64_t hi) {
      const bool ok = guarded_mapped_read(
          [&] {
            for (int64_t p = lo; p < hi; ++p) {
              const size_t a = static_cast<size_t>(p) * kPart, len = std::min(kPart, n - a);
              std::memcpy(stage + a, from + a, len);
            }
          },
          nullptr);
      if (!ok) faulted = true;
    });
    if (faulted) {
      return IoError("cuda runner: upload of " + what + ": " +
                     mapped_read_fault("reading the checkpoint"));
    }
    const cudaError_t e =
        cudaMemcpyAsync(static_cast<char*>(dst) + off, stage, n, cudaMemcpyHostToDevice, s_);
    if (e != cudaSuccess) {
      return Internal("cuda runner: upload of " + what + ": " + cudaGetErrorString(e));
    }
    GS_CUDA_RETURN(cudaEventRecord(ev_[i], s_));
    busy_[i] = true;
    done_ += n;
    report(false);
  }
  return Status::Ok();
}

Status Uploader::vec_f32(float* dst, const TensorRef& t, size_t n, const std::string& what) {
  if (static_cast<size_t>(t.numel()) != n) {
    return InvalidArgument("cuda runner: tensor " + what + " has " + std::to_string(t.numel()) +
                           " elements, expected " + std::to_string(n));
  }
  std::vector<float> h(n);
  float* out = h.data();
  if (!guarded_mapped_read(
          [&] {
            for (size_t i = 0; i < n; ++i) out[i] = t.get(static_cast<int64_t>(i));
          },
          nullptr)) {
    return IoError("cuda runner: " + mapped_read_fault("reading the checkpoint for " + what));
  }
  // h dies at return: copy() has already moved it into pinned staging.
  return copy(dst, h.data(), n * sizeof(float), what);
}

Status Uploader::zeros(void* dst, size_t bytes, const std::string& what) {
  const std::string ctx = "cuda runner: zeroing " + what;
  return kern::cuda_status(cudaMemsetAsync(dst, 0, bytes, s_), ctx.c_str());
}

Status Uploader::raw(void* dst, const TensorRef& t, size_t bytes, const std::string& what) {
  if (static_cast<size_t>(t.numel() * dtype_size(t.dtype)) != bytes) {
    return InvalidArgument("cuda runner: tensor " + what + " has " +
                           std::to_string(t.numel() * dtype_size(t.dtype)) + " bytes, expected " +
                           std::to_string(bytes));
  }
  return copy(dst, t.data, bytes, what);
}

void Uploader::report(bool last) {
  if (!progress_) return;
  const auto now = std::chrono::steady_clock::now();
  if (!last && now - last_report_ < std::chrono::milliseconds(500)) return;
  last_report_ = now;
  const double s = std::chrono::duration<double>(now - start_).count();
  std::fprintf(stderr, "\rloading weights to the GPU: %.2f / %.2f GB  %.1f s  %.2f GB/s%s",
               static_cast<double>(done_) / 1e9, static_cast<double>(total_) / 1e9, s,
               s > 0 ? static_cast<double>(done_) / 1e9 / s : 0.0, last ? "\n" : "");
  std::fflush(stderr);
}

Status Uploader::finish() {
  GS_CUDA_RETURN(cudaStreamSynchronize(s_));
  for (bool& b : busy_) b = false;
  report(true);
  return Status::Ok();
}

}  // namespace gossamer::cudarun

// Test-only: a FIFO for tests that a loader rejects FIFOs instead of blocking on them. While it
// exists, a thread keeps opening it for writing (non-blocking, so only while some reader has it
// open) and closing it again: code that wrongly opens it with a blocking open() then reads an
// empty file and fails its test instead of hanging it.
#pragma once

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <string>
#include <thread>

namespace gossamer::testing {

class ScopedFifo {
 public:
  explicit ScopedFifo(std::filesystem::path path) : path_(std::move(path)) {
    ok_ = ::mkfifo(path_.c_str(), 0600) == 0;
    if (ok_) writer_ = std::thread([this] { unblock_readers(); });
  }
  ~ScopedFifo() {
    stop_ = true;
    if (writer_.joinable()) writer_.join();
    std::error_code ec;
    if (ok_) std::filesystem::remove(path_, ec);
  }
  ScopedFifo(const ScopedFifo&) = delete;
  ScopedFifo& operator=(const ScopedFifo&) = delete;

  bool ok() const { return ok_; }  // mkfifo succeeded
  std::string path() const { return path_.string(); }

 private:
  void unblock_readers() {
    while (!stop_) {
      const int fd = ::open(path_.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
      if (fd >= 0) ::close(fd);  // the reader now sees end of file
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  }

  std::filesystem::path path_;
  bool ok_ = false;
  std::atomic<bool> stop_{false};
  std::thread writer_;
};

}  // namespace gossamer::testing

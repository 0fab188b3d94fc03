#include "common/file_util.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

namespace gossamer {
namespace {

class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() { ::close(fd_); }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

}  // namespace

Result<std::string> read_regular_file(const std::string& path) {
  // O_NONBLOCK: opening a FIFO must not wait for a writer (fstat then rejects it). It has no
  // effect on reads of a regular file.
  const int raw = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (raw < 0) {
    const int err = errno;
    if (err == ENOENT || err == ENOTDIR) return NotFound(path + ": does not exist");
    return IoError(path + ": cannot open: " + std::strerror(err));
  }
  const Fd fd(raw);
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) {
    return IoError(path + ": cannot stat: " + std::strerror(errno));
  }
  if (!S_ISREG(st.st_mode)) return IoError(path + ": not a regular file");
  std::string out;
  out.reserve(static_cast<size_t>(st.st_size));
  char buf[1 << 16];
  for (;;) {
    const ssize_t n = ::read(fd.get(), buf, sizeof(buf));
    if (n > 0) {
      out.append(buf, static_cast<size_t>(n));
    } else if (n == 0) {
      return out;
    } else if (errno != EINTR) {
      return IoError(path + ": read error: " + std::strerror(errno));
    }
  }
}

namespace {

// DIR without trailing separators (so that "m/original/" has the file name "original").
std::filesystem::path clean_dir(const std::string& dir) {
  std::filesystem::path p(dir);
  while (p.has_relative_path() && p.filename().empty()) p = p.parent_path();
  return p;
}

}  // namespace

std::string model_dir_file(const std::string& dir, const std::string& name) {
  std::error_code ec;
  const std::filesystem::path d = clean_dir(dir);
  if (!std::filesystem::exists(d / name, ec) && d.filename() == "original") {
    const auto up = d.parent_path() / name;
    if (std::filesystem::exists(up, ec)) return up.string();
  }
  return (d / name).string();
}

std::string model_dir_name(const std::string& dir) {
  std::error_code ec;
  std::filesystem::path d = std::filesystem::absolute(dir, ec);
  d = clean_dir((ec ? std::filesystem::path(dir) : d).lexically_normal().string());
  if (d.filename() == "original" && d.has_parent_path()) d = d.parent_path();
  return d.filename().string();
}

}  // namespace gossamer

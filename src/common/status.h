// Status / Result<T>: error returns at module boundaries (leveldb / absl style).
// Never exit() on error: return a Status whose message names the problem
// (file, tensor, field, byte offset) and let the caller decide.
#pragma once

#include <cassert>
#include <optional>
#include <string>
#include <utility>
#include <variant>

namespace gossamer {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,
  kNotFound,
  kIo,
  kCorrupt,
  kUnsupported,
  kOutOfRange,
  kResourceExhausted,
  kInternal,
  kCancelled
};

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string msg) : code_(code), msg_(std::move(msg)) {}
  static Status Ok() { return {}; }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return msg_; }
  std::string ToString() const;

  // Returns a copy with `context + ": "` prepended to the message.
  Status With(const std::string& context) const {
    return ok() ? *this : Status(code_, context + ": " + msg_);
  }

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string msg_;
};

inline Status InvalidArgument(std::string m) {
  return {StatusCode::kInvalidArgument, std::move(m)};
}
inline Status NotFound(std::string m) {
  return {StatusCode::kNotFound, std::move(m)};
}
inline Status IoError(std::string m) {
  return {StatusCode::kIo, std::move(m)};
}
inline Status Corrupt(std::string m) {
  return {StatusCode::kCorrupt, std::move(m)};
}
inline Status Unsupported(std::string m) {
  return {StatusCode::kUnsupported, std::move(m)};
}
inline Status OutOfRange(std::string m) {
  return {StatusCode::kOutOfRange, std::move(m)};
}
inline Status ResourceExhausted(std::string m) {
  return {StatusCode::kResourceExhausted, std::move(m)};
}
inline Status Internal(std::string m) {
  return {StatusCode::kInternal, std::move(m)};
}
inline Status Cancelled(std::string m) {
  return {StatusCode::kCancelled, std::move(m)};
}

const char* StatusCodeName(StatusCode c);

inline std::string Status::ToString() const {
  return ok() ? std::string("OK") : std::string(StatusCodeName(code_)) + ": " + msg_;
}

// Result<T>: a T or a non-OK Status.
template <class T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}  // NOLINT(implicit)
  Result(Status s) : v_(std::move(s)) {      // NOLINT(implicit)
    assert(!std::get<Status>(v_).ok() && "Result constructed from OK status");
  }
  bool ok() const { return std::holds_alternative<T>(v_); }
  const Status& status() const {
    static const Status kOk;
    return ok() ? kOk : std::get<Status>(v_);
  }
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace gossamer

#define GS_CONCAT_INNER_(a, b) a##b
#define GS_CONCAT_(a, b) GS_CONCAT_INNER_(a, b)

// Propagate a non-OK Status.
#define GS_RETURN_IF_ERROR(expr)             \
  do {                                       \
    ::gossamer::Status gs_status_ = (expr);  \
    if (!gs_status_.ok()) return gs_status_; \
  } while (0)

// GS_ASSIGN_OR_RETURN(auto x, MakeX());
#define GS_ASSIGN_OR_RETURN(lhs, expr) \
  GS_ASSIGN_OR_RETURN_IMPL_(GS_CONCAT_(gs_r_, __LINE__), lhs, expr)
#define GS_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                              \
  if (!tmp.ok()) return tmp.status();             \
  lhs = std::move(tmp).value()

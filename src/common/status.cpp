#include "common/status.h"

namespace gossamer {

const char* StatusCodeName(StatusCode c) {
  switch (c) {
    case StatusCode::kOk:
      return "OK";
    case StatusCode::kInvalidArgument:
      return "invalid argument";
    case StatusCode::kNotFound:
      return "not found";
    case StatusCode::kIo:
      return "I/O error";
    case StatusCode::kCorrupt:
      return "corrupt";
    case StatusCode::kUnsupported:
      return "unsupported";
    case StatusCode::kOutOfRange:
      return "out of range";
    case StatusCode::kResourceExhausted:
      return "resource exhausted";
    case StatusCode::kInternal:
      return "internal";
    case StatusCode::kCancelled:
      return "cancelled";
  }
  return "unknown";
}

}  // namespace gossamer

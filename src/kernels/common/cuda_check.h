// Host-side CUDA error handling: turn a cudaError_t into a gossamer Status naming the call.
#pragma once

#include <cuda_runtime.h>

#include <string>

#include "common/status.h"

namespace gossamer::kern {

inline Status cuda_status(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return Status::Ok();
  return Internal(std::string(what) + ": " + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) +
                  ")");
}

// Status of the last kernel launch (configuration errors; no sync).
inline Status launch_status(const char* kernel) {
  return cuda_status(cudaGetLastError(), kernel);
}

}  // namespace gossamer::kern

#define GS_CUDA_RETURN(expr) GS_RETURN_IF_ERROR(::gossamer::kern::cuda_status((expr), #expr))

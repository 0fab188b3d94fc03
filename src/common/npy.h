// Minimal NumPy .npy (format 1.0) writer/reader for float32 and int32 arrays.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"

namespace gossamer {

Status write_npy_f32(const std::string& path, const float* data, const std::vector<int64_t>& shape);

struct NpyArrayF32 {
  std::vector<int64_t> shape;
  std::vector<float> data;
};
Result<NpyArrayF32> read_npy_f32(const std::string& path);

}  // namespace gossamer

// Streaming safetensors writer: the header is computed up front from the tensor list, then the
// tensor bytes are appended in order in arbitrarily sized pieces, so a multi-GB tensor never has
// to be in memory. Also plans HF-style shards (model-0000k-of-0000n.safetensors) and writes
// model.safetensors.index.json.
//
// File layout (safetensors): u64 little-endian header length N, N bytes of JSON header (padded
// with spaces to a multiple of 8), then the data section; each header entry is
// {"dtype": "BF16", "shape": [..], "data_offsets": [begin, end]} relative to the data section.
#pragma once

#include <cstdint>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "common/status.h"
#include "model/weights.h"

namespace gossamer {

struct TensorSpec {
  std::string name;
  DType dtype = DType::kBF16;
  std::vector<int64_t> shape;
  int64_t numel() const;
  int64_t nbytes() const;
  Status validate() const;  // non-empty name, non-negative dims, no int64 overflow
};

// Builds the padded JSON header (without the 8-byte length prefix). Tensors are laid out in the
// given order. Errors on duplicate names.
Result<std::string> safetensors_header(const std::vector<TensorSpec>& tensors,
                                       const std::map<std::string, std::string>& metadata);

// Which tensors go into which file. Greedy in order: a new shard starts when the next tensor
// would push the current one past max_shard_bytes (a tensor larger than the limit gets a shard of
// its own). One shard => the single file "model.safetensors".
struct ShardPlan {
  std::vector<std::string> file_names;     // per shard
  std::vector<std::vector<size_t>> items;  // per shard: indices into the tensor list
  int64_t total_bytes = 0;                 // sum of tensor bytes (index "total_size")
};
Result<ShardPlan> plan_shards(const std::vector<TensorSpec>& tensors, int64_t max_shard_bytes);

// model.safetensors.index.json text: {"metadata": {"total_size": N}, "weight_map": {...}}.
std::string shard_index_json(const std::vector<TensorSpec>& tensors, const ShardPlan& plan);

// Writes one .safetensors file. Data goes to PATH.partial and is renamed to PATH by finish(),
// so an interrupted run never leaves a valid-looking but truncated file behind.
class SafetensorsFileWriter {
 public:
  static Result<SafetensorsFileWriter> open(const std::string& path,
                                            std::vector<TensorSpec> tensors,
                                            const std::map<std::string, std::string>& metadata);
  SafetensorsFileWriter(SafetensorsFileWriter&& o) noexcept;
  SafetensorsFileWriter& operator=(SafetensorsFileWriter&&) = delete;
  SafetensorsFileWriter(const SafetensorsFileWriter&) = delete;
  ~SafetensorsFileWriter();  // an unfinished file is closed and its .partial removed

  // Appends the next n bytes of the data section (tensor after tensor, in header order).
  Status append(const void* data, size_t n);
  // Checks that exactly the declared number of bytes was appended, flushes, closes, renames.
  Status finish();

  int64_t data_bytes() const { return data_total_; }
  int64_t written() const { return written_; }
  const std::string& path() const { return path_; }

 private:
  SafetensorsFileWriter() = default;
  std::string path_, tmp_path_;
  std::FILE* f_ = nullptr;
  int64_t data_total_ = 0, written_ = 0;
};

}  // namespace gossamer

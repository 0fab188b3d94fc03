// Read-only, mmap-backed safetensors reader (single file, a set of files, or a sharded
// checkpoint through model.safetensors.index.json).
//
// File format: u64 little-endian N, then N bytes of JSON header (an object mapping tensor name
// -> {"dtype", "shape", "data_offsets": [begin, end]}, plus an optional "__metadata__" object of
// string -> string), then the data region; offsets are relative to the data region start.
//
// Everything is validated before any view is handed out (see docs/checkpoints.md): every error
// names the file, the tensor, and the byte offset where relevant. Holes between tensors and
// trailing bytes after the last tensor are tolerated; overlapping tensors are an error.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "model/weights.h"

namespace gossamer {

// Upper bound for the JSON header length (the reference implementation uses 100 MB too).
inline constexpr uint64_t kMaxSafetensorsHeader = 100'000'000;

// One tensor entry of a parsed header.
struct TensorEntry {
  std::string name;
  DType dtype = DType::kBF16;
  std::vector<int64_t> shape;
  uint64_t begin = 0;  // byte offset into the data region
  uint64_t end = 0;    // one past the last byte (end - begin == numel * dtype_size)
};

// A parsed and validated safetensors header.
struct SafetensorsHeader {
  uint64_t data_start = 0;                      // absolute file offset of the data region (8 + N)
  std::vector<TensorEntry> tensors;             // in header order
  std::map<std::string, std::string> metadata;  // "__metadata__" (string values only)
};

// Parses and validates the header of a safetensors file held in memory (bytes[0, size) is the
// whole file). Pure function: no I/O; `source` names the file in error messages.
Result<SafetensorsHeader> parse_safetensors_header(const uint8_t* bytes, size_t size,
                                                   const std::string& source);

// Parses a dtype string ("BF16", "F32", "U8", ...). Unsupported for unknown names.
Result<DType> parse_dtype(const std::string& s);

// Parses model.safetensors.index.json text: returns tensor name -> shard file name.
// Shard names must be plain file names (no directories, no "..").
Result<std::map<std::string, std::string>> parse_safetensors_index(const std::string& text,
                                                                   const std::string& source);

class MappedFile;  // safetensors_store.cpp: RAII read-only mmap

// Owns the mmaps of one or more safetensors files; hands out TensorRef views into them.
// Immutable after open; safe to share between threads. Views stay valid while the store lives.
class TensorStore {
 public:
  // One safetensors file.
  static Result<std::unique_ptr<TensorStore>> open_file(const std::string& path);
  // Several files holding disjoint tensor sets (a tensor in two files is an error).
  static Result<std::unique_ptr<TensorStore>> open_files(const std::vector<std::string>& paths);
  // A checkpoint directory: DIR/model.safetensors.index.json when present (every tensor of the
  // weight_map must be in its named shard), else DIR/model.safetensors, else every
  // DIR/*.safetensors (sorted). NotFound when there is none.
  static Result<std::unique_ptr<TensorStore>> open_dir(const std::string& dir);

  ~TensorStore();
  TensorStore(const TensorStore&) = delete;
  TensorStore& operator=(const TensorStore&) = delete;

  bool contains(const std::string& name) const;
  // A view of `name`; NotFound (naming the tensor and the store's files) when absent.
  Result<TensorRef> get(const std::string& name) const;
  // The file holding `name` ("" when absent).
  std::string file_of(const std::string& name) const;
  // Absolute byte offset of `name`'s data in its file (-1 when absent).
  int64_t offset_of(const std::string& name) const;
  // All tensor names, sorted.
  std::vector<std::string> names() const;
  size_t size() const { return tensors_.size(); }
  // Paths of the opened files, in open order.
  std::vector<std::string> files() const;
  // "__metadata__" of file i (in files() order).
  const std::map<std::string, std::string>& metadata(size_t file_index) const;
  // Human-readable list of the files for error messages ("a.safetensors, b.safetensors").
  std::string describe() const;

 private:
  struct Located {
    TensorRef ref;
    size_t file = 0;
    uint64_t offset = 0;  // absolute file offset of the data
  };
  TensorStore() = default;
  Status add_file(const std::string& path);

  std::vector<std::unique_ptr<MappedFile>> maps_;
  std::vector<std::map<std::string, std::string>> metadata_;
  std::map<std::string, Located> tensors_;
};

}  // namespace gossamer

// Internal to src/model: looks checkpoint tensors up in a TensorStore and checks their dtype,
// shape, alignment and values (weights.cpp binds the Hugging Face names, weights_original.cpp
// OpenAI's own layout). Every error names the tensor and its file.
#pragma once

#include <initializer_list>
#include <string>
#include <vector>

#include "common/mapped_read.h"
#include "common/status.h"
#include "common/thread_pool.h"
#include "model/finite_check.h"
#include "model/safetensors.h"
#include "model/weights.h"

namespace gossamer::model_bind {

inline std::string shape_str(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

inline std::string dtypes_str(std::initializer_list<DType> ds) {
  std::string s;
  for (DType d : ds) s += (s.empty() ? "" : "|") + std::string(dtype_name(d));
  return s;
}

// What a tensor's values must satisfy (a NaN / inf float or a NaN E8M0 scale is a corrupt
// checkpoint); MXFP4 blocks can hold no non-finite value.
enum class Values { kAny, kFinite, kScales };

// Looks tensors up in the store and checks dtype, shape and values (the large scans split over
// `pool`).
class Binder {
 public:
  Binder(const TensorStore& store, ThreadPool* pool) : store_(store), pool_(pool) {}

  Status bind(const std::string& name, std::initializer_list<DType> dtypes,
              const std::vector<int64_t>& shape, Values values, TensorRef* out) const {
    const std::string expect = dtypes_str(dtypes) + " " + shape_str(shape);
    if (!store_.contains(name)) {
      return NotFound("tensor '" + name + "' (expected " + expect + ") not found in " +
                      store_.describe());
    }
    GS_ASSIGN_OR_RETURN(TensorRef t, store_.get(name));
    bool dtype_ok = false;
    for (DType d : dtypes) dtype_ok = dtype_ok || d == t.dtype;
    if (!dtype_ok || t.shape != shape) {
      return InvalidArgument("tensor '" + name + "' in " + store_.file_of(name) + ": expected " +
                             expect + ", found " + dtype_name(t.dtype) + " " + shape_str(t.shape));
    }
    // Consumers read elements through typed pointers: require natural alignment (mmaps are
    // page-aligned, so this is the file offset's alignment).
    if (store_.offset_of(name) % dtype_size(t.dtype) != 0) {
      return Unsupported("tensor '" + name + "' in " + store_.file_of(name) + " starts at byte " +
                         "offset " + std::to_string(store_.offset_of(name)) + ", not aligned to " +
                         std::to_string(dtype_size(t.dtype)) + " bytes");
    }
    GS_RETURN_IF_ERROR(check_values(name, t, values));
    *out = std::move(t);
    return Status::Ok();
  }
  // A float matrix or vector: BF16 (every published gpt-oss checkpoint), or F16 / F32 (e.g.
  // save_pretrained of a float16 / float32 model). Consumers convert per row (cpu_ops) or
  // refuse non-BF16 with a message (the CUDA uploader).
  Status flt(const std::string& name, const std::vector<int64_t>& shape, TensorRef* out) const {
    return bind(name, {DType::kBF16, DType::kF16, DType::kF32}, shape, Values::kFinite, out);
  }
  // MXFP4 blocks (any byte) and E8M0 scales (any byte but 0xFF).
  Status blocks(const std::string& name, const std::vector<int64_t>& shape, TensorRef* out) const {
    return bind(name, {DType::kU8}, shape, Values::kAny, out);
  }
  Status scales(const std::string& name, const std::vector<int64_t>& shape, TensorRef* out) const {
    return bind(name, {DType::kU8}, shape, Values::kScales, out);
  }
  // An MXFP4 expert tensor [experts, rows, cols] as its blocks [.., cols / 32, 16] and scales
  // [.., cols / 32] (the layouts name them "<base>_blocks" or "<base>.blocks").
  Status mxfp4(const std::string& blocks_name, const std::string& scales_name, int64_t experts,
               int64_t rows, int64_t cols, ExpertMatrix* m) const {
    m->format = ExpertFormat::kMxfp4;
    m->rows = rows;
    m->cols = cols;
    if (cols % 32 != 0) {
      return InvalidArgument("tensor '" + blocks_name + "': MXFP4 needs an input size divisible " +
                             "by 32, config gives " + std::to_string(cols));
    }
    GS_RETURN_IF_ERROR(blocks(blocks_name, {experts, rows, cols / 32, 16}, &m->blocks));
    return scales(scales_name, {experts, rows, cols / 32}, &m->scales);
  }
  bool has(const std::string& name) const { return store_.contains(name); }
  const TensorStore& store() const { return store_; }

 private:
  Status check_values(const std::string& name, const TensorRef& t, Values values) const {
    if (values == Values::kAny) return Status::Ok();
    const bool scales = values == Values::kScales;
    const ValueScan r = scales ? first_nan_scale(t, pool_) : first_nonfinite(t, pool_);
    if (r.fault_byte >= 0) {
      return IoError("tensor '" + name + "' in " + store_.file_of(name) + ": " +
                     mapped_read_fault("reading byte offset " +
                                       std::to_string(store_.offset_of(name) + r.fault_byte) +
                                       " of the file"));
    }
    const int64_t i = r.first;
    if (i < 0) return Status::Ok();
    return nonfinite_error(name, store_.file_of(name), store_.offset_of(name), t, i,
                           scales ? "the E8M0 scale 0xFF (NaN)" : nonfinite_kind(t, i));
  }
  const TensorStore& store_;
  ThreadPool* pool_;
};

}  // namespace gossamer::model_bind

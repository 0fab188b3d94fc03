// Non-finite values in a checkpoint: a NaN or infinity in a bf16 / f16 / f32 tensor, or the E8M0
// scale byte 0xFF (NaN in the OCP MX spec), turns every logit downstream into garbage without any
// other symptom. The loader scans each bound tensor once and names the first bad element.
#pragma once

#include <cstdint>
#include <string>

#include "common/status.h"
#include "model/weights.h"

namespace gossamer {

class ThreadPool;  // common/thread_pool.h

// What a value scan found: the index of the first bad element (-1: none), or, when reading the
// tensor's (memory-mapped) data faulted because the file shrank after it was mapped, the byte of
// the data that faulted (common/mapped_read.h); the scan stops there.
struct ValueScan {
  int64_t first = -1;
  int64_t fault_byte = -1;
};

// The first non-finite element of a float tensor (bf16 / f16 / f32); none when every element is
// finite or the dtype is not a float type. With a pool, tensors of 16M elements and more are
// split over its threads; the answer is the same first index either way.
ValueScan first_nonfinite(const TensorRef& t, ThreadPool* pool = nullptr);

// The first E8M0 scale byte 0xFF in a u8 tensor.
ValueScan first_nan_scale(const TensorRef& t, ThreadPool* pool = nullptr);

// The error for element `index` of tensor `name` (in `file`, data at byte `offset` of it).
// `what` says what the element is ("NaN", "+inf", "E8M0 scale 0xFF (NaN)").
Status nonfinite_error(const std::string& name, const std::string& file, int64_t offset,
                       const TensorRef& t, int64_t index, const std::string& what);

// What element `index` of a float tensor holds: "NaN", "+inf" or "-inf".
std::string nonfinite_kind(const TensorRef& t, int64_t index);

}  // namespace gossamer

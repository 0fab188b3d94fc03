#include "model/finite_check.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>

#include "common/mapped_read.h"
#include "common/thread_pool.h"

namespace gossamer {
namespace {

// Exponent-all-ones masks: an element is NaN or +-inf exactly when (bits & mask) == mask.
constexpr uint16_t kBf16Exp = 0x7f80, kF16Exp = 0x7c00;
constexpr uint32_t kF32Exp = 0x7f800000u;

// Lane constants of a 64-bit word holding 64 / (8 sizeof U) elements: the lowest bit and the
// highest bit of every lane.
template <typename U>
constexpr uint64_t lanes(uint64_t v) {
  uint64_t r = 0;
  for (size_t i = 0; i < 8 / sizeof(U); ++i) r |= v << (8 * sizeof(U) * i);
  return r;
}

// Whether any lane of word w matches (lane & mask) == mask. x = (w & M) ^ M is zero exactly in
// the matching lanes, and its lanes' top bits are clear (the masks leave the sign bit out), so
// the classic "has a zero lane" test (x - low) & ~x & high is exact: a borrow only crosses into a
// lane from a lower lane that is zero, i.e. a match.
template <typename U>
bool word_has_match(uint64_t w, U mask) {
  constexpr uint64_t kLow = lanes<U>(1), kHigh = lanes<U>(uint64_t{1} << (8 * sizeof(U) - 1));
  const uint64_t m = lanes<U>(mask);
  const uint64_t x = (w & m) ^ m;
  return ((x - kLow) & ~x & kHigh) != 0;
}

// First index in [begin, end) with (p[i] & mask) == mask, else -1. Whole 64-bit words are tested
// 1 KiB at a time; a block with a match is searched element by element.
template <typename U>
int64_t scan_range(const U* p, int64_t begin, int64_t end, U mask) {
  constexpr int64_t kPerWord = 8 / sizeof(U), kBlock = 1024 / sizeof(U);
  for (int64_t b = begin; b < end; b += kBlock) {
    const int64_t e = std::min(end, b + kBlock);
    bool hit = false;
    int64_t i = b;
    for (; i + kPerWord <= e; i += kPerWord) {
      uint64_t w;
      std::memcpy(&w, p + i, 8);  // tensors are only dtype-aligned
      hit |= word_has_match<U>(w, mask);
    }
    for (; i < e; ++i) hit |= (p[i] & mask) == mask;
    if (!hit) continue;
    for (i = b; i < e; ++i) {
      if ((p[i] & mask) == mask) return i;
    }
  }
  return -1;
}

// Scale bytes: memchr.
int64_t scan_range(const uint8_t* p, int64_t begin, int64_t end, uint8_t mask) {
  const void* hit = std::memchr(p + begin, mask, static_cast<size_t>(end - begin));
  return hit ? static_cast<const uint8_t*>(hit) - p : -1;
}

// scan_range over [0, n); with a pool, tensors of kParallelMin elements and more are split over
// its threads. Each chunk finds its first hit and the smallest wins, so the result does not
// depend on timing. Every chunk's reads are guarded (common/mapped_read.h): a chunk that faults
// records the faulting byte, and the smallest fault wins the same way.
template <typename U>
ValueScan scan(const void* data, int64_t n, U mask, ThreadPool* pool) {
  constexpr int64_t kParallelMin = int64_t{1} << 24;
  const U* p = static_cast<const U*>(data);
  const int64_t bytes = n * static_cast<int64_t>(sizeof(U));
  std::atomic<int64_t> first{n}, fault{bytes};
  auto lower = [](std::atomic<int64_t>& a, int64_t v) {
    int64_t cur = a.load();
    while (v >= 0 && v < cur && !a.compare_exchange_weak(cur, v)) {
    }
  };
  auto chunk = [&](int64_t begin, int64_t end) {
    int64_t f = -1;
    const void* addr = nullptr;
    if (guarded_mapped_read([&] { f = scan_range(p, begin, end, mask); }, &addr)) {
      lower(first, f);
    } else {
      lower(fault, static_cast<const char*>(addr) - static_cast<const char*>(data));
    }
  };
  if (pool == nullptr || pool->size() == 1 || n < kParallelMin) {
    chunk(0, n);
  } else {
    pool->parallel_for(n, chunk);
  }
  if (fault.load() < bytes) return ValueScan{-1, fault.load()};
  return ValueScan{first.load() < n ? first.load() : -1, -1};
}

}  // namespace

ValueScan first_nonfinite(const TensorRef& t, ThreadPool* pool) {
  if (t.data == nullptr) return {};
  const int64_t n = t.numel();
  switch (t.dtype) {
    case DType::kBF16:
      return scan<uint16_t>(t.data, n, kBf16Exp, pool);
    case DType::kF16:
      return scan<uint16_t>(t.data, n, kF16Exp, pool);
    case DType::kF32:
      return scan<uint32_t>(t.data, n, kF32Exp, pool);
    default:
      return {};
  }
}

ValueScan first_nan_scale(const TensorRef& t, ThreadPool* pool) {
  if (t.data == nullptr || t.dtype != DType::kU8) return {};
  return scan<uint8_t>(t.data, t.numel(), 0xff, pool);
}

std::string nonfinite_kind(const TensorRef& t, int64_t index) {
  const float v = t.get(index);
  if (std::isnan(v)) return "NaN";
  return v > 0 ? "+inf" : "-inf";
}

Status nonfinite_error(const std::string& name, const std::string& file, int64_t offset,
                       const TensorRef& t, int64_t index, const std::string& what) {
  std::string where;
  int64_t rest = index;
  for (size_t d = t.shape.size(); d-- > 0;) {  // multi-index of `index`, innermost last
    const int64_t extent = std::max<int64_t>(t.shape[d], 1);
    where = std::to_string(rest % extent) + (where.empty() ? "" : ", ") + where;
    rest /= extent;
  }
  return Corrupt("tensor '" + name + "' in " + file + ": element [" + where + "] (byte offset " +
                 std::to_string(offset + index * dtype_size(t.dtype)) + " of the file) is " + what);
}

}  // namespace gossamer

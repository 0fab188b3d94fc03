// Open-addressing hash tables used on the tokenizer's hot path. Built once at load time and
// read-only afterwards (safe to share between threads).
#pragma once

#include <bit>
#include <climits>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

namespace gossamer::tok {

// The n < 8 bytes at p as a little-endian word, zero padded (no call to memcpy: at most two
// overlapping fixed-size loads inside [p, p + n)).
inline uint64_t load_short(const char* p, size_t n) {
  uint32_t lo, hi;
  if (n >= 4) {
    std::memcpy(&lo, p, 4);
    std::memcpy(&hi, p + n - 4, 4);
    return lo | (static_cast<uint64_t>(hi) << (8 * (n - 4)));
  }
  if (n == 0) return 0;
  const auto b = [&](size_t i) { return static_cast<uint64_t>(static_cast<uint8_t>(p[i])); };
  return b(0) | (b(n / 2) << (8 * (n / 2))) | (b(n - 1) << (8 * (n - 1)));
}

// The first min(n, 8) bytes of p as a little-endian word, zero padded.
inline uint64_t load_head(const char* p, size_t n) {
  if (n < 8) return load_short(p, n);
  uint64_t w;
  std::memcpy(&w, p, 8);
  return w;
}

// 64-bit hash of a byte string (multiply-xorshift over 8-byte words).
inline uint64_t hash_bytes(std::string_view s) {
  constexpr uint64_t kMul = 0x9E3779B97F4A7C15ull;
  uint64_t h = s.size() * kMul;
  size_t i = 0;
  for (; i + 8 <= s.size(); i += 8) {
    uint64_t w;
    std::memcpy(&w, s.data() + i, 8);
    h = (h ^ w) * kMul;
    h ^= h >> 29;
  }
  if (i < s.size()) {
    h = (h ^ load_short(s.data() + i, s.size() - i)) * kMul;
    h ^= h >> 29;
  }
  h *= kMul;
  return h ^ (h >> 32);
}

// One-hash presence filter over 64-bit hashes (a Bloom filter with k = 1, 4 bits per table
// slot, i.e. >= 8 per key): "absent" is certain, "maybe" is wrong for ~1/9 of absent keys.
// It answers most misses from a few hundred KB (L2) instead of the multi-MB table.
class PresenceFilter {
 public:
  void reset(size_t n_slots) {  // n_slots: a power of two >= 16
    bits_.assign(n_slots * 4 / 64, 0);
    shift_ = 64 - std::countr_zero(n_slots * 4);
  }
  void add(uint64_t h) {
    const uint64_t b = h >> shift_;
    bits_[b >> 6] |= uint64_t{1} << (b & 63);
  }
  bool maybe(uint64_t h) const {
    const uint64_t b = h >> shift_;
    return (bits_[b >> 6] >> (b & 63)) & 1;
  }

 private:
  std::vector<uint64_t> bits_;
  int shift_ = 64;
};

// Byte string -> id. 16-byte slots hold the key's first 8 bytes, so keys of up to 8 bytes
// (most tokens) are compared without touching the key arena.
class StringIdMap {
 public:
  // Returns false when the key was already present (the first id is kept).
  bool insert(std::string_view key, int32_t id);
  // -1 when absent.
  int32_t find(std::string_view key) const {
    if (slots_.empty()) return -1;
    const uint64_t h = hash_bytes(key);
    if (!filter_.maybe(h)) return -1;
    const uint64_t head = load_head(key.data(), key.size());
    for (size_t i = h & mask_;; i = (i + 1) & mask_) {
      const Slot& s = slots_[i];
      if (s.id < 0) return -1;
      if (s.head == head && s.len == key.size() &&
          (key.size() <= 8 ||
           std::memcmp(arena_.data() + offsets_[i] + 8, key.data() + 8, key.size() - 8) == 0)) {
        return s.id;
      }
    }
  }
  size_t size() const { return count_; }

 private:
  struct Slot {
    uint64_t head = 0;  // first 8 key bytes, zero padded
    int32_t id = -1;    // -1: empty
    uint32_t len = 0;
  };
  void grow();
  std::vector<Slot> slots_;
  std::vector<uint32_t> offsets_;  // [slots] key offset in arena_, read for keys > 8 bytes
  PresenceFilter filter_;
  std::string arena_;
  size_t mask_ = 0;
  size_t count_ = 0;
};

// (left id, right id) -> merge rank, in one 8-byte slot per entry: left (21 bits) | right
// (21 bits) | rank (21 bits); all ones marks an empty slot. Ids and ranks must be <= kMaxValue.
// (8-byte slots keep the o200k table at 4 MB, mostly in L2, instead of 8.)
class PairMap {
 public:
  static constexpr int kBits = 21;
  static constexpr int32_t kMaxValue = (1 << kBits) - 1;
  static constexpr int32_t kNoRank = INT32_MAX;  // find(): no such merge

  // Inserts or overwrites (a repeated pair keeps the last rank); returns false when the pair
  // was already present.
  bool insert_or_assign(int32_t left, int32_t right, int32_t rank);
  int32_t find(int32_t left, int32_t right) const {
    const uint64_t key = pack(left, right);
    return find_packed(key, mix(key));
  }
  // Same for key = pack(left, right), h = mix(key).
  int32_t find_packed(uint64_t key, uint64_t h) const {
    if (!filter_.maybe(h)) return kNoRank;
    for (size_t i = h & mask_;; i = (i + 1) & mask_) {
      const uint64_t s = slots_[i];
      if (s == kEmpty) return kNoRank;
      if ((s >> kBits) == key) return static_cast<int32_t>(s & kMaxValue);
    }
  }
  size_t size() const { return count_; }
  // Starts loading the slot of (left, right), so that a later find() misses the cache less.
  void prefetch(int32_t left, int32_t right) const {
    __builtin_prefetch(&slots_[mix(pack(left, right)) & mask_]);
  }

  static uint64_t pack(int32_t a, int32_t b) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << kBits) | static_cast<uint32_t>(b);
  }
  static uint64_t mix(uint64_t k) {
    k *= 0x9E3779B97F4A7C15ull;
    return k ^ (k >> 29);
  }

 private:
  static constexpr uint64_t kEmpty = ~uint64_t{0};
  void grow();
  std::vector<uint64_t> slots_ = std::vector<uint64_t>(16, kEmpty);
  PresenceFilter filter_ = [] {
    PresenceFilter f;
    f.reset(16);
    return f;
  }();
  size_t mask_ = 15;
  size_t count_ = 0;
};

}  // namespace gossamer::tok

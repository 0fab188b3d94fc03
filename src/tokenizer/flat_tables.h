// Open-addressing hash tables used on the tokenizer's hot path. Built once at load time and
// read-only afterwards (safe to share between threads).
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

namespace gossamer::tok {

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
    uint64_t w = 0;
    std::memcpy(&w, s.data() + i, s.size() - i);
    h = (h ^ w) * kMul;
    h ^= h >> 29;
  }
  h *= kMul;
  return h ^ (h >> 32);
}

// Byte string -> id. Keys are stored in one arena.
class StringIdMap {
 public:
  // Returns false when the key was already present (the first id is kept).
  bool insert(std::string_view key, int32_t id);
  // -1 when absent.
  int32_t find(std::string_view key) const {
    if (slots_.empty()) return -1;
    const uint64_t h = hash_bytes(key);
    for (size_t i = h & mask_;; i = (i + 1) & mask_) {
      const Slot& s = slots_[i];
      if (s.id < 0) return -1;
      if (s.hash == h && s.len == key.size() &&
          std::memcmp(arena_.data() + s.offset, key.data(), key.size()) == 0) {
        return s.id;
      }
    }
  }
  size_t size() const { return count_; }

 private:
  struct Slot {
    uint64_t hash = 0;
    uint32_t offset = 0;
    uint32_t len = 0;
    int32_t id = -1;
  };
  void grow();
  std::vector<Slot> slots_;
  std::string arena_;
  size_t mask_ = 0;
  size_t count_ = 0;
};

// (left id, right id) -> (merge rank, merged id).
class PairMap {
 public:
  struct Value {
    int32_t rank = -1;  // -1: no such merge
    int32_t merged = -1;
  };
  // Inserts or overwrites; returns false when the pair was already present.
  bool insert_or_assign(int32_t left, int32_t right, Value v);
  Value find(int32_t left, int32_t right) const {
    const uint64_t key = pack(left, right);
    for (size_t i = mix(key) & mask_;; i = (i + 1) & mask_) {
      const Slot& s = slots_[i];
      if (s.v.rank < 0) return {};
      if (s.key == key) return s.v;
    }
  }
  size_t size() const { return count_; }

 private:
  struct Slot {
    uint64_t key = 0;
    Value v;
  };
  static uint64_t pack(int32_t a, int32_t b) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
  }
  static uint64_t mix(uint64_t k) {
    k *= 0x9E3779B97F4A7C15ull;
    return k ^ (k >> 31);
  }
  void grow();
  std::vector<Slot> slots_ = std::vector<Slot>(16);
  size_t mask_ = 15;
  size_t count_ = 0;
};

}  // namespace gossamer::tok

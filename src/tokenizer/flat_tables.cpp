#include "tokenizer/flat_tables.h"

namespace gossamer::tok {

bool StringIdMap::insert(std::string_view key, int32_t id) {
  if ((count_ + 1) * 2 > slots_.size()) grow();
  if (find(key) >= 0) return false;
  const uint64_t h = hash_bytes(key);
  size_t i = h & mask_;
  while (slots_[i].id >= 0) i = (i + 1) & mask_;
  slots_[i] = Slot{h, static_cast<uint32_t>(arena_.size()), static_cast<uint32_t>(key.size()), id};
  arena_.append(key);
  ++count_;
  return true;
}

void StringIdMap::grow() {
  std::vector<Slot> old = std::move(slots_);
  const size_t cap = old.empty() ? 1024 : old.size() * 2;
  slots_.assign(cap, Slot{});
  mask_ = cap - 1;
  for (const Slot& s : old) {
    if (s.id < 0) continue;
    size_t i = s.hash & mask_;
    while (slots_[i].id >= 0) i = (i + 1) & mask_;
    slots_[i] = s;
  }
}

bool PairMap::insert_or_assign(int32_t left, int32_t right, Value v) {
  if ((count_ + 1) * 2 > slots_.size()) grow();
  const uint64_t key = pack(left, right);
  size_t i = mix(key) & mask_;
  for (; slots_[i].v.rank >= 0; i = (i + 1) & mask_) {
    if (slots_[i].key == key) {
      slots_[i].v = v;
      return false;
    }
  }
  slots_[i] = Slot{key, v};
  ++count_;
  return true;
}

void PairMap::grow() {
  std::vector<Slot> old = std::move(slots_);
  slots_.assign(old.size() * 2, Slot{});
  mask_ = slots_.size() - 1;
  for (const Slot& s : old) {
    if (s.v.rank < 0) continue;
    size_t i = mix(s.key) & mask_;
    while (slots_[i].v.rank >= 0) i = (i + 1) & mask_;
    slots_[i] = s;
  }
}

}  // namespace gossamer::tok

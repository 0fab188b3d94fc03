#include "tokenizer/flat_tables.h"

namespace gossamer::tok {

bool StringIdMap::insert(std::string_view key, int32_t id) {
  if ((count_ + 1) * 2 > slots_.size()) grow();
  if (find(key) >= 0) return false;
  const uint64_t h = hash_bytes(key);
  size_t i = h & mask_;
  while (slots_[i].id >= 0) i = (i + 1) & mask_;
  slots_[i] = Slot{load_head(key.data(), key.size()), id, static_cast<uint32_t>(key.size())};
  offsets_[i] = static_cast<uint32_t>(arena_.size());
  filter_.add(h);
  arena_.append(key);
  ++count_;
  return true;
}

void StringIdMap::grow() {
  std::vector<Slot> old = std::move(slots_);
  std::vector<uint32_t> old_offsets = std::move(offsets_);
  const size_t cap = old.empty() ? 1024 : old.size() * 2;
  slots_.assign(cap, Slot{});
  offsets_.assign(cap, 0);
  mask_ = cap - 1;
  filter_.reset(cap);
  for (size_t k = 0; k < old.size(); ++k) {
    if (old[k].id < 0) continue;
    const uint64_t h = hash_bytes(std::string_view(arena_).substr(old_offsets[k], old[k].len));
    filter_.add(h);
    size_t i = h & mask_;
    while (slots_[i].id >= 0) i = (i + 1) & mask_;
    slots_[i] = old[k];
    offsets_[i] = old_offsets[k];
  }
}

bool PairMap::insert_or_assign(int32_t left, int32_t right, int32_t rank) {
  if ((count_ + 1) * 2 > slots_.size()) grow();
  const uint64_t key = pack(left, right);
  const uint64_t slot = (key << kBits) | static_cast<uint32_t>(rank);
  filter_.add(mix(key));
  size_t i = mix(key) & mask_;
  for (; slots_[i] != kEmpty; i = (i + 1) & mask_) {
    if ((slots_[i] >> kBits) == key) {
      slots_[i] = slot;
      return false;
    }
  }
  slots_[i] = slot;
  ++count_;
  return true;
}

void PairMap::grow() {
  std::vector<uint64_t> old = std::move(slots_);
  slots_.assign(old.size() * 2, kEmpty);
  mask_ = slots_.size() - 1;
  filter_.reset(slots_.size());
  for (const uint64_t s : old) {
    if (s == kEmpty) continue;
    filter_.add(mix(s >> kBits));
    size_t i = mix(s >> kBits) & mask_;
    while (slots_[i] != kEmpty) i = (i + 1) & mask_;
    slots_[i] = s;
  }
}

}  // namespace gossamer::tok

#include "tokenizer/bpe.h"

#include <algorithm>
#include <cstring>
#include <functional>

namespace gossamer::tok {

Result<BpeModel> BpeModel::build(const std::vector<std::pair<std::string, int32_t>>& vocab,
                                 const std::vector<std::pair<std::string, std::string>>& merges,
                                 bool ignore_merges) {
  BpeModel m;
  m.ignore_merges_ = ignore_merges;
  int32_t max_id = -1;
  for (const auto& [bytes, id] : vocab) {
    if (id < 0) return Corrupt("model.vocab: negative id " + std::to_string(id));
    max_id = std::max(max_id, id);
  }
  // Before anything is sized by max_id: a stray huge id must not allocate gigabytes.
  if (max_id >= PairMap::kMaxValue || merges.size() >= static_cast<size_t>(PairMap::kMaxValue)) {
    return Unsupported("model: more than " + std::to_string(PairMap::kMaxValue - 1) +
                       " tokens or merges");
  }
  std::vector<std::string_view> by_id(static_cast<size_t>(max_id + 1));
  m.present_.assign(static_cast<size_t>(max_id + 1), false);
  for (const auto& [bytes, id] : vocab) {
    if (m.present_[id]) return Corrupt("model.vocab: id " + std::to_string(id) + " used twice");
    if (bytes.empty()) return Corrupt("model.vocab: id " + std::to_string(id) + " is empty");
    if (!m.by_bytes_.insert(bytes, id)) {
      return Corrupt("model.vocab: id " + std::to_string(id) + " duplicates the bytes of another");
    }
    m.present_[id] = true;
    by_id[id] = bytes;
  }
  m.offsets_.reserve(by_id.size() + 1);
  for (std::string_view b : by_id) {
    m.offsets_.push_back(static_cast<uint32_t>(m.arena_.size()));
    m.arena_.append(b);
  }
  m.offsets_.push_back(static_cast<uint32_t>(m.arena_.size()));
  for (int b = 0; b < 256; ++b) {
    const char c = static_cast<char>(b);
    m.byte_ids_[b] = m.by_bytes_.find(std::string_view(&c, 1));
    if (m.byte_ids_[b] < 0) {
      return Unsupported("model.vocab: no token for the single byte " + std::to_string(b) +
                         " (byte-level BPE needs all 256)");
    }
  }
  m.merged_.reserve(merges.size());
  for (size_t r = 0; r < merges.size(); ++r) {
    const auto& [l, rt] = merges[r];
    const int32_t a = m.by_bytes_.find(l), b = m.by_bytes_.find(rt);
    const int32_t c = m.by_bytes_.find(l + rt);
    if (a < 0 || b < 0 || c < 0) {
      return Corrupt("model.merges[" + std::to_string(r) + "]: " +
                     (a < 0   ? "left part"
                      : b < 0 ? "right part"
                              : "merged result") +
                     " is not in the vocab");
    }
    // Like HF tokenizers, a repeated pair keeps its last rank.
    m.merges_.insert_or_assign(a, b, static_cast<int32_t>(r));
    m.merged_.push_back(c);
  }
  m.byte_pair_rank_.resize(256 * 256);
  for (int a = 0; a < 256; ++a) {
    for (int b = 0; b < 256; ++b) {
      m.byte_pair_rank_[(a << 8) | b] = m.pair_rank(m.byte_ids_[a], m.byte_ids_[b]);
    }
  }
  return m;
}

void BpeModel::encode_piece(std::string_view piece, std::vector<int32_t>* out) const {
  if (piece.size() == 1) {
    out->push_back(byte_ids_[static_cast<uint8_t>(piece[0])]);
    return;
  }
  if (ignore_merges_) {
    const int32_t id = by_bytes_.find(piece);
    if (id >= 0) {
      out->push_back(id);
      return;
    }
  }
  merge_piece(piece, out);
}

void BpeModel::merge_piece(std::string_view piece, std::vector<int32_t>* out) const {
  const size_t n = piece.size();
  const auto* bytes = reinterpret_cast<const uint8_t*>(piece.data());
  if (n <= kQuadraticMax) {
    int32_t syms[kQuadraticMax], ranks[kQuadraticMax];
    for (size_t i = 0; i < n; ++i) syms[i] = byte_ids_[bytes[i]];
    for (size_t i = 0; i + 1 < n; ++i) ranks[i] = byte_pair_rank(bytes[i], bytes[i + 1]);
    const size_t k = merge_small(syms, ranks, n);
    out->insert(out->end(), syms, syms + k);
    return;
  }
  std::vector<int32_t> syms(n), ranks(n - 1);
  for (size_t i = 0; i < n; ++i) syms[i] = byte_ids_[bytes[i]];
  for (size_t i = 0; i + 1 < n; ++i) ranks[i] = byte_pair_rank(bytes[i], bytes[i + 1]);
  merge_large(&syms, &ranks);
  out->insert(out->end(), syms.begin(), syms.end());
}

namespace {

// The first n (1..16) bytes of p as two little-endian words, zero padded. Reads 16 bytes at
// once when [p, limit) has them.
inline void load_key(const char* p, size_t n, const char* limit, uint64_t* k0, uint64_t* k1) {
  uint64_t w0 = 0, w1 = 0;
  if (limit - p >= 16) {
    std::memcpy(&w0, p, 8);
    std::memcpy(&w1, p + 8, 8);
  } else {
    char buf[16] = {};
    std::memcpy(buf, p, n);
    std::memcpy(&w0, buf, 8);
    std::memcpy(&w1, buf + 8, 8);
  }
  const auto mask = [](size_t bytes) {
    return bytes >= 8 ? ~uint64_t{0} : (uint64_t{1} << (8 * bytes)) - 1;
  };
  *k0 = w0 & mask(n);
  *k1 = n > 8 ? (w1 & mask(n - 8)) : 0;
}

}  // namespace

void BpeModel::encode_piece(std::string_view piece, const char* limit, std::vector<int32_t>* out,
                            PieceCache* cache) const {
  const size_t n = piece.size();
  if (n == 1) {
    out->push_back(byte_ids_[static_cast<uint8_t>(piece[0])]);
    return;
  }
  if (cache->ids_.size() > PieceCache::kMaxIds) {
    cache->ids_.clear();
    for (auto& s : cache->short_) s = PieceCache::ShortSlot{};
    for (auto& s : cache->long_) s = PieceCache::LongSlot{};
  }
  if (n <= PieceCache::kShortMax) {
    uint64_t k0, k1;
    load_key(piece.data(), n, limit, &k0, &k1);
    uint64_t h = (k0 ^ (k1 * 0xC2B2AE3D27D4EB4Full) ^ n) * 0x9E3779B97F4A7C15ull;
    PieceCache::ShortSlot& slot = cache->short_[h >> (64 - cache->short_bits_)];
    if (slot.len == n && slot.k0 == k0 && slot.k1 == k1) {
      if (slot.n <= PieceCache::kInlineIds) {
        out->insert(out->end(), slot.ids, slot.ids + slot.n);
      } else {
        const auto it = cache->ids_.begin() + slot.ids[0];
        out->insert(out->end(), it, it + slot.n);
      }
      return;
    }
    const size_t before = out->size();
    encode_piece(piece, out);
    slot.k0 = k0, slot.k1 = k1, slot.len = static_cast<uint32_t>(n);
    slot.n = static_cast<uint32_t>(out->size() - before);
    if (slot.n <= PieceCache::kInlineIds) {
      std::copy(out->begin() + static_cast<ptrdiff_t>(before), out->end(), slot.ids);
    } else {
      slot.ids[0] = static_cast<int32_t>(cache->ids_.size());
      cache->ids_.insert(cache->ids_.end(), out->begin() + static_cast<ptrdiff_t>(before),
                         out->end());
    }
    return;
  }
  PieceCache::LongSlot& slot = cache->long_[hash_bytes(piece) & (cache->long_.size() - 1)];
  if (slot.len == n && std::memcmp(slot.ptr, piece.data(), n) == 0) {
    out->insert(out->end(), cache->ids_.begin() + slot.off,
                cache->ids_.begin() + slot.off + slot.n);
    return;
  }
  const size_t before = out->size();
  encode_piece(piece, out);
  slot = PieceCache::LongSlot{piece.data(), static_cast<uint32_t>(n),
                              static_cast<uint32_t>(cache->ids_.size()),
                              static_cast<uint32_t>(out->size() - before)};
  cache->ids_.insert(cache->ids_.end(), out->begin() + static_cast<ptrdiff_t>(before), out->end());
}

size_t BpeModel::merge_small(int32_t* s, int32_t* r, size_t n) const {
  while (n > 1) {
    size_t best = 0;
    int32_t best_rank = r[0];
    for (size_t i = 1; i + 1 < n; ++i) {  // branch-free argmin (ranks are unpredictable)
      const bool lower = r[i] < best_rank;
      best = lower ? i : best;
      best_rank = lower ? r[i] : best_rank;
    }
    if (best_rank == PairMap::kNoRank) break;
    s[best] = merged_[r[best]];
    // Remove symbol best+1 and pair best+1 (the pairs at best-1 and best are recomputed).
    std::memmove(s + best + 1, s + best + 2, (n - best - 2) * sizeof(int32_t));
    if (n >= best + 3) std::memmove(r + best + 1, r + best + 2, (n - best - 3) * sizeof(int32_t));
    --n;
    // Both lookups usually miss the CPU cache: start both loads before waiting on either.
    if (best > 0) merges_.prefetch(s[best - 1], s[best]);
    if (best + 1 < n) merges_.prefetch(s[best], s[best + 1]);
    if (best > 0) r[best - 1] = pair_rank(s[best - 1], s[best]);
    if (best + 1 < n) r[best] = pair_rank(s[best], s[best + 1]);
  }
  return n;
}

void BpeModel::merge_quadratic(std::vector<int32_t>* syms) const {
  if (syms->size() > kQuadraticMax) return merge_heap(syms);
  std::vector<int32_t>& s = *syms;
  int32_t r[kQuadraticMax];
  for (size_t i = 0; i + 1 < s.size(); ++i) r[i] = pair_rank(s[i], s[i + 1]);
  s.resize(merge_small(s.data(), r, s.size()));
}

void BpeModel::merge_heap(std::vector<int32_t>* syms) const {
  std::vector<int32_t>& s = *syms;
  if (s.size() < 2) return;
  std::vector<int32_t> r(s.size() - 1);
  for (size_t i = 0; i + 1 < s.size(); ++i) r[i] = pair_rank(s[i], s[i + 1]);
  merge_large(syms, &r);
}

void BpeModel::merge_large(std::vector<int32_t>* syms_ptr, std::vector<int32_t>* ranks) const {
  std::vector<int32_t>& s = *syms_ptr;
  const size_t n = s.size();
  if (n < 2) return;
  // Doubly linked list over symbol slots; rank[i]: rank of the pair starting at live slot i
  // (kNoRank: none, or slot i merged away). Heap entries whose rank no longer matches are stale.
  std::vector<int32_t>& rank = *ranks;
  rank.resize(n, PairMap::kNoRank);
  std::vector<int32_t> prev(n), next(n);
  for (size_t i = 0; i < n; ++i) {
    prev[i] = static_cast<int32_t>(i) - 1;
    next[i] = i + 1 < n ? static_cast<int32_t>(i + 1) : -1;
  }
  struct Cand {
    int32_t rank, pos;
    bool operator>(const Cand& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
  };
  std::vector<Cand> heap;
  heap.reserve(n);
  for (size_t i = 0; i + 1 < n; ++i) {
    if (rank[i] != PairMap::kNoRank) heap.push_back({rank[i], static_cast<int32_t>(i)});
  }
  const auto greater = std::greater<Cand>();
  std::make_heap(heap.begin(), heap.end(), greater);
  const auto update = [&](int32_t pos) {
    if (pos < 0) return;
    rank[pos] = next[pos] < 0 ? PairMap::kNoRank : pair_rank(s[pos], s[next[pos]]);
    if (rank[pos] != PairMap::kNoRank) {
      heap.push_back({rank[pos], pos});
      std::push_heap(heap.begin(), heap.end(), greater);
    }
  };
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), greater);
    const Cand c = heap.back();
    heap.pop_back();
    if (rank[c.pos] != c.rank) continue;  // stale entry
    const int32_t right = next[c.pos];
    s[c.pos] = merged_[c.rank];
    rank[right] = PairMap::kNoRank;
    next[c.pos] = next[right];
    if (next[right] >= 0) prev[next[right]] = c.pos;
    next[right] = -2;  // merged away
    if (prev[c.pos] >= 0) merges_.prefetch(s[prev[c.pos]], s[c.pos]);
    if (next[c.pos] >= 0) merges_.prefetch(s[c.pos], s[next[c.pos]]);
    update(prev[c.pos]);
    update(c.pos);
  }
  size_t w = 0;
  for (size_t i = 0; i < n; ++i) {
    if (next[i] != -2) s[w++] = s[i];
  }
  s.resize(w);
}

}  // namespace gossamer::tok

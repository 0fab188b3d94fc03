#include "tokenizer/bpe.h"

#include <algorithm>
#include <climits>
#include <cstring>
#include <queue>

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
    m.merges_.insert_or_assign(a, b, {static_cast<int32_t>(r), c});
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
  if (piece.size() <= kQuadraticMax) {
    int32_t syms[kQuadraticMax];
    for (size_t i = 0; i < piece.size(); ++i) syms[i] = byte_ids_[static_cast<uint8_t>(piece[i])];
    const size_t n = merge_small(syms, piece.size());
    out->insert(out->end(), syms, syms + n);
    return;
  }
  std::vector<int32_t> syms(piece.size());
  for (size_t i = 0; i < piece.size(); ++i) syms[i] = byte_ids_[static_cast<uint8_t>(piece[i])];
  merge_heap(&syms);
  out->insert(out->end(), syms.begin(), syms.end());
}

void BpeModel::encode_piece(std::string_view piece, std::vector<int32_t>* out,
                            PieceCache* cache) const {
  if (piece.size() == 1) {
    out->push_back(byte_ids_[static_cast<uint8_t>(piece[0])]);
    return;
  }
  PieceCache::Slot& slot = cache->slots_[hash_bytes(piece) & (PieceCache::kSlots - 1)];
  if (slot.len == piece.size() && std::memcmp(slot.ptr, piece.data(), piece.size()) == 0) {
    out->insert(out->end(), cache->ids_.begin() + slot.off,
                cache->ids_.begin() + slot.off + slot.n);
    return;
  }
  const size_t before = out->size();
  encode_piece(piece, out);
  if (cache->ids_.size() > PieceCache::kMaxIds) {
    cache->ids_.clear();
    for (PieceCache::Slot& s : cache->slots_) s = PieceCache::Slot{};
  }
  slot = PieceCache::Slot{piece.data(), static_cast<uint32_t>(piece.size()),
                          static_cast<uint32_t>(cache->ids_.size()),
                          static_cast<uint32_t>(out->size() - before)};
  cache->ids_.insert(cache->ids_.end(), out->begin() + static_cast<ptrdiff_t>(before), out->end());
}

size_t BpeModel::merge_small(int32_t* s, size_t n) const {
  if (n < 2) return n;
  // rank[i], merged[i]: the merge of the pair (s[i], s[i+1]); INT_MAX when none.
  int32_t rank[kQuadraticMax], merged[kQuadraticMax];
  const auto lookup = [&](size_t i) {
    const PairMap::Value v = merges_.find(s[i], s[i + 1]);
    rank[i] = v.rank < 0 ? INT_MAX : v.rank;
    merged[i] = v.merged;
  };
  for (size_t i = 0; i + 1 < n; ++i) lookup(i);
  while (n > 1) {
    size_t best = 0;
    for (size_t i = 1; i + 1 < n; ++i) {
      if (rank[i] < rank[best]) best = i;
    }
    if (rank[best] == INT_MAX) break;
    s[best] = merged[best];
    // Remove symbol best+1 and pair best+1 (the pair at best is recomputed below).
    for (size_t i = best + 1; i + 1 < n; ++i) s[i] = s[i + 1];
    for (size_t i = best + 1; i + 2 < n; ++i) rank[i] = rank[i + 1], merged[i] = merged[i + 1];
    --n;
    if (best > 0) lookup(best - 1);
    if (best + 1 < n) lookup(best);
  }
  return n;
}

void BpeModel::merge_quadratic(std::vector<int32_t>* syms) const {
  if (syms->size() > kQuadraticMax) return merge_heap(syms);
  syms->resize(merge_small(syms->data(), syms->size()));
}

void BpeModel::merge_heap(std::vector<int32_t>* syms_ptr) const {
  std::vector<int32_t>& s = *syms_ptr;
  const size_t n = s.size();
  if (n < 2) return;
  // Doubly linked list over symbol slots; a merged-away slot gets alive = false.
  std::vector<int32_t> prev(n), next(n);
  std::vector<bool> alive(n, true);
  for (size_t i = 0; i < n; ++i) {
    prev[i] = static_cast<int32_t>(i) - 1;
    next[i] = i + 1 < n ? static_cast<int32_t>(i + 1) : -1;
  }
  struct Cand {
    int32_t rank, pos, merged;
    bool operator>(const Cand& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
  };
  std::priority_queue<Cand, std::vector<Cand>, std::greater<Cand>> heap;
  const auto push = [&](int32_t pos) {
    if (pos < 0 || next[pos] < 0) return;
    const PairMap::Value v = merges_.find(s[pos], s[next[pos]]);
    if (v.rank >= 0) heap.push({v.rank, pos, v.merged});
  };
  for (size_t i = 0; i + 1 < n; ++i) push(static_cast<int32_t>(i));
  while (!heap.empty()) {
    const Cand c = heap.top();
    heap.pop();
    if (!alive[c.pos] || next[c.pos] < 0) continue;
    const int32_t r = next[c.pos];
    const PairMap::Value v = merges_.find(s[c.pos], s[r]);
    if (v.rank != c.rank || v.merged != c.merged) continue;  // stale entry
    s[c.pos] = c.merged;
    alive[r] = false;
    next[c.pos] = next[r];
    if (next[r] >= 0) prev[next[r]] = c.pos;
    push(prev[c.pos]);
    push(c.pos);
  }
  size_t w = 0;
  for (size_t i = 0; i < n; ++i) {
    if (alive[i]) s[w++] = s[i];
  }
  s.resize(w);
}

}  // namespace gossamer::tok

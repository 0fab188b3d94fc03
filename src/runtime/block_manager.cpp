#include "runtime/block_manager.h"

#include <algorithm>
#include <cassert>

namespace gossamer {

namespace {

uint64_t mix64(uint64_t x) {  // splitmix64 finaliser
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  x ^= x >> 31;
  return x;
}

int64_t ceil_div(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}

}  // namespace

uint64_t hash_block(uint64_t parent, std::span<const int32_t> tokens) {
  uint64_t h = mix64(parent ^ 0x9e3779b97f4a7c15ULL);
  for (int32_t t : tokens) h = mix64(h ^ (static_cast<uint64_t>(static_cast<uint32_t>(t)) + 1));
  return mix64(h ^ static_cast<uint64_t>(tokens.size()));
}

// ---- BlockPool ----------------------------------------------------------------------------

BlockPool::BlockPool(int64_t num_blocks) : blocks_(static_cast<size_t>(num_blocks)) {
  free_.reserve(blocks_.size());
  for (int64_t b = num_blocks - 1; b >= 0; --b) free_.push_back(static_cast<int32_t>(b));
}

std::optional<int32_t> BlockPool::allocate() {
  int32_t b;
  if (!free_.empty()) {
    b = free_.back();
    free_.pop_back();
  } else if (!lru_.empty()) {
    b = lru_.front();
    lru_.pop_front();
    Block& blk = blocks_[b];
    auto it = by_hash_.find(blk.hash);
    if (it != by_hash_.end() && it->second == b) by_hash_.erase(it);
    blk.cached = false;
    blk.tokens.clear();
  } else {
    return std::nullopt;
  }
  blocks_[b].ref = 1;
  return b;
}

void BlockPool::retain(int32_t b) {
  Block& blk = blocks_[b];
  if (blk.ref == 0) {
    assert(blk.cached && "retain of a free, uncached block");
    lru_.erase(blk.lru_it);
  }
  ++blk.ref;
}

void BlockPool::release(int32_t b) {
  Block& blk = blocks_[b];
  assert(blk.ref > 0);
  if (--blk.ref > 0) return;
  if (blk.cached) {
    lru_.push_back(b);
    blk.lru_it = std::prev(lru_.end());
  } else {
    free_.push_back(b);
  }
}

std::optional<int32_t> BlockPool::lookup(uint64_t hash, std::span<const int32_t> tokens) const {
  auto it = by_hash_.find(hash);
  if (it == by_hash_.end()) return std::nullopt;
  const Block& blk = blocks_[it->second];
  if (!std::equal(tokens.begin(), tokens.end(), blk.tokens.begin(), blk.tokens.end())) {
    return std::nullopt;  // hash collision: treat as a miss
  }
  return it->second;
}

void BlockPool::register_block(int32_t b, uint64_t hash, std::span<const int32_t> tokens) {
  Block& blk = blocks_[b];
  if (blk.cached || by_hash_.count(hash) != 0) return;
  blk.cached = true;
  blk.hash = hash;
  blk.tokens.assign(tokens.begin(), tokens.end());
  by_hash_.emplace(hash, b);
}

// ---- KvBlockManager -----------------------------------------------------------------------

KvBlockManager::KvBlockManager(const KvCacheSpec& spec, int64_t sliding_window, bool prefix_caching)
    : bs_(spec.block_size),
      window_(sliding_window),
      prefix_caching_(prefix_caching),
      full_(spec.num_blocks_full),
      sliding_(spec.num_blocks_sliding) {}

int64_t KvBlockManager::full_blocks_needed(int64_t tokens) const {
  return has_full() ? ceil_div(tokens, bs_) : 0;
}

int64_t KvBlockManager::sliding_blocks_needed(int64_t tokens, int64_t chunk) const {
  if (!has_sliding()) return 0;
  return std::min(ceil_div(tokens, bs_), (window_ + chunk) / bs_ + 2);
}

bool KvBlockManager::sliding_prefix_cached(std::span<const int32_t> tokens,
                                           std::span<const uint64_t> hashes,
                                           int64_t nblocks) const {
  if (!has_sliding()) return true;
  for (int64_t b = window_start(nblocks * bs_) / bs_; b < nblocks; ++b) {
    if (!sliding_.lookup(hashes[b], tokens.subspan(b * bs_, bs_))) return false;
  }
  return true;
}

int64_t KvBlockManager::acquire_cached_prefix(std::span<const int32_t> tokens, SeqBlocks* seq) {
  assert(seq->full.empty() && seq->sliding.empty());
  if (!prefix_caching_ || tokens.empty()) return 0;
  prefix_queries_ += static_cast<int64_t>(tokens.size());
  const int64_t max_blocks = (static_cast<int64_t>(tokens.size()) - 1) / bs_;
  std::vector<uint64_t> hashes;
  std::vector<int32_t> full_hits;
  uint64_t parent = 0;
  for (int64_t b = 0; b < max_blocks; ++b) {
    auto blk = tokens.subspan(b * bs_, bs_);
    parent = hash_block(parent, blk);
    if (has_full()) {
      auto hit = full_.lookup(parent, blk);
      if (!hit) break;
      full_hits.push_back(*hit);
    }
    hashes.push_back(parent);
  }
  int64_t n = static_cast<int64_t>(hashes.size());
  while (n > 0 && !sliding_prefix_cached(tokens, hashes, n)) --n;
  if (n == 0) return 0;
  for (int64_t b = 0; b < n; ++b) {
    if (has_full()) {
      full_.retain(full_hits[b]);
      seq->full.push_back(full_hits[b]);
    }
    if (has_sliding()) {
      int32_t id = kNoBlock;
      if (b >= window_start(n * bs_) / bs_) {
        id = *sliding_.lookup(hashes[b], tokens.subspan(b * bs_, bs_));
        sliding_.retain(id);
      }
      seq->sliding.push_back(id);
    }
  }
  hashes.resize(n);
  seq->hashes = std::move(hashes);
  seq->num_registered = n;
  prefix_hits_ += n * bs_;
  return n * bs_;
}

bool KvBlockManager::allocate(SeqBlocks* seq, int64_t begin, int64_t end) {
  const int64_t nblocks = ceil_div(end, bs_);
  int64_t need_full = 0, need_sliding = 0;
  if (has_full()) need_full = std::max<int64_t>(0, nblocks - (int64_t)seq->full.size());
  const int64_t first_live = window_start(begin) / bs_;
  if (has_sliding()) {
    for (int64_t b = first_live; b < nblocks; ++b) {
      if (b >= (int64_t)seq->sliding.size() || seq->sliding[b] == kNoBlock) ++need_sliding;
    }
  }
  if (need_full > full_.num_free() || need_sliding > sliding_.num_free()) return false;
  if (has_full()) {
    while ((int64_t)seq->full.size() < nblocks) seq->full.push_back(*full_.allocate());
  }
  if (has_sliding()) {
    if ((int64_t)seq->sliding.size() < nblocks) seq->sliding.resize(nblocks, kNoBlock);
    for (int64_t b = first_live; b < nblocks; ++b) {
      if (seq->sliding[b] == kNoBlock) seq->sliding[b] = *sliding_.allocate();
    }
  }
  return true;
}

void KvBlockManager::on_computed(SeqBlocks* seq, std::span<const int32_t> tokens,
                                 int64_t num_computed) {
  const int64_t nfull = num_computed / bs_;
  for (int64_t b = (int64_t)seq->hashes.size(); b < nfull; ++b) {
    uint64_t parent = b == 0 ? 0 : seq->hashes[b - 1];
    seq->hashes.push_back(hash_block(parent, tokens.subspan(b * bs_, bs_)));
  }
  if (prefix_caching_) {
    for (int64_t b = seq->num_registered; b < nfull; ++b) {
      auto blk = tokens.subspan(b * bs_, bs_);
      if (has_full()) full_.register_block(seq->full[b], seq->hashes[b], blk);
      if (has_sliding() && seq->sliding[b] != kNoBlock) {
        sliding_.register_block(seq->sliding[b], seq->hashes[b], blk);
      }
    }
  }
  seq->num_registered = std::max(seq->num_registered, nfull);
  if (has_sliding()) {
    const int64_t dead =
        std::min<int64_t>(window_start(num_computed) / bs_, (int64_t)seq->sliding.size());
    for (int64_t b = 0; b < dead; ++b) {
      if (seq->sliding[b] != kNoBlock) {
        sliding_.release(seq->sliding[b]);
        seq->sliding[b] = kNoBlock;
      }
    }
  }
}

void KvBlockManager::free(SeqBlocks* seq) {
  for (int32_t b : seq->full) full_.release(b);
  for (int32_t b : seq->sliding) {
    if (b != kNoBlock) sliding_.release(b);
  }
  *seq = SeqBlocks{};
}

BlockManagerStats KvBlockManager::stats() const {
  BlockManagerStats s;
  s.full_total = full_.num_blocks();
  s.full_used = full_.num_blocks() - full_.num_free();
  s.sliding_total = sliding_.num_blocks();
  s.sliding_used = sliding_.num_blocks() - sliding_.num_free();
  s.prefix_queries = prefix_queries_;
  s.prefix_hits = prefix_hits_;
  return s;
}

}  // namespace gossamer

// Paged KV block manager with prefix caching (vLLM style), for the two pools of model_runner.h.
//
// A BlockPool hands out physical block ids with reference counts. A *full* block (all
// block_size slots computed) may be registered in the prefix cache under the hash of its tokens
// and of every token before it (a chain hash: h_i = H(h_{i-1}, tokens of block i)). Cached
// blocks whose refcount drops to 0 are kept in an LRU list and are reused by a later request with
// the same prefix, or evicted (oldest first) when a fresh block is needed.
//
// KvBlockManager keeps one sequence's block tables (SeqBlocks) for the full-attention pool and
// the sliding-window pool. Sliding-window entries for blocks that fell out of the window are
// released (kNoBlock in the table). A prefix-cache hit needs every full-pool block of the prefix
// and the sliding-pool blocks that the next token's window still covers.
#pragma once

#include <cstdint>
#include <list>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

#include "engine/model_runner.h"

namespace gossamer {

// Chain hash of one block: parent hash + the block's tokens.
uint64_t hash_block(uint64_t parent, std::span<const int32_t> tokens);

class BlockPool {
 public:
  explicit BlockPool(int64_t num_blocks);

  int64_t num_blocks() const { return static_cast<int64_t>(blocks_.size()); }
  // Blocks with refcount 0 (uncached free + evictable cached).
  int64_t num_free() const { return static_cast<int64_t>(free_.size() + lru_.size()); }
  int64_t num_cached() const { return static_cast<int64_t>(by_hash_.size()); }
  int32_t refcount(int32_t b) const { return blocks_[b].ref; }

  // A block with refcount 1: an uncached free block, else the least recently used cached one
  // (dropped from the cache). nullopt when every block is in use.
  std::optional<int32_t> allocate();
  // Takes another reference to a block (a cached block with refcount 0 leaves the LRU list).
  void retain(int32_t b);
  // Drops a reference; at 0 a cached block goes to the LRU tail, others to the free list.
  void release(int32_t b);

  // The cached block with this hash whose tokens equal `tokens` (collision-safe), if any.
  std::optional<int32_t> lookup(uint64_t hash, std::span<const int32_t> tokens) const;
  // Registers an in-use full block under `hash`. No-op if the hash is already cached (another
  // block holds the same content) or this block is already registered.
  void register_block(int32_t b, uint64_t hash, std::span<const int32_t> tokens);

 private:
  struct Block {
    int32_t ref = 0;
    bool cached = false;
    uint64_t hash = 0;
    std::vector<int32_t> tokens;          // content, for collision checks (cached only)
    std::list<int32_t>::iterator lru_it;  // valid when cached && ref == 0
  };
  std::vector<Block> blocks_;
  std::vector<int32_t> free_;  // uncached, refcount 0 (used as a stack)
  std::list<int32_t> lru_;     // cached, refcount 0, least recently used first
  std::unordered_map<uint64_t, int32_t> by_hash_;
};

// One sequence's block tables. full[i] / sliding[i] hold logical block i.
struct SeqBlocks {
  std::vector<int32_t> full;
  std::vector<int32_t> sliding;
  std::vector<uint64_t> hashes;  // chain hashes of the full blocks computed so far
  int64_t num_registered = 0;    // leading blocks registered (or found) in the prefix cache
};

struct BlockManagerStats {
  int64_t full_total = 0, full_used = 0, sliding_total = 0, sliding_used = 0;
  int64_t prefix_queries = 0;  // prompt tokens looked up
  int64_t prefix_hits = 0;     // prompt tokens found
};

class KvBlockManager {
 public:
  // sliding_window: tokens kept by sliding layers (0 when the model has none).
  KvBlockManager(const KvCacheSpec& spec, int64_t sliding_window, bool prefix_caching);

  int64_t block_size() const { return bs_; }
  bool has_full() const { return full_.num_blocks() > 0; }
  bool has_sliding() const { return sliding_.num_blocks() > 0; }
  // Blocks one sequence of `tokens` tokens needs at most in each pool, with steps of at most
  // `chunk` new tokens. Used for admission: a request that can never fit is rejected up front.
  int64_t full_blocks_needed(int64_t tokens) const;
  int64_t sliding_blocks_needed(int64_t tokens, int64_t chunk) const;
  const BlockPool& full_pool() const { return full_; }
  const BlockPool& sliding_pool() const { return sliding_; }

  // For a new (empty) sequence: finds the longest cached prefix of `tokens` (whole blocks,
  // always leaving at least one token to compute), takes references on its blocks and returns
  // the number of tokens it covers.
  int64_t acquire_cached_prefix(std::span<const int32_t> tokens, SeqBlocks* seq);
  // Makes the tables cover positions [0, end) for a step computing [begin, end): allocates the
  // missing blocks (sliding ones only inside the window of [begin, end)). Returns false and
  // changes nothing when a pool lacks free blocks.
  bool allocate(SeqBlocks* seq, int64_t begin, int64_t end);
  // After the KV of tokens[0, num_computed) is in the cache: registers newly full blocks in the
  // prefix cache and releases sliding blocks that no later query can attend to.
  void on_computed(SeqBlocks* seq, std::span<const int32_t> tokens, int64_t num_computed);
  // Releases every block of the sequence (cached ones stay reusable until evicted).
  void free(SeqBlocks* seq);

  BlockManagerStats stats() const;

 private:
  // First position a query at >= `pos` may attend to in sliding layers.
  int64_t window_start(int64_t pos) const { return pos - window_ < 0 ? 0 : pos - window_; }
  bool sliding_prefix_cached(std::span<const int32_t> tokens, std::span<const uint64_t> hashes,
                             int64_t nblocks) const;

  int64_t bs_;
  int64_t window_;
  bool prefix_caching_;
  BlockPool full_;
  BlockPool sliding_;
  int64_t prefix_queries_ = 0;
  int64_t prefix_hits_ = 0;
};

}  // namespace gossamer

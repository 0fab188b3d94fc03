// Block pool refcounts, prefix-cache hashing / LRU eviction, sliding-window release.
#include "runtime/block_manager.h"

#include <gtest/gtest.h>

#include <numeric>

namespace gossamer {
namespace {

std::vector<int32_t> iota_tokens(int n, int start = 0) {
  std::vector<int32_t> v(n);
  std::iota(v.begin(), v.end(), start);
  return v;
}

TEST(BlockPool, AllocateReleaseRefcount) {
  BlockPool pool(3);
  auto a = pool.allocate(), b = pool.allocate(), c = pool.allocate();
  ASSERT_TRUE(a && b && c);
  EXPECT_FALSE(pool.allocate().has_value());
  EXPECT_EQ(pool.num_free(), 0);
  pool.release(*b);
  EXPECT_EQ(pool.num_free(), 1);
  auto d = pool.allocate();
  ASSERT_TRUE(d);
  EXPECT_EQ(*d, *b);  // reused
  EXPECT_EQ(pool.refcount(*d), 1);
}

TEST(BlockPool, CachedBlocksAreLruEvicted) {
  BlockPool pool(2);
  auto t1 = iota_tokens(4, 0), t2 = iota_tokens(4, 100);
  int32_t a = *pool.allocate(), b = *pool.allocate();
  pool.register_block(a, hash_block(0, t1), t1);
  pool.register_block(b, hash_block(0, t2), t2);
  pool.release(a);  // a is least recently used
  pool.release(b);
  EXPECT_EQ(pool.num_free(), 2);
  EXPECT_EQ(pool.num_cached(), 2);
  // A hit takes a cached block back out of the LRU list.
  auto hit = pool.lookup(hash_block(0, t2), t2);
  ASSERT_TRUE(hit);
  EXPECT_EQ(*hit, b);
  pool.retain(b);
  EXPECT_EQ(pool.num_free(), 1);
  // Allocation with no uncached free block evicts the LRU cached one (a).
  auto fresh = pool.allocate();
  ASSERT_TRUE(fresh);
  EXPECT_EQ(*fresh, a);
  EXPECT_FALSE(pool.lookup(hash_block(0, t1), t1).has_value());
  EXPECT_TRUE(pool.lookup(hash_block(0, t2), t2).has_value());
}

TEST(BlockPool, LookupChecksTokensNotJustHash) {
  BlockPool pool(1);
  auto t = iota_tokens(4);
  int32_t a = *pool.allocate();
  pool.register_block(a, 42, t);
  EXPECT_TRUE(pool.lookup(42, t).has_value());
  auto other = iota_tokens(4, 1);
  EXPECT_FALSE(pool.lookup(42, other).has_value());  // forced collision is a miss
}

TEST(HashBlock, ChainDependsOnParentAndTokens) {
  auto t = iota_tokens(16);
  EXPECT_NE(hash_block(0, t), hash_block(1, t));
  auto u = t;
  u[15] = 999;
  EXPECT_NE(hash_block(0, t), hash_block(0, u));
  EXPECT_EQ(hash_block(7, t), hash_block(7, t));
}

TEST(KvBlockManager, PrefixSharingRefcountsAndLastTokenRecomputed) {
  KvCacheSpec spec{4, 16, 16};
  KvBlockManager kv(spec, /*sliding_window=*/0, /*prefix_caching=*/true);
  auto prompt = iota_tokens(12);  // exactly 3 blocks
  SeqBlocks a;
  EXPECT_EQ(kv.acquire_cached_prefix(prompt, &a), 0);
  ASSERT_TRUE(kv.allocate(&a, 0, 12));
  kv.on_computed(&a, prompt, 12);
  // Same prompt: only 2 blocks are reused, the last token must be computed again.
  SeqBlocks b;
  EXPECT_EQ(kv.acquire_cached_prefix(prompt, &b), 8);
  ASSERT_EQ(b.full.size(), 2u);
  EXPECT_EQ(b.full[0], a.full[0]);
  EXPECT_EQ(kv.full_pool().refcount(a.full[0]), 2);
  ASSERT_TRUE(kv.allocate(&b, 8, 12));
  EXPECT_NE(b.full[2], a.full[2]);  // never writes into a shared block
  kv.free(&a);
  EXPECT_EQ(kv.full_pool().refcount(b.full[0]), 1);
  kv.free(&b);
  EXPECT_EQ(kv.stats().full_used, 0);
  // A different second block only shares the first.
  auto p2 = prompt;
  p2[5] = 77;
  SeqBlocks c;
  EXPECT_EQ(kv.acquire_cached_prefix(p2, &c), 4);
  kv.free(&c);
}

TEST(KvBlockManager, SlidingBlocksOutsideWindowAreReleased) {
  KvCacheSpec spec{4, 32, 32};
  KvBlockManager kv(spec, /*sliding_window=*/8, /*prefix_caching=*/false);
  auto toks = iota_tokens(40);
  SeqBlocks s;
  ASSERT_TRUE(kv.allocate(&s, 0, 24));
  EXPECT_EQ(kv.stats().sliding_used, 6);
  kv.on_computed(&s, toks, 24);
  // Queries from position 24 attend to >= 16: blocks 0..3 ([0,16)) are dead.
  EXPECT_EQ(kv.stats().sliding_used, 2);
  for (int b = 0; b < 4; ++b) EXPECT_EQ(s.sliding[b], kNoBlock);
  EXPECT_NE(s.sliding[4], kNoBlock);
  EXPECT_EQ(kv.stats().full_used, 6);  // full pool keeps everything
  ASSERT_TRUE(kv.allocate(&s, 24, 40));
  EXPECT_EQ(s.sliding.size(), 10u);
  kv.free(&s);
  EXPECT_EQ(kv.stats().sliding_used, 0);
  EXPECT_EQ(kv.stats().full_used, 0);
}

TEST(KvBlockManager, AllocateFailsAtomically) {
  KvCacheSpec spec{4, 3, 3};
  KvBlockManager kv(spec, 0, false);
  SeqBlocks a;
  EXPECT_FALSE(kv.allocate(&a, 0, 16));  // needs 4 blocks
  EXPECT_TRUE(a.full.empty());
  EXPECT_EQ(kv.stats().full_used, 0);
  EXPECT_TRUE(kv.allocate(&a, 0, 12));
}

}  // namespace
}  // namespace gossamer

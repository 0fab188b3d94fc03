// Workspace layout and tile constants shared by the moe_prefill sources (internal).
#pragma once

#include <cstddef>
#include <cstdint>

namespace gossamer::kern::moe_prefill {

inline constexpr int kBM = 64;            // token rows per tile of the wgmma variants
inline constexpr int kMinBM = 32;         // smallest tile of any variant (sizes the tile list)
inline constexpr int kMaxExperts = 4096;  // route kernel keeps 3 ints per expert in smem

// Byte offsets of the workspace regions (each 256-byte aligned).
struct Layout {
  size_t offsets = 0;  // int32 [E + 1]: sorted-row start of each expert, [E] = pairs
  size_t ntiles = 0;   // int32 [1]: tiles in use
  size_t tiles = 0;    // int2 [max_tiles]: (expert, first sorted row)
  size_t perm = 0;     // int32 [T*k]: sorted row -> pair t*k + j (-1 never stored)
  size_t xb = 0;       // bf16 [T, H] (k-permuted groups of 8)
  size_t act = 0;      // bf16 [T*k, I] sorted rows (k-permuted groups of 8)
  size_t y = 0;        // f32 [T*k, H] per pair, routing weight applied
  size_t total = 0;
  int max_tiles = 0;  // for the smallest tile (kMinBM rows)
};

inline size_t align256(size_t v) {
  return (v + 255) & ~size_t{255};
}

// Tiles of `bm` rows needed in the worst case for `pairs` pairs over n_experts experts: every
// used expert may leave one partial tile.
inline int max_tiles_for(size_t pairs, int n_experts, int bm) {
  const size_t e_used = pairs < static_cast<size_t>(n_experts) ? pairs : n_experts;
  return static_cast<int>((pairs + bm - 1) / bm + e_used);
}

inline Layout make_layout(int tokens, int k, int hidden, int inter, int n_experts) {
  Layout l;
  const size_t pairs = static_cast<size_t>(tokens) * k;
  l.max_tiles = max_tiles_for(pairs, n_experts, kMinBM);
  size_t at = 0;
  auto take = [&](size_t bytes) {
    const size_t here = at;
    at = align256(at + bytes);
    return here;
  };
  l.offsets = take(sizeof(int32_t) * (n_experts + 1));
  l.ntiles = take(sizeof(int32_t));
  l.tiles = take(sizeof(int32_t) * 2 * l.max_tiles);
  l.perm = take(sizeof(int32_t) * pairs);
  l.xb = take(2 * static_cast<size_t>(tokens) * hidden);
  l.act = take(2 * pairs * inter);
  l.y = take(sizeof(float) * pairs * hidden);
  l.total = at;
  return l;
}

}  // namespace gossamer::kern::moe_prefill

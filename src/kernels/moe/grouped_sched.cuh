// Routing schedule of the expert-grouped MoE decode kernels (grouped.cu, pipe 9): the routed
// (row b, slot j) pairs of a step sorted by expert, cut into "items" of at most C pairs of one
// expert. Every block (and its producer thread) computes the same schedule from ids in shared
// memory, so no extra kernel or global workspace is needed. Internal to src/kernels/moe.
//
// Entries: i = b k + j < N = batch k (N <= kMaxEntries). order[] lists them sorted by
// (expert, i); item q covers order[begin, begin + count) of one expert, in increasing expert order
// and, within an expert, in chunks of C (an expert chosen by more than C rows gets several items:
// its weights are then streamed once per item).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace gossamer::kern::moe_grouped {

inline constexpr int kMaxEntries = 256;  // batch * k
inline constexpr int kMaxExperts = 256;

// Item q packed as expert (bits 0..8) | begin (bits 9..17) | count (bits 18..26).
struct Item {
  int expert, begin, count;
};
__host__ __device__ constexpr uint32_t pack_item(int e, int begin, int count) {
  return static_cast<uint32_t>(e) | static_cast<uint32_t>(begin) << 9 |
         static_cast<uint32_t>(count) << 18;
}
__host__ __device__ constexpr Item unpack_item(uint32_t v) {
  return Item{static_cast<int>(v & 511u), static_cast<int>((v >> 9) & 511u),
              static_cast<int>((v >> 18) & 511u)};
}

// Shared-memory schedule (~1.5 KB) and scratch (~2 KB, may alias memory that is used only after
// the schedule is built).
struct Sched {
  uint16_t order[kMaxEntries];
  uint32_t items[kMaxEntries];
  int n_items;
};
struct SchedScratch {
  int16_t expert_of[kMaxEntries];  // clamped expert of entry i
  int16_t rank_of[kMaxEntries];    // position of entry i among the entries of its expert
  int count[kMaxExperts];          // entries per expert, then their first position in order[]
};

// Inclusive warp scan of v.
__device__ __forceinline__ int warp_scan_incl(int v, int lane) {
#pragma unroll
  for (int d = 1; d < 32; d <<= 1) {
    const int n = __shfl_up_sync(0xffffffffu, v, d);
    if (lane >= d) v += n;
  }
  return v;
}

// Builds the schedule with ONE warp (all 32 lanes call it); the caller synchronises the block
// afterwards. ids: [n] (n = batch k), clamped to [0, n_experts). C >= 1 pairs per item.
__device__ inline void build_schedule(const int32_t* __restrict__ ids, int n, int n_experts, int C,
                                      Sched& S, SchedScratch& T, int lane) {
  for (int e = lane; e < n_experts; e += 32) T.count[e] = 0;
  __syncwarp();
  // Rank of each entry among the earlier entries of the same expert: chunks of 32 in order,
  // __match_any_sync groups the lanes of one expert, the group's last lane advances the count.
  for (int c0 = 0; c0 < n; c0 += 32) {
    const int i = c0 + lane;
    const int e = i < n ? min(max(ids[i], 0), n_experts - 1) : -1 - lane;
    const unsigned same = __match_any_sync(0xffffffffu, e);
    const int before = __popc(same & ((1u << lane) - 1u));
    const int base = i < n ? T.count[e] : 0;
    __syncwarp();
    if (i < n) {
      T.expert_of[i] = static_cast<int16_t>(e);
      T.rank_of[i] = static_cast<int16_t>(base + before);
      if (before == __popc(same) - 1) T.count[e] = base + before + 1;
    }
    __syncwarp();
  }
  // Exclusive prefix sums over the experts: first position of each expert in order[] and first
  // item (ceil(count / C) items per expert); the items are written here.
  int pos_carry = 0, item_carry = 0;
  for (int e0 = 0; e0 < n_experts; e0 += 32) {
    const int e = e0 + lane;
    const int cnt = e < n_experts ? T.count[e] : 0, ni = (cnt + C - 1) / C;
    const int pos = warp_scan_incl(cnt, lane), it = warp_scan_incl(ni, lane);
    if (e < n_experts) {
      T.count[e] = pos_carry + pos - cnt;
      for (int q = 0; q < ni; ++q) {
        const int begin = pos_carry + pos - cnt + q * C;
        S.items[item_carry + it - ni + q] = pack_item(e, begin, min(C, cnt - q * C));
      }
    }
    pos_carry += __shfl_sync(0xffffffffu, pos, 31);
    item_carry += __shfl_sync(0xffffffffu, it, 31);
  }
  __syncwarp();
  for (int i = lane; i < n; i += 32) S.order[T.count[T.expert_of[i]] + T.rank_of[i]] = i;
  if (lane == 0) S.n_items = item_carry;
}

}  // namespace gossamer::kern::moe_grouped

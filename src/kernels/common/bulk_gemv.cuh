// The shared-memory ring of whole bf16 weight rows behind the batch-1 bulk GEMVs
// (gemv/bulk.cu, qkv_rope/bulk.cu). One producer thread requests rows 0..n-1 of its block by
// 1-D TMA bulk copies (row j -> slot j % slots, full / empty mbarrier pair per slot); the
// consumer warps reduce them against x staged in shared memory as [2][cols / 8] float4 halves.
//
// A slot belongs to one consumer warp (slot s -> warp s % WARPS) and its rows are reduced in
// increasing j: a parity wait cannot tell phase k + 2 from phase k, so no warp may wait for a
// slot's next row before that slot's previous row was consumed (docs/decode-overhead.md §6).
// Per lane the 16-byte chunks lane, lane + 32, ... are summed in the order of warp_gemv_bf16
// (gemv_core.cuh), then the same butterfly: results are bit-identical to the warp GEMV.
#pragma once

#include <algorithm>
#include <string>

#include "common/status.h"
#include "kernels/common/bulk_copy.cuh"
#include "kernels/common/gemv_core.cuh"

namespace gossamer::kern::bulk_gemv {

struct Ring {
  uint8_t* smem;    // slot s at smem + s * row_bytes
  uint64_t* full;   // [slots]: the row landed (transaction bytes)
  uint64_t* empty;  // [slots]: the owner warp's 32 lanes consumed it
  int slots, row_bytes;
};

// Thread 0 initialises the barriers; the caller then synchronises the block.
__device__ __forceinline__ void ring_init(const Ring& r) {
  for (int s = 0; s < r.slots; ++s) {
    bulk_copy::mbar_init(r.full + s, 1);
    bulk_copy::mbar_init(r.empty + s, 32);  // every lane of the owner warp releases its reads
  }
  bulk_copy::mbar_init_fence();
}

// The producer thread: row j (global address row_ptr(j)) into slot j % slots. The copies carry
// an L2::evict_first policy: the weights are read once per step, so they should not push out
// what is read again (activations, KV rows, code). Session 15, H100, with the MoE kernels' copies
// hinted too: tg128 120b 398.5 / 397.9 -> 401.3 / 400.7 t/s, 20b 558.3 -> 563.1, and a tg128
// after a pp4 test no longer slower than a cold one (396.4 -> 401.3; docs/decode-budget-later.md).
template <class RowPtr>
__device__ __forceinline__ void ring_produce(const Ring& r, int n, RowPtr row_ptr) {
  const uint64_t policy = bulk_copy::evict_first_policy();
  for (int j = 0; j < n; ++j) {
    const int s = j % r.slots;
    if (j >= r.slots) bulk_copy::mbar_wait(r.empty + s, ((j / r.slots) - 1) & 1);
    bulk_copy::mbar_arrive_expect_tx(r.full + s, r.row_bytes);
    bulk_copy::bulk_g2s_hint(r.smem + static_cast<size_t>(s) * r.row_bytes, row_ptr(j), r.row_bytes,
                             r.full + s, policy);
  }
}

// Consumer warp `warp` of WARPS: every row it owns, dot with the BT activation rows xs (row b at
// xs + 2 b nch, as [2][nch] float4 halves); each lane releases the slot after its last read (32
// arrivals: no lane's read can race the next copy), then lane 0 calls finish(j, dots[BT]). Each
// row's sum is formed in the same order whatever BT is (batch rows are bit-identical to BT = 1).
template <int WARPS, int BT, class Finish>
__device__ __forceinline__ void ring_consume(const Ring& r, int n, const float4* xs, int nch,
                                             int warp, Finish finish) {
  const int lane = threadIdx.x & 31;
  for (int j = 0; j < n; ++j) {
    const int s = j % r.slots;
    if (s % WARPS != warp) continue;
    bulk_copy::mbar_wait(r.full + s, (j / r.slots) & 1);
    const uint4* wr = reinterpret_cast<const uint4*>(r.smem + static_cast<size_t>(s) * r.row_bytes);
    // Unroll 8 (H100 tg128, three A/B rounds: +0.6% to +1.0% over 2; 4: -0.8%; loading 4 / 8 /
    // 12 chunks explicitly before their FMAs: -2% / -1% / -3.7%). The summation order does not
    // depend on it.
    float acc[BT];
#pragma unroll
    for (int b = 0; b < BT; ++b) acc[b] = 0.f;
#pragma unroll 8
    for (int k = lane; k < nch; k += 32) {
      const uint4 w = wr[k];
#pragma unroll
      for (int b = 0; b < BT; ++b)
        acc[b] += dot8_bf16(w, xs[2 * b * nch + k], xs[(2 * b + 1) * nch + k]);
    }
    bulk_copy::mbar_arrive(r.empty + s);  // this lane's reads of the slot are done (release)
#pragma unroll
    for (int b = 0; b < BT; ++b) acc[b] = warp_sum(acc[b]);
    if (lane == 0) finish(j, acc);
  }
}

// Host: ring slots for rows of row_bytes, at most max_rows, about ring_bytes (at least two rows)
// within smem_left bytes of shared memory (16 bytes of barriers per slot).
inline Result<int> ring_slots(const char* kernel, int row_bytes, int max_rows, int ring_bytes,
                              int smem_left) {
  const int want = std::max(ring_bytes, 2 * (row_bytes + 16));
  const int fit = std::min(want, smem_left) / (row_bytes + 16);
  if (fit < 2) {
    return InvalidArgument(std::string(kernel) + ": a weight row of " + std::to_string(row_bytes) +
                           " bytes does not fit twice in shared memory");
  }
  return std::min(max_rows, fit);
}

}  // namespace gossamer::kern::bulk_gemv

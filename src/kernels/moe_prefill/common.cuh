// Device helpers shared by the moe_prefill GEMMs (gemm.cu: mma.sync, tgemm.cu: transposed
// mma.sync, wgmma.cu: wgmma). Internal.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/moe_prefill/bits.h"
#include "kernels/moe_prefill/kernels.h"

namespace gossamer::kern::moe_prefill {

// 16-byte cp.async of which the first `bytes` (0..16) come from src, the rest is zero-filled.
__device__ __forceinline__ void cp_async16(void* dst, const void* src, int bytes) {
  const auto s = static_cast<uint32_t>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(src), "r"(bytes));
}
__device__ __forceinline__ void cp_commit() {
  asm volatile("cp.async.commit_group;\n" ::);
}
template <int N>
__device__ __forceinline__ void cp_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

// One GEMM tile: expert e, first sorted row row0, valid rows (<= the tile height), first weight
// row n0, MX blocks per weight row KB, K stages nk.
struct GemmTile {
  int e, row0, rows, n0, KB, nk;
};

// The shared start of the GEMM kernels, for tile list entry `tile` and column block `col` of a
// configuration with BM-row tiles, BN weight rows and KBS MX blocks per K stage. Fills t; writes
// spair[r] = perm[row0 + r] (rows past the tile repeat the last valid one) into smem after the
// scale tile; issues the cp.async copies of the scales of weight rows n0 .. n0 + BN - 1 (one
// contiguous span; they join the caller's first cp.async group) to ssc_raw (smem after the
// operand ring) and sets *ssc to row n0's first scale there. Returns spair; the caller syncs.
template <int BM, int BN, int KBS, int kThreads>
__device__ __forceinline__ int32_t* tile_prologue(const GemmArgs& g, int tile, int col,
                                                  uint8_t* ssc_raw, GemmTile& t,
                                                  const uint8_t** ssc) {
  const int2 td = g.tiles[tile];
  t.e = td.x, t.row0 = td.y, t.rows = min(BM, g.offsets[t.e + 1] - t.row0);
  t.n0 = col * BN, t.KB = g.K / 32, t.nk = (t.KB + KBS - 1) / KBS;
  auto* spair = reinterpret_cast<int32_t*>(ssc_raw + ((BN * t.KB + 47) & ~15));
  for (int r = threadIdx.x; r < BM; r += kThreads) spair[r] = g.perm[t.row0 + min(r, t.rows - 1)];
  const uint8_t* s0 = g.scales + (static_cast<size_t>(t.e) * g.N + t.n0) * t.KB;
  const uint8_t* s1 = s0 + static_cast<size_t>(min(BN, g.N - t.n0)) * t.KB;
  const auto* a0 =
      reinterpret_cast<const uint8_t*>(reinterpret_cast<uintptr_t>(s0) & ~uintptr_t{15});
  const int chunks = static_cast<int>((s1 - a0 + 15) / 16);
  for (int c = threadIdx.x; c < chunks; c += kThreads) {
    const ptrdiff_t left = s1 - (a0 + 16 * c);
    cp_async16(ssc_raw + 16 * c, a0 + 16 * c, static_cast<int>(left < 16 ? left : 16));
  }
  *ssc = ssc_raw + (s0 - a0);
  return spair;
}

// Smem row of physical weight row n of a tile (gate_up: the gate/up rows of one output,
// interleaved in the weights, are stored 8 rows apart within each group of 16).
template <bool kGateUp>
__device__ __forceinline__ int pair_row_smem(int n) {
  if constexpr (!kGateUp) return n;
  const int r = n & 15;
  return (n & ~15) | ((r & 1) << 3) | (r >> 1);
}

__device__ __forceinline__ uint32_t bf16x2_mul(uint32_t a, uint32_t b) {
  uint32_t r;
  asm("mul.rn.bf16x2 %0, %1, %2;\n" : "=r"(r) : "r"(a), "r"(b));
  return r;
}
// bf16x2 multiplier 2^(s - 1) for an E8M0 scale byte s (s > 128 overflows to inf): the biased
// exponent e = min(s, 129) + 126 placed at bits 7 and 23, as one multiply-add ((e << 7) | (e << 23)
// == e * 0x00800080 since the two fields do not overlap).
__device__ __forceinline__ uint32_t scale_mul(uint32_t s) {
  return min(s, 129u) * 0x00800080u + 126u * 0x00800080u;
}

__device__ __forceinline__ float swiglu(float gate, float up, float alpha, float limit) {
  gate = fminf(gate, limit);
  up = fminf(fmaxf(up, -limit), limit);
  return (up + 1.f) * gate / (1.f + expf(-alpha * gate));
}

}  // namespace gossamer::kern::moe_prefill

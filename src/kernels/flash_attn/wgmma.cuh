// Warpgroup MMA (sm_90a wgmma.mma_async) helpers for the flash-attention tiles: A operand from
// registers (the mma.sync m16n8k16 A-fragment layout per warp), B from shared memory through a
// matrix descriptor over the no-swizzle ("interleave") layout of 8 x 16-byte core matrices.
// Tile layout used here ([64 keys][64 dims] bf16, 8 KB): key k, 16-byte chunk c (dims 8c..8c+7)
// at ((k / 8) * 8 + c) * 128 + (k % 8) * 16, i.e. core matrix (k / 8, c) at (k / 8) * 1024 +
// c * 128. As the B operand of S = Q K^T (K-major, N = keys): LBO 128 (next chunk along K = dims),
// SBO 1024 (next 8 keys). As the B operand of O += P V (N = dims, K = keys: MN-major, transposed
// B): LBO / SBO are the byte steps along K (8 keys) and N (8 dims).
#pragma once

#include <cstdint>

#include "kernels/common/wgmma.cuh"
#include "kernels/flash_attn/mma.cuh"

namespace gossamer::kern::wg {

// d[64 x 64] (+)= a[64 x 16] b[16 x 64]: per thread d[i][0..1] = (row g, cols 8i + 2q + 0..1),
// d[i][2..3] = (row g + 8, same cols) of its warp's 16 rows. ACC 0: d = a b. TB: B transposed.
template <int ACC, int TB>
__device__ __forceinline__ void m64n64k16(float (&d)[8][4], const uint32_t (&a)[4], uint64_t b) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %38, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, "
      "%20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, "
      "{%32, %33, %34, %35}, %36, p, 1, 1, %37;\n}\n"
      : "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]), "+f"(d[1][0]), "+f"(d[1][1]),
        "+f"(d[1][2]), "+f"(d[1][3]), "+f"(d[2][0]), "+f"(d[2][1]), "+f"(d[2][2]), "+f"(d[2][3]),
        "+f"(d[3][0]), "+f"(d[3][1]), "+f"(d[3][2]), "+f"(d[3][3]), "+f"(d[4][0]), "+f"(d[4][1]),
        "+f"(d[4][2]), "+f"(d[4][3]), "+f"(d[5][0]), "+f"(d[5][1]), "+f"(d[5][2]), "+f"(d[5][3]),
        "+f"(d[6][0]), "+f"(d[6][1]), "+f"(d[6][2]), "+f"(d[6][3]), "+f"(d[7][0]), "+f"(d[7][1]),
        "+f"(d[7][2]), "+f"(d[7][3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "n"(TB), "r"(ACC));
}
// d[64 x 8] += a[64 x 16] b[16 x 8] (row sums of P with a ones B): d[0..1] row g, d[2..3] g + 8.
__device__ __forceinline__ void m64n8k16(float (&d)[4], const uint32_t (&a)[4], uint64_t b) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %9, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16 "
      "{%0, %1, %2, %3}, {%4, %5, %6, %7}, %8, p, 1, 1, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(1));
}

// ---- The flash-attention tile ops (kernel.cu, WG variants). F: the kernel's per-thread
// fragments (qh: Q A-fragments per 16-dim k-step, o: O accumulators, la: row-sum accumulators).
// S = Q K^T as 4 m64n64k16 (Q from registers, K from the ring slot), O += P V as 4 m64n64k16
// (P from registers, V transposed), row sums of P by m64n8k16 against a [16 x 8] ones tile.

// Descriptors are built once per kernel for ring slot 0 (k_desc / v_desc) and moved by adding
// (byte offset >> 4) to their address field (bits 0..13): ring slot s at + s * kSlotStep, k-step
// ks of K at + 16 ks, of V at + 128 ks. (Rebuilding each descriptor from an address cost ~8
// uniform-datapath instructions per wgmma, a fifth of the kernel's instructions: ncu, H100.)
// K as the K-major B of Q K^T: LBO = 128 (next 8 dims), SBO = 1024 (next 8 keys).
__device__ __forceinline__ uint64_t k_desc(uint32_t kb) {
  return desc(kb, 128, 1024);
}
// V as the transposed (MN-major) B of P V: LBO = 1024 (next 8 keys along K), SBO = 128 (next 8
// dims along N); the other order faults on the device (H100, 2026-11-22).
__device__ __forceinline__ uint64_t v_desc(uint32_t vb) {
  return desc(vb, 1024, 128);
}

// s = Q K^T for the K tile of descriptor dk (one commit group).
template <class F>
__device__ __forceinline__ void qk(const F& f, uint64_t dk, float (&s)[8][4]) {
  fence();
  m64n64k16<0, 0>(s, f.qh[0], dk);
#pragma unroll
  for (int ks = 1; ks < 4; ++ks) m64n64k16<1, 0>(s, f.qh[ks], dk + 16 * ks);  // + 256 B
  commit();
}
// P (bf16) as the A fragments of the 4 key k-steps (the m16n8k16 A layout of each warp's rows).
__device__ __forceinline__ void pack_p(const float (&s)[8][4], uint32_t (&a)[4][4]) {
#pragma unroll
  for (int j = 0; j < 4; ++j) pack_p_frag(s[2 * j], s[2 * j + 1], a[j]);
}
// O += P V and la += P ones for the V tile of descriptor dv, ones tile dones (one commit group).
template <class F>
__device__ __forceinline__ void pv(F& f, uint64_t dv, uint64_t dones, const uint32_t (&a)[4][4]) {
  fence();
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    m64n64k16<1, 1>(f.o, a[j], dv + 128 * j);  // + 2048 B: the next 16 keys
    m64n8k16(f.la, a[j], dones);
  }
  commit();
}
// Pins O and the row sums after the wait that retires P V.
template <class F>
__device__ __forceinline__ void pin_o(F& f) {
  fence_regs(f.o);
  fence_regs(f.la);
}

}  // namespace gossamer::kern::wg

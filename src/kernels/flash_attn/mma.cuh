// Inline-PTX helpers shared by the tensor-core attention kernels (flash_attn_paged_bf16kv_f32q
// here, attn_decode_mma_bf16kv_f32q in kernels/attention): cp.async with zero fill, ldmatrix,
// mma.sync m16n8k16 bf16 -> f32, bf16 hi/lo packing, ldmatrix with an immediate offset and
// mbarrier init / arrive / cp.async arrive / parity wait.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

namespace gossamer::kern {

__device__ __forceinline__ void cp_async16_zfill(uint32_t dst, const void* src, bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src),
               "r"(valid ? 16 : 0));
}
// One 16-byte chunk `ch` (dims 8 ch .. 8 ch + 7) of key `key` of a paged K/V tile: key `key` sits
// in logical block `bi` = physical block `blk` (used when `ok`); K goes to smem address `dst`, V
// to `dst + tile_bytes`; zero-filled when !ok or blk is outside [0, num_blocks).
// P: any params struct with k_cache, v_cache, n_kv_heads, block_size, num_blocks (head dim 64).
template <class P>
__device__ __forceinline__ void cp_async_kv_chunk_at(const P& p, int kh, int key, int bi, int blk,
                                                     bool ok, int ch, uint32_t dst,
                                                     int tile_bytes) {
  ok = ok && blk >= 0 && blk < p.num_blocks;
  const size_t off = ok ? ((static_cast<size_t>(blk) * p.n_kv_heads + kh) * p.block_size +
                           (key - bi * p.block_size)) *
                                  64 +
                              ch * 8
                        : 0;
  cp_async16_zfill(dst, p.k_cache + off, ok);
  cp_async16_zfill(dst + tile_bytes, p.v_cache + off, ok);
}
// As cp_async_kv_chunk_at into tile row `row` of the XOR-swizzled [64 keys][8 x 16 B] tile at
// `base` (chunk c of row r at c ^ (r & 7)).
template <class P>
__device__ __forceinline__ void cp_async_kv_chunk(const P& p, int kh, int key, int bi, int blk,
                                                  bool ok, int row, int ch, uint32_t base,
                                                  int tile_bytes) {
  cp_async_kv_chunk_at(p, kh, key, bi, blk, ok, ch, base + (row * 8 + (ch ^ (row & 7))) * 16,
                       tile_bytes);
}
__device__ __forceinline__ void cp_commit() {
  asm volatile("cp.async.commit_group;\n" ::);
}
template <int N>
__device__ __forceinline__ void cp_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}
__device__ __forceinline__ void ldsm_x4(uint32_t addr, uint32_t (&r)[4]) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
__device__ __forceinline__ void ldsm_x4_t(uint32_t addr, uint32_t (&r)[4]) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
// c[16x8] += a[16x16] b[16x8], bf16 inputs, f32 accumulate.
__device__ __forceinline__ void mma_bf16(float (&c)[4], const uint32_t (&a)[4], uint32_t b0,
                                         uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
// (lo, hi) -> bf16x2 (lo in the low half), round to nearest even.
__device__ __forceinline__ uint32_t pack_bf16(float lo, float hi) {
  __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<uint32_t*>(&v);
}
// The bf16x2 residual (x - bf16(x)) of the pair packed in `hi`.
__device__ __forceinline__ uint32_t pack_resid(float lo, float hi, uint32_t packed) {
  return pack_bf16(lo - __uint_as_float(packed << 16), hi - __uint_as_float(packed & 0xffff0000u));
}
// The m16n8k16 A fragment of one 16-key k-step of P, built from the two 8-key S accumulator
// blocks s0 (keys 0..7) and s1 (keys 8..15) of a warp's 16 rows (FA2: P never leaves registers).
__device__ __forceinline__ void pack_p_frag(const float (&s0)[4], const float (&s1)[4],
                                            uint32_t (&a)[4]) {
  a[0] = pack_bf16(s0[0], s0[1]);
  a[1] = pack_bf16(s0[2], s0[3]);
  a[2] = pack_bf16(s1[0], s1[1]);
  a[3] = pack_bf16(s1[2], s1[3]);
}
// The bf16 residual fragment of the same P (precise mode), given a from pack_p_frag.
__device__ __forceinline__ void pack_p_resid(const float (&s0)[4], const float (&s1)[4],
                                             const uint32_t (&a)[4], uint32_t (&al)[4]) {
  al[0] = pack_resid(s0[0], s0[1], a[0]);
  al[1] = pack_resid(s0[2], s0[3], a[1]);
  al[2] = pack_resid(s1[0], s1[1], a[2]);
  al[3] = pack_resid(s1[2], s1[3], a[3]);
}

// ldmatrix x4 (plain / transposed) at smem address a + OFF (OFF folded into the instruction).
template <int OFF>
__device__ __forceinline__ void ldsm_x4_at(uint32_t a, uint32_t (&r)[4]) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4+%5];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(a), "n"(OFF));
}
template <int OFF>
__device__ __forceinline__ void ldsm_x4_t_at(uint32_t a, uint32_t (&r)[4]) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4+%5];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(a), "n"(OFF));
}

// mbarrier helpers (CTA scope).
__device__ __forceinline__ void mbar_init(uint32_t bar, int count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count));
}
__device__ __forceinline__ void mbar_arrive(uint32_t bar) {
  asm volatile("{\n .reg .b64 st;\n mbarrier.arrive.shared::cta.b64 st, [%0];\n}\n" ::"r"(bar)
               : "memory");
}
// Arrives once this thread's earlier cp.async copies have landed (count not incremented).
__device__ __forceinline__ void mbar_cp_arrive(uint32_t bar) {
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(bar) : "memory");
}
__device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t parity) {
  asm volatile(
      "{\n .reg .pred P1;\n LAB_WAIT:\n"
      " mbarrier.try_wait.parity.shared::cta.b64 P1, [%0], %1;\n"
      " @P1 bra DONE;\n bra LAB_WAIT;\n DONE:\n}\n" ::"r"(bar),
      "r"(parity)
      : "memory");
}

}  // namespace gossamer::kern

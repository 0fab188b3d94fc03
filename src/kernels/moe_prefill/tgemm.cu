// Transposed mma.sync variants (GemmArgs::variant 7..12, the defaults 8, 10 and 12; kernels.h) of
// the grouped MXFP4 GEMMs: the block computes D^T [weight rows x tokens] = W x X^T with mma.sync
// m16n8k16, the decoded weights as operand A (m16: 16 weight rows) and the tile's tokens as operand
// B (n8: 8 tokens). Against the gemm.cu variants (tokens as A) this
//  * needs no register moves to build the A fragments: the decode writes a0..a3 directly and one
//    16-byte activation load gives b0/b1 of both MMAs of an MX block in consecutive registers;
//  * wastes less at few tokens per expert: n8 granularity (NT = ceil(rows / 8) fragments, a
//    template parameter, so the inner loops carry no row branches) instead of m16.
// Block: W warps (4 in every variant; TCfg takes 8 too) x 16 MT weight rows (MT m16 tiles each)
// = BN 16 MT W, BM tokens (32, 64 or 96), K stages of KBS MX blocks through a kStages-deep cp.async
// ring, same smem layouts as gemm.cu:
//   activations: [BM tokens][4 KBS chunks of 16 B], chunk c of row r at c ^ ((r & 1) << 2);
//   weights: [BN rows][KBS x 16 B] padded by 16 B; gate_up stores physical row 2i + u of each
//            16 at smem row i + 8u, so that a thread's A rows g and g + 8 are gate and up of the
//            same output;
//   scales: [BN rows][K/32] for the whole K, copied once per tile (physical row order).
// Grid: x = column blocks of N, y = tiles (GemmArgs::cols_first, the default): the blocks resident
// at one time cover a few tiles completely, so their activations stay in L2 and each expert's
// weights stream contiguously; with tiles along x, down re-read `act` from DRAM per column block.
// All stages but the last are full (every MX block inside K): their copies carry no zero-fill
// predicates and their scale loads no clamp; the last stage is peeled off the K loop.
// k order (perm8, as gemm.cu): lane (g, q) owns word q of each MX block of its rows g, g + 8, i.e.
// elements 8q..8q+7, decoded as pairs P_i = (e_{8q+i}, e_{8q+i+4}). MMA 0 of the block: a0/a1 =
// P_0 of rows g / g+8, a2/a3 = P_1; MMA 1: P_2, P_3. The activation chunk of token g holds
// (P_0, P_1, P_2, P_3) of the same elements: b0/b1 of MMA 0 = .x/.y, of MMA 1 = .z/.w.
#include <cuda_bf16.h>

#include <string>

#include "kernels/common/cuda_check.h"
#include "kernels/moe_prefill/common.cuh"
#include "kernels/moe_prefill/kernels.h"
#include "kernels/moe_prefill/layout.h"

namespace gossamer::kern::moe_prefill {
namespace {

template <int BM, int KBS, int Stages, int MinBlocks, int MT = 2, int Warps = 4>
struct TCfg {
  static constexpr int kBM = BM, kKBS = KBS, kStages = Stages, kMinBlocks = MinBlocks;
  static constexpr int kMT = MT;  // m16 weight tiles per warp
  static constexpr int kThreads = 32 * Warps, kBN = 16 * MT * Warps;
  static constexpr int kCPR = 4 * KBS;  // 16-byte activation chunks per token per stage
  // n8 fragments in use step by kNTStep: a stage's chunks of 8 kNTStep token rows = whole threads
  static constexpr int kNTStep = kThreads / (8 * kCPR) > 1 ? kThreads / (8 * kCPR) : 1;
  static_assert(BM % (8 * kNTStep) == 0);
  static constexpr int kBRow = 16 * KBS + 16;  // bytes per weight row per stage (padded)
  static constexpr int kAStage = BM * 64 * KBS, kBStage = kBN * kBRow;  // bytes
  static constexpr int kAIters = BM * kCPR / kThreads;  // activation chunks per thread per stage
  static constexpr int kBIters = kBN * KBS / kThreads;  // weight chunks per thread per stage
  static_assert(kAIters * kThreads == BM * kCPR && kBIters * kThreads == kBN * KBS);
  static size_t smem_bytes(int K) {
    return kStages * (kAStage + kBStage) +
           ((static_cast<size_t>(kBN) * (K / 32) + 47) & ~size_t{15}) + BM * sizeof(int32_t);
  }
};

__device__ __forceinline__ void mma_t(float (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2,
                                      uint32_t a3, uint32_t b0, uint32_t b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// Per-thread copy plan, fixed for the tile: sources (stage 0) and smem addresses (slot 0).
template <class C>
struct Plan {
  const uint16_t* asrc[C::kAIters];  // activation row + chunk (elements)
  uint32_t adst[C::kAIters];         // shared-window address
  int achunk;                        // chunk index (MX block = KBS kt + achunk / 4)
  const uint8_t* bsrc[C::kBIters];   // weight row, MX block h
  uint32_t bdst[C::kBIters];
  int bh[C::kBIters];
};

__device__ __forceinline__ void cp_async16_s(uint32_t dst, const void* src, int bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(bytes));
}

// Issues the cp.async copies of K stage kt into the ring slot at byte offset `slot_a` (activations)
// / `slot_b` (weights). Only the 8 NT token rows in use are copied: the first NT KBS / 4 chunks of
// the thread, no row test. kFull: every MX block of the stage is inside K (all stages but the
// last), so no zero-fill predicates.
template <class C, int NT, bool kFull>
__device__ __forceinline__ void tload_stage(uint32_t slot_a, uint32_t slot_b, const Plan<C>& pl,
                                            const GemmTile& t, int kt) {
  constexpr int kAUsed = 8 * NT * C::kCPR / C::kThreads;
  static_assert(kAUsed * C::kThreads == 8 * NT * C::kCPR && kAUsed <= C::kAIters);
  const bool a_ok = kFull || C::kKBS * kt + pl.achunk / 4 < t.KB;
#pragma unroll
  for (int i = 0; i < kAUsed; ++i) {
    cp_async16_s(slot_a + pl.adst[i], pl.asrc[i] + (a_ok ? kt * (32 * C::kKBS) : 0), a_ok ? 16 : 0);
  }
#pragma unroll
  for (int i = 0; i < C::kBIters; ++i) {
    const bool ok = kFull || C::kKBS * kt + pl.bh[i] < t.KB;
    cp_async16_s(slot_b + pl.bdst[i], pl.bsrc[i] + (ok ? kt * (16 * C::kKBS) : 0), ok ? 16 : 0);
  }
}

// acc += this stage's products for the warp's 16 MT weight rows x 8 NT tokens. kFull: no MX
// block of the stage is past K, so the scale loads take immediate offsets; otherwise the scale
// index is clamped (the zero-filled blocks past K are loaded but not multiplied).
// srow[mt][h]: smem row offsets (bytes) of the thread's weight rows 16 mt + g + 8 h of the warp;
// sc_at[mt][h]: the scale tile index of those rows' first MX block.
template <class C, int NT, bool kFull>
__device__ __forceinline__ void tcompute_stage(const uint8_t* as, const uint8_t* bs,
                                               const uint8_t* ssc, int kt, const GemmTile& t,
                                               const int (&srow)[C::kMT][2],
                                               const int (&sc_at)[C::kMT][2],
                                               float (&acc)[C::kMT][NT][4]) {
  const int lane = threadIdx.x % 32, g = lane / 4, q = lane % 4;
  uint32_t w[C::kKBS][C::kMT][2], sc[C::kKBS][C::kMT][2];
#pragma unroll
  for (int kb = 0; kb < C::kKBS; ++kb) {
    const int kblk = kFull ? C::kKBS * kt + kb : min(C::kKBS * kt + kb, t.KB - 1);
#pragma unroll
    for (int mt = 0; mt < C::kMT; ++mt) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        w[kb][mt][h] = *reinterpret_cast<const uint32_t*>(bs + srow[mt][h] + kb * 16 + q * 4);
        sc[kb][mt][h] = ssc[sc_at[mt][h] + kblk];
      }
    }
  }
  const int abase = g * (C::kCPR * 16);
#pragma unroll
  for (int kb = 0; kb < C::kKBS; ++kb) {
    if (!kFull && C::kKBS * kt + kb >= t.KB) break;  // the last stage's MX blocks past K
    const int chunk = (4 * kb + q) ^ ((g & 1) << 2);
    uint4 bx[NT];
#pragma unroll
    for (int nf = 0; nf < NT; ++nf) {
      bx[nf] = *reinterpret_cast<const uint4*>(as + abase + nf * 8 * (C::kCPR * 16) + chunk * 16);
    }
    // a[mt][k16 half][a0..a3]: rows g / g + 8 of m16 tile mt; the MMAs are issued k half by
    // k half so that no two consecutive ones update the same accumulator.
    uint32_t a[C::kMT][2][4];
#pragma unroll
    for (int mt = 0; mt < C::kMT; ++mt) {
      const uint32_t m0 = scale_mul(sc[kb][mt][0]), m1 = scale_mul(sc[kb][mt][1]);
      const uint32_t w0 = w[kb][mt][0], w1 = w[kb][mt][1];
      a[mt][0][0] = bf16x2_mul(e2m1_bf16x2<0>(w0), m0);
      a[mt][0][1] = bf16x2_mul(e2m1_bf16x2<0>(w1), m1);
      a[mt][0][2] = bf16x2_mul(e2m1_bf16x2<1>(w0), m0);
      a[mt][0][3] = bf16x2_mul(e2m1_bf16x2<1>(w1), m1);
      a[mt][1][0] = bf16x2_mul(e2m1_bf16x2<2>(w0), m0);
      a[mt][1][1] = bf16x2_mul(e2m1_bf16x2<2>(w1), m1);
      a[mt][1][2] = bf16x2_mul(e2m1_bf16x2<3>(w0), m0);
      a[mt][1][3] = bf16x2_mul(e2m1_bf16x2<3>(w1), m1);
    }
#pragma unroll
    for (int kh = 0; kh < 2; ++kh) {
#pragma unroll
      for (int mt = 0; mt < C::kMT; ++mt) {
#pragma unroll
        for (int nf = 0; nf < NT; ++nf) {
          mma_t(acc[mt][nf], a[mt][kh][0], a[mt][kh][1], a[mt][kh][2], a[mt][kh][3],
                kh ? bx[nf].z : bx[nf].x, kh ? bx[nf].w : bx[nf].y);
        }
      }
    }
  }
}

// Epilogue. acc[mt][nf][2h + u]: weight smem row 32 wn + 16 mt + g + 8 h, token 8 nf + 2q + u.
template <bool kGateUp, class C, int NT>
__device__ __forceinline__ void tepilogue(const GemmArgs& g, const GemmTile& t,
                                          const int32_t* spair, const float (&acc)[C::kMT][NT][4]) {
  const int lane = threadIdx.x % 32, gr = lane / 4, q = lane % 4, wn = threadIdx.x / 32;
  const size_t eb = static_cast<size_t>(t.e) * g.N;
#pragma unroll
  for (int mt = 0; mt < C::kMT; ++mt) {
    const int base = t.n0 + 16 * C::kMT * wn + 16 * mt;
    // Physical rows of the thread's two A rows (gate_up: gate 2i and up 2i + 1 of output i).
    const int p0 = kGateUp ? base + 2 * gr : base + gr, p1 = kGateUp ? p0 + 1 : p0 + 8;
    const float b0 = g.bias[eb + min(p0, g.N - 1)], b1 = g.bias[eb + min(p1, g.N - 1)];
#pragma unroll
    for (int nf = 0; nf < NT; ++nf) {
#pragma unroll
      for (int u = 0; u < 2; ++u) {
        const int tt = 8 * nf + 2 * q + u;
        if (tt >= t.rows) continue;
        const float v0 = acc[mt][nf][u] + b0, v1 = acc[mt][nf][2 + u] + b1;
        if constexpr (kGateUp) {
          if (p1 >= g.N) continue;
          const int I = g.N / 2, i = p0 / 2;
          const __nv_bfloat16 a = __float2bfloat16_rn(swiglu(v0, v1, g.alpha, g.limit));
          g.act[static_cast<size_t>(t.row0 + tt) * I + ((i & ~7) | perm8(i & 7))] =
              *reinterpret_cast<const uint16_t*>(&a);
        } else {
          const int pair = spair[tt];
          const float wt = g.weights[pair];
          float* yr = g.y + static_cast<size_t>(pair) * g.N;
          if (p0 < g.N) yr[p0] = wt * v0;
          if (p1 < g.N) yr[p1] = wt * v1;
        }
      }
    }
  }
}

template <bool kGateUp, class C, int NT>
__device__ __forceinline__ void trun(const GemmArgs& g, const GemmTile& t, uint8_t* smem,
                                     const uint8_t* ssc, const int32_t* spair) {
  uint8_t* as = smem;
  uint8_t* bs = as + C::kStages * C::kAStage;
  const int tid = threadIdx.x;
  const auto as_s = static_cast<uint32_t>(__cvta_generic_to_shared(as));
  const auto bs_s = static_cast<uint32_t>(__cvta_generic_to_shared(bs));
  Plan<C> pl;
  pl.achunk = tid % C::kCPR;
#pragma unroll
  for (int i = 0; i < C::kAIters; ++i) {
    const int r = tid / C::kCPR + (C::kThreads / C::kCPR) * i;
    const int rr = min(r, C::kBM - 1);
    const size_t src = kGateUp ? spair[rr] / g.k : t.row0 + min(rr, t.rows - 1);
    pl.asrc[i] = g.a + src * g.K + pl.achunk * 8;
    pl.adst[i] = as_s + r * (C::kCPR * 16) + ((pl.achunk ^ ((r & 1) << 2)) * 16);
  }
  const uint8_t* wbase = g.blocks + static_cast<size_t>(t.e) * g.N * t.KB * 16;
#pragma unroll
  for (int i = 0; i < C::kBIters; ++i) {
    const int idx = tid + C::kThreads * i, n = idx / C::kKBS, h = idx % C::kKBS;
    const int row = min(t.n0 + n, g.N - 1);
    pl.bsrc[i] = wbase + (static_cast<size_t>(row) * t.KB + h) * 16;
    pl.bdst[i] = bs_s + pair_row_smem<kGateUp>(n) * C::kBRow + h * 16;
    pl.bh[i] = h;
  }
#pragma unroll
  for (int s = 0; s < C::kStages - 1; ++s) {
    if (s < t.nk - 1) {
      tload_stage<C, NT, true>(s * C::kAStage, s * C::kBStage, pl, t, s);
    } else if (s == t.nk - 1) {
      tload_stage<C, NT, false>(s * C::kAStage, s * C::kBStage, pl, t, s);
    }
    cp_commit();
  }
  const int lane = tid % 32, gq = lane / 4, wn = tid / 32;
  int srow[C::kMT][2], sc_at[C::kMT][2];
#pragma unroll
  for (int mt = 0; mt < C::kMT; ++mt) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int r = 16 * C::kMT * wn + 16 * mt + gq + 8 * h;  // smem row
      const int phys = kGateUp ? 16 * C::kMT * wn + 16 * mt + 2 * gq + h : r;
      srow[mt][h] = r * C::kBRow;
      sc_at[mt][h] = phys * t.KB;
    }
  }
  float acc[C::kMT][NT][4] = {};
  // Stages 0 .. nk - 2 are full (all MX blocks inside K); the last one is peeled off the loop.
  int rslot = 0, wslot = C::kStages - 1;  // ring slots read / written in this iteration
  for (int kt = 0; kt < t.nk - 1; ++kt) {
    cp_wait<C::kStages - 2>();
    __syncthreads();
    const int nxt = kt + C::kStages - 1;
    if (nxt < t.nk - 1) {
      tload_stage<C, NT, true>(wslot * C::kAStage, wslot * C::kBStage, pl, t, nxt);
    } else if (nxt == t.nk - 1) {
      tload_stage<C, NT, false>(wslot * C::kAStage, wslot * C::kBStage, pl, t, nxt);
    }
    cp_commit();
    tcompute_stage<C, NT, true>(as + rslot * C::kAStage, bs + rslot * C::kBStage, ssc, kt, t, srow,
                                sc_at, acc);
    rslot = rslot == C::kStages - 1 ? 0 : rslot + 1;
    wslot = wslot == C::kStages - 1 ? 0 : wslot + 1;
  }
  cp_wait<0>();
  __syncthreads();
  tcompute_stage<C, NT, false>(as + rslot * C::kAStage, bs + rslot * C::kBStage, ssc, t.nk - 1, t,
                               srow, sc_at, acc);
  tepilogue<kGateUp, C, NT>(g, t, spair, acc);
}

template <bool kGateUp, class C, int NT>
__device__ __forceinline__ void tdispatch(const GemmArgs& g, const GemmTile& t, uint8_t* smem,
                                          const uint8_t* ssc, const int32_t* spair) {
  if constexpr (NT < C::kBM / 8) {
    if (t.rows > 8 * NT) {
      tdispatch<kGateUp, C, NT + C::kNTStep>(g, t, smem, ssc, spair);
      return;
    }
  }
  trun<kGateUp, C, NT>(g, t, smem, ssc, spair);
}

template <bool kGateUp, class C>
__global__ void __launch_bounds__(C::kThreads, C::kMinBlocks) moe_prefill_tgemm(GemmArgs g) {
  // Grid order (GemmArgs::cols_first): column blocks along x, so that the blocks running at one
  // time share a few tiles' activations in L2, or tiles along x (all tiles of one column block).
  const int tile = static_cast<int>(g.cols_first ? blockIdx.y : blockIdx.x);
  const int col = static_cast<int>(g.cols_first ? blockIdx.x : blockIdx.y);
  if (tile >= *g.ntiles) return;
  extern __shared__ __align__(16) uint8_t smem[];
  GemmTile t;
  const uint8_t* ssc = nullptr;
  const int32_t* spair = tile_prologue<C::kBM, C::kBN, C::kKBS, C::kThreads>(
      g, tile, col, smem + C::kStages * (C::kAStage + C::kBStage), t, &ssc);
  __syncthreads();
  tdispatch<kGateUp, C, C::kNTStep>(g, t, smem, ssc, spair);
}

template <bool kGateUp, class C>
Status tlaunch(const GemmArgs& g, cudaStream_t s, const char* name) {
  const size_t smem = C::smem_bytes(g.K);
  GS_RETURN_IF_ERROR(check_gemm_launch(g, C::kBM, smem, name));
  auto* fn = moe_prefill_tgemm<kGateUp, C>;
  GS_CUDA_RETURN(cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                      static_cast<int>(smem)));
  const int cols = (g.N + C::kBN - 1) / C::kBN;
  GemmArgs a = g;  // tiles go along x when there are more than grid y allows (> ~500k tokens)
  a.cols_first = g.cols_first && g.max_tiles <= 65535;
  if (!a.cols_first && cols > 65535) {
    return Unsupported(std::string(name) + ": N = " + std::to_string(g.N) + " is too large");
  }
  const dim3 grid = a.cols_first ? dim3(cols, a.max_tiles) : dim3(a.max_tiles, cols);
  fn<<<grid, C::kThreads, smem, s>>>(a);
  return launch_status(name);
}

template <bool kGateUp>
Status tlaunch_variant(const GemmArgs& g, cudaStream_t s, const char* name) {
  switch (g.variant) {
    case kTransVariant:  // 32 tokens, 128-wide K stages (as variant 6)
      return tlaunch<kGateUp, TCfg<32, 4, 3, 3>>(g, s, name);
    case kTransVariant + 1:  // 64 tokens, 64-wide K stages
      return tlaunch<kGateUp, TCfg<64, 2, 3, 3>>(g, s, name);
    case kTransVariant + 2:  // 32 tokens, 64-wide K stages, 4-slot ring, 4 blocks/SM
      return tlaunch<kGateUp, TCfg<32, 2, 4, 4>>(g, s, name);
    case kTransVariant + 3:  // as 7 with BN 64 (one m16 tile per warp), 4 blocks/SM
      return tlaunch<kGateUp, TCfg<32, 4, 3, 4, 1>>(g, s, name);
    case kTransVariant + 4:  // as 8 with BN 64, 4 blocks/SM
      return tlaunch<kGateUp, TCfg<64, 2, 3, 4, 1>>(g, s, name);
    case kTransVariant + 5:  // 96 tokens, 4 warps x 2 m16 tiles (BN 128), 4-slot ring, 2/SM
      return tlaunch<kGateUp, TCfg<96, 2, 4, 2, 2, 4>>(g, s, name);
    default:
      return InvalidArgument(std::string(name) + ": unknown variant " + std::to_string(g.variant));
  }
}

}  // namespace

Status launch_tgemm_gate_up(const GemmArgs& g, cudaStream_t s) {
  return tlaunch_variant<true>(g, s, "moe_prefill_tgemm<gate_up>");
}
Status launch_tgemm_down(const GemmArgs& g, cudaStream_t s) {
  return tlaunch_variant<false>(g, s, "moe_prefill_tgemm<down>");
}

}  // namespace gossamer::kern::moe_prefill

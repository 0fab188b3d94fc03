// Grouped MXFP4 x bf16 GEMMs of the MoE prefill on tensor cores (mma.sync m16n8k16 bf16 ->
// f32). A block computes one tile: BM = 16 MF sorted rows of one expert x BN = 32 x WN output
// columns; WN warps, each all BM rows x 32 columns (MF m16 x 4 n8 fragments, 16 MF f32
// accumulators); m16 fragments past the tile's valid rows are skipped (block-uniform).
// K advances in stages of 32 KBS (KBS MX blocks) through a kStages-deep cp.async ring:
//   A stage: [BM rows][4 KBS chunks of 16 B] bf16, chunk c of row r stored at c ^ ((r & 1) << 2)
//            (conflict-free 16-byte fragment loads);
//   B stage: [BN rows][KBS MX blocks x 16 B], rows padded by 16 B (conflict-free word loads);
//   scales:  [BN rows][K/32] bytes for the whole K: the tile's rows are one contiguous span of
//            the scale tensor, copied once per tile by 16-byte cp.async (from the 16-byte
//            granule holding its first byte; `skew` bytes in).
// k order: lane (g, q) = (lane / 4, lane % 4) owns word q of each MX block of its weight row,
// i.e. elements 8q..8q+7; it decodes them as 4 bf16x2 pairs P_i = (e_{8q+i}, e_{8q+i+4}) (bit
// placement gives E2M1 x 2^-126 exactly, one bf16x2 multiply by 2^(s-1) applies the scale).
// MMA 0 of the block takes P_0, P_1 as its b0, b1 and MMA 1 takes P_2, P_3; the activations are
// stored with every group of 8 permuted the same way, (e0,e4, e1,e5, e2,e6, e3,e7), so one
// 16-byte load gives a thread a0/a2 of both MMAs for one row.
#include <cuda_bf16.h>

#include <string>

#include "kernels/common/cuda_check.h"
#include "kernels/moe_prefill/common.cuh"
#include "kernels/moe_prefill/kernels.h"
#include "kernels/moe_prefill/layout.h"

namespace gossamer::kern::moe_prefill {
namespace {

// Tile configuration: WN warps along n, MF m16 fragments (BM = 16 MF rows), KBS MX blocks per
// K stage, kStages-deep ring, kMinBlocks for __launch_bounds__.
template <int WN, int MF, int KBS, int Stages, int MinBlocks>
struct Cfg {
  static constexpr int kMF = MF, kKBS = KBS, kStages = Stages, kMinBlocks = MinBlocks;
  static constexpr int kThreads = 32 * WN, kBN = 32 * WN, kBMc = 16 * MF;
  static constexpr int kCPR = 4 * KBS;         // 16-byte A chunks per row per stage
  static constexpr int kBRow = 16 * KBS + 16;  // bytes per weight row per stage (padded)
  static constexpr int kAStage = kBMc * 64 * KBS, kBStage = kBN * kBRow;  // bytes
  static constexpr int kAIters = kBMc * kCPR / kThreads;  // 16-byte A chunks per thread per stage
  static constexpr int kBIters = kBN * KBS / kThreads;    // 16-byte B chunks per thread per stage
  static_assert(kAIters * kThreads == kBMc * kCPR && kBIters * kThreads == kBN * KBS);
  static size_t smem_bytes(int K) {
    return kStages * (kAStage + kBStage) +
           ((static_cast<size_t>(kBN) * (K / 32) + 47) & ~size_t{15}) + kBMc * sizeof(int32_t);
  }
};

__device__ __forceinline__ void mma_bf16(float (&d)[4], uint4 lo, uint4 hi, int half, uint32_t b0,
                                         uint32_t b1) {
  const uint32_t a0 = half ? lo.z : lo.x, a1 = half ? hi.z : hi.x;
  const uint32_t a2 = half ? lo.w : lo.y, a3 = half ? hi.w : hi.y;
  asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

struct Tile : GemmTile {
  int nf;  // m16 fragments holding valid rows
};

// Issues the cp.async copies of K stage kt (A rows past the valid fragments are skipped).
template <class C>
__device__ __forceinline__ void load_stage(uint8_t* as, uint8_t* bs,
                                           const uint16_t* const (&arow)[C::kAIters],
                                           const uint8_t* wbase, const Tile& t, int N, int kt) {
  const int tid = threadIdx.x, c = tid % C::kCPR;
  const bool a_ok = C::kKBS * kt + c / 4 < t.KB;
#pragma unroll
  for (int i = 0; i < C::kAIters; ++i) {
    const int r = tid / C::kCPR + (C::kThreads / C::kCPR) * i;
    if (r >= 16 * t.nf) break;
    cp_async16(as + r * (C::kCPR * 16) + ((c ^ ((r & 1) << 2)) * 16),
               arow[i] + (a_ok ? kt * (32 * C::kKBS) + c * 8 : 0), a_ok ? 16 : 0);
  }
#pragma unroll
  for (int i = 0; i < C::kBIters; ++i) {
    const int idx = tid + C::kThreads * i, n = idx / C::kKBS, h = idx % C::kKBS;
    const int row = min(t.n0 + n, N - 1), kb = C::kKBS * kt + h;
    const bool ok = kb < t.KB;
    const uint8_t* src = wbase + (static_cast<size_t>(row) * t.KB + (ok ? kb : 0)) * 16;
    cp_async16(bs + n * C::kBRow + h * 16, src, ok ? 16 : 0);
  }
}

// acc += this stage's products for the warp's BM x 32 tile. An MX block past K is zero-filled
// in smem (its scale index is clamped so that no inf x 0 can appear).
template <class C>
__device__ __forceinline__ void compute_stage(const uint8_t* as, const uint8_t* bs,
                                              const uint8_t* ssc, int kt, const Tile& t,
                                              float (&acc)[C::kMF][4][4]) {
  const int lane = threadIdx.x % 32, g = lane / 4, q = lane % 4, wn = threadIdx.x / 32;
  uint32_t w[C::kKBS][4], sc[C::kKBS][4];  // all of the stage's words and scales first
#pragma unroll
  for (int kb = 0; kb < C::kKBS; ++kb) {
    const int kblk = min(C::kKBS * kt + kb, t.KB - 1);
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int row = wn * 32 + 8 * j + g;
      w[kb][j] = *reinterpret_cast<const uint32_t*>(bs + row * C::kBRow + kb * 16 + q * 4);
      sc[kb][j] = ssc[row * t.KB + kblk];
    }
  }
#pragma unroll
  for (int kb = 0; kb < C::kKBS; ++kb) {
    uint32_t b[4][4];
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const uint32_t m = scale_mul(sc[kb][j]);  // bf16x2 of 2^(scale - 1)
      b[j][0] = bf16x2_mul(e2m1_bf16x2<0>(w[kb][j]), m);
      b[j][1] = bf16x2_mul(e2m1_bf16x2<1>(w[kb][j]), m);
      b[j][2] = bf16x2_mul(e2m1_bf16x2<2>(w[kb][j]), m);
      b[j][3] = bf16x2_mul(e2m1_bf16x2<3>(w[kb][j]), m);
    }
    const int chunk = (4 * kb + q) ^ ((g & 1) << 2);
#pragma unroll
    for (int f = 0; f < C::kMF; ++f) {
      if (f >= t.nf) break;
      const uint8_t* a0 = as + (16 * f + g) * (C::kCPR * 16) + chunk * 16;
      const uint4 lo = *reinterpret_cast<const uint4*>(a0);
      const uint4 hi = *reinterpret_cast<const uint4*>(a0 + 8 * (C::kCPR * 16));
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        mma_bf16(acc[f][j], lo, hi, 0, b[j][0], b[j][1]);
        mma_bf16(acc[f][j], lo, hi, 1, b[j][2], b[j][3]);
      }
    }
  }
}

// Epilogues. Accumulator (f, j, 2h + u): row 16f + g + 8h, column n0 + 32 wn + 8j + 2q + u.
template <bool kGateUp, class C>
__device__ __forceinline__ void epilogue(const GemmArgs& g, const Tile& t, const int32_t* spair,
                                         float (&acc)[C::kMF][4][4]) {
  const int lane = threadIdx.x % 32, gr = lane / 4, q = lane % 4, wn = threadIdx.x / 32;
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const int n = t.n0 + wn * 32 + 8 * j + 2 * q;
    if (n >= g.N) continue;
    const float b0 = g.bias[static_cast<size_t>(t.e) * g.N + n];
    const float b1 = g.bias[static_cast<size_t>(t.e) * g.N + n + 1];
#pragma unroll
    for (int f = 0; f < C::kMF; ++f) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int r = 16 * f + gr + 8 * h;
        if (r >= t.rows) continue;
        const float v0 = acc[f][j][2 * h] + b0, v1 = acc[f][j][2 * h + 1] + b1;
        if constexpr (kGateUp) {
          const int I = g.N / 2, i = n / 2;
          const int col = (i & ~7) | perm8(i & 7);
          const __nv_bfloat16 a = __float2bfloat16_rn(swiglu(v0, v1, g.alpha, g.limit));
          g.act[static_cast<size_t>(t.row0 + r) * I + col] = *reinterpret_cast<const uint16_t*>(&a);
        } else {
          const int pair = spair[r];
          const float w = g.weights[pair];
          *reinterpret_cast<float2*>(g.y + static_cast<size_t>(pair) * g.N + n) =
              make_float2(w * v0, w * v1);
        }
      }
    }
  }
}

template <bool kGateUp, class C>
__global__ void __launch_bounds__(C::kThreads, C::kMinBlocks) moe_prefill_gemm(GemmArgs g) {
  if (static_cast<int>(blockIdx.x) >= *g.ntiles) return;
  extern __shared__ __align__(16) uint8_t smem[];
  uint8_t* as = smem;
  uint8_t* bs = as + C::kStages * C::kAStage;
  Tile t;
  const uint8_t* ssc = nullptr;
  const int32_t* spair = tile_prologue<C::kBMc, C::kBN, C::kKBS, C::kThreads>(
      g, blockIdx.x, blockIdx.y, bs + C::kStages * C::kBStage, t, &ssc);
  t.nf = (t.rows + 15) / 16;
  const int tid = threadIdx.x;
  __syncthreads();
  const uint16_t* arow[C::kAIters];
#pragma unroll
  for (int i = 0; i < C::kAIters; ++i) {
    const int r = tid / C::kCPR + (C::kThreads / C::kCPR) * i;
    const size_t src = kGateUp ? spair[r] / g.k : t.row0 + min(r, t.rows - 1);
    arow[i] = g.a + src * g.K;
  }
  const uint8_t* wbase = g.blocks + static_cast<size_t>(t.e) * g.N * t.KB * 16;
#pragma unroll
  for (int s = 0; s < C::kStages - 1; ++s) {
    if (s < t.nk) {
      load_stage<C>(as + s * C::kAStage, bs + s * C::kBStage, arow, wbase, t, g.N, s);
    }
    cp_commit();
  }
  float acc[C::kMF][4][4] = {};
  for (int kt = 0; kt < t.nk; ++kt) {
    cp_wait<C::kStages - 2>();
    __syncthreads();
    const int nxt = kt + C::kStages - 1;
    if (nxt < t.nk) {
      const int slot = nxt % C::kStages;
      load_stage<C>(as + slot * C::kAStage, bs + slot * C::kBStage, arow, wbase, t, g.N, nxt);
    }
    cp_commit();
    const int slot = kt % C::kStages;
    compute_stage<C>(as + slot * C::kAStage, bs + slot * C::kBStage, ssc, kt, t, acc);
  }
  cp_wait<0>();
  epilogue<kGateUp, C>(g, t, spair, acc);
}

}  // namespace

Status check_gemm_launch(const GemmArgs& g, int bm, size_t smem, const char* name) {
  if (bm != variant_bm(g.variant)) {  // the route kernel sized the tile list with it
    return Internal(std::string(name) + ": variant " + std::to_string(g.variant) + " has " +
                    std::to_string(bm) + "-row tiles, variant_bm says " +
                    std::to_string(variant_bm(g.variant)));
  }
  if (smem > 227 * 1024) {
    return Unsupported(std::string(name) + ": K = " + std::to_string(g.K) +
                       " needs too much shared memory for the scale tile");
  }
  return Status::Ok();
}

namespace {

template <bool kGateUp, class C>
Status launch_cfg(const GemmArgs& g, cudaStream_t s, const char* name) {
  const size_t smem = C::smem_bytes(g.K);
  GS_RETURN_IF_ERROR(check_gemm_launch(g, C::kBMc, smem, name));
  auto* fn = moe_prefill_gemm<kGateUp, C>;
  GS_CUDA_RETURN(cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                      static_cast<int>(smem)));
  const dim3 grid(g.max_tiles, (g.N + C::kBN - 1) / C::kBN);
  fn<<<grid, C::kThreads, smem, s>>>(g);
  return launch_status(name);
}

// The configurations selectable by GemmArgs::variant (see kernels.h).
template <bool kGateUp>
Status launch_gemm(const GemmArgs& g, cudaStream_t s, const char* name) {
  switch (g.variant) {
    case 0:
      return launch_cfg<kGateUp, Cfg<4, 4, 2, 4, 3>>(g, s, name);
    case 1:
      return launch_cfg<kGateUp, Cfg<4, 4, 2, 3, 4>>(g, s, name);
    case 2:
      return launch_cfg<kGateUp, Cfg<8, 4, 2, 3, 2>>(g, s, name);
    case 3:
      return launch_cfg<kGateUp, Cfg<8, 4, 2, 4, 2>>(g, s, name);
    case 6:
      return launch_cfg<kGateUp, Cfg<4, 2, 4, 3, 3>>(g, s, name);
    case kWgmmaVariant:
    case kWgmmaVariant + 1:
      return kGateUp ? launch_wgmma_gate_up(g, s) : launch_wgmma_down(g, s);
    case kTransVariant:
    case kTransVariant + 1:
    case kTransVariant + 2:
    case kTransVariant + 3:
    case kTransVariant + 4:
    case kTransVariant + 5:
      return kGateUp ? launch_tgemm_gate_up(g, s) : launch_tgemm_down(g, s);
    default:
      return InvalidArgument(std::string(name) + ": unknown variant " + std::to_string(g.variant));
  }
}

}  // namespace

Status launch_gemm_gate_up(const GemmArgs& g, cudaStream_t s) {
  return launch_gemm<true>(g, s, "moe_prefill_gemm<gate_up>");
}
Status launch_gemm_down(const GemmArgs& g, cudaStream_t s) {
  return launch_gemm<false>(g, s, "moe_prefill_gemm<down>");
}

}  // namespace gossamer::kern::moe_prefill

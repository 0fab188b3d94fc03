// wgmma variants (GemmArgs::variant 4, 5) of the grouped MXFP4 GEMMs: the product is computed
// transposed, D^T [weight rows x tokens] = W [rows x K] x X^T, so that the decoded weights are
// the register operand A of wgmma.mma_async m64nNk16 (no bf16 weight tile in smem) and the
// expert's token rows are the smem operand B with N = 16, 32 or 64 (the tile's valid rows
// rounded up to 16: fewer tokens, narrower MMAs).
// Block: 2 warpgroups (256 threads) x 64 weight rows = 128 rows; tile tokens kBM = 64.
// Per K stage of 64 (two MX blocks), a C::kStages ring filled by cp.async, prefetch distance
// C::kDist (two extra slots: the wgmmas of the previous stage may still read theirs):
//   activations: [64 tokens][64 k] bf16 as 8x8 core matrices (8 rows x 16 B), ((n/8)*8 + c)*128
//                + (n%8)*16 for token n, 16-byte chunk c; descriptor: no swizzle, LBO 128 B
//                (next chunk along K), SBO 1024 B (next 8 tokens);
//   weights: [128 rows][2 x 16 B] padded to 48 B; gate_up stores physical row 2i of each 16 at
//            smem row i and 2i+1 at i+8, so that a thread's two A rows (g, g+8) are gate and
//            up of the same output;
//   scales: [128 rows][K/32], whole K, as in gemm.cu.
// k order: a thread (g, q) owns word q of each MX block of its two rows; P_i = (e_{8q+i},
// e_{8q+i+4}); wgmma 0 of the block takes P_0 (a0/a1) and P_1 (a2/a3), wgmma 1 P_2, P_3. The
// activations are stored in the matching order perm32 (common.cuh) within each MX block.
#include <cuda_bf16.h>

#include <string>

#include "kernels/common/cuda_check.h"
#include "kernels/common/wgmma.cuh"
#include "kernels/moe_prefill/common.cuh"
#include "kernels/moe_prefill/kernels.h"
#include "kernels/moe_prefill/layout.h"

namespace gossamer::kern::moe_prefill {
namespace {

constexpr int kWThreads = 256, kWBN = 128;
constexpr int kWRow = 48;
constexpr int kActStage = kBM * 128, kWStage = kWBN * kWRow;  // bytes

// Ring depth, prefetch distance (Stages >= Dist + 2, see wrun), min blocks per SM.
template <int Stages, int Dist, int MinBlocks>
struct WCfg {
  static constexpr int kStages = Stages, kDist = Dist, kMinBlocks = MinBlocks;
  static_assert(Stages >= Dist + 2);
};

template <class C>
size_t wsmem_bytes(int K) {
  return C::kStages * (kActStage + kWStage) +
         ((static_cast<size_t>(kWBN) * (K / 32) + 47) & ~size_t{15}) + kBM * sizeof(int32_t);
}

__device__ __forceinline__ uint64_t smem_desc(const void* p) {
  return wg::desc(static_cast<uint32_t>(__cvta_generic_to_shared(p)), 128, 1024);
}

__device__ __forceinline__ void wgmma_n16(float (&d)[8], uint32_t a0, uint32_t a1, uint32_t a2,
                                          uint32_t a3, uint64_t desc) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %13, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n16k16.f32.bf16.bf16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7}, "
      "{%8, %9, %10, %11}, %12, p, 1, 1, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]),
        "+f"(d[7])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "l"(desc), "r"(1));
}
__device__ __forceinline__ void wgmma_n32(float (&d)[16], uint32_t a0, uint32_t a1, uint32_t a2,
                                          uint32_t a3, uint64_t desc) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %21, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15}, "
      "{%16, %17, %18, %19}, %20, p, 1, 1, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]),
        "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]),
        "+f"(d[14]), "+f"(d[15])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "l"(desc), "r"(1));
}
__device__ __forceinline__ void wgmma_n64(float (&d)[32], uint32_t a0, uint32_t a1, uint32_t a2,
                                          uint32_t a3, uint64_t desc) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, "
      "%20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, "
      "{%32, %33, %34, %35}, %36, p, 1, 1, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]),
        "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]),
        "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]),
        "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]),
        "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "l"(desc), "r"(1));
}

template <int NT>
__device__ __forceinline__ void wgmma(float (&d)[NT / 2], uint32_t a0, uint32_t a1, uint32_t a2,
                                      uint32_t a3, uint64_t desc) {
  if constexpr (NT == 16) {
    wgmma_n16(d, a0, a1, a2, a3, desc);
  } else if constexpr (NT == 32) {
    wgmma_n32(d, a0, a1, a2, a3, desc);
  } else {
    wgmma_n64(d, a0, a1, a2, a3, desc);
  }
}

// cp.async copies of K stage kt: NT token rows of activations, 128 weight rows.
template <bool kGateUp, int NT>
__device__ __forceinline__ void wload_stage(uint8_t* as, uint8_t* ws,
                                            const uint16_t* const (&arow)[2], const uint8_t* wbase,
                                            const GemmTile& t, int N, int kt) {
  const int tid = threadIdx.x;
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int idx = tid + kWThreads * i, c = (idx / 8) % 8, n = 8 * (idx / 64) + idx % 8;
    if (n >= NT) break;
    const bool ok = 2 * kt + c / 4 < t.KB;
    cp_async16(as + ((n / 8) * 8 + c) * 128 + (n % 8) * 16, arow[i] + (ok ? kt * 64 + c * 8 : 0),
               ok ? 16 : 0);
  }
  const int n = tid / 2, h = tid % 2, kb = 2 * kt + h;
  const int row = min(t.n0 + n, N - 1);
  const bool ok = kb < t.KB;
  cp_async16(ws + pair_row_smem<kGateUp>(n) * kWRow + h * 16,
             wbase + (static_cast<size_t>(row) * t.KB + (ok ? kb : 0)) * 16, ok ? 16 : 0);
}

// Decodes this thread's A fragments of stage kt and issues the stage's 4 wgmmas.
template <bool kGateUp, int NT>
__device__ __forceinline__ void wcompute_stage(const uint8_t* as, const uint8_t* ws,
                                               const uint8_t* ssc, int kt, const GemmTile& t,
                                               uint32_t (&a)[2][2][4], float (&d)[NT / 2]) {
  const int lane = threadIdx.x % 32, g = lane / 4, q = lane % 4;
  const int base16 = (threadIdx.x / 32) * 16;  // warp w of warpgroup wg: rows 64 wg + 16 w
  const int p0 = kGateUp ? base16 + 2 * g : base16 + g, p1 = kGateUp ? p0 + 1 : p0 + 8;
#pragma unroll
  for (int kb = 0; kb < 2; ++kb) {
    const int kblk = min(2 * kt + kb, t.KB - 1);
    const uint32_t w0 =
        *reinterpret_cast<const uint32_t*>(ws + (base16 + g) * kWRow + kb * 16 + 4 * q);
    const uint32_t w1 =
        *reinterpret_cast<const uint32_t*>(ws + (base16 + g + 8) * kWRow + kb * 16 + 4 * q);
    const uint32_t m0 = scale_mul(ssc[p0 * t.KB + kblk]), m1 = scale_mul(ssc[p1 * t.KB + kblk]);
    a[kb][0][0] = bf16x2_mul(e2m1_bf16x2<0>(w0), m0);
    a[kb][0][1] = bf16x2_mul(e2m1_bf16x2<0>(w1), m1);
    a[kb][0][2] = bf16x2_mul(e2m1_bf16x2<1>(w0), m0);
    a[kb][0][3] = bf16x2_mul(e2m1_bf16x2<1>(w1), m1);
    a[kb][1][0] = bf16x2_mul(e2m1_bf16x2<2>(w0), m0);
    a[kb][1][1] = bf16x2_mul(e2m1_bf16x2<2>(w1), m1);
    a[kb][1][2] = bf16x2_mul(e2m1_bf16x2<3>(w0), m0);
    a[kb][1][3] = bf16x2_mul(e2m1_bf16x2<3>(w1), m1);
  }
  wg::fence();
#pragma unroll
  for (int kb = 0; kb < 2; ++kb) {
#pragma unroll
    for (int m = 0; m < 2; ++m) {
      wgmma<NT>(d, a[kb][m][0], a[kb][m][1], a[kb][m][2], a[kb][m][3],
                smem_desc(as + (2 * (2 * kb + m)) * 128));
    }
  }
  wg::commit();
}

// Epilogue. d[4i + u] = D^T[row p0][token 8i + 2q + u], d[4i + 2 + u] = [row p1][same token].
template <bool kGateUp, int NT>
__device__ __forceinline__ void wepilogue(const GemmArgs& g, const GemmTile& t,
                                          const int32_t* spair, const float (&d)[NT / 2]) {
  const int lane = threadIdx.x % 32, gr = lane / 4, q = lane % 4;
  const int base16 = (threadIdx.x / 32) * 16;
  const int p0 = t.n0 + (kGateUp ? base16 + 2 * gr : base16 + gr);
  const int p1 = kGateUp ? p0 + 1 : p0 + 8;
  const size_t eb = static_cast<size_t>(t.e) * g.N;
  const float b0 = g.bias[eb + min(p0, g.N - 1)], b1 = g.bias[eb + min(p1, g.N - 1)];
#pragma unroll
  for (int i = 0; i < NT / 8; ++i) {
#pragma unroll
    for (int u = 0; u < 2; ++u) {
      const int tt = 8 * i + 2 * q + u;
      if (tt >= t.rows) continue;
      if constexpr (kGateUp) {
        if (p1 >= g.N) continue;
        const int I = g.N / 2, fi = p0 / 2;
        const __nv_bfloat16 v =
            __float2bfloat16_rn(swiglu(d[4 * i + u] + b0, d[4 * i + 2 + u] + b1, g.alpha, g.limit));
        g.act[static_cast<size_t>(t.row0 + tt) * I + (fi & ~31) + perm32(fi & 31)] =
            *reinterpret_cast<const uint16_t*>(&v);
      } else {
        const int pair = spair[tt];
        const float w = g.weights[pair];
        float* yr = g.y + static_cast<size_t>(pair) * g.N;
        if (p0 < g.N) yr[p0] = w * (d[4 * i + u] + b0);
        if (p1 < g.N) yr[p1] = w * (d[4 * i + 2 + u] + b1);
      }
    }
  }
}

template <bool kGateUp, int NT, class C>
__device__ __forceinline__ void wrun(const GemmArgs& g, const GemmTile& t, uint8_t* smem,
                                     const uint8_t* ssc, const int32_t* spair) {
  uint8_t* as = smem;
  uint8_t* ws = as + C::kStages * kActStage;
  const int tid = threadIdx.x;
  const uint16_t* arow[2];
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int idx = tid + kWThreads * i, n = min(8 * (idx / 64) + idx % 8, kBM - 1);
    const size_t src = kGateUp ? spair[n] / g.k : t.row0 + min(n, t.rows - 1);
    arow[i] = g.a + src * g.K;
  }
  const uint8_t* wbase = g.blocks + static_cast<size_t>(t.e) * g.N * t.KB * 16;
#pragma unroll
  for (int s = 0; s < C::kDist; ++s) {
    if (s < t.nk)
      wload_stage<kGateUp, NT>(as + s * kActStage, ws + s * kWStage, arow, wbase, t, g.N, s);
    cp_commit();
  }
  float d[NT / 2];
#pragma unroll
  for (int i = 0; i < NT / 2; ++i) d[i] = 0.f;
  wg::fence_regs(d);
  // One K stage: wait for its copies, refill the slot freed two stages ago, decode A into `a`,
  // issue the wgmmas and wait for them. The wait must be wg::wait<0>: the first version kept
  // one stage in flight (wg::wait<1>) and measured wrong, run-to-run different results on the
  // H200 (K >= 256 with 64-token tiles): ptxas does not keep the A registers a pending wgmma
  // still reads from being rewritten by the next stage's decode. The <0> version has not run
  // on a GPU yet (docs/moe-prefill.md).
  auto stage = [&](int kt, uint32_t(&a)[2][2][4]) {
    cp_wait<C::kDist - 1>();
    wg::fence_async_smem();
    __syncthreads();
    const int nxt = kt + C::kDist;
    if (nxt < t.nk) {
      const int slot = nxt % C::kStages;
      wload_stage<kGateUp, NT>(as + slot * kActStage, ws + slot * kWStage, arow, wbase, t, g.N,
                               nxt);
    }
    cp_commit();
    const int slot = kt % C::kStages;
    wcompute_stage<kGateUp, NT>(as + slot * kActStage, ws + slot * kWStage, ssc, kt, t, a, d);
    wg::wait<0>();
  };
  uint32_t a[2][2][4];  // [kb][wgmma of the MX block][a0..a3]
  for (int kt = 0; kt < t.nk; ++kt) stage(kt, a);
  wg::wait<0>();
  wg::fence_regs(d);
  cp_wait<0>();
  wepilogue<kGateUp, NT>(g, t, spair, d);
}

template <bool kGateUp, class C>
__global__ void __launch_bounds__(kWThreads, C::kMinBlocks) moe_prefill_wgmma(GemmArgs g) {
  if (static_cast<int>(blockIdx.x) >= *g.ntiles) return;
  extern __shared__ __align__(128) uint8_t smem[];
  GemmTile t;
  const uint8_t* ssc = nullptr;
  const int32_t* spair = tile_prologue<kBM, kWBN, 2, kWThreads>(
      g, blockIdx.x, blockIdx.y, smem + C::kStages * (kActStage + kWStage), t, &ssc);
  __syncthreads();
  if (t.rows <= 16) {
    wrun<kGateUp, 16, C>(g, t, smem, ssc, spair);
  } else if (t.rows <= 32) {
    wrun<kGateUp, 32, C>(g, t, smem, ssc, spair);
  } else {
    wrun<kGateUp, 64, C>(g, t, smem, ssc, spair);
  }
}

template <bool kGateUp, class C>
Status wlaunch(const GemmArgs& g, cudaStream_t s, const char* name) {
  const size_t smem = wsmem_bytes<C>(g.K);
  GS_RETURN_IF_ERROR(check_gemm_launch(g, kBM, smem, name));
  auto* fn = moe_prefill_wgmma<kGateUp, C>;
  GS_CUDA_RETURN(cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                      static_cast<int>(smem)));
  const dim3 grid(g.max_tiles, (g.N + kWBN - 1) / kWBN);
  fn<<<grid, kWThreads, smem, s>>>(g);
  return launch_status(name);
}

}  // namespace

// Variant 4: 6-slot ring, 4 stages ahead, 2 blocks/SM; variant 5: 4 slots, 2 ahead, 3 blocks/SM.
Status launch_wgmma_gate_up(const GemmArgs& g, cudaStream_t s) {
  if (g.variant == kWgmmaVariant) {
    return wlaunch<true, WCfg<6, 4, 2>>(g, s, "moe_prefill_wgmma<gate_up>");
  }
  return wlaunch<true, WCfg<4, 2, 3>>(g, s, "moe_prefill_wgmma<gate_up, 3/SM>");
}
Status launch_wgmma_down(const GemmArgs& g, cudaStream_t s) {
  if (g.variant == kWgmmaVariant) {
    return wlaunch<false, WCfg<6, 4, 2>>(g, s, "moe_prefill_wgmma<down>");
  }
  return wlaunch<false, WCfg<4, 2, 3>>(g, s, "moe_prefill_wgmma<down, 3/SM>");
}

}  // namespace gossamer::kern::moe_prefill

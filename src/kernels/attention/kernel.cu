// attn_decode_split_bf16kv_f32q: grid (splits, kvh, batch), 128 threads. A CTA owns one kv head,
// all G = nh/kvh query heads that share it, and one contiguous split of the row's context
// ([lo, pos] cut into `splits` equal chunks, computed on the device from pos so the launch can
// live in a CUDA graph while positions advance). Tiles of 128 tokens: thread t loads token t's
// K row (128 B, through the block table) and computes its G scores (q pre-scaled by
// scale*log2(e), kept in smem); warps then do the online softmax per head (max, rescale, sum);
// for P.V thread t owns head t/16 (+8, +16 ...) and dims 4*(t%16)..+3, reading V rows (the G
// heads share each row, so it is fetched once through L1). Output: unnormalised o, (m, l).
// attn_combine_f32: grid batch*nh, 64 threads (one per dim): merges the splits and the sink.
// This scalar pair is AttnParams::kernel == 0; the default (kernel 1) forwards to the
// tensor-core kernel in kernels/flash_attn (narrow variant for decode batches), see
// docs/attention.md.
#include <cfloat>

#include "kernels/attention/decode_mma.h"
#include "kernels/attention/params.h"
#include "kernels/common/cuda_check.h"
#include "kernels/common/device.cuh"
#include "kernels/common/pdl.cuh"
#include "kernels/common/pdl.h"
#include "kernels/common/split_combine.cuh"
#include "kernels/flash_attn/params.h"

namespace gossamer::kern {
namespace {

constexpr int kThreads = 128, kTile = 128, kMaxG = 16, kD = 64;
constexpr float kLog2e = 1.4426950408889634f;
static_assert(kThreads == kTile, "one token per thread per tile");
static_assert((kThreads / 16) * 2 >= kMaxG, "P.V: each thread owns at most 2 heads");

// Thread t scores token ts + t of the tile against the G query heads (sc[g][t]; -FLT_MAX past
// t1) and records its K/V row offset.
__device__ __forceinline__ void tile_scores(const AttnParams& p, const int* table, int kh, int G,
                                            int ts, int t1, const float (&qs)[kMaxG][kD],
                                            float (&sc)[kMaxG][kTile], size_t (&off)[kTile]) {
  const int tid = threadIdx.x, t = ts + tid;
  if (t >= t1) {
    for (int g = 0; g < G; ++g) sc[g][tid] = -FLT_MAX;
    return;
  }
  const int blk = table[t / p.block_size];
  const size_t o =
      ((static_cast<size_t>(blk) * p.n_kv_heads + kh) * p.block_size + t % p.block_size) * kD;
  off[tid] = o;
  const uint4* kp = reinterpret_cast<const uint4*>(p.k_cache + o);
  float s[kMaxG] = {};
#pragma unroll
  for (int c = 0; c < kD / 8; ++c) {
    const uint4 kv = kp[c];
    const float k8[8] = {bf16_lo(kv.x), bf16_hi(kv.x), bf16_lo(kv.y), bf16_hi(kv.y),
                         bf16_lo(kv.z), bf16_hi(kv.z), bf16_lo(kv.w), bf16_hi(kv.w)};
#pragma unroll
    for (int g = 0; g < kMaxG; ++g) {
      if (g < G) {  // q as two broadcast float4 smem loads per 8 dims
        const float4 qa = *reinterpret_cast<const float4*>(&qs[g][c * 8]);
        const float4 qb = *reinterpret_cast<const float4*>(&qs[g][c * 8 + 4]);
        s[g] = fmaf(qa.x, k8[0], s[g]);
        s[g] = fmaf(qa.y, k8[1], s[g]);
        s[g] = fmaf(qa.z, k8[2], s[g]);
        s[g] = fmaf(qa.w, k8[3], s[g]);
        s[g] = fmaf(qb.x, k8[4], s[g]);
        s[g] = fmaf(qb.y, k8[5], s[g]);
        s[g] = fmaf(qb.z, k8[6], s[g]);
        s[g] = fmaf(qb.w, k8[7], s[g]);
      }
    }
  }
#pragma unroll
  for (int g = 0; g < kMaxG; ++g)
    if (g < G) sc[g][tid] = s[g];
}

// Online softmax of the tile: warp w updates heads w, w + 4, ... (m_run / l_run slot j), turns
// sc into probabilities and leaves each head's rescale factor in alpha_s.
__device__ __forceinline__ void tile_softmax(int G, float (&sc)[kMaxG][kTile],
                                             float (&alpha_s)[kMaxG], float (&m_run)[kMaxG / 4],
                                             float (&l_run)[kMaxG / 4]) {
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
#pragma unroll
  for (int j = 0; j < kMaxG / 4; ++j) {
    const int g = warp + 4 * j;
    if (g >= G) break;
    float mx = -FLT_MAX;
    for (int i = lane; i < kTile; i += 32) mx = fmaxf(mx, sc[g][i]);
    mx = warp_max(mx);
    const float m_new = fmaxf(m_run[j], mx);
    float sum = 0.f;
    for (int i = lane; i < kTile; i += 32) {
      const float e = exp2f(sc[g][i] - m_new);  // -FLT_MAX entries -> 0
      sc[g][i] = e;
      sum += e;
    }
    sum = warp_sum(sum);
    const float alpha = exp2f(m_run[j] - m_new);
    l_run[j] = l_run[j] * alpha + sum;
    m_run[j] = m_new;
    if (lane == 0) alpha_s[g] = alpha;
  }
}

// P.V of the tile's nt tokens: thread t accumulates heads t / 16 (+8) at dims d4..d4 + 3.
__device__ __forceinline__ void tile_pv(const AttnParams& p, int G, int nt, int d4,
                                        const float (&sc)[kMaxG][kTile],
                                        const float (&alpha_s)[kMaxG], const size_t (&off)[kTile],
                                        float (&acc)[2][4]) {
  const int tid = threadIdx.x;
#pragma unroll
  for (int j = 0; j < 2; ++j) {
    const int g = tid / 16 + 8 * j;
    if (g >= G) break;
    const float a = alpha_s[g];
#pragma unroll
    for (int e = 0; e < 4; ++e) acc[j][e] *= a;
    for (int tt = 0; tt < nt; ++tt) {
      const float pr = sc[g][tt];
      const uint2 vv = *reinterpret_cast<const uint2*>(p.v_cache + off[tt] + d4);
      acc[j][0] = fmaf(pr, bf16_lo(vv.x), acc[j][0]);
      acc[j][1] = fmaf(pr, bf16_hi(vv.x), acc[j][1]);
      acc[j][2] = fmaf(pr, bf16_lo(vv.y), acc[j][2]);
      acc[j][3] = fmaf(pr, bf16_hi(vv.y), acc[j][3]);
    }
  }
}

__global__ void __launch_bounds__(kThreads) attn_decode_split_bf16kv_f32q(AttnParams p) {
  __shared__ __align__(16) float qs[kMaxG][kD];
  __shared__ float sc[kMaxG][kTile];
  __shared__ float alpha_s[kMaxG];
  __shared__ size_t off[kTile];
  const int split = blockIdx.x, kh = blockIdx.y, b = blockIdx.z, tid = threadIdx.x;
  pdl_wait();  // q and this step's K/V row come from qkv_rope
  pdl_trigger();
  const int G = p.n_heads / p.n_kv_heads;
  const int pos = p.pos[b];
  const int lo = p.window > 0 ? max(0, pos - p.window + 1) : 0;
  const int len = pos + 1 - lo;
  const int chunk = (len + p.splits - 1) / p.splits;
  const int t0 = lo + split * chunk, t1 = min(pos + 1, t0 + chunk);
  for (int i = tid; i < G * kD; i += kThreads) {
    qs[i / kD][i % kD] = p.q[(static_cast<size_t>(b) * p.n_heads + kh * G + i / kD) * kD + i % kD] *
                         p.scale * kLog2e;
  }
  float m_run[kMaxG / 4], l_run[kMaxG / 4];  // warp w owns heads w, w+4, w+8, w+12
#pragma unroll
  for (int j = 0; j < kMaxG / 4; ++j) m_run[j] = -FLT_MAX, l_run[j] = 0.f;
  float acc[2][4] = {};
  const int warp = tid >> 5, lane = tid & 31, d4 = (tid & 15) * 4;
  const int* table =
      p.block_table + static_cast<size_t>(p.row_seq ? p.row_seq[b] : b) * p.max_blocks;
  __syncthreads();
  for (int ts = t0; ts < t1; ts += kTile) {
    tile_scores(p, table, kh, G, ts, t1, qs, sc, off);
    __syncthreads();
    tile_softmax(G, sc, alpha_s, m_run, l_run);
    __syncthreads();
    tile_pv(p, G, min(kTile, t1 - ts), d4, sc, alpha_s, off, acc);
    __syncthreads();
  }
  // Write partials: o[b, h, split, :], ml[b, h, split, :].
#pragma unroll
  for (int j = 0; j < 2; ++j) {
    const int g = tid / 16 + 8 * j;
    if (g >= G) break;
    const size_t row = (static_cast<size_t>(b) * p.n_heads + kh * G + g) * p.splits + split;
    *reinterpret_cast<float4*>(p.part_o + row * kD + d4) =
        make_float4(acc[j][0], acc[j][1], acc[j][2], acc[j][3]);
  }
#pragma unroll
  for (int j = 0; j < kMaxG / 4; ++j) {
    const int g = warp + 4 * j;
    if (g >= G) break;
    if (lane == 0) {
      const size_t row = (static_cast<size_t>(b) * p.n_heads + kh * G + g) * p.splits + split;
      p.part_ml[row * 2] = t0 < t1 ? m_run[j] : -FLT_MAX;
      p.part_ml[row * 2 + 1] = l_run[j];
    }
  }
}

__global__ void __launch_bounds__(kD) attn_combine_f32(AttnParams p) {
  const int bh = blockIdx.x, d = threadIdx.x;
  pdl_wait();  // partials come from the split kernel
  pdl_trigger();
  combine_splits_with_sink<kD>(p.part_ml, p.part_o, p.sinks[bh % p.n_heads], p.splits, bh, d,
                               p.out);
}

}  // namespace

Status launch_attention(const AttnParams& p, cudaStream_t s) {
  GS_RETURN_IF_ERROR(p.validate());
  if (p.kernel != 0 && p.tickets && p.batch <= 64) return launch_attention_decode_mma(p, s);
  if (p.kernel != 0) {
    FlashAttnParams f;
    f.q = p.q;
    f.k_cache = p.k_cache;
    f.v_cache = p.v_cache;
    f.block_table = p.block_table;
    f.row_seq = p.row_seq;
    f.pos = p.pos;
    f.sinks = p.sinks;
    f.out = p.out;
    f.part_o = p.part_o;
    f.part_ml = p.part_ml;
    f.tokens = p.batch;
    f.n_heads = p.n_heads;
    f.n_kv_heads = p.n_kv_heads;
    f.block_size = p.block_size;
    f.max_blocks = p.max_blocks;
    f.num_blocks = p.num_blocks;
    f.window = p.window;
    f.splits = p.splits;
    f.scale = p.scale;
    f.variant = p.batch <= 64 ? 1 : 2;
    f.stages = p.stages;
    f.precise = p.kernel == 1;
    f.pdl = p.pdl;
    return launch_flash_attn(f, s);
  }
  GS_RETURN_IF_ERROR(launch_pdl(p.pdl, "attn_decode_split_bf16kv_f32q",
                                attn_decode_split_bf16kv_f32q,
                                dim3(p.splits, p.n_kv_heads, p.batch), dim3(kThreads), 0, s, p));
  return launch_pdl(p.pdl, "attn_combine_f32", attn_combine_f32, dim3(p.batch * p.n_heads),
                    dim3(kD), 0, s, p);
}

}  // namespace gossamer::kern

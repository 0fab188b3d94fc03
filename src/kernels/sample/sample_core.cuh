// Shared pieces of the device sampler (sampler.cu: the multi-block passes; finish.cu: the
// per-row finish). The pipeline per launch (all four kernels are always launched; a block whose
// row does not need a phase returns at once):
//   1. sample_stats   grid (B, rows) x 256: penalties of the block's slice, then per-block max,
//      sum exp, argmax key, bad flag -> RowWs::part[b]. Also clears the row's histogram.
//   2. sample_hist    grid (B, rows) x 256: the row's max from the partials; per block the mass
//      sum (RowWs::part[b].wmass), the min_p cut and a 2048-bin histogram of the top 11 key
//      bits (count + mass), added to the row's histogram; the last block (atomic ticket) picks
//      the lowest bin a filter or the top_logprobs can reach (RowWs::plan).
//   3. sample_compact grid (B, rows) x 256: keys in bins >= plan.thr -> RowWs::cand.
//   4. sample_finish  grid (rows) x 1024: selects and the draw over the candidates (in shared
//      memory), or over the whole row when they overflowed kCap.
// B = ceil(vocab / kChunk) blocks per row, block b owns ids [b * kChunk, (b + 1) * kChunk).
#pragma once

#include <cuda_runtime.h>

#include "common/status.h"
#include "kernels/common/gemv_core.cuh"
#include "kernels/sample/params.h"

namespace gossamer::kern::samp {

using u64 = unsigned long long;
constexpr int kPT = 256;                        // threads of the multi-block kernels
constexpr int kPer = 8;                         // logits per thread in those
constexpr int kChunk = kPT * kPer;              // logits per block
constexpr int kMaxBlocks = (1 << 18) / kChunk;  // vocab <= 2^18
constexpr int kBins = 2048;                     // first radix level: key bits 63..53
constexpr int kCap = kSampleCandidates;         // candidate keys per row
constexpr float kFix = 1099511627776.f;         // masses are w * 2^40, w = exp((z - max) / T) <= 1
constexpr u64 kOne = 1ull << 40;
// Bits 31..18 of every key: ~id for ids < 2^18 (never histogrammed; part of every cut so that a
// cut taken at a value level still orders correctly against keys of the same value).
constexpr u64 kIdHigh = 0x3FFFull << 18;
constexpr int kNoPlan = kBins;  // plan.thr: no candidates were gathered

struct Partial {  // one block's share of a row (sample_stats, then wmass by sample_hist)
  float m, s;     // max and sum exp(z - m) of the slice
  int bad, pad;   // a NaN or +inf in the slice
  u64 best;       // argmax key of the slice
  u64 wmass;      // sum of the slice's fixed-point masses (temperature > 0)
};

struct Plan {
  int thr;       // candidates: keys whose top 11 bits are >= thr (kNoPlan: none gathered)
  int do_top_p;  // 0: the top_p cut is surely below the min_p cut (skip its select)
};

struct RowWs {   // per-row workspace (SampleParams::workspace), rewritten by every launch
  u64 wsum;      // total mass (temperature > 0)
  u64 minp_cut;  // smallest key with w >= min_p (~0 when none / off)
  unsigned cand_n, ticket;
  Plan plan;
  Partial part[kMaxBlocks];
  unsigned cnt[kBins];  // histogram of key bits 63..53: counts
  u64 mass[kBins];      //                                masses
  u64 cand[kCap];       // candidate keys (any order)
};

__device__ __forceinline__ RowWs& row_ws(const SampleParams& p, int row) {
  return reinterpret_cast<RowWs*>(p.workspace)[row];
}
__device__ __forceinline__ int row_vocab(const SampleRowParams& rp, int vocab) {
  return rp.vocab_limit > 0 && rp.vocab_limit < vocab ? rp.vocab_limit : vocab;
}
__device__ __forceinline__ bool top_k_on(const SampleRowParams& rp, int V) {
  return rp.top_k > 0 && rp.top_k < V;
}
__device__ __forceinline__ bool filtered(const SampleRowParams& rp, int V) {
  return rp.temperature > 0.f && (top_k_on(rp, V) || rp.top_p < 1.f || rp.min_p > 0.f);
}
__device__ __forceinline__ bool needs_hist(const SampleRowParams& rp, int V) {
  return filtered(rp, V) || rp.top_logprobs > 0;
}

// exp((x - mx) / T) and its fixed-point mass. Every pass uses exactly these two functions, so
// the masses (and their integer sums) agree bit for bit between the kernels.
__device__ __forceinline__ float wexp(float x, float mx, float inv_t) {
  return expf((x - mx) * inv_t);
}
__device__ __forceinline__ u64 wfix_e(float x, float mx, float e) {
  return x - mx == 0.f ? kOne : __float2ull_rn(e * kFix);
}
__device__ __forceinline__ u64 wfix(float x, float mx, float inv_t) {
  return wfix_e(x, mx, wexp(x, mx, inv_t));
}

// The logit of a key (inverse of argmax_key's value half).
__device__ __forceinline__ float key_value(u64 k) {
  const unsigned u = static_cast<unsigned>(k >> 32);
  return __uint_as_float((u & 0x80000000u) ? (u & 0x7fffffffu) : ~u);
}

__device__ __forceinline__ void ms_combine(float& m, float& s, float m2, float s2) {
  if (m2 == -INFINITY) return;
  if (m == -INFINITY) {
    m = m2, s = s2;
    return;
  }
  const float mx = fmaxf(m, m2);
  s = s * expf(m - mx) + s2 * expf(m2 - mx);
  m = mx;
}

// Exclusive prefix sum in thread order over NT threads; *total = the block sum.
// red: [NT / 32] shared scratch. Starts with a barrier.
template <int NT>
__device__ u64 block_excl_scan(u64 v, u64* red, u64* total) {
  constexpr int kW = NT / 32;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  u64 incl = v;
  for (int o = 1; o < 32; o <<= 1) {
    const u64 n = __shfl_up_sync(~0u, incl, o);
    if (lane >= o) incl += n;
  }
  __syncthreads();
  if (lane == 31) red[warp] = incl;
  __syncthreads();
  u64 before = 0, tot = 0;
  for (int w = 0; w < kW; ++w) {
    const u64 x = red[w];
    if (w < warp) before += x;
    tot += x;
  }
  *total = tot;
  return before + incl - v;
}

enum class Op { kSum, kMax, kMin };

template <Op op>
__device__ __forceinline__ u64 apply(u64 a, u64 b) {
  if constexpr (op == Op::kSum) return a + b;
  if constexpr (op == Op::kMax) return a > b ? a : b;
  return a < b ? a : b;
}

// Every thread gets the same result. red: [NT / 32] shared scratch. Starts with a barrier.
template <int NT, Op op>
__device__ u64 block_reduce(u64 v, u64* red) {
  for (int o = 16; o > 0; o >>= 1) v = apply<op>(v, __shfl_xor_sync(~0u, v, o));
  __syncthreads();
  if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = v;
  __syncthreads();
  v = red[0];
  for (int w = 1; w < NT / 32; ++w) v = apply<op>(v, red[w]);
  return v;
}

struct RowStats {
  float m, s;  // max and sum exp(z - m) over the row
  int bad;
  u64 best;  // argmax key
};

// The row's stats from sample_stats' nb partials, combined in one fixed order (every block of
// every kernel gets the same values). out: shared. Starts and ends with a barrier.
__device__ inline RowStats row_stats(const RowWs& ws, int nb, RowStats* out) {
  __syncthreads();
  if (threadIdx.x < 32) {
    float m = -INFINITY, s = 0.f;
    int bad = 0;
    u64 best = 0;
    for (int j = threadIdx.x; j < nb; j += 32) {
      const Partial& q = ws.part[j];
      ms_combine(m, s, q.m, q.s);
      bad |= q.bad;
      best = max(best, q.best);
    }
    for (int o = 16; o > 0; o >>= 1) {
      const float m2 = __shfl_xor_sync(~0u, m, o), s2 = __shfl_xor_sync(~0u, s, o);
      ms_combine(m, s, m2, s2);
      bad |= __shfl_xor_sync(~0u, bad, o);
      best = max(best, __shfl_xor_sync(~0u, best, o));
    }
    if (threadIdx.x == 0) *out = {m, s, bad, best};
  }
  __syncthreads();
  return *out;
}

// The bin of a descending walk over a histogram: by count, the bin holding the need-th largest
// key; by mass, the bin where the running mass first reaches need (need <= the total).
struct Pick {
  u64 bin, in_bin, c_above, m_above, bin_mass;
};

// cnt/mass: [nb] shared (mass read only when `masses`; by_mass needs it). NT threads; thread t
// owns the bins nb-1-t*per ... (descending). red: [NT / 32] shared scratch; out: shared. Every
// thread gets the result.
template <int NT>
__device__ Pick pick_bin(const unsigned* cnt, const u64* mass, int nb, bool masses, bool by_mass,
                         u64 need, u64* red, Pick* out) {
  const int per = (nb + NT - 1) / NT, top = nb - 1 - per * static_cast<int>(threadIdx.x);
  u64 c = 0, m = 0;
  for (int j = 0; j < per; ++j) {
    const int b = top - j;
    if (b >= 0) c += cnt[b], m += masses ? mass[b] : 0ull;
  }
  if (threadIdx.x == 0) *out = {0, 0, 0, 0, 0};
  u64 tot;
  u64 ca = block_excl_scan<NT>(c, red, &tot);
  u64 ma = block_excl_scan<NT>(m, red, &tot);
  for (int j = 0; j < per; ++j) {
    const int b = top - j;
    if (b < 0) break;
    const u64 cb = cnt[b], mb = masses ? mass[b] : 0ull;
    const bool hit = by_mass ? (ma < need && need <= ma + mb) : (ca < need && need <= ca + cb);
    if (hit) *out = {static_cast<u64>(b), cb, ca, ma, mb};
    ca += cb, ma += mb;
  }
  __syncthreads();
  const Pick r = *out;
  __syncthreads();  // everyone has read *out before it is reused
  return r;
}

// The last kernel (finish.cu): one 1024-thread block per row.
Status launch_sample_finish(const SampleParams& p, cudaStream_t stream);

}  // namespace gossamer::kern::samp

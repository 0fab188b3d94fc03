// sample_rows_f32: grid (rows), 1024 threads; one block samples one logits row (params.h).
// Passes over the row (L2-resident after the first): penalties (scattered), max / argmax /
// sum exp, then for temperature > 0: total mass + min_p cut, a radix select per active filter
// (top_k by count, top_p by mass; 11/11/10 bits of the value, 11/7 bits of the id, stopping as
// soon as the chosen bin is taken whole), the survivors' mass (block scan in thread-major
// order) and a one-warp walk to the drawn token; a count select for the top_logprobs.
// Every selection is "key >= cut" on the unique 64-bit key (value bits, ~id), so ties resolve to
// the lower id exactly like the CPU sampler's sort.
#include <cmath>

#include "kernels/common/cuda_check.h"
#include "kernels/common/gemv_core.cuh"
#include "kernels/sample/params.h"

namespace gossamer::kern {
namespace {

using u64 = unsigned long long;
constexpr int kT = 1024, kW = kT / 32, kBins = 2048, kLevels = 5;
constexpr float kFix = 1099511627776.f;  // masses are w * 2^40, w = exp((z - max) / T) <= 1
constexpr u64 kOne = 1ull << 40;
// Bits 31..18 of every key: ~id for ids < 2^18 (never histogrammed; part of every cut so that a
// cut taken at a value level still orders correctly against keys of the same value).
constexpr u64 kIdHigh = 0x3FFFull << 18;
constexpr int kUnroll = 8;  // loads in flight per thread in a pass over the row

// f(z[i], i) for this thread's elements i = tid, tid + kT, ... < V, in that order; the loads of
// kUnroll consecutive elements are issued before any is used (a pass is latency-bound otherwise:
// one block per row).
template <class F>
__device__ __forceinline__ void for_each(const float* z, int V, F&& f) {
  int i = threadIdx.x;
  for (; i + (kUnroll - 1) * kT < V; i += kUnroll * kT) {
    float v[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) v[u] = z[i + u * kT];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) f(v[u], i + u * kT);
  }
  for (; i < V; i += kT) f(z[i], i);
}

struct Smem {
  unsigned cnt[kBins];  // radix histogram: counts
  u64 mass[kBins];      //                  masses
  u64 red[kW];          // block reductions / scans
  float redf[2 * kW];
  u64 sel[4];  // the chosen bin: digit, count in bin, count above, mass above (+ mass in bin)
  u64 sel_mass;
  int owner, drawn, top_n;
  u64 top_key[kMaxTopLogprobs];
};

// Radix levels over the 64-bit key: bits 63..32 (value), then the id's low 18 bits (~id's bits
// 31..18 are all ones for ids < 2^18).
__device__ __forceinline__ void level(int l, int& shift, int& bits) {
  switch (l) {
    case 0:
      shift = 53, bits = 11;
      break;
    case 1:
      shift = 42, bits = 11;
      break;
    case 2:
      shift = 32, bits = 10;
      break;
    case 3:
      shift = 7, bits = 11;
      break;
    default:
      shift = 0, bits = 7;
      break;
  }
}

__device__ __forceinline__ u64 wfix(float x, float mx, float inv_t) {
  const float d = x - mx;
  if (d == 0.f) return kOne;
  return __float2ull_rn(expf(d * inv_t) * kFix);
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

enum class Op { kSum, kMax, kMin };

template <Op op>
__device__ __forceinline__ u64 apply(u64 a, u64 b) {
  if constexpr (op == Op::kSum) return a + b;
  if constexpr (op == Op::kMax) return a > b ? a : b;
  return a < b ? a : b;
}

// Every thread gets the same result (same order of operations).
template <Op op>
__device__ u64 block_reduce(u64 v, Smem& sm) {
  for (int o = 16; o > 0; o >>= 1) v = apply<op>(v, __shfl_xor_sync(~0u, v, o));
  __syncthreads();
  if ((threadIdx.x & 31) == 0) sm.red[threadIdx.x >> 5] = v;
  __syncthreads();
  v = sm.red[0];
  for (int w = 1; w < kW; ++w) v = apply<op>(v, sm.red[w]);
  return v;
}

__device__ void block_reduce_ms(float& m, float& s, Smem& sm) {
  for (int o = 16; o > 0; o >>= 1) {
    const float m2 = __shfl_xor_sync(~0u, m, o), s2 = __shfl_xor_sync(~0u, s, o);
    ms_combine(m, s, m2, s2);
  }
  __syncthreads();
  if ((threadIdx.x & 31) == 0) sm.redf[threadIdx.x >> 5] = m, sm.redf[kW + (threadIdx.x >> 5)] = s;
  __syncthreads();
  m = -INFINITY, s = 0.f;
  for (int w = 0; w < kW; ++w) ms_combine(m, s, sm.redf[w], sm.redf[kW + w]);
}

// Exclusive prefix sum in thread order; *total = the sum over the block.
__device__ u64 block_excl_scan(u64 v, Smem& sm, u64* total) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  u64 incl = v;
  for (int o = 1; o < 32; o <<= 1) {
    const u64 n = __shfl_up_sync(~0u, incl, o);
    if (lane >= o) incl += n;
  }
  __syncthreads();
  if (lane == 31) sm.red[warp] = incl;
  __syncthreads();
  u64 before = 0, tot = 0;
  for (int w = 0; w < kW; ++w) {
    const u64 x = sm.red[w];
    if (w < warp) before += x;
    tot += x;
  }
  *total = tot;
  return before + incl - v;
}

// The cut of a radix select over keys of z[0, V): by count, the `need` largest keys; by mass,
// the shortest descending prefix whose mass reaches `need`. Selected = {key >= cut}. With
// want_mass, *sel_mass = the selected mass (count mode).
__device__ u64 radix_select(const float* z, int V, float mx, float inv_t, bool by_mass, u64 need,
                            bool want_mass, u64* sel_mass, Smem& sm) {
  const int tid = threadIdx.x;
  u64 prefix = kIdHigh, mask = kIdHigh, acc = 0;
  const bool masses = want_mass || by_mass;
  for (int l = 0; l < kLevels; ++l) {
    int shift, bits;
    level(l, shift, bits);
    const int nb = 1 << bits;
    for (int b = tid; b < nb; b += kT) sm.cnt[b] = 0, sm.mass[b] = 0;
    __syncthreads();
    for_each(z, V, [&](float x, int i) {
      const u64 k = argmax_key(x, i);
      if ((k & mask) != prefix) return;
      const int d = static_cast<int>((k >> shift) & (nb - 1));
      atomicAdd(&sm.cnt[d], 1u);
      if (masses) {
        const u64 w = wfix(x, mx, inv_t);
        if (w) atomicAdd(&sm.mass[d], w);
      }
    });
    __syncthreads();
    // Thread t owns bins nb-1-2t and nb-2-2t: thread order is descending key order.
    const int b0 = nb - 1 - 2 * tid, b1 = b0 - 1;
    const u64 c0 = b0 >= 0 ? sm.cnt[b0] : 0, c1 = b1 >= 0 ? sm.cnt[b1] : 0;
    const u64 m0 = b0 >= 0 ? sm.mass[b0] : 0, m1 = b1 >= 0 ? sm.mass[b1] : 0;
    u64 tot;
    const u64 ca0 = block_excl_scan(c0 + c1, sm, &tot);
    const u64 ma0 = block_excl_scan(m0 + m1, sm, &tot);
    const u64 ca1 = ca0 + c0, ma1 = ma0 + m0;
    const bool hit0 = by_mass ? (ma0 < need && need <= ma1) : (ca0 < need && need <= ca1);
    const bool hit1 = by_mass ? (ma1 < need && need <= ma1 + m1) : (ca1 < need && need <= ca1 + c1);
    if (hit0) sm.sel[0] = b0, sm.sel[1] = c0, sm.sel[2] = ca0, sm.sel[3] = ma0, sm.sel_mass = m0;
    if (hit1) sm.sel[0] = b1, sm.sel[1] = c1, sm.sel[2] = ca1, sm.sel[3] = ma1, sm.sel_mass = m1;
    __syncthreads();
    const u64 bin = sm.sel[0], in_bin = sm.sel[1], c_above = sm.sel[2], m_above = sm.sel[3];
    const u64 bin_mass = sm.sel_mass;
    prefix |= bin << shift;
    mask |= static_cast<u64>(nb - 1) << shift;
    acc += m_above;
    need -= by_mass ? m_above : c_above;
    if ((by_mass && in_bin == 1) || (!by_mass && in_bin == need)) {
      acc += bin_mass;
      break;
    }
  }
  __syncthreads();  // every thread has read sm.sel before anyone reuses it
  if (sel_mass) *sel_mass = acc;
  return prefix;
}

// The survivors' cut for temperature > 0 (min_p, top_k, top_p; the strictest wins).
__device__ u64 filter_cut(const float* z, int V, float mx, float inv_t, const SampleRowParams& rp,
                          Smem& sm) {
  u64 wsum = 0, minp_cut = ~0ull;
  const float min_p = rp.min_p;
  for_each(z, V, [&](float x, int i) {
    wsum += wfix(x, mx, inv_t);
    if (min_p > 0.f && (x == mx || expf((x - mx) * inv_t) >= min_p)) {
      minp_cut = min(minp_cut, argmax_key(x, i));
    }
  });
  wsum = block_reduce<Op::kSum>(wsum, sm);
  u64 cut = rp.min_p > 0.f ? block_reduce<Op::kMin>(minp_cut, sm) : 0ull;
  u64 wk = wsum;
  if (rp.top_k > 0 && rp.top_k < V) {
    cut = max(cut, radix_select(z, V, mx, inv_t, false, rp.top_k, true, &wk, sm));
  }
  if (rp.top_p < 1.f) {
    u64 target = static_cast<u64>(ceil(static_cast<double>(rp.top_p) * static_cast<double>(wk)));
    target = min(max(target, 1ull), wk);
    cut = max(cut, radix_select(z, V, mx, inv_t, true, target, false, nullptr, sm));
  }
  return cut;
}

// Draws one survivor (key >= cut) with probability mass / survivor mass. Order of the walk:
// thread-major (thread t's elements t, t + 1024, ...), then the owner's elements by one warp.
__device__ int draw(const float* z, int V, float mx, float inv_t, u64 cut, u64 rnd, int fallback,
                    u64* survivor_mass, Smem& sm) {
  const int tid = threadIdx.x, lane = tid & 31;
  u64 mine = 0;  // this thread's elements (tid, tid + kT, ...): the walk below uses the same
  for_each(z, V, [&](float x, int i) {
    if (argmax_key(x, i) >= cut) mine += wfix(x, mx, inv_t);
  });
  if (tid == 0) sm.drawn = fallback, sm.owner = 0, sm.sel[0] = 0;
  u64 total;
  const u64 before = block_excl_scan(mine, sm, &total);  // (starts with a barrier)
  const u64 r = __umul64hi(rnd, total);                  // uniform in [0, total)
  if (mine > 0 && before <= r && r < before + mine) sm.owner = tid, sm.sel[0] = before;
  __syncthreads();
  if (tid < 32) {
    const int owner = sm.owner;
    u64 acc = sm.sel[0];
    for (int j0 = 0; owner + j0 * kT < V; j0 += 32) {
      const int i = owner + (j0 + lane) * kT;
      u64 w = 0;
      if (i < V && argmax_key(z[i], i) >= cut) w = wfix(z[i], mx, inv_t);
      u64 c = w;
      for (int o = 1; o < 32; o <<= 1) {
        const u64 n = __shfl_up_sync(~0u, c, o);
        if (lane >= o) c += n;
      }
      const unsigned hit = __ballot_sync(~0u, acc + c > r);
      if (hit) {
        if (lane == __ffs(hit) - 1) sm.drawn = i;
        break;
      }
      acc += __shfl_sync(~0u, c, 31);
    }
  }
  __syncthreads();
  *survivor_mass = total;
  return sm.drawn;
}

// The top_logprobs alternatives: a count select, then the <= 20 keys sorted by one thread.
__device__ void top_logprobs(const float* z, int V, int n, float lse, SampleRowOut* out, Smem& sm) {
  const u64 cut = radix_select(z, V, 0.f, 0.f, false, n, false, nullptr, sm);
  if (threadIdx.x == 0) sm.top_n = 0;
  __syncthreads();
  for_each(z, V, [&](float x, int i) {
    const u64 k = argmax_key(x, i);
    if (k >= cut) {
      const int slot = atomicAdd(&sm.top_n, 1);
      if (slot < kMaxTopLogprobs) sm.top_key[slot] = k;
    }
  });
  __syncthreads();
  if (threadIdx.x != 0) return;
  const int cnt = min(sm.top_n, kMaxTopLogprobs);
  for (int a = 1; a < cnt; ++a) {  // insertion sort, descending
    const u64 k = sm.top_key[a];
    int b = a - 1;
    for (; b >= 0 && sm.top_key[b] < k; --b) sm.top_key[b + 1] = sm.top_key[b];
    sm.top_key[b + 1] = k;
  }
  for (int a = 0; a < cnt; ++a) {
    const int id = argmax_key_index(sm.top_key[a]);
    out->top_ids[a] = id;
    out->top_logprobs[a] = z[id] - lse;
  }
  out->n_top = cnt;
}

__global__ void __launch_bounds__(kT) sample_rows_f32(SampleParams p) {
  __shared__ Smem sm;
  const SampleRowParams rp = p.row[blockIdx.x];
  if (!rp.active) return;
  const int tid = threadIdx.x;
  float* z = p.logits + static_cast<size_t>(blockIdx.x) * p.ld;
  float* dbg = p.debug_probs ? p.debug_probs + static_cast<size_t>(blockIdx.x) * p.ld : nullptr;
  SampleRowOut* out = p.out + blockIdx.x;
  const int V = rp.vocab_limit > 0 && rp.vocab_limit < p.vocab ? rp.vocab_limit : p.vocab;
  if (rp.pen_count > 0) {  // 1. penalties, in place (distinct ids)
    for (int j = tid; j < rp.pen_count; j += kT) {
      const int t = p.pen_tokens[rp.pen_offset + j], c = p.pen_counts[rp.pen_offset + j];
      if (t >= 0 && t < V && c > 0) z[t] -= rp.presence + rp.frequency * static_cast<float>(c);
    }
    __syncthreads();
  }
  float m = -INFINITY, s = 0.f;  // 2. max, argmax, sum exp (online)
  u64 best = 0;
  int bad = 0;
  for_each(z, V, [&](float x, int i) {
    if (isnan(x) || x == INFINITY) {
      bad = 1;
      return;
    }
    best = max(best, argmax_key(x, i));
    if (x == -INFINITY) return;
    if (x > m) {
      s = s * expf(m - x) + 1.f;
      m = x;
    } else {
      s += expf(x - m);
    }
  });
  bad = __syncthreads_or(bad);
  best = block_reduce<Op::kMax>(best, sm);
  block_reduce_ms(m, s, sm);
  if (bad || m == -INFINITY) {
    if (tid == 0) {
      out->token = -1, out->logprob = 0.f, out->n_top = 0;
      out->status = bad ? kSampleNonFinite : kSampleAllMasked;
    }
    if (dbg)
      for (int i = tid; i < p.ld; i += kT) dbg[i] = -1.f;
    return;
  }
  const float lse = m + logf(s);
  int token = argmax_key_index(best);
  u64 cut = best, smass = kOne;
  float inv_t = 0.f;
  if (rp.temperature > 0.f) {  // 3. filters and the draw
    inv_t = 1.f / rp.temperature;
    cut = filter_cut(z, V, m, inv_t, rp, sm);
    token = draw(z, V, m, inv_t, cut, sample_random64(rp.seed, rp.counter), token, &smass, sm);
  }
  const int nt = min(rp.top_logprobs, V);
  if (nt > 0) {
    top_logprobs(z, V, nt, lse, out, sm);
  } else if (tid == 0) {
    out->n_top = 0;
  }
  if (tid == 0) out->token = token, out->logprob = z[token] - lse, out->status = kSampleOk;
  if (dbg) {  // survivors' probabilities (test/debug mode)
    const double inv_mass = static_cast<double>(kOne) / static_cast<double>(smass);
    for (int i = tid; i < p.ld; i += kT) {
      float v = -1.f;
      if (i < V && argmax_key(z[i], i) >= cut) {
        const double w = rp.temperature > 0.f && z[i] != m ? expf((z[i] - m) * inv_t) : 1.0;
        v = static_cast<float>(w * inv_mass);
      }
      dbg[i] = v;
    }
  }
}

}  // namespace

Status launch_sample(const SampleParams& p, cudaStream_t s) {
  GS_RETURN_IF_ERROR(p.validate());
  sample_rows_f32<<<p.rows, kT, 0, s>>>(p);
  return launch_status("sample_rows_f32");
}

}  // namespace gossamer::kern

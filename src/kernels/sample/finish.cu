// sample_finish: grid (rows) x 1024 threads, one block per row, after the multi-block passes
// (sampler.cu). The row's max / lse / argmax come from the partials; temperature > 0 with a
// filter: radix selects (top_k by count, top_p by mass; 11/11/10 bits of the value, 11/7 bits of
// the id, stopping as soon as the chosen bin is taken whole) and the draw (a mass select for the
// random point) over the candidate keys in shared memory, or over the whole row when they
// overflowed; unfiltered: the draw walks the blocks' masses, then one 2048-id slice, in id order;
// top_logprobs: a count select, then a sort of <= 20 keys.
// Every selection is "key >= cut" on the unique 64-bit key (value bits, ~id), so ties resolve to
// the lower id exactly like the CPU sampler's sort.
#include <cmath>

#include "kernels/common/cuda_check.h"
#include "kernels/sample/sample_core.cuh"

namespace gossamer::kern::samp {
namespace {

constexpr int kT = 1024, kLevels = 5;
constexpr int kUnroll = 8;  // loads in flight per thread in a pass over a whole row

struct Smem {
  unsigned cnt[kBins];  // radix histogram: counts
  u64 mass[kBins];      //                  masses
  u64 red[kT / 32];     // block reductions / scans
  Pick pick;
  RowStats st;
  u64 base;
  int owner, drawn, top_n, pad;
  u64 top_key[kMaxTopLogprobs];
};

// The keys of a whole logits row: f(key, z[i]) for this thread's ids tid, tid + kT, ...
struct RowSrc {
  const float* z;
  int V;
  template <class F>
  __device__ __forceinline__ void for_each(F&& f) const {
    int i = threadIdx.x;
    for (; i + (kUnroll - 1) * kT < V; i += kUnroll * kT) {
      float v[kUnroll];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) v[u] = z[i + u * kT];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) f(argmax_key(v[u], i + u * kT), v[u]);
    }
    for (; i < V; i += kT) f(argmax_key(z[i], i), z[i]);
  }
};

// The candidate keys (shared memory): f(key, value).
struct CandSrc {
  const u64* keys;
  int n;
  template <class F>
  __device__ __forceinline__ void for_each(F&& f) const {
    for (int j = threadIdx.x; j < n; j += kT) f(keys[j], key_value(keys[j]));
  }
};

// Radix levels over the 64-bit key: bits 63..32 (value), then the id's low 18 bits (~id's bits
// 31..18 are all ones for ids < 2^18).
__device__ __forceinline__ void level(int l, int& shift, int& bits) {
  constexpr int kShift[kLevels] = {53, 42, 32, 7, 0}, kBits[kLevels] = {11, 11, 10, 11, 7};
  shift = kShift[l], bits = kBits[l];
}

// The cut of a radix select over the keys >= lo of src: by count, the `need` largest; by mass,
// the shortest descending prefix whose mass reaches `need` (<= their total). Selected =
// {key >= cut} (and >= lo). With sel_mass: *sel_mass = the selected mass.
template <class Src>
__device__ u64 radix_select(const Src& src, float mx, float inv_t, bool by_mass, u64 need, u64 lo,
                            u64* sel_mass, Smem& sm) {
  const int tid = threadIdx.x;
  u64 prefix = kIdHigh, mask = kIdHigh, acc = 0;
  const bool masses = sel_mass != nullptr || by_mass;
  for (int l = 0; l < kLevels; ++l) {
    int shift, bits;
    level(l, shift, bits);
    const int nb = 1 << bits;
    for (int b = tid; b < nb; b += kT) sm.cnt[b] = 0, sm.mass[b] = 0;
    __syncthreads();
    src.for_each([&](u64 k, float x) {
      if (k < lo || (k & mask) != prefix) return;
      const int d = static_cast<int>((k >> shift) & (nb - 1));
      atomicAdd(&sm.cnt[d], 1u);
      if (masses) {
        const u64 w = wfix(x, mx, inv_t);
        if (w) atomicAdd(&sm.mass[d], w);
      }
    });
    __syncthreads();
    const Pick pk = pick_bin<kT>(sm.cnt, sm.mass, nb, masses, by_mass, need, sm.red, &sm.pick);
    prefix |= pk.bin << shift;
    mask |= static_cast<u64>(nb - 1) << shift;
    acc += pk.m_above;
    need -= by_mass ? pk.m_above : pk.c_above;
    if ((by_mass && pk.in_bin == 1) || (!by_mass && pk.in_bin == need)) {
      acc += pk.bin_mass;
      break;
    }
  }
  if (sel_mass) *sel_mass = acc;
  return prefix;
}

struct Draw {
  int token;
  u64 cut, mass;  // survivors: key >= cut; their total mass
};

// temperature > 0 with filters: the survivors' cut (min_p from sample_hist; top_k; top_p, unless
// the plan knows min_p is stricter), then the draw: a mass select of the random point over the
// survivors in descending key order.
template <class Src>
__device__ Draw draw_filtered(const Src& src, const SampleRowParams& rp, int V, float mx,
                              float inv_t, const RowWs& ws, const Plan& plan, u64 rnd, int fallback,
                              Smem& sm) {
  u64 cut = rp.min_p > 0.f ? ws.minp_cut : 0ull, wk = ws.wsum;
  if (top_k_on(rp, V)) {
    cut = max(cut, radix_select(src, mx, inv_t, false, rp.top_k, 0ull, &wk, sm));
  }
  if (rp.top_p < 1.f && plan.do_top_p) {
    u64 target = static_cast<u64>(ceil(static_cast<double>(rp.top_p) * static_cast<double>(wk)));
    target = min(max(target, 1ull), wk);
    cut = max(cut, radix_select(src, mx, inv_t, true, target, 0ull, nullptr, sm));
  }
  u64 mine = 0;
  src.for_each([&](u64 k, float x) {
    if (k >= cut) mine += wfix(x, mx, inv_t);
  });
  const u64 total = block_reduce<kT, Op::kSum>(mine, sm.red);
  const u64 r = __umul64hi(rnd, total);  // uniform in [0, total)
  const u64 pt = radix_select(src, mx, inv_t, true, r + 1, cut, nullptr, sm);
  const u64 lo = max(pt, cut);
  u64 least = ~0ull;  // the drawn key: the smallest selected one
  src.for_each([&](u64 k, float) {
    if (k >= lo) least = min(least, k);
  });
  least = block_reduce<kT, Op::kMin>(least, sm.red);
  return {least == ~0ull ? fallback : argmax_key_index(least), cut, total};
}

// temperature > 0, no filter: the block of sample_hist whose mass holds the random point
// (blocks in id order), then that block's 2048 ids in id order (2 per thread).
__device__ int draw_unfiltered(const float* z, int V, int nb, float mx, float inv_t,
                               const RowWs& ws, u64 rnd, int fallback, Smem& sm) {
  const int tid = threadIdx.x;
  const u64 r = __umul64hi(rnd, ws.wsum);
  const u64 v = tid < nb ? ws.part[tid].wmass : 0ull;
  if (tid == 0) sm.owner = -1, sm.base = 0, sm.drawn = fallback;
  u64 tot;
  const u64 before = block_excl_scan<kT>(v, sm.red, &tot);
  if (v > 0 && before <= r && r < before + v) sm.owner = tid, sm.base = before;
  __syncthreads();
  const int ob = sm.owner;
  if (ob < 0) return fallback;
  const u64 rr = r - sm.base;
  const int i0 = ob * kChunk + 2 * tid, hi = min(V, (ob + 1) * kChunk);
  const u64 w0 = i0 < hi ? wfix(z[i0], mx, inv_t) : 0ull;
  const u64 w1 = i0 + 1 < hi ? wfix(z[i0 + 1], mx, inv_t) : 0ull;
  const u64 b = block_excl_scan<kT>(w0 + w1, sm.red, &tot);
  if (b <= rr && rr < b + w0 + w1) sm.drawn = rr < b + w0 ? i0 : i0 + 1;
  __syncthreads();
  return sm.drawn;
}

// The top_logprobs alternatives: a count select, then the <= 20 keys sorted by one thread.
template <class Src>
__device__ void top_logprobs(const Src& src, const float* z, int n, float lse, SampleRowOut* out,
                             Smem& sm) {
  const u64 cut = radix_select(src, 0.f, 0.f, false, static_cast<u64>(n), 0ull, nullptr, sm);
  if (threadIdx.x == 0) sm.top_n = 0;
  __syncthreads();
  src.for_each([&](u64 k, float) {
    if (k >= cut) {
      const int slot = atomicAdd(&sm.top_n, 1);
      if (slot < kMaxTopLogprobs) sm.top_key[slot] = k;
    }
  });
  __syncthreads();
  if (threadIdx.x == 0) {
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
  __syncthreads();
}

// debug_probs: each survivor's renormalised probability, -1 elsewhere.
__device__ void write_debug(float* dbg, const float* z, int V, int ld, float mx, float inv_t,
                            bool temp, u64 cut, u64 smass) {
  const double inv_mass = static_cast<double>(kOne) / static_cast<double>(smass);
  for (int i = threadIdx.x; i < ld; i += kT) {
    float v = -1.f;
    if (i < V && argmax_key(z[i], i) >= cut) {
      const double w = temp && z[i] != mx ? wexp(z[i], mx, inv_t) : 1.0;
      v = static_cast<float>(w * inv_mass);
    }
    dbg[i] = v;
  }
}

__global__ void __launch_bounds__(kT) sample_finish(SampleParams p) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  Smem& sm = *reinterpret_cast<Smem*>(smem_raw);
  u64* keys = reinterpret_cast<u64*>(smem_raw + sizeof(Smem));  // [kCap]
  const int row = blockIdx.x, tid = threadIdx.x;
  const SampleRowParams rp = p.row[row];
  if (!rp.active) return;
  const RowWs& ws = row_ws(p, row);
  const int V = row_vocab(rp, p.vocab), nb = (p.vocab + kChunk - 1) / kChunk;
  const float* z = p.logits + static_cast<size_t>(row) * p.ld;
  float* dbg = p.debug_probs ? p.debug_probs + static_cast<size_t>(row) * p.ld : nullptr;
  SampleRowOut* out = p.out + row;
  const RowStats st = row_stats(ws, nb, &sm.st);
  if (st.bad || st.m == -INFINITY) {
    if (tid == 0) {
      out->token = -1, out->logprob = 0.f, out->n_top = 0;
      out->status = st.bad ? kSampleNonFinite : kSampleAllMasked;
    }
    if (dbg)
      for (int i = tid; i < p.ld; i += kT) dbg[i] = -1.f;
    return;
  }
  const float lse = st.m + logf(st.s);
  const Plan plan = ws.plan;
  const int n_cand = static_cast<int>(ws.cand_n);
  const bool use_cand = plan.thr < kNoPlan && n_cand <= kCap;
  if (use_cand) {
    for (int j = tid; j < n_cand; j += kT) keys[j] = ws.cand[j];
    __syncthreads();
  }
  const RowSrc rsrc{z, V};
  const CandSrc csrc{keys, n_cand};
  int token = argmax_key_index(st.best);
  u64 cut = st.best, smass = kOne;
  const bool temp = rp.temperature > 0.f && rp.force_token < 0;  // a forced row draws nothing
  const float inv_t = temp ? 1.f / rp.temperature : 0.f;
  if (temp) {
    const u64 rnd = sample_random64(rp.seed, rp.counter);
    if (filtered(rp, V)) {
      const Draw d = use_cand ? draw_filtered(csrc, rp, V, st.m, inv_t, ws, plan, rnd, token, sm)
                              : draw_filtered(rsrc, rp, V, st.m, inv_t, ws, plan, rnd, token, sm);
      token = d.token, cut = d.cut, smass = d.mass;
    } else {
      token = draw_unfiltered(z, V, nb, st.m, inv_t, ws, rnd, token, sm);
      cut = 0, smass = ws.wsum;
    }
  }
  const int nt = min(rp.top_logprobs, V);
  if (nt > 0) {
    if (use_cand) {
      top_logprobs(csrc, z, nt, lse, out, sm);
    } else {
      top_logprobs(rsrc, z, nt, lse, out, sm);
    }
  } else if (tid == 0) {
    out->n_top = 0;
  }
  if (tid == 0) {
    if (rp.force_token >= 0) token = rp.force_token;  // scoring: the given id, nothing drawn
    out->token = token, out->status = kSampleOk;
    out->logprob = token < V ? z[token] - lse : -INFINITY;
  }
  if (dbg) write_debug(dbg, z, V, p.ld, st.m, inv_t, temp, cut, smass);
}

}  // namespace

Status launch_sample_finish(const SampleParams& p, cudaStream_t s) {
  constexpr size_t kSmem = sizeof(Smem) + kCap * sizeof(u64);
  static_assert(kSmem <= 227 * 1024, "sample_finish: shared memory over the sm_90 opt-in limit");
  GS_CUDA_RETURN(
      cudaFuncSetAttribute(sample_finish, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem));
  sample_finish<<<p.rows, kT, kSmem, s>>>(p);
  return launch_status("sample_finish");
}

}  // namespace gossamer::kern::samp

// The device sampler's multi-block passes over the logits rows (sample_stats, sample_hist,
// sample_compact; see sample_core.cuh for the pipeline) and launch_sample.
// grid (B = ceil(vocab / 2048), rows) x 256 threads: block b owns ids [2048 b, 2048 (b + 1)),
// 8 per thread (thread t: 2048 b + t + 256 u, u < 8), all loads issued before any is used.
#include <cmath>

#include "kernels/common/cuda_check.h"
#include "kernels/sample/sample_core.cuh"

namespace gossamer::kern {
namespace samp {
namespace {

// This thread's ids in the block's slice of a row with V ids (id < 0: outside the row).
__device__ __forceinline__ void slice_ids(int V, int (&ids)[kPer]) {
  const int base = blockIdx.x * kChunk + threadIdx.x;
#pragma unroll
  for (int u = 0; u < kPer; ++u) ids[u] = base + u * kPT < V ? base + u * kPT : -1;
}

__device__ __forceinline__ void load_slice(const float* z, const int (&ids)[kPer],
                                           float (&x)[kPer]) {
#pragma unroll
  for (int u = 0; u < kPer; ++u) x[u] = ids[u] >= 0 ? z[ids[u]] : -INFINITY;
}

// 1. Penalties (in place), then the slice's max / sum exp / argmax / bad flag.
__global__ void __launch_bounds__(kPT) sample_stats(SampleParams p) {
  const int row = blockIdx.y, tid = threadIdx.x;
  const SampleRowParams rp = p.row[row];
  if (!rp.active) return;
  RowWs& ws = row_ws(p, row);
  for (int i = blockIdx.x * kPT + tid; i < kBins; i += gridDim.x * kPT)
    ws.cnt[i] = 0, ws.mass[i] = 0;
  if (blockIdx.x == 0 && tid == 0) {
    ws.wsum = 0, ws.minp_cut = ~0ull, ws.cand_n = 0, ws.ticket = 0;
    ws.plan = {kNoPlan, 0};
  }
  float* z = p.logits + static_cast<size_t>(row) * p.ld;
  const int V = row_vocab(rp, p.vocab), lo = blockIdx.x * kChunk, hi = min(V, lo + kChunk);
  if (rp.pen_count > 0 && lo < V) {  // distinct ids; each block the ones in its slice
    for (int j = tid; j < rp.pen_count; j += kPT) {
      const int t = p.pen_tokens[rp.pen_offset + j], c = p.pen_counts[rp.pen_offset + j];
      const float b = p.pen_bias ? p.pen_bias[rp.pen_offset + j] : 0.f;
      if (t < lo || t >= hi || (c <= 0 && b == 0.f)) continue;
      float v = b != 0.f ? z[t] + b : z[t];
      if (c > 0) v -= rp.presence + rp.frequency * static_cast<float>(c);
      z[t] = v;
    }
    __syncthreads();
  }
  int ids[kPer];
  float x[kPer];
  slice_ids(V, ids);
  load_slice(z, ids, x);
  float m = -INFINITY, s = 0.f;
  u64 best = 0;
  int bad = 0;
#pragma unroll
  for (int u = 0; u < kPer; ++u) {
    if (ids[u] < 0) continue;
    if (isnan(x[u]) || x[u] == INFINITY) {
      bad = 1;
      continue;
    }
    best = max(best, argmax_key(x[u], ids[u]));
    ms_combine(m, s, x[u], 1.f);
  }
  __shared__ float redf[2 * kPT / 32];
  __shared__ u64 red[kPT / 32];
  for (int o = 16; o > 0; o >>= 1) {
    const float m2 = __shfl_xor_sync(~0u, m, o), s2 = __shfl_xor_sync(~0u, s, o);
    ms_combine(m, s, m2, s2);
  }
  const int warp = tid >> 5;
  if ((tid & 31) == 0) redf[warp] = m, redf[kPT / 32 + warp] = s;
  bad = __syncthreads_or(bad);
  best = block_reduce<kPT, Op::kMax>(best, red);
  if (tid == 0) {
    m = -INFINITY, s = 0.f;
    for (int w = 0; w < kPT / 32; ++w) ms_combine(m, s, redf[w], redf[kPT / 32 + w]);
    Partial& q = ws.part[blockIdx.x];
    q.m = m, q.s = s, q.bad = bad, q.best = best;
  }
}

// The last block of sample_hist: the lowest bin any filter / the top_logprobs can reach.
__device__ void plan_row(RowWs& ws, const SampleRowParams& rp, int V, unsigned* cnt, u64* mass,
                         u64* red, Pick* pick) {
  const bool masses = filtered(rp, V) && rp.top_p < 1.f;
  for (int b = threadIdx.x; b < kBins; b += kPT) {
    cnt[b] = __ldcg(&ws.cnt[b]);
    mass[b] = masses ? __ldcg(&ws.mass[b]) : 0ull;
  }
  __syncthreads();
  const u64 wsum = __ldcg(&ws.wsum), minp_cut = __ldcg(&ws.minp_cut);
  int thr = kBins, do_top_p = 0;
  if (filtered(rp, V)) {
    const bool tk = top_k_on(rp, V), mp = rp.min_p > 0.f;
    const int b_m = mp ? static_cast<int>(minp_cut >> 53) : -1;
    int b_s = b_m;
    if (tk) {  // the top_k set holds every survivor (and the top_p prefix)
      b_s =
          static_cast<int>(pick_bin<kPT>(cnt, mass, kBins, false, false, rp.top_k, red, pick).bin);
      do_top_p = rp.top_p < 1.f;
    } else if (rp.top_p < 1.f) {  // the exact top_p target (no top_k: the mass is wsum)
      u64 target =
          static_cast<u64>(ceil(static_cast<double>(rp.top_p) * static_cast<double>(wsum)));
      target = min(max(target, 1ull), wsum);
      const int b_p =
          static_cast<int>(pick_bin<kPT>(cnt, mass, kBins, true, true, target, red, pick).bin);
      do_top_p = b_p >= b_m;  // else cut_p < cut_min_p: min_p decides
      b_s = max(b_p, b_m);
    }
    thr = b_s;
  }
  const int n = min(rp.top_logprobs, V);
  if (n > 0) {
    thr =
        min(thr, static_cast<int>(pick_bin<kPT>(cnt, mass, kBins, false, false, n, red, pick).bin));
  }
  if (threadIdx.x == 0) ws.plan = {thr, do_top_p};
}

// 2. Masses, min_p cut and the first-level histogram (see sample_core.cuh).
__global__ void __launch_bounds__(kPT) sample_hist(SampleParams p) {
  const int row = blockIdx.y, tid = threadIdx.x;
  const SampleRowParams rp = p.row[row];
  if (!rp.active) return;
  RowWs& ws = row_ws(p, row);
  const int V = row_vocab(rp, p.vocab);
  const bool temp = rp.temperature > 0.f, hist = needs_hist(rp, V);
  if (!temp && !hist) return;  // greedy without top_logprobs
  __shared__ unsigned cnt[kBins];
  __shared__ u64 mass[kBins];
  __shared__ u64 red[kPT / 32];
  __shared__ RowStats st_sm;
  __shared__ Pick pick;
  __shared__ int last;
  const RowStats st = row_stats(ws, gridDim.x, &st_sm);
  if (st.bad || st.m == -INFINITY) return;
  const float* z = p.logits + static_cast<size_t>(row) * p.ld;
  int ids[kPer];
  float x[kPer];
  slice_ids(V, ids);
  load_slice(z, ids, x);
  if (hist) {
    for (int b = tid; b < kBins; b += kPT) cnt[b] = 0, mass[b] = 0;
    __syncthreads();
  }
  const float inv_t = temp ? 1.f / rp.temperature : 0.f, min_p = rp.min_p;
  u64 wloc = 0, mcut = ~0ull;
#pragma unroll
  for (int u = 0; u < kPer; ++u) {
    if (ids[u] < 0) continue;
    const u64 k = argmax_key(x[u], ids[u]);
    u64 w = 0;
    if (temp) {
      const float e = wexp(x[u], st.m, inv_t);
      w = wfix_e(x[u], st.m, e);
      wloc += w;
      if (min_p > 0.f && (x[u] == st.m || e >= min_p)) mcut = min(mcut, k);
    }
    if (hist) {
      const int d = static_cast<int>(k >> 53);
      atomicAdd(&cnt[d], 1u);
      if (w) atomicAdd(&mass[d], w);
    }
  }
  if (temp) {
    wloc = block_reduce<kPT, Op::kSum>(wloc, red);
    mcut = block_reduce<kPT, Op::kMin>(mcut, red);
    if (tid == 0) {
      ws.part[blockIdx.x].wmass = wloc;
      if (wloc) atomicAdd(&ws.wsum, wloc);
      if (min_p > 0.f && mcut != ~0ull) atomicMin(&ws.minp_cut, mcut);
    }
  }
  if (!hist) return;
  __syncthreads();
  for (int b = tid; b < kBins; b += kPT) {
    if (cnt[b]) atomicAdd(&ws.cnt[b], cnt[b]);
    if (mass[b]) atomicAdd(&ws.mass[b], mass[b]);
  }
  __threadfence();
  __syncthreads();
  if (tid == 0) last = atomicAdd(&ws.ticket, 1u) == gridDim.x - 1;
  __syncthreads();
  if (!last) return;
  __threadfence();
  plan_row(ws, rp, V, cnt, mass, red, &pick);
}

// 3. Candidates: the slice's keys in bins >= plan.thr, appended (one atomic per block).
__global__ void __launch_bounds__(kPT) sample_compact(SampleParams p) {
  const int row = blockIdx.y, tid = threadIdx.x;
  const SampleRowParams rp = p.row[row];
  if (!rp.active) return;
  RowWs& ws = row_ws(p, row);
  const int thr = ws.plan.thr;
  if (thr >= kNoPlan) return;
  const float* z = p.logits + static_cast<size_t>(row) * p.ld;
  int ids[kPer];
  float x[kPer];
  slice_ids(row_vocab(rp, p.vocab), ids);
  load_slice(z, ids, x);
  u64 keys[kPer];
  unsigned mine = 0;
#pragma unroll
  for (int u = 0; u < kPer; ++u) {
    keys[u] = ids[u] >= 0 ? argmax_key(x[u], ids[u]) : 0ull;
    if (ids[u] >= 0 && static_cast<int>(keys[u] >> 53) >= thr) ++mine;
  }
  __shared__ u64 red[kPT / 32];
  __shared__ unsigned base;
  u64 total;
  const u64 before = block_excl_scan<kPT>(mine, red, &total);
  if (total == 0) return;
  if (tid == 0) base = atomicAdd(&ws.cand_n, static_cast<unsigned>(total));
  __syncthreads();
  unsigned pos = base + static_cast<unsigned>(before);
#pragma unroll
  for (int u = 0; u < kPer; ++u) {
    if (ids[u] < 0 || static_cast<int>(keys[u] >> 53) < thr) continue;
    if (pos < static_cast<unsigned>(kCap)) ws.cand[pos] = keys[u];
    ++pos;
  }
}

}  // namespace
}  // namespace samp

size_t sample_workspace_bytes(int rows) {
  return rows > 0 ? static_cast<size_t>(rows) * sizeof(samp::RowWs) : 0;
}

Status launch_sample(const SampleParams& p, cudaStream_t s) {
  GS_RETURN_IF_ERROR(p.validate());
  const dim3 grid((p.vocab + samp::kChunk - 1) / samp::kChunk, p.rows);
  samp::sample_stats<<<grid, samp::kPT, 0, s>>>(p);
  GS_RETURN_IF_ERROR(launch_status("sample_stats"));
  samp::sample_hist<<<grid, samp::kPT, 0, s>>>(p);
  GS_RETURN_IF_ERROR(launch_status("sample_hist"));
  samp::sample_compact<<<grid, samp::kPT, 0, s>>>(p);
  GS_RETURN_IF_ERROR(launch_status("sample_compact"));
  return samp::launch_sample_finish(p, s);
}

}  // namespace gossamer::kern

// Expert-grouped streaming MoE kernels for decode batches (params.pipe 9): each routed expert's
// weights are streamed ONCE per step and applied to every row routed to it, where the per-row
// streaming kernels (bulk.cu, pipe 6) stream an expert once per (row, expert) pair and rely on L2
// for the repeats. Same weight path as pipe 6 (1-D bulk copies of 8-row groups into a shared-
// memory ring, tensor-core decode from shared memory, tc.cuh) and the same arithmetic per
// (row, expert) pair: act and the residual are bit-identical to pipe 6's.
//
// Work: the routed (row b, slot j) pairs sorted by expert and cut into items of at most kC pairs
// of one expert (grouped_sched.cuh, computed by every block from ids). A unit is (item, row group
// of 8 weight rows); units are numbered item-major, each block (one per SM) takes a contiguous
// range. Per unit a warp pair splits K in halves (as pipe 6's gate_up: part_begin), decodes each
// weight word once and runs one mma per staged vector (run_group_multi):
//  - gate_up: vectors = x[b] of the item's pairs; unit = 4 SwiGLU outputs of each pair -> act;
//  - down: vectors = act[b, j]; unit = 8 output rows of each pair -> part[b, j, rows] (f32);
//    moe_combine_f32 then adds resid[b] += sum_j w[b, j] (part[b, j] + bias[e_bj]) in slot order
//    (pipe 6's epilogue arithmetic, deterministic).
// A block restages its vectors when its range enters the next item (a consumer barrier before
// and after the staging). Ring: one stage per warp pair (12 x 12 KB); one producer thread issues
// the units in the consumers' order.
// PDL: gate_up waits before the schedule (ids come from the router); down builds the schedule and
// issues its first copies before the wait (ids final: params.h), reads act after it; combine waits
// before reading part.
#include <algorithm>

#include "kernels/common/cuda_check.h"
#include "kernels/common/pdl.cuh"
#include "kernels/common/pdl.h"
#include "kernels/moe/bulk_core.cuh"
#include "kernels/moe/grouped_sched.cuh"
#include "kernels/moe/pipe.h"
#include "kernels/moe/pipe_common.cuh"

namespace gossamer::kern {
namespace {

using namespace moe_tc;       // NOLINT: internal helpers
using namespace moe_bulk;     // NOLINT
using namespace moe_grouped;  // NOLINT

constexpr int kConsumerBar = 15;
// 24 consumer warps (12 pairs, one ring stage each) + 1 producer warp; items of at most kC = 2
// pairs. Measured (docs/moe-decode.md "Session 19", moe_bench on the H100): 12 or 16 warps, two
// stages per pair, or items of 3, 4 or 6 pairs were slower. At 80 registers (the bound for 800
// threads) ptxas spills a few bytes.
constexpr int kWarps = 24;
constexpr int kShare = 2;  // warps per unit (each half of K, part_begin)
constexpr int kPairs = kWarps / kShare;
constexpr int kC = 2;

struct GLayout {
  int nb, sb, vec_units, units_per_expert, rows_per_expert;
  int vec_off, part_off, sched_off, bar_off, smem, evict_first;
};

// Problem of one launch: gate_up (down = false) or down.
struct GJob {
  const uint8_t* blocks;
  const uint8_t* scales;
  const float* bias;   // gate_up [E, 2I] (down: unused here, see combine)
  const float* vecs;   // gate_up x [batch, H]; down act [batch, k, I]
  const int32_t* ids;  // [batch, k]
  float* out;          // gate_up act [batch, k, I]; down part [batch, k, H]
  int n, k, n_experts, inter, out_stride;
  float alpha, limit;
  bool down;
  __device__ const float* vec(int entry, int nb) const {
    return vecs + static_cast<size_t>(down ? entry : entry / k) * nb * 32;
  }
};

// tc_block over nv <= kC staged vectors: each weight word decoded once, one mma per vector. For
// every vector the same operations in the same order as tc_block (bit-identical dots).
__device__ __forceinline__ void tc_block_multi(const uint4& q, uint32_t sc, const uint2* const* b,
                                               int off, int nv, float (&acc)[kC][4],
                                               uint32_t& bad) {
  bad |= static_cast<uint32_t>(!scale_in_fast_range(sc));
  const uint32_t m = scale_mult_bf16x2(sc);
  const uint32_t w[4] = {q.x, q.y, q.z, q.w};
  float d[kC][4] = {};
#pragma unroll
  for (int p = 0; p < 4; ++p) {
    uint32_t P[4];
    e2m1_bf16x2(w[p], P);
    const uint32_t a0 = mul_bf16x2(P[0], m), a1 = mul_bf16x2(P[2], m);
    const uint32_t a2 = mul_bf16x2(P[1], m), a3 = mul_bf16x2(P[3], m);
#pragma unroll
    for (int v = 0; v < kC; ++v)
      if (v < nv) mma_bf16(d[v], a0, a1, a2, a3, b[v][off + 2 * p], d[v]);
  }
#pragma unroll
  for (int v = 0; v < kC; ++v)
#pragma unroll
    for (int i = 0; i < 4; ++i) acc[v][i] += d[v][i];
}

// run_group (bulk_core.cuh) over nv staged vectors (vector v at vs + v vec_units), blocks [c0, c1).
__device__ __forceinline__ void run_group_multi(const uint8_t* wg, const uint8_t* sg,
                                                const uint4* vs, int vec_units, int nv, int nb,
                                                int lane, float (&acc)[kC][4], uint32_t& bad,
                                                int c0, int c1) {
  const int g = lane >> 2, t = lane & 3, nc = c1 - c0, su = split_units(1, nb);
  const uint8_t* w = wg + (g * nb + c0 + t) * 16;
  const uint8_t* sc = sg + g * nb + c0 + t;
  const uint2* bp[kC];
#pragma unroll
  for (int v = 0; v < kC; ++v) bp[v] = tc_b_lane(vs + v * vec_units, su, c0, lane);
  const int full_steps = nc >> 2;
#pragma unroll 2
  for (int s = 0; s < full_steps; ++s) {
    const uint4 q = *reinterpret_cast<const uint4*>(w + s * 64);
    tc_block_multi(q, sc[4 * s], bp, s * 32, nv, acc, bad);
  }
  if (full_steps * 4 < nc) {
    uint4 q;
    uint32_t sb;
    partial_step(w, sc, full_steps, t, nc, q, sb);
    tc_block_multi(q, sb, bp, full_steps * 32, nv, acc, bad);
  }
}

// Producer (one thread): the units of every segment (run of one item) of [u0, u1) in the order
// the pairs consume them (segment, n, pair); every unit of pair m goes to stage m.
__device__ void produce(const GJob& J, const GLayout& L, const Sched& S, int2 r, uint8_t* smem,
                        uint64_t* full, uint64_t* empty) {
  const uint64_t policy = L.evict_first ? evict_first_policy() : 0;
  int used[kPairs] = {};
  for (int u = r.x; u < r.y;) {
    const int item = u / L.units_per_expert;
    const int end = min(r.y, (item + 1) * L.units_per_expert), n_seg = end - u;
    const int e = unpack_item(S.items[item]).expert;
    for (int n = 0; kPairs * n < n_seg; ++n) {
#pragma unroll
      for (int m = 0; m < kPairs; ++m) {
        if (m + kPairs * n >= n_seg) break;
        const int c = used[m]++;
        if (c > 0) mbar_wait(empty + m, (c - 1) & 1);
        const int g = u + m + kPairs * n - item * L.units_per_expert;
        const size_t row0 = static_cast<size_t>(e) * L.rows_per_expert + static_cast<size_t>(g) * 8;
        issue_row_group(J.blocks, J.scales, row0, L.nb, smem + static_cast<size_t>(m) * L.sb,
                        full + m, L.evict_first != 0, policy);
      }
    }
    u = end;
  }
}

// Epilogue of one unit for pair t of the item (warp h = 0 of the pair, all lanes): the halves'
// dots (q: [2][kC][9], half h at q + h kC 9) added in order, or the exact path when a half met
// an out-of-range scale byte; then gate_up's SwiGLU into act or down's dots into part.
__device__ __forceinline__ void unit_epilogue(const GJob& J, const GLayout& L, const float* q,
                                              int t, int entry, int e, int g, int lane) {
  const size_t row0 = static_cast<size_t>(e) * L.rows_per_expert + static_cast<size_t>(g) * 8;
  float d[2] = {0.f, 0.f};
  bool bad = false;  // down: lane l < 8 takes row l; gate_up: lane l < 4 rows 2l, 2l + 1
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const float* qh = q + (h * kC + t) * 9;
    if (J.down) {
      if (lane < 8) d[0] += qh[lane];
    } else if (lane < 4) {
      d[0] += qh[2 * lane], d[1] += qh[2 * lane + 1];
    }
    bad |= qh[8] != 0.f;
  }
  if (bad) {  // warp-uniform
    const float2 ex = exact_rows(J.blocks, J.scales, row0, L.nb, J.vec(entry, L.nb), lane);
    if (J.down) {
      const float e0 = __shfl_sync(0xffffffffu, ex.x, (lane & 7) >> 1);
      const float e1 = __shfl_sync(0xffffffffu, ex.y, (lane & 7) >> 1);
      d[0] = lane & 1 ? e1 : e0;
    } else {
      d[0] = ex.x, d[1] = ex.y;
    }
  }
  if (J.down) {
    if (lane < 8) J.out[static_cast<size_t>(entry) * J.out_stride + g * 8 + lane] = d[0];
    return;
  }
  if (lane < 4) {
    const float* bu = J.bias + row0;
    const float gt = fminf(d[0] + bu[2 * lane], J.limit);
    const float up = fmaxf(fminf(d[1] + bu[2 * lane + 1], J.limit), -J.limit);
    J.out[static_cast<size_t>(entry) * J.inter + g * 4 + lane] =
        (up + 1.f) * gt / (1.f + __expf(-J.alpha * gt));
  }
}

// Consumer warps: per segment, stage the item's vectors, then the pair's units of it.
__device__ void consume(const GJob& J, const GLayout& L, const Sched& S, int2 r, uint8_t* smem,
                        uint64_t* full, uint64_t* empty) {
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, m = warp >> 1, h = warp & 1;
  auto* vs = reinterpret_cast<uint4*>(smem + L.vec_off);
  auto* part = reinterpret_cast<float*>(smem + L.part_off);  // [pair][round][2][kC][9]
  const uint8_t* st = smem + static_cast<size_t>(m) * L.sb;  // the pair's ring stage
  int used = 0;
  for (int u = r.x; u < r.y;) {
    const int item = u / L.units_per_expert;
    const int end = min(r.y, (item + 1) * L.units_per_expert), n_seg = end - u;
    const Item it = unpack_item(S.items[item]);
    named_sync(kConsumerBar, kWarps * 32);  // the previous segment's readers are done
    for (int v = 0; v < it.count; ++v)
      tc_stage(vs + v * L.vec_units, J.vec(S.order[it.begin + v], L.nb), 1, L.nb, threadIdx.x,
               kWarps * 32);
    named_sync(kConsumerBar, kWarps * 32);
    // Every pair runs the segment's rounds (a pair without a unit in a round only meets its pair
    // barrier), so that all warps have passed the same barriers when the next segment restages:
    // compute-sanitizer's racecheck reported the restaging as racing with the mma reads otherwise.
    for (int n = 0; kPairs * n < n_seg; ++n) {
      if (m + kPairs * n >= n_seg) {
        named_sync(1 + m, kShare * 32);
        continue;
      }
      const int c = used++;
      float acc[kC][4] = {};
      uint32_t bad = 0;
      mbar_wait(full + m, c & 1);
      run_group_multi(st, st + 128 * L.nb, vs, L.vec_units, it.count, L.nb, lane, acc, bad,
                      part_begin(L.nb, h, kShare), part_begin(L.nb, h + 1, kShare));
      mbar_arrive(empty + m);
      float* q = part + (m * 2 + (c & 1)) * 2 * kC * 9;
#pragma unroll
      for (int v = 0; v < kC; ++v)
        if (v < it.count) store_part(q + (h * kC + v) * 9, acc[v], bad, lane);
      named_sync(1 + m, kShare * 32);
      if (h != 0) continue;
      const int g = u + m + kPairs * n - item * L.units_per_expert;
      for (int v = 0; v < it.count; ++v)
        unit_epilogue(J, L, q, v, S.order[it.begin + v], it.expert, g, lane);
    }
    u = end;
  }
}

__device__ __forceinline__ void grouped_body(const GJob& J, const GLayout& L) {
  constexpr int kStages = kPairs;
  extern __shared__ __align__(128) uint8_t smem[];
  auto* full = reinterpret_cast<uint64_t*>(smem + L.bar_off);
  uint64_t* empty = full + kStages;
  auto& S = *reinterpret_cast<Sched*>(smem + L.sched_off);
  auto& T = *reinterpret_cast<SchedScratch*>(smem + L.vec_off);  // before any staging
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  if (!J.down) pdl_wait(), pdl_trigger();  // gate_up: ids come from the router
  if (warp == kWarps) {
    if (lane == 0) {
      for (int s = 0; s < kStages; ++s) mbar_init(full + s, 1), mbar_init(empty + s, kShare * 32);
      mbar_init_fence();
    }
    build_schedule(J.ids, J.n, J.n_experts, kC, S, T, lane);
  }
  __syncthreads();
  const int2 r = block_range(S.n_items * L.units_per_expert);
  if (warp == kWarps) {
    if (lane == 0) produce(J, L, S, r, smem, full, empty);
    if (J.down) pdl_wait(), pdl_trigger();
    return;
  }
  if (J.down) pdl_wait(), pdl_trigger();  // act comes from gate_up (the previous kernel)
  consume(J, L, S, r, smem, full, empty);
}

__global__ void __launch_bounds__((kWarps + 1) * 32, 1)
    moe_gate_up_grouped_mxfp4w_f32a(GJob J, GLayout L) {
  grouped_body(J, L);
}
__global__ void __launch_bounds__((kWarps + 1) * 32, 1)
    moe_down_grouped_mxfp4w_f32a(GJob J, GLayout L) {
  grouped_body(J, L);
}

// resid[b, h] += sum_j w[b, j] (part[b, j, h] + bias[e_bj, h]), j in order: pipe 6's down
// epilogue (bulk_core.cuh down_team_sum_parts) per element. One thread per (b, h).
__global__ void moe_combine_f32(MoeDownParams p) {
  const int b = blockIdx.y, h = blockIdx.x * blockDim.x + threadIdx.x;
  const bool live = h < p.hidden;
  // k <= 8 (launch_moe_down_grouped); loops unrolled over 8 so w / bias stay in registers.
  float w[8] = {}, bias[8] = {};
#pragma unroll
  for (int j = 0; j < 8; ++j) {  // ids / weights final before the wait (params.h)
    if (j >= p.k || !live) continue;
    const int e = min(max(p.ids[b * p.k + j], 0), p.n_experts - 1);
    w[j] = p.weights[b * p.k + j], bias[j] = p.bias[static_cast<size_t>(e) * p.hidden + h];
  }
  pdl_wait();
  pdl_trigger();
  if (!live) return;
  float sum = 0.f;
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    if (j >= p.k) continue;
    sum = fmaf(w[j], p.part[(static_cast<size_t>(b) * p.k + j) * p.hidden + h] + bias[j], sum);
  }
  float* dst = p.resid + static_cast<size_t>(b) * p.hidden + h;
  *dst = *dst + sum;
}

Result<GLayout> grouped_layout(int batch, int k, int nb, int rows_per_expert, int n_experts,
                               const void* blocks, const void* scales) {
  if (batch * k > kMaxEntries || n_experts > kMaxExperts || k > 8 || nb % 2 != 0 ||
      !moe_pipe::aligned(blocks, 16) || !moe_pipe::aligned(scales, 16)) {
    return moe_pipe::NoPipe();
  }
  auto up128 = [](long long v) { return (v + 127) & ~127ll; };
  GLayout L{};
  L.nb = nb;
  L.sb = static_cast<int>(up128(136ll * nb));  // 8 nb 16 weight + 8 nb scale bytes
  L.vec_units = kSplits * split_units(1, nb);
  L.rows_per_expert = rows_per_expert;
  L.units_per_expert = rows_per_expert / 8;
  const long long vec_bytes =
      std::max<long long>(up128(kC * 16ll * L.vec_units), up128(sizeof(SchedScratch)));
  L.vec_off = static_cast<int>(1ll * kPairs * L.sb);
  L.part_off = static_cast<int>(L.vec_off + vec_bytes);
  L.sched_off = static_cast<int>(L.part_off + up128(kPairs * 2 * 2 * kC * 9 * 4));
  L.bar_off = static_cast<int>(L.sched_off + up128(sizeof(Sched)));
  L.smem = L.bar_off + 2 * kPairs * 8;
  if (L.smem > static_cast<int>(moe_pipe::kMaxSmem)) return moe_pipe::NoPipe();
  L.evict_first = 1;
  return L;
}

Result<GLayout> gate_up_layout(const MoeGateUpParams& p) {
  if (!device_is_sm90()) return moe_pipe::NoPipe();
  return grouped_layout(p.batch, p.k, p.hidden / 32, 2 * p.inter, p.n_experts, p.blocks, p.scales);
}
Result<GLayout> down_layout(const MoeDownParams& p) {
  if (!device_is_sm90() || p.part == nullptr) return moe_pipe::NoPipe();
  return grouped_layout(p.batch, p.k, p.inter / 32, p.hidden, p.n_experts, p.blocks, p.scales);
}

template <class Params>
Status launch_grouped(const Params& p, const GJob& J, const GLayout& L, void (*fn)(GJob, GLayout),
                      const char* name, cudaStream_t s) {
  GS_ASSIGN_OR_RETURN(const int sms, sm_count());
  GS_CUDA_RETURN(cudaFuncSetAttribute(reinterpret_cast<const void*>(fn),
                                      cudaFuncAttributeMaxDynamicSharedMemorySize, L.smem));
  return launch_pdl(p.pdl, name, fn, dim3(sms), dim3((kWarps + 1) * 32),
                    static_cast<size_t>(L.smem), s, J, L);
}

}  // namespace

bool moe_gate_up_grouped_supported(const MoeGateUpParams& p) {
  return p.validate().ok() && gate_up_layout(p).ok();
}
bool moe_down_grouped_supported(const MoeDownParams& p) {
  return p.validate().ok() && down_layout(p).ok();
}

Status launch_moe_gate_up_grouped(const MoeGateUpParams& p, cudaStream_t s) {
  GS_ASSIGN_OR_RETURN(const GLayout L, gate_up_layout(p));
  const GJob J{p.blocks, p.scales,    p.bias,  p.x,     p.ids,   p.act,   p.batch * p.k,
               p.k,      p.n_experts, p.inter, p.inter, p.alpha, p.limit, false};
  return launch_grouped(p, J, L, moe_gate_up_grouped_mxfp4w_f32a, "moe_gate_up_grouped_mxfp4w_f32a",
                        s);
}

Status launch_moe_down_grouped(const MoeDownParams& p, cudaStream_t s) {
  GS_ASSIGN_OR_RETURN(const GLayout L, down_layout(p));
  const GJob J{p.blocks, p.scales,    nullptr, p.act,    p.ids, p.part, p.batch * p.k,
               p.k,      p.n_experts, p.inter, p.hidden, 0.f,   0.f,    true};
  GS_RETURN_IF_ERROR(
      launch_grouped(p, J, L, moe_down_grouped_mxfp4w_f32a, "moe_down_grouped_mxfp4w_f32a", s));
  constexpr int kThreads = 256;
  return launch_pdl(p.pdl, "moe_combine_f32", moe_combine_f32,
                    dim3((p.hidden + kThreads - 1) / kThreads, p.batch), dim3(kThreads), 0, s, p);
}

}  // namespace gossamer::kern

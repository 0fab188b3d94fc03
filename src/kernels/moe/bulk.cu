// Streaming MoE MXFP4 expert GEMVs (params.pipe 6): weights move by Hopper bulk copies
// (1-D TMA) into a shared-memory ring, consumers decode from shared memory into tensor-core
// fragments (tc.cuh: tc_block, exact scale fold, fp32 fallback). Same contracts as kernel.cu.
//
// Work: a "row group" is 8 consecutive weight rows of one expert (one mma n8 tile) over the whole
// K range: 8 x nb x 16 contiguous bytes (11520 B for gpt-oss, 128-byte aligned when the tensor
// is) + its 8 x nb contiguous scale bytes. A stage holds one row group, filled by TWO bulk copies
// (weights, scales). (A first version cut the rows into 512-byte K slices, 9 copies per 4.8 KB
// stage: it streamed at only ~500 GB/s on the H100, docs/moe-decode.md.) Grid = (blocks per
// batch row, batch): a block works for one batch row b only (it stages one activation set) on a
// contiguous range of "units", about one block per SM.
//  - gate_up: unit = (routed slot j, row group) = 4 SwiGLU outputs; a pair of warps shares a
//    unit (kGuShare = 2, session 8): each decodes half of the MX blocks, the halves meet in
//    shared memory and the first warp writes act. Splitting K halves the decode latency of a
//    unit (~2.5 us for one warp on the H100), which is the tail of the kernel and delays the
//    refill of a stage (docs/moe-decode.md session 8).
//  - down: unit = row group of the output (8 hidden rows); a team of 2k warps (members 2j, 2j + 1
//    = routed slot j, each half of the MX blocks: kDnShare, session 14) computes the k dot
//    products of the same 8 rows; after a team barrier member 0 adds the halves and
//    sum_j w_j (dot_j + bias_j) to the residual in a fixed order (deterministic, no atomics).
// Ring: down: kSpw stages per pair of consumer warps (stage (w / 2) kSpw + n % kSpw for the
// pair's n-th unit); gate_up: two stages per pair (its n-th unit in stage 2m + n % 2); one
// producer thread (last warp) issues every unit in the order (n, pair): all stages at kernel
// start (~200 KB per SM), then each one as soon as its readers release it (empty mbarrier, 32
// arrivals per reading warp); consumers wait on the stage's full mbarrier (transaction bytes).
// PDL (params.pdl): see params.h. gate_up waits before reading ids (they come from the router,
// the kernel just before it); down issues its first weight copies before pdl_wait (its ids and
// routing weights come from the router, two kernels back, which has completed by then).
#include <algorithm>

#include "kernels/common/cuda_check.h"
#include "kernels/common/pdl.cuh"
#include "kernels/common/pdl.h"
#include "kernels/moe/bulk.cuh"
#include "kernels/moe/bulk_core.cuh"
#include "kernels/moe/bulk_hint.h"
#include "kernels/moe/pipe.h"
#include "kernels/moe/pipe_common.cuh"
#include "kernels/moe/tc.cuh"

namespace gossamer::kern {
namespace {

using namespace moe_tc;    // NOLINT: internal helpers
using namespace moe_bulk;  // NOLINT

// The kernels keep the names of kernel.cu's (the runner's kernel_path() and the kernel-profile
// test name kernels by base name); their templates are (consumer warps, stages per warp).
constexpr int kConsumerBar = 15;  // named barrier of all consumer warps
constexpr int kGuShare = 2;       // gate_up warps per unit (split K), session 8
constexpr int kDnShare = 2;       // down warps per (unit, routed slot) (split K), session 14
// Decode batches only (tested 1..64): a block streams the routed weights of one batch row, so
// prefill-sized batches (the moe_prefill fallback runs these kernels on 2048 rows) would stream
// every expert once per row with no L2 reuse between rows; they keep the old kernels.
constexpr int kMaxBulkBatch = 64;

// Shared-memory layout and work split, computed on the host (bulk_layout).
struct Layout {
  int nb;           // MX blocks per weight row (K / 32)
  int wbytes;       // weight bytes of a row group: 8 nb 16
  int sb;           // bytes per stage: wbytes + 8 nb scale bytes, rounded up to 128
  int ns;           // stages: kSpw per consumer warp
  int team;         // warps per unit: 1 (gate_up) or k (down)
  int units;        // units per batch row
  int act_off;      // staged activations (tc_stage layout, nv vectors)
  int part_off;     // partial dots [2][consumer warps][9] f32 (down teams, gate_up pairs)
  int rows_off;     // per local unit: bias [team'][8] (gate_up 1, down k), down: resid [8], w [k]
  int max_local;    // units per block at most; 0: no staging area (large batches), global reads
  int bar_off;      // mbarriers full[ns], empty[ns]
  int smem;         // total dynamic shared memory
  int evict_first;  // 1: weight / scale copies carry an L2::evict_first policy (bulk_hint.h)
};

// Fills `stage` with the row group at row0 (bulk_core.cuh issue_row_group).
__device__ __forceinline__ void issue_group(const uint8_t* blocks, const uint8_t* scales,
                                            size_t row0, const Layout& L, uint8_t* stage,
                                            uint64_t* full, uint64_t policy) {
  issue_row_group(blocks, scales, row0, L.nb, stage, full, L.evict_first != 0, policy);
}

// Units of consumer warp w (team m = w / team: local units m, m + teams, ...).
__device__ __forceinline__ int warp_units(const Layout& L, int w, int n_local, int warps) {
  const int teams = warps / L.team, m = w / L.team;
  if (m >= teams || m >= n_local) return 0;
  return (n_local - m + teams - 1) / teams;
}

// Producer (one thread): every unit of every group of kShare consumer warps (the warps that
// share a stage: warps kShare g .. kShare g + kShare - 1, member (w % team) / kShare of their
// team) in the order (n, g); group g's n-th unit goes to stage g kSpw + n % kSpw.
template <int kWarps, int kSpw, int kShare>
__device__ void produce(const Job& J, const Layout& L, int b, int u0, int n_local, uint8_t* smem,
                        uint64_t* full, uint64_t* empty) {
  const int teams = kWarps / L.team;
  const int n_max = warp_units(L, 0, n_local, kWarps);
  const uint64_t policy = L.evict_first ? evict_first_policy() : 0;
  for (int n = 0; n < n_max; ++n) {
    for (int w = 0; w < kWarps; w += kShare) {
      if (n >= warp_units(L, w, n_local, kWarps)) continue;
      const int s = w / kShare * kSpw + n % kSpw, use = n / kSpw;
      if (use > 0) mbar_wait(empty + s, (use - 1) & 1);
      const size_t row0 = J.row0(b, u0 + w / L.team + teams * n, w % L.team / kShare);
      issue_group(J.blocks, J.scales, row0, L, smem + static_cast<size_t>(s) * L.sb, full + s,
                  policy);
    }
  }
}

// Producer of gate_up (one thread), whose units are shared by groups of kShare warps (split
// K): group m (warps kShare m .. kShare m + kShare - 1) decodes local units m, m + kGroups, ...;
// its n-th unit goes to stage kShare m + n % kShare (the group's stages in turn), issued in the
// order (n, m).
template <int kWarps, int kShare>
__device__ void produce_shared(const Job& J, const Layout& L, int b, int u0, int n_local,
                               uint8_t* smem, uint64_t* full, uint64_t* empty) {
  constexpr int kGroups = kWarps / kShare;
  const uint64_t policy = L.evict_first ? evict_first_policy() : 0;
  for (int n = 0; kGroups * n < n_local; ++n) {
    for (int m = 0; m < kGroups && m + kGroups * n < n_local; ++m) {
      const int s = kShare * m + n % kShare, use = n / kShare;
      if (use > 0) mbar_wait(empty + s, (use - 1) & 1);
      issue_group(J.blocks, J.scales, J.row0(b, u0 + m + kGroups * n, 0), L,
                  smem + static_cast<size_t>(s) * L.sb, full + s, policy);
    }
  }
}

// Barrier init by thread 0 of the producer warp.
// `readers`: warps that decode (and release) each stage.
template <int kWarps>
__device__ __forceinline__ void init_barriers(const Layout& L, uint64_t* full, uint64_t* empty,
                                              int readers = 1) {
  if (threadIdx.x == kWarps * 32) {
    for (int s = 0; s < L.ns; ++s) {
      mbar_init(full + s, 1);
      mbar_init(empty + s, 32 * readers);
    }
    mbar_init_fence();
  }
  __syncthreads();
}

// This block's unit range [u0, u0 + n_local) of its batch row.
__device__ __forceinline__ int2 unit_range(const Layout& L) {
  const int2 r = block_range(L.units);
  return make_int2(r.x, r.y - r.x);
}

template <int kWarps, int kSpw>
__global__ void __launch_bounds__((kWarps + 1) * 32, 1)
    moe_gate_up_swiglu_mxfp4w_f32a(MoeGateUpParams p, Layout L) {
  extern __shared__ __align__(128) uint8_t smem[];
  auto* full = reinterpret_cast<uint64_t*>(smem + L.bar_off);
  uint64_t* empty = full + L.ns;
  const int b = blockIdx.y, warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int2 range = unit_range(L);
  const int u0 = range.x, n_local = range.y;
  const Job J{p.blocks, p.scales, p.ids, p.k, p.n_experts, 2 * p.inter, p.inter / 4, false};
  static_assert(kSpw == 1 && kWarps % kGuShare == 0, "gate_up: a warp group shares its stages");
  init_barriers<kWarps>(L, full, empty, kGuShare);
  pdl_wait();  // ids come from the router (the previous kernel)
  pdl_trigger();
  if (warp == kWarps) {
    if (lane == 0) produce_shared<kWarps, kGuShare>(J, L, b, u0, n_local, smem, full, empty);
    return;
  }
  auto* xs = reinterpret_cast<uint4*>(smem + L.act_off);
  const float* x = p.x + static_cast<size_t>(b) * p.hidden;
  // The bias of every local unit's 8 rows into shared memory with the staging of x (each
  // unit's epilogue read them from DRAM: ~1 us per unit on the warp pair's path).
  float* bias_s = reinterpret_cast<float*>(smem + L.rows_off);  // [n_local][8]
  for (int t = threadIdx.x; L.max_local > 0 && t < 8 * n_local; t += kWarps * 32)
    bias_s[t] = p.bias[J.row0(b, u0 + t / 8, 0) + t % 8];
  tc_stage(xs, x, 1, L.nb, threadIdx.x, kWarps * 32);
  named_sync(kConsumerBar, kWarps * 32);
  // Warp group m shares each unit: its warp h decodes blocks [part_begin(nb, h),
  // part_begin(nb, h + 1)); the parts meet in `part` [groups][2 rounds][kGuShare][8 dots + bad
  // flag] (round n % 2: the next unit's parts never overwrite unread ones) and warp h = 0 adds them
  // in order h = 0, 1, ..., then the epilogue (or the exact fallback when a part met a bad scale
  // byte).
  constexpr int kGroups = kWarps / kGuShare;
  const int m = warp / kGuShare, h = warp % kGuShare;
  const int su = split_units(1, L.nb);
  const int n_units = m < n_local ? (n_local - m + kGroups - 1) / kGroups : 0;
  auto* part = reinterpret_cast<float*>(smem + L.part_off);
  for (int n = 0; n < n_units; ++n) {
    const int s = kGuShare * m + n % kGuShare;
    float acc[4] = {0.f, 0.f, 0.f, 0.f};
    uint32_t bad = 0;
    mbar_wait(full + s, (n / kGuShare) & 1);
    const uint8_t* st = smem + static_cast<size_t>(s) * L.sb;
    run_group(st, st + L.wbytes, xs, su, L.nb, lane, acc, bad, part_begin(L.nb, h, kGuShare),
              part_begin(L.nb, h + 1, kGuShare));
    mbar_arrive(empty + s);
    float* q = part + (m * 2 + (n & 1)) * kGuShare * 9;  // part h at q + 9 h
    store_part(q + h * 9, acc, bad, lane);
    named_sync(1 + m, kGuShare * 32);
    if (h != 0) continue;
    const int u = u0 + m + kGroups * n, group = u % J.groups_per_slot;
    const size_t row0 = J.row0(b, u, 0);
    float2 gu = make_float2(0.f, 0.f);
    bool fallback = false;
#pragma unroll
    for (int i = 0; i < kGuShare; ++i) {
      if (lane < 4) gu.x += q[i * 9 + 2 * lane], gu.y += q[i * 9 + 2 * lane + 1];
      fallback |= q[i * 9 + 8] != 0.f;
    }
    if (fallback) gu = exact_rows(p.blocks, p.scales, row0, L.nb, x, lane);
    if (lane < 4) {
      const int i = group * 4 + lane;  // SwiGLU output in the expert
      const float* bu = L.max_local > 0 ? bias_s + (u - u0) * 8 : p.bias + row0;
      const float g = fminf(gu.x + bu[2 * lane], p.limit);
      const float up = fmaxf(fminf(gu.y + bu[2 * lane + 1], p.limit), -p.limit);
      p.act[(static_cast<size_t>(b) * p.k + u / J.groups_per_slot) * p.inter + i] =
          (up + 1.f) * g / (1.f + __expf(-p.alpha * g));
    }
  }
}

template <int kWarps, int kSpw>
__global__ void __launch_bounds__((kWarps + 1) * 32, 1)
    moe_down_mxfp4w_f32a(MoeDownParams p, Layout L) {
  extern __shared__ __align__(128) uint8_t smem[];
  auto* full = reinterpret_cast<uint64_t*>(smem + L.bar_off);
  uint64_t* empty = full + L.ns;
  const int b = blockIdx.y, warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int2 range = unit_range(L);
  const int u0 = range.x, n_local = range.y;
  const Job J{p.blocks, p.scales, p.ids, p.k, p.n_experts, p.hidden, 0, true};
  init_barriers<kWarps>(L, full, empty, kDnShare);
  if (warp == kWarps) {
    // ids / weights are final before pdl_wait (params.h): the weight copies start at once.
    if (lane == 0) produce<kWarps, kSpw, kDnShare>(J, L, b, u0, n_local, smem, full, empty);
    pdl_wait();
    pdl_trigger();
    return;
  }
  // Per local unit: the bias of its rows for every routed slot, [k][8], and (below) its residual
  // rows [8]; then the routing weights [k]. The bias and the weights are read before pdl_wait (as
  // the ids: weights, and the router's output two kernels back), the residual after it.
  float* bias_s = reinterpret_cast<float*>(smem + L.rows_off);  // [n_local][k][8]
  float* resid_s = bias_s + L.max_local * p.k * 8;              // [n_local][8]
  float* w_s = resid_s + L.max_local * 8;                       // [k]
  const int t = threadIdx.x, nb8 = L.max_local > 0 ? n_local * p.k * 8 : 0;
  // Entry i: row i % 8 of local unit i / (8 k) for routed slot (i / 8) % k.
  auto bias_entry = [&](int i) {
    const int jj = (i / 8) % p.k, e = min(max(p.ids[b * p.k + jj], 0), p.n_experts - 1);
    return p.bias[static_cast<size_t>(e) * p.hidden + (u0 + i / (8 * p.k)) * 8 + i % 8];
  };
  const float bv = t < nb8 ? bias_entry(t) : 0.f;
  const float wv = t < p.k ? p.weights[b * p.k + t] : 0.f;
  pdl_wait();  // act comes from gate_up (the previous kernel)
  pdl_trigger();
  auto* xs = reinterpret_cast<uint4*>(smem + L.act_off);
  const float* act = p.act + static_cast<size_t>(b) * p.k * p.inter;
  tc_stage(xs, act, p.k, L.nb, threadIdx.x, kWarps * 32);
  for (int i = t; i < nb8; i += kWarps * 32) bias_s[i] = i == t ? bv : bias_entry(i);
  for (int i = t; nb8 > 0 && i < 8 * n_local; i += kWarps * 32)
    resid_s[i] = p.resid[static_cast<size_t>(b) * p.hidden + u0 * 8 + i];
  if (nb8 > 0 && t < p.k) w_s[t] = wv;
  named_sync(kConsumerBar, kWarps * 32);
  // Team m (L.team = k kDnShare warps) shares each unit: member mi = kDnShare j + h decodes the
  // MX blocks [part_begin(h), part_begin(h + 1)) of slot j's rows; the parts meet in `part`
  // [2 rounds][teams][team][8 dots + bad flag] and member 0 sums them (down_team_sum_parts).
  auto* part = reinterpret_cast<float*>(smem + L.part_off);
  const int su = split_units(p.k, L.nb), n_units = warp_units(L, warp, n_local, kWarps);
  const int teams = kWarps / L.team, m = warp / L.team, mi = warp % L.team;
  const int j = mi / kDnShare, h = mi % kDnShare;
  const uint4* xv = xs + j * pad4(L.nb) * 4;
  for (int n = 0; n < n_units; ++n) {
    const int s = warp / kDnShare * kSpw + n % kSpw, u = u0 + m + teams * n;
    float acc[4] = {0.f, 0.f, 0.f, 0.f};
    uint32_t bad = 0;
    mbar_wait(full + s, (n / kSpw) & 1);
    const uint8_t* st = smem + static_cast<size_t>(s) * L.sb;
    run_group(st, st + L.wbytes, xv, su, L.nb, lane, acc, bad, part_begin(L.nb, h, kDnShare),
              part_begin(L.nb, h + 1, kDnShare));
    mbar_arrive(empty + s);
    float* pt = part + ((n & 1) * teams + m) * L.team * 9;  // double-buffered by round
    store_part(pt + mi * 9, acc, bad, lane);
    named_sync(1 + m, L.team * 32);
    if (mi != 0) continue;
    const DownStaged st_u{bias_s + (u - u0) * p.k * 8, resid_s + (u - u0) * 8, w_s};
    down_team_sum_parts<kDnShare>(p, J, pt, b, u, act, L.nb, lane, nb8 > 0 ? &st_u : nullptr);
  }
}

// Layout for K = 32 nb inputs, nv staged vectors, `warps` consumer warps with `spw` stages per
// `share` warps (the warps that decode one stage together), in teams of `team`; an Unsupported
// status when the shapes / pointers do not suit the kernels.
// rows_floats: floats of the per-unit staging area for max_local units.
Result<Layout> bulk_layout(int batch, int nb, int nv, int warps, int spw, int team, int units,
                           const void* blocks, const void* scales, int max_local, int rows_floats,
                           int share) {
  if (batch > kMaxBulkBatch || nb % 2 != 0 || team > warps || !moe_pipe::aligned(blocks, 16) ||
      !moe_pipe::aligned(scales, 16)) {
    return moe_pipe::NoPipe();  // 8 nb scale bytes must be a multiple of 16
  }
  auto up128 = [](long long v) { return (v + 127) & ~127ll; };
  const long long wbytes = 8ll * nb * 16, sb = up128(wbytes + 8ll * nb);
  const long long ns = static_cast<long long>(warps) / share * spw, act_off = ns * sb;
  const long long part_off = act_off + up128(stage_bytes(nv, nb));
  const long long rows_off = part_off + up128(2ll * warps * 9 * 4);
  const long long bar_off = rows_off + up128(4ll * rows_floats);
  const long long smem = bar_off + 2 * ns * 8;
  if (smem > static_cast<long long>(moe_pipe::kMaxSmem)) return moe_pipe::NoPipe();
  Layout L{};
  L.nb = nb;
  L.wbytes = static_cast<int>(wbytes);
  L.sb = static_cast<int>(sb);
  L.ns = static_cast<int>(ns);
  L.team = team;
  L.units = units;
  L.act_off = static_cast<int>(act_off);
  L.part_off = static_cast<int>(part_off);
  L.rows_off = static_cast<int>(rows_off);
  L.max_local = max_local;
  L.bar_off = static_cast<int>(bar_off);
  L.smem = static_cast<int>(smem);
  return L;
}

// Pipe 6: gate_up 16 consumer warps x 1 stage (a warp pair shares its two stages' units), down
// 24 x 1 (teams of 2k: two warps per routed slot share its stage, session 14).
struct Config {
  int gu_warps, gu_spw, dn_warps, dn_spw;
};
constexpr Config kPipe6{16, 1, 24, 1};

// Units per block at most (the grid of launch_streaming: blocks_per_row).
Result<int> max_local_units(int batch, int units) {
  GS_ASSIGN_OR_RETURN(const int gx, blocks_per_row(batch, units));
  return (units + gx - 1) / gx;
}

// bulk_layout with the per-unit staging area (rows_floats(max_local) floats), or without it when
// that does not fit (large batches: many units per block; the epilogues then read global memory).
template <class RowsFloats>
Result<Layout> staged_layout(int batch, int nb, int nv, int warps, int spw, int team, int units,
                             const void* blocks, const void* scales, RowsFloats rows_floats,
                             int share = 1) {
  GS_ASSIGN_OR_RETURN(const int ml, max_local_units(batch, units));
  auto L = bulk_layout(batch, nb, nv, warps, spw, team, units, blocks, scales, ml, rows_floats(ml),
                       share);
  if (L.ok()) return L;
  return bulk_layout(batch, nb, nv, warps, spw, team, units, blocks, scales, 0, 0, share);
}

Result<Layout> gate_up_layout(const MoeGateUpParams& p) {
  const Config c = kPipe6;
  return staged_layout(p.batch, p.hidden / 32, 1, c.gu_warps, c.gu_spw, 1, p.k * (p.inter / 4),
                       p.blocks, p.scales, [](int ml) { return 8 * ml; });  // bias [ml][8]
}
Result<Layout> down_layout(const MoeDownParams& p) {
  const Config c = kPipe6;
  // bias [ml][k][8], residual [ml][8], routing weights [k]
  return staged_layout(
      p.batch, p.inter / 32, p.k, c.dn_warps, c.dn_spw, p.k * kDnShare, p.hidden / 8, p.blocks,
      p.scales, [&](int ml) { return ml * p.k * 8 + ml * 8 + p.k; }, kDnShare);
}

}  // namespace

bool moe_gate_up_bulk_supported(const MoeGateUpParams& p) {
  return p.validate().ok() && gate_up_layout(p).ok() && device_is_sm90();
}
bool moe_down_bulk_supported(const MoeDownParams& p) {
  return p.validate().ok() && down_layout(p).ok() && device_is_sm90();
}

Status launch_moe_gate_up_bulk_hint(const MoeGateUpParams& p, MoeL2Hint hint, cudaStream_t s) {
  if (!device_is_sm90()) return moe_pipe::NoPipe();
  GS_ASSIGN_OR_RETURN(Layout L, gate_up_layout(p));
  L.evict_first = hint == MoeL2Hint::kEvictFirst ? 1 : 0;
  constexpr const char* kName = "moe_gate_up_swiglu_mxfp4w_f32a (bulk)";
  return launch_streaming(p, L, moe_gate_up_swiglu_mxfp4w_f32a<kPipe6.gu_warps, kPipe6.gu_spw>,
                          kPipe6.gu_warps, kName, s);
}

Status launch_moe_down_bulk_hint(const MoeDownParams& p, MoeL2Hint hint, cudaStream_t s) {
  if (!device_is_sm90()) return moe_pipe::NoPipe();
  GS_ASSIGN_OR_RETURN(Layout L, down_layout(p));
  L.evict_first = hint == MoeL2Hint::kEvictFirst ? 1 : 0;
  constexpr const char* kName = "moe_down_mxfp4w_f32a (bulk)";
  return launch_streaming(p, L, moe_down_mxfp4w_f32a<kPipe6.dn_warps, kPipe6.dn_spw>,
                          kPipe6.dn_warps, kName, s);
}

// The engine's launches hint evict_first (session 15: with the dense GEMVs' copies hinted too,
// +0.7% tg128 on 120b, common/bulk_gemv.cuh ring_produce).
Status launch_moe_gate_up_bulk(const MoeGateUpParams& p, cudaStream_t s) {
  return launch_moe_gate_up_bulk_hint(p, MoeL2Hint::kEvictFirst, s);
}

Status launch_moe_down_bulk(const MoeDownParams& p, cudaStream_t s) {
  return launch_moe_down_bulk_hint(p, MoeL2Hint::kEvictFirst, s);
}

}  // namespace gossamer::kern

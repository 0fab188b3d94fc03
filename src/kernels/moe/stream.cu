// Streaming MoE MXFP4 expert GEMVs, pipe 8 (params.pipe 8): the pipe 6 structure (bulk.cu: one
// block per SM and batch row, weights by Hopper bulk copies into a shared-memory ring,
// tensor-core decode from shared memory) with fewer, larger copies and no fixed slot ownership.
// Same contracts as kernel.cu.
//
// Chunk = up to G consecutive row groups (8 weight rows each, over all of K) of ONE expert: they
// are adjacent in memory, so a chunk is one weight copy of ng x 8 x nb x 16 bytes plus one scale
// copy of ng x 8 x nb bytes (pipe 6: two copies per single row group). Chunks are aligned to
// multiples of G groups inside an expert's range and clipped to the block's unit range.
//  - gate_up: unit = (routed slot, row group) = 4 SwiGLU outputs; chunk key = slot x cps +
//    group / G. Consumer warps take the NEXT unit from a shared counter (atomicAdd in shared
//    memory), so any free warp decodes the next chunk to arrive and a late chunk's groups are
//    spread over the free warps.
//  - down: unit = 8 hidden rows, member j = routed slot j (its expert); chunk (unit chunk ub,
//    member j) has index ub x k + j. Teams of k warps as in pipe 6 (team m: units m, m + teams,
//    ...; member 0 adds sum_j w_j (dot_j + bias_j) in a fixed j order: deterministic). At batch
//    1 a block's whole share (~3 units x 4 experts) is ONE unit chunk: all k copies are issued at
//    kernel start.
// Ring: ns slots of G groups; chunk c goes to slot c % ns; one producer thread issues the chunks
// in order, each as soon as its slot's previous chunk is released (empty mbarrier, 32 G arrivals:
// every lane of every warp that decoded one of its groups; the warp decoding the first group of
// a chunk with ng < G groups arrives G - ng + 1 times). A per-slot tag (the chunk the producer
// put there last) tells a consumer when its chunk owns the slot, before the parity wait
// (wait_tag). Deadlock-free: every warp consumes its groups in increasing chunk order, so the
// lowest unconsumed group's chunk is always issuable (down needs ns >= k for the same argument
// over its team barriers).
// PDL: as pipe 6 (params.h).
#include <algorithm>

#include "kernels/common/cuda_check.h"
#include "kernels/common/pdl.cuh"
#include "kernels/common/pdl.h"
#include "kernels/moe/bulk.cuh"
#include "kernels/moe/bulk_core.cuh"
#include "kernels/moe/pipe.h"
#include "kernels/moe/pipe_common.cuh"

namespace gossamer::kern {
namespace {

using namespace moe_bulk;  // NOLINT: internal helpers

constexpr int kConsumerBar = 15;     // named barrier of all consumer warps
constexpr int kMaxStreamBatch = 64;  // decode batches only (as pipe 6)
constexpr int kGuWarps = 16, kDnWarps = 12;
constexpr int kMaxSlots = 32;
constexpr int kDefaultGroups = 2;  // gate_up; down: a block's whole unit range if <= 3 units

struct SLayout {
  int nb;              // MX blocks per weight row (K / 32)
  int wbytes, sbytes;  // per row group: weights 8 nb 16, scales 8 nb
  int groups;          // G: row groups per chunk
  int cb;              // bytes per ring slot: G (wbytes + sbytes), rounded up to 128
  int ns;              // ring slots
  int members;         // M: 1 (gate_up) or k (down)
  int gps;             // units per expert segment: inter / 4 (gate_up), all units (down)
  int units;           // units per batch row
  int act_off, part_off, ctr_off, bar_off, smem;  // ctr: work counter + kMaxSlots slot tags
};

// Chunk geometry of one block's unit range [u0, u0 + n) (device side).
struct Geo {
  int u0, n, G, gps, cps, M;
  __device__ __forceinline__ int key(int u) const { return (u / gps) * cps + (u % gps) / G; }
  __device__ __forceinline__ int first(int u) const { return max(u0, u - (u % gps) % G); }
  __device__ __forceinline__ int end(int u) const {
    const int seg = u / gps * gps, p = u % gps;
    return min(u0 + n, seg + min(gps, p / G * G + G));
  }
  __device__ __forceinline__ int index(int u, int j) const { return (key(u) - key(u0)) * M + j; }
  __device__ __forceinline__ int chunks() const {
    return n > 0 ? (key(u0 + n - 1) - key(u0) + 1) * M : 0;
  }
};

struct Job {
  const uint8_t* blocks;  // [E, rows, nb, 16]
  const uint8_t* scales;  // [E, rows, nb]
  const int32_t* ids;     // [batch, k]
  int k, n_experts, rows_per_expert;
  // First weight row of unit u, member j (gate_up: j = 0, the routed slot is u / gps).
  __device__ __forceinline__ size_t row0(const Geo& g, int b, int u, int j) const {
    const int slot = g.M == 1 ? u / g.gps : j;
    const int e = min(max(ids[b * k + slot], 0), n_experts - 1);  // ids come from top-k (valid)
    return static_cast<size_t>(e) * rows_per_expert + static_cast<size_t>(u % g.gps) * 8;
  }
};

// Producer (one thread): every chunk in order, each into slot c % ns once the slot is free.
__device__ void produce(const Job& J, const Geo& g, const SLayout& L, int b, uint8_t* smem,
                        uint64_t* full, uint64_t* empty, int* tags) {
  const int nc = g.chunks(), k0 = g.key(g.u0);
  for (int c = 0; c < nc; ++c) {
    const int s = c % L.ns, use = c / L.ns;
    if (use > 0) mbar_wait(empty + s, (use - 1) & 1);
    const int key = k0 + c / g.M, j = c % g.M;
    const int seg = key / g.cps, gc = key % g.cps;
    const int ua = max(g.u0, seg * g.gps + gc * g.G), ng = g.end(ua) - ua;
    const size_t row0 = J.row0(g, b, ua, j);
    uint8_t* slot = smem + static_cast<size_t>(s) * L.cb;
    atomicExch(tags + s, c);  // slot s now holds chunk c (see wait_tag)
    mbar_arrive_expect_tx(full + s, ng * (L.wbytes + L.sbytes));
    bulk_g2s(slot, J.blocks + row0 * L.nb * 16, ng * L.wbytes, full + s);
    bulk_g2s(slot + L.groups * L.wbytes, J.scales + row0 * L.nb, ng * L.sbytes, full + s);
  }
}

// Lane 0 spins until the producer has taken slot s for chunk c (tags[s] == c). Needed because a
// warp can take a unit whose chunk is a whole ring (or more) ahead of the slot's current chunk:
// a parity wait alone would then see the opposite parity of an older, still incomplete phase as
// "done" (the first device run of pipe 8 failed that way at 2880 x 2880, where 16 warps share
// 8 slots). Once the tag is c, the slot's previous chunk has been released, so the full
// barrier's current phase is chunk c's and its parity is unambiguous. Watchdog as mbar_wait.
__device__ __forceinline__ void wait_tag(int* tags, int s, int c, int lane) {
  if (lane == 0 && atomicOr(tags + s, 0) != c) {
    const long long t0 = clock64();
    while (atomicOr(tags + s, 0) != c) {
      if (clock64() - t0 > (1ll << 35)) __trap();
    }
  }
  __syncwarp();
}

// Waits for the chunk holding (unit u, member j), decodes its group against xv, releases it.
__device__ __forceinline__ void consume(const Geo& g, const SLayout& L, const uint8_t* smem,
                                        uint64_t* full, uint64_t* empty, int* tags, int u, int j,
                                        const uint4* xv, int su, int lane, float (&acc)[2],
                                        uint32_t& bad) {
  const int c = g.index(u, j), s = c % L.ns, fu = g.first(u), off = u - fu;
  const uint8_t* slot = smem + static_cast<size_t>(s) * L.cb;
  wait_tag(tags, s, c, lane);
  mbar_wait(full + s, (c / L.ns) & 1);
  run_group(slot + off * L.wbytes, slot + L.groups * L.wbytes + off * L.sbytes, xv, su, L.nb, lane,
            acc, bad);
  mbar_arrive_count(empty + s, off == 0 ? L.groups - (g.end(u) - fu) + 1 : 1);
}

__device__ __forceinline__ Geo block_geo(const SLayout& L) {
  const int u0 = static_cast<int>(static_cast<long long>(L.units) * blockIdx.x / gridDim.x);
  const int u1 = static_cast<int>(static_cast<long long>(L.units) * (blockIdx.x + 1) / gridDim.x);
  return Geo{u0, u1 - u0, L.groups, L.gps, (L.gps + L.groups - 1) / L.groups, L.members};
}

// Barriers, slot tags (ctr[1 + s]) and the gate_up work counter (ctr[0]) by thread 0 of the
// producer warp.
__device__ __forceinline__ void init_ring(const SLayout& L, uint64_t* full, uint64_t* empty,
                                          int* ctr, int producer_thread) {
  if (static_cast<int>(threadIdx.x) == producer_thread) {
    for (int s = 0; s < L.ns; ++s) {
      mbar_init(full + s, 1);
      mbar_init(empty + s, 32 * L.groups);
      ctr[1 + s] = -1;
    }
    *ctr = 0;
    mbar_init_fence();
  }
  __syncthreads();
}

template <int kW>
__global__ void __launch_bounds__((kW + 1) * 32, 1)
    moe_gate_up_swiglu_mxfp4w_f32a(MoeGateUpParams p, SLayout L) {
  extern __shared__ __align__(128) uint8_t smem[];
  auto* full = reinterpret_cast<uint64_t*>(smem + L.bar_off);
  uint64_t* empty = full + L.ns;
  int* ctr = reinterpret_cast<int*>(smem + L.ctr_off);
  const int b = blockIdx.y, warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const Geo g = block_geo(L);
  const Job J{p.blocks, p.scales, p.ids, p.k, p.n_experts, 2 * p.inter};
  init_ring(L, full, empty, ctr, kW * 32);
  pdl_wait();  // ids come from the router (the previous kernel)
  pdl_trigger();
  if (warp == kW) {
    if (lane == 0) produce(J, g, L, b, smem, full, empty, ctr + 1);
    return;
  }
  auto* xs = reinterpret_cast<uint4*>(smem + L.act_off);
  const float* x = p.x + static_cast<size_t>(b) * p.hidden;
  tc_stage(xs, x, 1, L.nb, threadIdx.x, kW * 32);
  named_sync(kConsumerBar, kW * 32);
  const int su = split_units(1, L.nb);
  for (;;) {
    int i = 0;
    if (lane == 0) i = atomicAdd(ctr, 1);  // next unit in order: any free warp takes it
    i = __shfl_sync(0xffffffffu, i, 0);
    if (i >= g.n) break;
    const int u = g.u0 + i, slot = u / g.gps, group = u % g.gps;
    float acc[2] = {0.f, 0.f};
    uint32_t bad = 0;
    consume(g, L, smem, full, empty, ctr + 1, u, 0, xs, su, lane, acc, bad);
    const size_t row0 = J.row0(g, b, u, 0);
    const float2 gu = finish_rows(acc, bad, p.blocks, p.scales, row0, L.nb, x, lane);
    if (lane < 4) {
      const int o = group * 4 + lane;                              // SwiGLU output in the expert
      const size_t e_row = row0 - static_cast<size_t>(group) * 8;  // expert's row 0
      const float gt = fminf(gu.x + p.bias[e_row + 2 * o], p.limit);
      const float up = fmaxf(fminf(gu.y + p.bias[e_row + 2 * o + 1], p.limit), -p.limit);
      p.act[(static_cast<size_t>(b) * p.k + slot) * p.inter + o] =
          (up + 1.f) * gt / (1.f + __expf(-p.alpha * gt));
    }
  }
}

template <int kW>
__global__ void __launch_bounds__((kW + 1) * 32, 1)
    moe_down_mxfp4w_f32a(MoeDownParams p, SLayout L) {
  extern __shared__ __align__(128) uint8_t smem[];
  auto* full = reinterpret_cast<uint64_t*>(smem + L.bar_off);
  uint64_t* empty = full + L.ns;
  const int b = blockIdx.y, warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const Geo g = block_geo(L);
  const Job J{p.blocks, p.scales, p.ids, p.k, p.n_experts, p.hidden};
  int* ctr = reinterpret_cast<int*>(smem + L.ctr_off);  // [0] unused here, [1 + s] slot tags
  init_ring(L, full, empty, ctr, kW * 32);
  if (warp == kW) {
    // ids / weights are final before pdl_wait (params.h): the weight copies start at once.
    if (lane == 0) produce(J, g, L, b, smem, full, empty, ctr + 1);
    pdl_wait();
    pdl_trigger();
    return;
  }
  pdl_wait();  // act comes from gate_up (the previous kernel)
  pdl_trigger();
  auto* xs = reinterpret_cast<uint4*>(smem + L.act_off);
  const float* act = p.act + static_cast<size_t>(b) * p.k * p.inter;
  tc_stage(xs, act, p.k, L.nb, threadIdx.x, kW * 32);
  named_sync(kConsumerBar, kW * 32);
  auto* part = reinterpret_cast<float*>(smem + L.part_off);  // [2][teams][k][8]
  const int teams = kW / p.k, m = warp / p.k, j = warp % p.k;
  if (m >= teams) return;
  const int su = split_units(p.k, L.nb);
  const uint4* xv = xs + j * pad4(L.nb) * 4;
  const int n_units = m < g.n ? (g.n - m + teams - 1) / teams : 0;
  for (int n = 0; n < n_units; ++n) {
    const int u = g.u0 + m + teams * n;
    float acc[2] = {0.f, 0.f};
    uint32_t bad = 0;
    consume(g, L, smem, full, empty, ctr + 1, u, j, xv, su, lane, acc, bad);
    const float2 v = finish_rows(acc, bad, p.blocks, p.scales, J.row0(g, b, u, j), L.nb,
                                 act + static_cast<size_t>(j) * p.inter, lane);
    float* pt = part + ((n & 1) * teams + m) * p.k * 8;  // double-buffered by round
    down_team_sum(p, pt, v, b, u, j, lane, 1 + m);
  }
}

// Shape of the work: K = 32 nb, nv staged vectors, `warps` consumer warps, M members per unit,
// gps units per expert segment, `units` per batch row, `groups` requested (0: default). The
// ring takes what shared memory is left (at most kMaxSlots slots, at least min_slots; G is
// lowered until that many fit). Unsupported when the shapes / pointers do not suit the kernels.
struct Shape {
  int batch, nb, nv, warps, members, gps, units, groups, min_slots;
};
Result<SLayout> stream_layout(const Shape& sh, const void* blocks, const void* scales) {
  if (sh.batch > kMaxStreamBatch || sh.nb % 2 != 0 || sh.members > sh.warps ||
      !moe_pipe::aligned(blocks, 16) || !moe_pipe::aligned(scales, 16)) {
    return moe_pipe::NoPipe();  // 8 nb scale bytes must be a multiple of 16
  }
  GS_ASSIGN_OR_RETURN(const int gx, blocks_per_row(sh.batch, sh.units));
  const int upb = (sh.units + gx - 1) / gx;  // most units of one block
  auto up128 = [](long long v) { return (v + 127) & ~127ll; };
  SLayout L{};
  L.nb = sh.nb;
  L.wbytes = 8 * sh.nb * 16;
  L.sbytes = 8 * sh.nb;
  L.members = sh.members;
  L.gps = sh.gps;
  L.units = sh.units;
  L.act_off = 0;
  L.part_off = static_cast<int>(up128(stage_bytes(sh.nv, sh.nb)));
  L.ctr_off = L.part_off + static_cast<int>(up128(2ll * sh.warps * 8 * 4));
  L.bar_off = L.ctr_off + static_cast<int>(up128(4ll * (1 + kMaxSlots)));
  const long long ring_off = up128(L.bar_off + 2ll * kMaxSlots * 8);
  const long long avail = static_cast<long long>(moe_pipe::kMaxSmem) - ring_off;
  int G = sh.groups > 0 ? sh.groups : (sh.members > 1 && upb <= 3 ? upb : kDefaultGroups);
  G = std::max(1, std::min({G, upb, sh.gps}));
  for (;; --G) {
    const long long cb = up128(static_cast<long long>(G) * (L.wbytes + L.sbytes));
    const long long ns = std::min<long long>(kMaxSlots, avail / cb);
    if (ns >= sh.min_slots) {
      L.groups = G;
      L.cb = static_cast<int>(cb);
      L.ns = static_cast<int>(ns);
      break;
    }
    if (G == 1) return moe_pipe::NoPipe();
  }
  // The ring goes first (128-byte aligned slots), the rest after it.
  const int ring = L.ns * L.cb;
  L.act_off += ring;
  L.part_off += ring;
  L.ctr_off += ring;
  L.bar_off += ring;
  L.smem = static_cast<int>(ring + ring_off);
  return L;
}

Result<SLayout> gate_up_layout(const MoeGateUpParams& p) {
  const int gps = p.inter / 4;
  return stream_layout({p.batch, p.hidden / 32, 1, kGuWarps, 1, gps, p.k * gps, p.stream_groups, 2},
                       p.blocks, p.scales);
}
Result<SLayout> down_layout(const MoeDownParams& p) {
  const int units = p.hidden / 8;
  return stream_layout(
      {p.batch, p.inter / 32, p.k, kDnWarps, p.k, units, units, p.stream_groups, p.k}, p.blocks,
      p.scales);
}

}  // namespace

bool moe_gate_up_stream_supported(const MoeGateUpParams& p) {
  return p.validate().ok() && device_is_sm90() && gate_up_layout(p).ok();
}
bool moe_down_stream_supported(const MoeDownParams& p) {
  return p.validate().ok() && device_is_sm90() && down_layout(p).ok();
}

Status launch_moe_gate_up_stream(const MoeGateUpParams& p, cudaStream_t s) {
  if (!device_is_sm90()) return moe_pipe::NoPipe();
  GS_ASSIGN_OR_RETURN(const SLayout L, gate_up_layout(p));
  return launch_streaming(p, L, moe_gate_up_swiglu_mxfp4w_f32a<kGuWarps>, kGuWarps,
                          "moe_gate_up_swiglu_mxfp4w_f32a (stream)", s);
}

Status launch_moe_down_stream(const MoeDownParams& p, cudaStream_t s) {
  if (!device_is_sm90()) return moe_pipe::NoPipe();
  GS_ASSIGN_OR_RETURN(const SLayout L, down_layout(p));
  return launch_streaming(p, L, moe_down_mxfp4w_f32a<kDnWarps>, kDnWarps,
                          "moe_down_mxfp4w_f32a (stream)", s);
}

}  // namespace gossamer::kern

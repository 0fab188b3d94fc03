// gemv_bulk_bf16w_f32a<BT>: the GEMV of BT = 1..4 activation rows (y (+)= W x + bias, no argmax)
// with the weight rows streamed into shared memory by bulk copies (1-D TMA), as the MoE decode
// kernels do. Decode batches of 2..4 sequences read each weight row once for all their rows.
//
// Why: the warp GEMV of kernel.cu keeps only ~4 KB per warp in flight and its grid (one block per
// 16 rows: 180 blocks for the O-projection on 132 SMs) is uneven across SMs. Here the grid is one
// block per SM with an even split of the rows (block b: rows [b R / G, (b + 1) R / G)), and the
// block's producer thread requests its rows as soon as the block is resident, before
// pdl_wait() (weights only: common/pdl.h rule 1), through a ring of kGemvBulkRingBytes (small,
// so that the neighbouring kernels' blocks fit beside it: docs/decode-overhead.md section 6).
//
// Mapping: warps 0..7 consume, warp 8 lane 0 produces; the ring and its slot ownership are
// common/bulk_gemv.cuh's. x is staged once per block in shared memory as low / high float4
// halves per row (conflict-free LDS.128). Every row's result is bit-identical to
// gemv_bf16w_f32a<1> of that row alone (gemv_test).
#include <algorithm>

#include "kernels/common/bulk_gemv.cuh"
#include "kernels/common/cuda_check.h"
#include "kernels/common/pdl.h"
#include "kernels/gemv/params.h"

namespace gossamer::kern {
namespace {

constexpr int kConsumers = 8, kThreads = (kConsumers + 1) * 32, kConsumerBar = 1;
constexpr int kMaxSmem = 227 * 1024;

struct Layout {
  int slots;      // rows of the ring
  int row_bytes;  // 2 cols
  int x_off;      // x staged as [BT][2][cols / 8] float4
  int rows_off;   // [1 + BT][max_rows] f32: the block's bias, then its y rows (accumulate)
  int max_rows;   // rows per block at most
  int bar_off;    // full[slots], empty[slots]
  int smem;
};

template <int BT>
__global__ void __launch_bounds__(kThreads, 1) gemv_bulk_bf16w_f32a(GemvParams p, Layout L) {
  extern __shared__ __align__(128) uint8_t smem[];
  uint64_t* full = reinterpret_cast<uint64_t*>(smem + L.bar_off);
  const bulk_gemv::Ring ring{smem, full, full + L.slots, L.slots, L.row_bytes};
  float4* xs = reinterpret_cast<float4*>(smem + L.x_off);  // [BT][2][nch]
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, nch = p.cols / 8;
  const int r0 = static_cast<int>(static_cast<long long>(blockIdx.x) * p.rows / gridDim.x);
  const int n = static_cast<int>(static_cast<long long>(blockIdx.x + 1) * p.rows / gridDim.x) - r0;
  if (threadIdx.x == 0) bulk_gemv::ring_init(ring);
  __syncthreads();
  if (warp == kConsumers) {  // producer: weights only, so it never waits for the predecessor
    if (lane == 0) {
      bulk_gemv::ring_produce(ring, n,
                              [&](int j) { return p.w + static_cast<size_t>(r0 + j) * p.cols; });
    }
    return;
  }
  // The block's bias rows (a weight: before the wait) and y rows (accumulate: after it) go to
  // shared memory with the staging of x, so that finishing a row reads no global memory (the
  // last rows' bias used to be a DRAM round trip at the kernel's tail).
  float* bias_s = reinterpret_cast<float*>(smem + L.rows_off);  // [max_rows]
  float* y_s = bias_s + L.max_rows;                             // [BT][max_rows]
  const int t = threadIdx.x;
  const float b0 = t < n && p.bias ? p.bias[r0 + t] : 0.f;  // in flight across the wait
  pdl_wait();  // x (and y when accumulating) come from earlier kernels
  pdl_trigger();
  const int nb = min(BT, p.batch);
  // This thread's first y rows (accumulate): loaded before x, so that both are in flight at once
  // (one L2 round trip after the wait instead of two).
  float y0[BT];
#pragma unroll
  for (int b = 0; b < BT; ++b)
    y0[b] = p.accumulate && t < n && b < nb ? p.y[b * static_cast<size_t>(p.ldy) + r0 + t] : 0.f;
  // A plain loop on purpose: qkv_rope/bulk.cu's stage_rows (chunks in pairs, loads first), used
  // here instead, measured slower (session 21, H100, tg64 in one call: 120b b2 603 -> 584 t/s,
  // 20b b2 856 -> 828, b1 -0.3% / -1%); the schedule ptxas gives this loop is not understood.
  for (int k = threadIdx.x; k < nch; k += kConsumers * 32) {
#pragma unroll
    for (int b = 0; b < BT; ++b) {
      const float4* src =
          reinterpret_cast<const float4*>(p.x + static_cast<size_t>(min(b, nb - 1)) * p.cols) +
          2 * k;
      xs[2 * b * nch + k] = __ldg(src);
      xs[(2 * b + 1) * nch + k] = __ldg(src + 1);
    }
  }
  for (int j = t; j < n; j += kConsumers * 32) {
    if (p.accumulate)
#pragma unroll
      for (int b = 0; b < BT; ++b)
        if (b < nb)
          y_s[b * L.max_rows + j] = j == t ? y0[b] : p.y[b * static_cast<size_t>(p.ldy) + r0 + j];
    bias_s[j] = j == t ? b0 : p.bias ? p.bias[r0 + j] : 0.f;
  }
  bulk_copy::named_sync(kConsumerBar, kConsumers * 32);
  bulk_gemv::ring_consume<kConsumers, BT>(ring, n, xs, nch, warp, [&](int j, const float* dot) {
    for (int b = 0; b < nb; ++b) {
      const float v = dot[b] + bias_s[j];
      p.y[b * static_cast<size_t>(p.ldy) + r0 + j] = p.accumulate ? y_s[b * L.max_rows + j] + v : v;
    }
  });
}

Result<Layout> make_layout(const GemvParams& p, int grid) {
  Layout L{};
  L.row_bytes = 2 * p.cols;
  const int x_bytes = 4 * p.cols * p.batch;  // x of every row
  L.max_rows = (p.rows + grid - 1) / grid;
  const int rows_bytes = 4 * (1 + p.batch) * L.max_rows;
  GS_ASSIGN_OR_RETURN(
      L.slots, bulk_gemv::ring_slots("gemv_bulk", L.row_bytes, L.max_rows,
                                     p.bulk_ring_bytes > 0 ? p.bulk_ring_bytes : kGemvBulkRingBytes,
                                     kMaxSmem - x_bytes - rows_bytes - 128));
  L.x_off = L.slots * L.row_bytes;
  L.rows_off = L.x_off + x_bytes;
  L.bar_off = (L.rows_off + rows_bytes + 15) / 16 * 16;
  L.smem = L.bar_off + 16 * L.slots;
  return L;
}

// The batch, columns and device, before the shared-memory layout is looked at.
bool shape_supported(const GemvParams& p) {
  return p.batch >= 1 && p.batch <= kGemvBulkMaxBatch && !p.argmax && p.cols <= kGemvBulkMaxCols &&
         p.rows >= 1 && bulk_copy::device_is_sm90();
}

}  // namespace

bool gemv_bulk_supported(const GemvParams& p) {
  // x of every row and two weight rows must also fit in shared memory (not so for 16384 columns
  // at 3..4 rows): otherwise the auto variant must not pick this kernel.
  if (!shape_supported(p)) return false;
  const auto sms = bulk_copy::sm_count();
  return sms.ok() && make_layout(p, std::min(p.rows, *sms)).ok();
}

namespace {

struct Prepared {
  Layout L;
  bulk_copy::OneBlockLaunch<void (*)(GemvParams, Layout)> k;
};

// The kernel, grid and shared memory of a launch (at least one_block_per_sm_smem: one block per
// SM, whatever the registers allow).
Result<Prepared> prepare(const GemvParams& p) {
  GS_RETURN_IF_ERROR(p.validate());
  if (!shape_supported(p)) {  // the layout below says why it does not fit, where it does not
    return InvalidArgument("gemv_bulk: needs batch 1.." + std::to_string(kGemvBulkMaxBatch) +
                           ", no argmax, cols <= " + std::to_string(kGemvBulkMaxCols) +
                           " and an sm_90 GPU");
  }
  GS_ASSIGN_OR_RETURN(const int sms, bulk_copy::sm_count());
  const int grid = std::min(p.rows, sms);
  GS_ASSIGN_OR_RETURN(const Layout L, make_layout(p, grid));
  static_assert(kGemvBulkMaxBatch <= 4, "instantiated for 1..4 rows");
  void (*const kernels[])(GemvParams, Layout) = {gemv_bulk_bf16w_f32a<1>, gemv_bulk_bf16w_f32a<2>,
                                                 gemv_bulk_bf16w_f32a<3>, gemv_bulk_bf16w_f32a<4>};
  GS_ASSIGN_OR_RETURN(const auto k,
                      bulk_copy::one_block_launch(kernels[p.batch - 1], grid, L.smem));
  return Prepared{L, k};
}

}  // namespace

Status launch_gemv_bulk(const GemvParams& p, cudaStream_t s) {
  GS_ASSIGN_OR_RETURN(const Prepared b, prepare(p));
  return launch_pdl(p.pdl, "gemv_bulk_bf16w_f32a", b.k.kernel, dim3(b.k.grid), dim3(kThreads),
                    static_cast<size_t>(b.k.smem), s, p, b.L);
}

Result<int> gemv_bulk_blocks_per_sm(const GemvParams& p) {
  GS_ASSIGN_OR_RETURN(const Prepared b, prepare(p));
  return bulk_copy::blocks_per_sm(b.k, kThreads);
}

}  // namespace gossamer::kern

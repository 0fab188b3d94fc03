// Dense GEMV with bf16 weights and fp32 activations, for a few activation rows (batch 1..64):
//   y[b, r] (+)= sum_c W[r, c] * x[b, c] + bias[r]
// Used for the O-projection (accumulate = residual add), the router and the lm_head (optionally
// with a fused argmax over rows for greedy sampling).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

#include "common/status.h"

namespace gossamer::kern {

struct GemvParams {
  const uint16_t* w = nullptr;  // [rows, cols] bf16, 16-byte aligned
  const float* bias = nullptr;  // [rows] f32 or null
  const float* x = nullptr;     // [batch, cols] f32, 16-byte aligned
  float* y = nullptr;           // [batch, ldy] f32 (may be null when only argmax is wanted)
  int rows = 0, cols = 0, batch = 0, ldy = 0;
  bool accumulate = false;  // y += result (residual add) instead of y = result
  // [batch] packed (value, row) keys; reset to 0 before the launch. Null: no argmax.
  unsigned long long* argmax = nullptr;
  bool pdl = false;  // programmatic dependent launch (common/pdl.h)
  // 0 = auto, 1 = the warp GEMV gemv_bf16w_f32a<BT>, 2 = gemv_bulk_bf16w_f32a (batch 1..4),
  // 3 = gemv_mma_bf16w_f32a (batch >= 2, cols % 32 == 0: tensor cores, mma.cu).
  int variant = 0;
  // Variant 2: weight ring bytes per block (0 = kGemvBulkRingBytes), at least 2 rows.
  int bulk_ring_bytes = 0;
  Status validate() const;
};

// gemv_bulk_bf16w_f32a (bulk.cu): batch 1..kGemvBulkMaxBatch, no argmax (so y is written), cols
// <= kGemvBulkMaxCols, x and two weight rows within shared memory, sm_90.
inline constexpr int kGemvBulkMaxCols = 16384;
inline constexpr int kGemvBulkMaxBatch = 4;
// Default ring: small enough that the next kernel's blocks (and the previous one's) fit on the
// SM beside it, so that PDL can overlap their prologues (H100, docs/decode-overhead.md section 6).
inline constexpr int kGemvBulkRingBytes = 64 * 1024;
bool gemv_bulk_supported(const GemvParams& p);
Status launch_gemv_bulk(const GemvParams& p, cudaStream_t stream);
// Blocks of gemv_bulk's kernel for p that fit on one SM (1: the launch keeps it to one; a test).
Result<int> gemv_bulk_blocks_per_sm(const GemvParams& p);
// gemv_mma_bf16w_f32a (mma.cu): batch >= 2 (tiles of 8, 16, 32 rows), cols % 32 == 0. Preferred
// (auto) from batch 3: at batch 2 the warp GEMV streams the lm_head faster (408 vs 444 us, H100).
// Tiles of 16 / 32 rows re-split x in every warp and turn compute-bound (lm_head b16 719 us, b32
// 2162 us; the warp GEMV 1412 / 2814): the runner keeps cuBLASLt for > 8 logits rows.
bool gemv_mma_supported(const GemvParams& p);
bool gemv_mma_preferred(const GemvParams& p);
Status launch_gemv_mma(const GemvParams& p, cudaStream_t stream);

// Variant 1: kernel gemv_bf16w_f32a<BT>, the batch tile BT in {1,2,4,8} from `batch`; variant 2:
// launch_gemv_bulk; variant 3: launch_gemv_mma; auto: 2 where supported (batch 1), else 3 where
// preferred (batch >= 3), else 1.
Status launch_gemv(const GemvParams& p, cudaStream_t stream);
// The variant launch_gemv runs (variant 0 resolved as above), and
// its kernel's name (kernel-path report). Only the shape fields of p matter.
int gemv_resolved_variant(const GemvParams& p);
const char* gemv_variant(const GemvParams& p);

// Decodes an argmax key (from GemvParams::argmax) into the row index.
int argmax_key_to_index(unsigned long long key);

// fp64 reference: x [batch, cols], w bf16 [rows, cols], bias [rows] (may be empty), y0 [batch,
// rows] initial y for accumulate (may be empty) -> y [batch, rows].
std::vector<double> gemv_ref(const std::vector<uint16_t>& w, const std::vector<float>& bias,
                             const std::vector<float>& x, const std::vector<float>& y0, int rows,
                             int cols, int batch);

}  // namespace gossamer::kern

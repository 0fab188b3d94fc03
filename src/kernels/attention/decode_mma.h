// The one-kernel decode attention (decode_mma.cu): reached through launch_attention() when
// AttnParams::tickets is set (kernels 1-2, batch <= 64).
#pragma once

#include <cuda_runtime.h>

#include <cmath>

#include "common/status.h"
#include "kernels/attention/params.h"

namespace gossamer::kern {

// The split of one row's keys [lo, pos] into ns runs of `chunk` key tiles of 64 (tiles tb0 ..
// tb0 + n - 1; the last run may be shorter, none is empty). Every CTA of a (row, kv head)
// computes it from pos on the device. `per` = AttnParams::split_tiles: > 0 forces at least that
// many tiles per split; 0 is the default rule, from the H100 measurements (docs/attention.md):
// n <= 3 (contexts up to 192 keys, the 128-token sliding window): one split (no merge); else
// about max(2, sqrt(n) / 2) tiles per split (ctx 300 / 1024: 2 tiles, 4096: 4, 16384: 8).
struct DecodeSplit {
  int lo, tb0, n, ns, chunk;
};
inline constexpr int kDecodeMinSplitTiles = 2;  // the default rule's smallest run

__host__ __device__ inline DecodeSplit decode_split(int pos, int window, int zmax, int per) {
  constexpr int kBc = 64;
  DecodeSplit d;
  d.lo = window > 0 && pos - window + 1 > 0 ? pos - window + 1 : 0;
  d.tb0 = d.lo / kBc;
  d.n = pos >= d.lo ? pos / kBc - d.tb0 + 1 : 0;
  if (per <= 0) {
    per = d.n <= 3 ? d.n : static_cast<int>(ceilf(sqrtf(static_cast<float>(d.n)) * 0.5f));
    per = per < kDecodeMinSplitTiles && d.n > 3 ? kDecodeMinSplitTiles : per;
    per = per < 1 ? 1 : per;
  }
  const int want = (d.n + per - 1) / per;
  d.ns = want < zmax ? want : zmax;
  d.ns = d.ns < 1 ? 1 : d.ns;
  d.chunk = (d.n + d.ns - 1) / d.ns;
  d.chunk = d.chunk < 1 ? 1 : d.chunk;
  d.ns = (d.n + d.chunk - 1) / d.chunk;  // no empty run
  d.ns = d.ns < 1 ? 1 : d.ns;
  return d;
}

// Grid depth (CTAs per (row, kv head)) of the launch: min(splits, the most runs any position in
// the cache can need).
int decode_mma_max_splits(const AttnParams& p);

Status launch_attention_decode_mma(const AttnParams& p, cudaStream_t stream);

}  // namespace gossamer::kern

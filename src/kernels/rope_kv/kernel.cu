// rope_kv_f32: grid = rows, 256 threads. The first 32 threads form the row's 32 rotation angles
// in fp64 (range-reduced, as qkv_rope: fp32 loses ~1e-2 rad at pos ~1e5) and leave cos/sin
// (scaled) in shared memory; then thread t handles pairs idx = t, t + 256, ... over
// (unit = idx / 32, i = idx % 32): consecutive threads read consecutive floats of a head half.
// Under PDL the angles (pos is the step's upload, never written by a kernel: pdl.h rule 1) are
// formed before pdl_wait(), while the QKV GEMM drains.
#include "kernels/common/cuda_check.h"
#include "kernels/common/device.cuh"
#include "kernels/common/pdl.cuh"
#include "kernels/common/pdl.h"
#include "kernels/rope_kv/params.h"

namespace gossamer::kern {
namespace {

constexpr int kThreads = 256;

__global__ void __launch_bounds__(kThreads) rope_kv_f32(RopeKvParams p) {
  __shared__ float cs[32], sn[32];
  const int r = blockIdx.x;
  const int pos = p.pos[r];
  if (threadIdx.x < 32) {
    const int i = threadIdx.x;
    const double ang = fmod(static_cast<double>(pos) * p.inv_freq[i], 6.283185307179586);
    float s, c;
    sincosf(static_cast<float>(ang), &s, &c);
    cs[i] = c * p.rope_scale;
    sn[i] = s * p.rope_scale;
  }
  pdl_wait();  // qkv comes from the QKV GEMM; the K/V cache may still be read by attention
  pdl_trigger();
  __syncthreads();
  const int seq = p.row_seq ? p.row_seq[r] : r;
  const int blk = p.block_table[static_cast<size_t>(seq) * p.max_blocks + pos / p.block_size];
  const bool blk_ok = blk >= 0 && blk < p.num_blocks;  // the host validates tables
  const int units = p.n_heads + 2 * p.n_kv_heads;
  const float* src = p.qkv + static_cast<size_t>(r) * p.ld;
  for (int idx = threadIdx.x; idx < units * 32; idx += kThreads) {
    const int u = idx >> 5, i = idx & 31;
    float x1 = src[u * 64 + i], x2 = src[u * 64 + i + 32];
    const bool is_v = u >= p.n_heads + p.n_kv_heads;
    if (!is_v) {
      const float o1 = x1 * cs[i] - x2 * sn[i], o2 = x2 * cs[i] + x1 * sn[i];
      x1 = o1;
      x2 = o2;
    }
    if (u < p.n_heads) {
      const size_t o = (static_cast<size_t>(r) * p.n_heads + u) * 64 + i;
      if (p.q) {
        p.q[o] = x1;
        p.q[o + 32] = x2;
      }
      if (p.q_bf16) {
        p.q_bf16[o] = f32_to_bf16(x1);
        p.q_bf16[o + 32] = f32_to_bf16(x2);
      }
      continue;
    }
    if (!blk_ok) continue;
    const int kh = is_v ? u - p.n_heads - p.n_kv_heads : u - p.n_heads;
    uint16_t* dst =
        (is_v ? p.v_cache : p.k_cache) +
        ((static_cast<size_t>(blk) * p.n_kv_heads + kh) * p.block_size + pos % p.block_size) * 64;
    dst[i] = f32_to_bf16(x1);
    dst[i + 32] = f32_to_bf16(x2);
  }
}

}  // namespace

Status launch_rope_kv(const RopeKvParams& p, cudaStream_t s) {
  GS_RETURN_IF_ERROR(p.validate());
  return launch_pdl(p.pdl, "rope_kv_f32", rope_kv_f32, dim3(p.rows), dim3(kThreads), 0, s, p);
}

}  // namespace gossamer::kern

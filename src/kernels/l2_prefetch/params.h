// L2 prefetch of a byte range of global memory (issue #4: pull the next layer's dense weights
// into L2 while latency-bound kernels leave DRAM idle), and the helpers of its probe bench.
//   launch_l2_prefetch: fire-and-forget hints; the kernel ends before the data has arrived. It
//     reads nothing into registers and writes nothing (a hint never changes memory).
//   launch_l2_touch: real loads of one 4-byte word per 32-byte sector (the kernel ends when every
//     sector is in L2); the bench uses it to flush L2 with unrelated data.
//   launch_l2_demote: applypriority L2::evict_normal on the 128-byte lines of the range (undoes
//     an evict_last prefetch for the lines that are still resident).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "common/status.h"

namespace gossamer::kern {

// How the prefetch is issued.
enum class L2Method {
  kBulk,    // cp.async.bulk.prefetch.L2 (Hopper TMA) of 4 KB pieces, with an L2 cache policy
  kSector,  // prefetch.global.L2[::evict_last] per 32-byte sector (sm_80+)
  kLoad,    // ld.global.L2::cache_hint per 32-byte sector (blocking loads, value discarded)
};
// L2 eviction priority given to the prefetched lines (kSector supports kNormal and kLast).
enum class L2Priority { kNormal, kLast, kFirst };

struct L2PrefetchParams {
  const void* ptr = nullptr;  // [bytes] any alignment; may be null when bytes == 0
  size_t bytes = 0;           // 0: nothing is launched
  L2Method method = L2Method::kBulk;
  L2Priority priority = L2Priority::kLast;
  int blocks = 0;  // grid size; 0 = one block per SM
  // PDL launch (pdl.h): the kernel triggers at once and issues its hints (weights only), then
  // pdl_wait()s, so a kernel after it in a PDL chain still sees everything before it completed.
  bool pdl = false;
  Status validate() const;
};

// Kernel l2_prefetch (sm_90 for kBulk: elsewhere kBulk falls back to kSector).
Status launch_l2_prefetch(const L2PrefetchParams& p, cudaStream_t stream);
// Kernel l2_touch: loads every 32-byte sector of [ptr, ptr + bytes) (plain L2 priority).
Status launch_l2_touch(const void* ptr, size_t bytes, cudaStream_t stream);
// Kernel l2_demote: evict_normal priority for the resident lines of the range.
Status launch_l2_demote(const void* ptr, size_t bytes, cudaStream_t stream);
// Kernel l2_spin (bench helper): one block busy for about `ns` nanoseconds (gives fire-and-forget
// prefetches time to land while the host keeps the stream queue full).
Status launch_l2_spin(uint32_t ns, cudaStream_t stream);

}  // namespace gossamer::kern

// The end of every forward (decode and prefill): final RMSNorm of the logits rows, lm_head, the
// greedy argmax keys and the greedy tokens (optionally fed back as the next step's inputs).
//
// Up to kGemvMaxRows logits rows: gathered RMSNorm + the lm_head GEMV with fused argmax (one pass
// over the 1.16 GB weight per 8 rows, f32 activations; from 3 rows on the tensor cores). (The
// tensor-core GEMV with 16- or 32-row tiles measured slower than cuBLASLt here: engine tg32 b32
// 20b 3756 -> 3185 t/s; kernels/gemv/params.h.) More rows (decode batches, prompts with
// all-row logits): one pass per 8 rows would cost ~0.4-0.7 ms each, so the rows go through
// cuBLASLt instead: the normed rows split into bf16 hi + lo (hi + lo carries ~16 significant
// bits, so the logits stay within ~1e-5 of the f32 GEMV and greedy picks agree except at
// near-ties), two GEMMs (hi, then lo accumulated) and the argmax kernel over the logits rows.
#include <algorithm>

#include "engine/cuda/forward_parts.h"
#include "engine/cuda/runner_impl.h"
#include "kernels/common/cuda_check.h"
#include "kernels/gemm/params.h"
#include "kernels/gemv/params.h"
#include "kernels/rmsnorm/params.h"
#include "kernels/sample/params.h"

namespace gossamer::cudarun {

bool lm_head_uses_gemm(const CudaModelRunner::Impl& m, int logit_rows) {
  return m.gemm && m.ws.lm_x && logit_rows > kGemvMaxRows;
}

Status enqueue_lm_head(const CudaModelRunner::Impl& m, int logit_rows, bool feedback,
                       const Dims& d) {
  using namespace kern;
  const auto& ws = m.ws;
  cudaStream_t s = m.stream;
  Range r("lm_head + greedy");
  // xn[i] = rmsnorm(x[logit_rows[i]]): [logit_rows, H]
  GS_RETURN_IF_ERROR(launch_rmsnorm(
      {ws.x, m.final_norm, m.in.logit_rows, ws.xn, logit_rows, d.H, d.eps, d.pdl}, s));
  if (lm_head_uses_gemm(m, logit_rows)) {
    const size_t n = static_cast<size_t>(logit_rows) * d.H;
    uint16_t* hi = ws.lm_x;      // [logit_rows, H] bf16
    uint16_t* lo = ws.lm_x + n;  // [logit_rows, H] bf16: xn - hi
    GS_RETURN_IF_ERROR(launch_f32_to_bf16(ws.xn, hi, n, s, lo));
    GemmParams g;  // logits[logit_rows, V] = xn lm_head^T
    g.a = hi;
    g.w = m.lm_head;
    g.d = ws.logits;
    g.m = logit_rows;
    g.n = d.V;
    g.k = d.H;
    GS_RETURN_IF_ERROR(m.gemm->run(g, s));
    g.a = lo;
    g.accumulate = true;
    GS_RETURN_IF_ERROR(m.gemm->run(g, s));
    GS_RETURN_IF_ERROR(launch_argmax({ws.logits, ws.keys, logit_rows, d.V, d.V}, s));
  } else {
    GS_RETURN_IF_ERROR(launch_gemv(
        {m.lm_head, nullptr, ws.xn, ws.logits, d.V, d.H, logit_rows, d.V, false, ws.keys, d.pdl},
        s));
  }
  GreedyFinalizeParams fp{ws.keys, ws.sampled, feedback ? m.in.tokens : nullptr,
                          feedback ? m.in.pos : nullptr, logit_rows};
  return launch_greedy_finalize(fp, s);
}

}  // namespace gossamer::cudarun

// The decode/prefill forward of gpt-oss on the GPU: the op sequence per layer, enqueued on the
// runner's stream (also used inside CUDA graph capture: no host sync, no allocation here).
#include <nvtx3/nvToolsExt.h>

#include <algorithm>

#include "engine/cuda/forward_parts.h"
#include "engine/cuda/runner_impl.h"
#include "kernels/attention/params.h"
#include "kernels/common/cuda_check.h"
#include "kernels/embed/params.h"
#include "kernels/gemv/params.h"
#include "kernels/moe/params.h"
#include "kernels/qkv_rope/params.h"
#include "kernels/rmsnorm/params.h"
#include "kernels/router/params.h"
#include "kernels/sample/params.h"

namespace gossamer {

namespace {

using cudarun::Dims;
using cudarun::Range;

// Attention half of a layer: fused norm + QKV/RoPE/KV write, split attention, O-proj + residual.
Status enqueue_attention(const CudaModelRunner::Impl& m, const cudarun::DevLayer& L, int rows,
                         const Dims& d, kern::QkvRopeParams& qp, kern::AttnParams& ap) {
  using namespace kern;
  const auto& ws = m.ws;
  cudaStream_t s = m.stream;
  Range r("attention block");
  const int32_t* tables = L.sliding ? m.in.tables_sliding : m.in.tables_full;
  const int nblocks = static_cast<int>(L.sliding ? m.kv.num_blocks_sliding : m.kv.num_blocks_full);
  qp.x = ws.x;  // RMSNorm fused into qkv_rope (norm_w): no separate norm kernel
  qp.norm_w = L.attn_norm;
  qp.eps = d.eps;
  qp.w = L.qkv_w;
  qp.bias = L.qkv_b;
  qp.block_table = tables;
  qp.k_cache = L.k;
  qp.v_cache = L.v;
  qp.num_blocks = nblocks;
  GS_RETURN_IF_ERROR(launch_qkv_rope(qp, s));
  ap.k_cache = L.k;
  ap.v_cache = L.v;
  ap.block_table = tables;
  ap.num_blocks = nblocks;
  ap.sinks = L.sinks;
  ap.window = L.sliding ? static_cast<int>(m.cfg.sliding_window) : 0;
  // A sliding layer attends to at most `window` keys: one split per 64 of them is plenty (the
  // full-context split count would leave most CTAs with nothing to do and a long combine).
  ap.splits = L.sliding ? std::min(m.splits_for(rows), std::max(1, (ap.window + 63) / 64))
                        : m.splits_for(rows);
  GS_RETURN_IF_ERROR(launch_attention(ap, s));
  return launch_gemv({L.o_w, L.o_b, ws.attn, ws.x, d.H, d.QD, rows, d.H, true, nullptr, d.pdl}, s);
}

// MoE half of a layer: norm, router GEMV + top-k, gate_up + SwiGLU, down + weighted residual.
Status enqueue_moe(const CudaModelRunner::Impl& m, const cudarun::DevLayer& L, int rows,
                   const Dims& d) {
  using namespace kern;
  const auto& ws = m.ws;
  cudaStream_t s = m.stream;
  Range r("moe block");
  if (use_norm_router(d.E)) {  // one fused kernel: norm (writes xn), router GEMV, top-k
    GS_RETURN_IF_ERROR(
        launch_norm_router_topk({ws.x, L.mlp_norm, L.router_w, L.router_b, ws.xn, nullptr, ws.ids,
                                 ws.rw, rows, d.H, d.E, d.K, d.eps, d.pdl},
                                s));
  } else {
    GS_RETURN_IF_ERROR(
        launch_rmsnorm({ws.x, L.mlp_norm, nullptr, ws.xn, rows, d.H, d.eps, d.pdl}, s));
    GS_RETURN_IF_ERROR(launch_gemv(
        {L.router_w, L.router_b, ws.xn, ws.router, d.E, d.H, rows, d.E, false, nullptr, d.pdl}, s));
    GS_RETURN_IF_ERROR(launch_topk_softmax({ws.router, ws.ids, ws.rw, rows, d.E, d.K, d.pdl}, s));
  }
  return cudarun::enqueue_moe_experts(m, L, 0, rows, d);
}

}  // namespace

Status CudaModelRunner::Impl::enqueue_forward(int rows, int logit_rows, bool feedback) {
  using namespace kern;
  const Dims d(cfg, opts.pdl);
  cudaStream_t s = stream;
  Range fwd("forward");
  // The first kernel of the step follows the input upload (a copy, not a kernel): no PDL.
  GS_RETURN_IF_ERROR(launch_embed({embed, in.tokens, ws.x, nullptr, rows, d.V, d.H, false}, s));
  QkvRopeParams qp;  // per-layer fields are set in enqueue_attention
  qp.x = ws.xn;
  qp.pos = in.pos;
  qp.row_seq = in.row_seq;
  qp.q = ws.q;
  qp.batch = rows;
  qp.hidden = d.H;
  qp.n_heads = d.nh;
  qp.n_kv_heads = d.kvh;
  qp.block_size = static_cast<int>(kv.block_size);
  qp.max_blocks = max_blocks;
  for (int i = 0; i < 32; ++i) qp.inv_freq[i] = rope.inv_freq[i];
  qp.rope_scale = static_cast<float>(rope.attention_scaling);
  qp.pdl = d.pdl;
  AttnParams ap = cudarun::decode_attn_params(*this, rows, d);
  for (const cudarun::DevLayer& L : layers) {
    Range layer_range(L.sliding ? "layer (sliding)" : "layer (full)");
    GS_RETURN_IF_ERROR(enqueue_attention(*this, L, rows, d, qp, ap));
    GS_RETURN_IF_ERROR(enqueue_moe(*this, L, rows, d));
  }
  if (logit_rows == 0) return Status::Ok();
  return cudarun::enqueue_lm_head(*this, logit_rows, feedback, d);
}

namespace cudarun {

kern::AttnParams decode_attn_params(const CudaModelRunner::Impl& m, int rows, const Dims& d) {
  kern::AttnParams ap;
  ap.q = m.ws.q;
  ap.row_seq = m.in.row_seq;
  ap.pos = m.in.pos;
  ap.part_o = m.ws.part_o;
  ap.part_ml = m.ws.part_ml;
  ap.tickets = m.ws.attn_tickets;  // one-kernel decode attention (batch <= 64)
  ap.out = m.ws.attn;
  ap.batch = rows;
  ap.n_heads = d.nh;
  ap.n_kv_heads = d.kvh;
  ap.block_size = static_cast<int>(m.kv.block_size);
  ap.max_blocks = m.max_blocks;
  ap.splits = m.splits_for(rows);
  ap.scale = 0.125f;  // 1 / sqrt(head_dim = 64)
  // Batch 1: a 4-tile ring (3 tiles copied before the wait; docs/attention.md "Session 11":
  // +0.4% tg128 at depth 0, +1.5% at depth 16384 for 120b). Larger batches keep 3 (more CTAs per
  // SM: b64 at short contexts was 8.3 vs 6.0 us with 4).
  ap.stages = rows == 1 ? 4 : 0;
  ap.pdl = d.pdl;
  return ap;
}

Status enqueue_moe_experts(const CudaModelRunner::Impl& m, const DevLayer& L, int r0, int n,
                           const Dims& d, bool grouped) {
  const auto& ws = m.ws;
  const size_t rk = static_cast<size_t>(r0) * d.K;
  kern::MoeGateUpParams gp;
  gp.blocks = L.gu_blocks;
  gp.scales = L.gu_scales;
  gp.bias = L.gu_b;
  gp.x = ws.xn + static_cast<size_t>(r0) * d.H;
  gp.ids = ws.ids + rk;
  gp.act = ws.act + rk * d.I;
  gp.batch = n;
  gp.k = d.K;
  gp.hidden = d.H;
  gp.inter = d.I;
  gp.n_experts = d.E;
  gp.alpha = 1.702f;
  gp.limit = static_cast<float>(m.cfg.swiglu_limit);
  gp.pdl = d.pdl;             // honoured by the streaming kernels (moe/params.h: pipes 6 and 9)
  gp.pipe = grouped ? 9 : 6;  // 9 falls back to 6 where it does not apply
  GS_RETURN_IF_ERROR(kern::launch_moe_gate_up(gp, m.stream));
  kern::MoeDownParams dp;
  dp.blocks = L.dn_blocks;
  dp.scales = L.dn_scales;
  dp.bias = L.dn_b;
  dp.act = gp.act;
  dp.ids = gp.ids;
  dp.weights = ws.rw + rk;
  dp.resid = ws.x + static_cast<size_t>(r0) * d.H;
  dp.batch = n;
  dp.k = d.K;
  dp.hidden = d.H;
  dp.inter = d.I;
  dp.n_experts = d.E;
  dp.pdl = d.pdl;  // down follows this gate_up: ids / weights final before its pdl_wait
  dp.pipe = gp.pipe;
  dp.part = ws.moe_part;
  return kern::launch_moe_down(dp, m.stream);
}

}  // namespace cudarun

}  // namespace gossamer

// The decode/prefill forward of gpt-oss on the GPU: the op sequence per layer, enqueued on the
// runner's stream (also used inside CUDA graph capture: no host sync, no allocation here).
#include <nvtx3/nvToolsExt.h>

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
// NVTX range guard (host-side annotation; visible in eager runs and around graph launches).
struct Range {
  explicit Range(const char* name) { nvtxRangePushA(name); }
  ~Range() { nvtxRangePop(); }
  Range(const Range&) = delete;
  Range& operator=(const Range&) = delete;
};
}  // namespace

Status CudaModelRunner::Impl::enqueue_forward(int rows, int logit_rows, bool feedback) {
  using namespace kern;
  const int H = static_cast<int>(cfg.hidden_size), nh = static_cast<int>(cfg.num_attention_heads);
  const int kvh = static_cast<int>(cfg.num_key_value_heads), E = static_cast<int>(cfg.num_local_experts);
  const int K = static_cast<int>(cfg.experts_per_token), I = static_cast<int>(cfg.intermediate_size);
  const int V = static_cast<int>(cfg.vocab_size), QD = nh * 64;
  const float eps = static_cast<float>(cfg.rms_norm_eps);
  cudaStream_t s = stream;
  Range fwd("forward");
  GS_RETURN_IF_ERROR(launch_embed({embed, in.tokens, ws.x, nullptr, rows, V, H}, s));
  QkvRopeParams qp;
  qp.bias = nullptr;
  qp.x = ws.xn;
  qp.pos = in.pos;
  qp.row_seq = in.row_seq;
  qp.q = ws.q;
  qp.batch = rows;
  qp.hidden = H;
  qp.n_heads = nh;
  qp.n_kv_heads = kvh;
  qp.block_size = static_cast<int>(kv.block_size);
  qp.max_blocks = max_blocks;
  for (int i = 0; i < 32; ++i) qp.inv_freq[i] = rope.inv_freq[i];
  qp.rope_scale = static_cast<float>(rope.attention_scaling);
  AttnParams ap;
  ap.q = ws.q;
  ap.row_seq = in.row_seq;
  ap.pos = in.pos;
  ap.part_o = ws.part_o;
  ap.part_ml = ws.part_ml;
  ap.out = ws.attn;
  ap.batch = rows;
  ap.n_heads = nh;
  ap.n_kv_heads = kvh;
  ap.block_size = qp.block_size;
  ap.max_blocks = max_blocks;
  ap.splits = splits_for(rows);
  ap.scale = 0.125f;  // 1 / sqrt(head_dim = 64)
  for (size_t l = 0; l < layers.size(); ++l) {
    const cudarun::DevLayer& L = layers[l];
    Range layer_range(L.sliding ? "layer (sliding)" : "layer (full)");
    const int32_t* tables = L.sliding ? in.tables_sliding : in.tables_full;
    const int nblocks = static_cast<int>(L.sliding ? kv.num_blocks_sliding : kv.num_blocks_full);
    {
      Range r("attention block");
      GS_RETURN_IF_ERROR(launch_rmsnorm({ws.x, L.attn_norm, nullptr, ws.xn, rows, H, eps}, s));
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
      ap.window = L.sliding ? static_cast<int>(cfg.sliding_window) : 0;
      GS_RETURN_IF_ERROR(launch_attention(ap, s));
      GS_RETURN_IF_ERROR(launch_gemv({L.o_w, L.o_b, ws.attn, ws.x, H, QD, rows, H, true, nullptr}, s));
    }
    {
      Range r("moe block");
      GS_RETURN_IF_ERROR(launch_rmsnorm({ws.x, L.mlp_norm, nullptr, ws.xn, rows, H, eps}, s));
      GS_RETURN_IF_ERROR(launch_gemv({L.router_w, L.router_b, ws.xn, ws.router, E, H, rows, E, false, nullptr}, s));
      GS_RETURN_IF_ERROR(launch_topk_softmax({ws.router, ws.ids, ws.rw, rows, E, K}, s));
      MoeGateUpParams gp{L.gu_blocks, L.gu_scales, L.gu_b, ws.xn, ws.ids, ws.act, rows, K, H, I, E,
                         1.702f, static_cast<float>(cfg.swiglu_limit)};
      GS_RETURN_IF_ERROR(launch_moe_gate_up(gp, s));
      MoeDownParams dp{L.dn_blocks, L.dn_scales, L.dn_b, ws.act, ws.ids, ws.rw, ws.x, rows, K, H, I, E};
      GS_RETURN_IF_ERROR(launch_moe_down(dp, s));
    }
  }
  if (logit_rows == 0) return Status::Ok();
  Range r("lm_head + greedy");
  GS_RETURN_IF_ERROR(launch_rmsnorm({ws.x, final_norm, in.logit_rows, ws.xn, logit_rows, H, eps}, s));
  GS_RETURN_IF_ERROR(launch_gemv({lm_head, nullptr, ws.xn, ws.logits, V, H, logit_rows, V, false, ws.keys}, s));
  GreedyFinalizeParams fp{ws.keys, ws.sampled, feedback ? in.tokens : nullptr,
                          feedback ? in.pos : nullptr, logit_rows};
  return launch_greedy_finalize(fp, s);
}

}  // namespace gossamer

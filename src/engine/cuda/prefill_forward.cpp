// The prefill forward of gpt-oss on the GPU (forwards of >= opts.prefill_min_rows token rows):
// the same op sequence and names as forward.cpp, with the dense projections (QKV, O, router) as
// cuBLASLt bf16 GEMMs (bias in the epilogue, the O-projection accumulating into the residual),
// RoPE + paged K/V write as a separate pass on the QKV GEMM output (kernels/rope_kv), the RMSNorms
// writing the bf16 GEMM inputs directly, the small kernels under PDL when opts.pdl, and
// - MoE: kernels/moe_prefill (grouped MXFP4 GEMMs) when built and opts.prefill_grouped_moe,
//   else the decode kernels over all rows (in pieces of kMoePiece rows: their grid is rows x k);
// - attention: kernels/flash_attn when built and opts.prefill_flash_attn, else the decode
//   split-attention kernel over all rows.
// The lm_head runs only for the logits rows (gathered RMSNorm + GEMV with fused argmax).
// No allocation and no host sync in enqueue_prefill; init_prefill allocates everything once.
#include <nvtx3/nvToolsExt.h>

#include <algorithm>
#include <string>

#include "engine/cuda/forward_parts.h"
#include "engine/cuda/runner_impl.h"
#include "kernels/attention/params.h"
#include "kernels/common/cuda_check.h"
#include "kernels/embed/params.h"
#include "kernels/gemm/params.h"
#include "kernels/gemv/params.h"
#include "kernels/moe/params.h"
#include "kernels/rmsnorm/params.h"
#include "kernels/rope_kv/params.h"
#include "kernels/router/params.h"
#include "kernels/sample/params.h"
#ifdef GOSSAMER_HAVE_FLASH_ATTN
#include "kernels/flash_attn/params.h"
static_assert(gossamer::kMaxPrefillFlashVariant == gossamer::kern::kFlashAttnMaxVariant,
              "CudaRunnerOptions::prefill_flash_variant passes FlashAttnParams::variant through");
#endif
#ifdef GOSSAMER_HAVE_MOE_PREFILL
#include "kernels/moe_prefill/params.h"
#endif

namespace gossamer {

namespace {

using cudarun::Dims;
using cudarun::Range;

constexpr int kMoePiece = 2048;  // decode-MoE fallback: rows per launch (grid.y = rows x k)

// Split (hi + lo) bf16 activations for the router GEMM: always in split mode, and with
// opts.prefill_split_router (near-tied experts then pick as the fp32 reference does).
bool split_router(const CudaModelRunner::Impl& m) {
  return m.opts.prefill_split_bf16 || m.opts.prefill_split_router;
}

// f32 activations [rows, k] -> ws.xb (bf16), and ws.xb_lo (residual) if `split`.
Status to_bf16(const CudaModelRunner::Impl& m, const float* x, int rows, int k, bool split,
               bool pdl) {
  return kern::launch_f32_to_bf16(x, m.ws.xb, static_cast<size_t>(rows) * k, m.stream,
                                  split ? m.ws.xb_lo : nullptr, pdl);
}

// RMSNorm of the residual stream straight into the bf16 GEMM input ws.xb (+ xb_lo if `split`),
// and into ws.xn (f32) if `f32_out` (the MoE kernels read it): one kernel, no conversion pass.
Status norm_to_bf16(const CudaModelRunner::Impl& m, const uint16_t* w, int rows, const Dims& d,
                    bool split, bool f32_out) {
  const auto& ws = m.ws;
  kern::RmsNormParams p{ws.x, w, nullptr, f32_out ? ws.xn : nullptr, rows, d.H, d.eps, d.pdl};
  p.yb = ws.xb;
  p.yb_lo = split ? ws.xb_lo : nullptr;
  return kern::launch_rmsnorm(p, m.stream);
}

// out[rows, n] (+)= ws.xb[rows, k] w[n, k]^T + bias; if `split` a second GEMM accumulates
// ws.xb_lo w^T.
Status gemm(const CudaModelRunner::Impl& m, const uint16_t* w, const float* bias, float* out,
            int rows, int n, int k, bool accumulate, bool split) {
  kern::GemmParams g;
  g.a = m.ws.xb;
  g.w = w;
  g.bias = bias;
  g.d = out;
  g.m = rows;
  g.n = n;
  g.k = k;
  g.accumulate = accumulate;
  GS_RETURN_IF_ERROR(m.gemm->run(g, m.stream));
  if (!split) return Status::Ok();
  g.a = m.ws.xb_lo;
  g.bias = nullptr;
  g.accumulate = true;
  return m.gemm->run(g, m.stream);
}

Status prefill_attention_core(const CudaModelRunner::Impl& m, const cudarun::DevLayer& L, int rows,
                              const Dims& d, kern::AttnParams& ap) {
  const int32_t* tables = L.sliding ? m.in.tables_sliding : m.in.tables_full;
  const int nblocks = static_cast<int>(L.sliding ? m.kv.num_blocks_sliding : m.kv.num_blocks_full);
  const int window = L.sliding ? static_cast<int>(m.cfg.sliding_window) : 0;
#ifdef GOSSAMER_HAVE_FLASH_ATTN
  if (m.opts.prefill_flash_attn) {
    kern::FlashAttnParams fp;
    fp.q = m.ws.q;
    fp.k_cache = L.k;
    fp.v_cache = L.v;
    fp.block_table = tables;
    fp.row_seq = m.in.row_seq;
    fp.pos = m.in.pos;
    fp.sinks = L.sinks;
    fp.out = m.ws.attn;
    fp.part_o = m.ws.part_o;
    fp.part_ml = m.ws.part_ml;
    fp.tokens = rows;
    fp.n_heads = d.nh;
    fp.n_kv_heads = d.kvh;
    fp.block_size = static_cast<int>(m.kv.block_size);
    fp.max_blocks = m.max_blocks;
    fp.num_blocks = nblocks;
    fp.window = window;
    fp.splits = ap.splits;  // scratch is sized for rows x splits_for(rows)
    fp.scale = ap.scale;
    fp.pdl = d.pdl;
    fp.variant = m.opts.prefill_flash_variant;
    return kern::launch_flash_attn(fp, m.stream);
  }
#endif
  ap.k_cache = L.k;
  ap.v_cache = L.v;
  ap.block_table = tables;
  ap.num_blocks = nblocks;
  ap.sinks = L.sinks;
  ap.window = window;
  return kern::launch_attention(ap, m.stream);
}

// Attention half: norm -> bf16, QKV GEMM (+bias), RoPE + K/V write, attention, O GEMM (+bias,
// += residual).
Status prefill_attention(const CudaModelRunner::Impl& m, const cudarun::DevLayer& L, int rows,
                         const Dims& d, kern::RopeKvParams& rp, kern::AttnParams& ap) {
  const auto& ws = m.ws;
  Range r("attention block");
  const bool split = m.opts.prefill_split_bf16;
  GS_RETURN_IF_ERROR(norm_to_bf16(m, L.attn_norm, rows, d, split, false));
  GS_RETURN_IF_ERROR(gemm(m, L.qkv_w, L.qkv_b, ws.qkv, rows, d.QKV, d.H, false, split));
  rp.block_table = L.sliding ? m.in.tables_sliding : m.in.tables_full;
  rp.num_blocks = static_cast<int>(L.sliding ? m.kv.num_blocks_sliding : m.kv.num_blocks_full);
  rp.k_cache = L.k;
  rp.v_cache = L.v;
  GS_RETURN_IF_ERROR(kern::launch_rope_kv(rp, m.stream));
  GS_RETURN_IF_ERROR(prefill_attention_core(m, L, rows, d, ap));
  GS_RETURN_IF_ERROR(to_bf16(m, ws.attn, rows, d.QD, split, d.pdl));
  return gemm(m, L.o_w, L.o_b, ws.x, rows, d.H, d.QD, true, split);
}

// The decode MoE kernels over all rows, in pieces (fallback when moe_prefill is not used).
Status moe_decode_kernels(const CudaModelRunner::Impl& m, const cudarun::DevLayer& L, int rows,
                          const Dims& d) {
  for (int r0 = 0; r0 < rows; r0 += kMoePiece) {
    GS_RETURN_IF_ERROR(cudarun::enqueue_moe_experts(m, L, r0, std::min(kMoePiece, rows - r0), d));
  }
  return Status::Ok();
}

// MoE half: norm -> bf16, router GEMM (+bias) + top-k, experts (+ weighted sum + residual).
Status prefill_moe(const CudaModelRunner::Impl& m, const cudarun::DevLayer& L, int rows,
                   const Dims& d) {
  const auto& ws = m.ws;
  Range r("moe block");
  const bool split = split_router(m);
  GS_RETURN_IF_ERROR(norm_to_bf16(m, L.mlp_norm, rows, d, split, true));
  GS_RETURN_IF_ERROR(gemm(m, L.router_w, L.router_b, ws.router, rows, d.E, d.H, false, split));
  GS_RETURN_IF_ERROR(
      kern::launch_topk_softmax({ws.router, ws.ids, ws.rw, rows, d.E, d.K, d.pdl}, m.stream));
  if (m.grouped_moe(rows)) return cudarun::enqueue_moe_experts(m, L, 0, rows, d, true);
#ifdef GOSSAMER_HAVE_MOE_PREFILL
  if (m.opts.prefill_grouped_moe) {
    kern::MoePrefillParams mp;
    mp.gu_blocks = L.gu_blocks;
    mp.gu_scales = L.gu_scales;
    mp.gu_bias = L.gu_b;
    mp.dn_blocks = L.dn_blocks;
    mp.dn_scales = L.dn_scales;
    mp.dn_bias = L.dn_b;
    mp.x = ws.xn;
    mp.ids = ws.ids;
    mp.weights = ws.rw;
    mp.resid = ws.x;
    mp.workspace = ws.moe_ws;
    mp.workspace_bytes = ws.moe_ws_bytes;
    mp.tokens = rows;
    mp.k = d.K;
    mp.hidden = d.H;
    mp.inter = d.I;
    mp.n_experts = d.E;
    mp.alpha = 1.702f;
    mp.limit = static_cast<float>(m.cfg.swiglu_limit);
    return kern::launch_moe_prefill(mp, m.stream);
  }
#endif
  return moe_decode_kernels(m, L, rows, d);
}

}  // namespace

Status CudaModelRunner::Impl::init_prefill() {
  if (opts.prefill_min_rows == 0 || opts.prefill_min_rows > R_max) return Status::Ok();
  const Dims d(cfg);
  GS_ASSIGN_OR_RETURN(gemm, kern::GemmContext::create());
  GS_ASSIGN_OR_RETURN(ws.xb, alloc_n<uint16_t>(static_cast<size_t>(R_max) * std::max(d.H, d.QD),
                                               "prefill bf16 activations"));
  GS_ASSIGN_OR_RETURN(ws.qkv, alloc_n<float>(static_cast<size_t>(R_max) * d.QKV, "prefill qkv"));
  if (split_router(*this)) {
    GS_ASSIGN_OR_RETURN(ws.xb_lo,
                        alloc_n<uint16_t>(static_cast<size_t>(R_max) * std::max(d.H, d.QD),
                                          "prefill bf16 residuals"));
  }
#ifdef GOSSAMER_HAVE_MOE_PREFILL
  if (opts.prefill_grouped_moe) {
    ws.moe_ws_bytes = kern::moe_prefill_workspace_bytes(R_max, d.K, d.H, d.I, d.E);
    if (ws.moe_ws_bytes == 0) return Unsupported("cuda runner: moe_prefill rejects this shape");
    GS_ASSIGN_OR_RETURN(ws.moe_ws, alloc(ws.moe_ws_bytes, "moe_prefill workspace"));
  }
#endif
  return Status::Ok();
}

Status CudaModelRunner::Impl::enqueue_prefill(int rows, int logit_rows, bool feedback) {
  using namespace kern;
  if (!gemm) return Internal("cuda runner: prefill path used without init_prefill");
  const Dims d(cfg, opts.pdl);  // PDL (opts.pdl) for the small kernels between the GEMMs
  cudaStream_t s = stream;
  Range fwd("prefill forward");
  GS_RETURN_IF_ERROR(launch_embed({embed, in.tokens, ws.x, nullptr, rows, d.V, d.H}, s));
  RopeKvParams rp;  // per-layer fields are set in prefill_attention
  rp.qkv = ws.qkv;
  rp.pos = in.pos;
  rp.row_seq = in.row_seq;
  rp.q = ws.q;
  rp.rows = rows;
  rp.ld = d.QKV;
  rp.n_heads = d.nh;
  rp.n_kv_heads = d.kvh;
  rp.block_size = static_cast<int>(kv.block_size);
  rp.max_blocks = max_blocks;
  for (int i = 0; i < 32; ++i) rp.inv_freq[i] = rope.inv_freq[i];
  rp.rope_scale = static_cast<float>(rope.attention_scaling);
  rp.pdl = d.pdl;
  AttnParams ap = cudarun::decode_attn_params(*this, rows, d);
  for (const cudarun::DevLayer& L : layers) {
    Range layer_range(L.sliding ? "layer (sliding)" : "layer (full)");
    GS_RETURN_IF_ERROR(prefill_attention(*this, L, rows, d, rp, ap));
    GS_RETURN_IF_ERROR(prefill_moe(*this, L, rows, d));
  }
  if (logit_rows == 0) return Status::Ok();
  return cudarun::enqueue_lm_head(*this, logit_rows, feedback, d);
}

std::string CudaModelRunner::prefill_path() const {
  const Impl& m = *impl_;
  if (!m.use_prefill(m.R_max)) return "off (decode kernels for every forward)";
  bool flash = false, grouped = false;
  std::string flash_rule;
#ifdef GOSSAMER_HAVE_FLASH_ATTN
  flash = m.opts.prefill_flash_attn;
  flash_rule = m.opts.prefill_flash_variant == 0
                   ? kern::flash_attn_auto_rule()
                   : "variant " + std::to_string(m.opts.prefill_flash_variant);
#endif
#ifdef GOSSAMER_HAVE_MOE_PREFILL
  grouped = m.opts.prefill_grouped_moe;
#endif
  return "forwards of >= " + std::to_string(m.opts.prefill_min_rows) + " rows" +
         (m.opts.prefill_split_bf16
              ? " (split bf16 hi+lo activations: 2 GEMMs each)"
              : (m.opts.prefill_split_router ? " (router GEMM on split bf16 hi+lo activations)"
                                             : "")) +
         ": rmsnorm_f32a_bf16w (bf16 out) | cuBLASLt bf16 GEMM QKV (+bias) | "
         "rope_kv_f32 | " +
         (flash ? "flash_attn_paged_bf16kv_f32q (" + flash_rule + ")"
                : std::string("attn_decode_split_bf16kv_f32q (decode fallback)")) +
         " | cvt_f32_bf16 + cuBLASLt GEMM O (+bias, +=residual) | cuBLASLt GEMM router (+bias) + "
         "topk_softmax_f32 | " +
         (grouped ? std::string("moe_prefill (grouped MXFP4 GEMMs)")
                  : std::string("moe_gate_up/moe_down decode kernels (fallback)")) +
         " | lm_head gemv for the logits rows";
}

}  // namespace gossamer

// CudaModelRunner: step() (validation, token rows, sub-batches, graphs), copy_block, and the
// bench hooks. Device memory and the forward live in device_model.cpp / forward.cpp.
#include "engine/cuda/cuda_runner.h"

#include <algorithm>
#include <chrono>
#include <random>
#include <string>

#include "engine/cuda/forward_parts.h"
#include "engine/cuda/runner_impl.h"
#include "git_sha.h"  // generated at build time: GOSSAMER_GIT_SHA
#include "kernels/attention/params.h"
#include "kernels/common/cuda_check.h"
#include "kernels/gemv/params.h"
#include "kernels/moe/params.h"
#include "kernels/qkv_rope/params.h"
#include "kernels/router/params.h"

namespace gossamer {

const char* gossamer_git_sha() {
  return GOSSAMER_GIT_SHA;
}

Status CudaRunnerOptions::validate() const {
  if (kv.block_size <= 0 || kv.block_size > 1024)
    return InvalidArgument("cuda runner: kv block_size must be in [1, 1024]");
  if (kv.num_blocks_full < 0 || kv.num_blocks_sliding < 0)
    return InvalidArgument("cuda runner: negative KV block counts");
  if (max_seq_len <= 0 || max_seqs <= 0 || max_step_tokens <= 0 || max_step_tokens > 16384) {
    return InvalidArgument(
        "cuda runner: max_seq_len, max_seqs > 0 and max_step_tokens in [1, 16384]");
  }
  if (max_logit_rows <= 0 || prefill_min_rows < 0)
    return InvalidArgument("cuda runner: max_logit_rows must be > 0, prefill_min_rows >= 0");
  if (prefill_flash_variant < 0 || prefill_flash_variant > kMaxPrefillFlashVariant) {
    return InvalidArgument("cuda runner: prefill_flash_variant must be in [0, " +
                           std::to_string(kMaxPrefillFlashVariant) + "]");
  }
  return Status::Ok();
}

CudaModelRunner::CudaModelRunner(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
CudaModelRunner::~CudaModelRunner() = default;

Result<std::unique_ptr<CudaModelRunner>> CudaModelRunner::create(const LoadedModel& model,
                                                                 const CudaRunnerOptions& opts) {
  auto impl = std::make_unique<Impl>();
  GS_RETURN_IF_ERROR(impl->init_common(model.config, opts));
  if (model.weights.layers.size() != impl->layers.size()) {
    return InvalidArgument("cuda runner: weights have " +
                           std::to_string(model.weights.layers.size()) + " layers, config says " +
                           std::to_string(impl->layers.size()));
  }
  GS_RETURN_IF_ERROR(impl->alloc_weights());
  GS_RETURN_IF_ERROR(impl->upload_weights(model));
  return std::unique_ptr<CudaModelRunner>(new CudaModelRunner(std::move(impl)));
}

Result<std::unique_ptr<CudaModelRunner>> CudaModelRunner::create_synthetic(
    const ModelConfig& cfg, const CudaRunnerOptions& opts, uint64_t seed) {
  auto impl = std::make_unique<Impl>();
  GS_RETURN_IF_ERROR(impl->init_common(cfg, opts));
  GS_RETURN_IF_ERROR(impl->alloc_weights());
  GS_RETURN_IF_ERROR(impl->synth_weights(seed));
  return std::unique_ptr<CudaModelRunner>(new CudaModelRunner(std::move(impl)));
}

const ModelConfig& CudaModelRunner::config() const {
  return impl_->cfg;
}
const KvCacheSpec& CudaModelRunner::kv_spec() const {
  return impl_->kv;
}

// The expert-grouped MoE kernels of a prefill-path forward of `rows` rows (grouped_moe(rows):
// prefill_moe -> enqueue_moe_experts), or the per-row ones they fall back to.
std::string CudaModelRunner::Impl::moe_path(int rows) const {
  kern::MoeGateUpParams gp;  // only shapes and non-null pointers matter for the choice
  kern::MoeDownParams dp;
  if (layers.empty()) return "(no layers)";
  gp.blocks = layers[0].gu_blocks, gp.scales = layers[0].gu_scales;
  dp.blocks = layers[0].dn_blocks, dp.scales = layers[0].dn_scales;
  gp.bias = gp.x = dp.bias = dp.act = dp.weights = ws.x;
  gp.ids = dp.ids = ws.ids;
  gp.act = dp.resid = ws.x;
  dp.part = ws.moe_part;
  gp.batch = dp.batch = rows;
  gp.k = dp.k = static_cast<int>(cfg.experts_per_token);
  gp.hidden = dp.hidden = static_cast<int>(cfg.hidden_size);
  gp.inter = dp.inter = static_cast<int>(cfg.intermediate_size);
  gp.n_experts = dp.n_experts = static_cast<int>(cfg.num_local_experts);
  if (kern::moe_gate_up_grouped_supported(gp) && kern::moe_down_grouped_supported(dp)) {
    return "moe_gate_up_grouped_mxfp4w_f32a | moe_down_grouped_mxfp4w_f32a + moe_combine_f32"
           "(+weighted sum+residual)";
  }
  return "moe_gate_up_swiglu_mxfp4w_f32a | moe_down_mxfp4w_f32a(+weighted sum+residual)";
}

std::string CudaModelRunner::kernel_path(int rows) const {
  const Impl& m = *impl_;
  const std::string graph = std::string(", as CUDA graph: ") + (m.opts.use_graphs ? "yes" : "no");
  if (m.use_prefill(rows)) {  // decode batches this large replay the prefill path (graph_for)
    return "decode batch of " + std::to_string(rows) + " rows through the prefill path (" +
           prefill_path() + ")" +
           (m.grouped_moe(rows) ? ", MoE of this batch: " + m.moe_path(rows) : std::string()) +
           ", lm_head " +
           (cudarun::lm_head_uses_gemm(m, rows) ? "split-bf16 cuBLASLt GEMM + argmax_f32"
                                                : "GEMV + fused argmax") +
           graph;
  }
  const bool fused_router = kern::use_norm_router(static_cast<int>(m.cfg.num_local_experts));
  kern::NormRouterParams router;  // only the shape matters for the variant's name
  router.hidden = static_cast<int>(m.cfg.hidden_size);
  router.n_experts = static_cast<int>(m.cfg.num_local_experts);
  router.batch = rows;
  // Only the shape fields matter for the GEMV variant's name.
  unsigned long long key = 0;  // a non-null argmax pointer names the argmax variant
  const auto gemv = [&](int out, int in, bool argmax) {
    kern::GemvParams g;
    g.rows = out;
    g.cols = in;
    g.batch = rows;
    g.argmax = argmax ? &key : nullptr;
    return std::string(kern::gemv_variant(g));
  };
  const int hidden = static_cast<int>(m.cfg.hidden_size);
  const int qdim = static_cast<int>(m.cfg.num_attention_heads * m.cfg.head_dim);
  kern::QkvRopeParams qkv;
  qkv.batch = rows;
  qkv.hidden = hidden;
  return std::string("embed_bf16_f32 | rmsnorm+") + kern::qkv_rope_variant(qkv) + " | " +
         kern::attention_variant(rows, m.splits_for(rows), m.ws.attn_tickets != nullptr) +
         " | o_proj " + gemv(hidden, qdim, false) + "+residual | " +
         (fused_router ? std::string(kern::norm_router_variant(router)) + " (rmsnorm+router+topk)"
                       : "rmsnorm | router " + gemv(router.n_experts, hidden, false) +
                             " + topk_softmax_f32") +
         " | moe_gate_up_swiglu_mxfp4w_f32a | moe_down_mxfp4w_f32a(+weighted sum+residual) | "
         "lm_head " +
         gemv(static_cast<int>(m.cfg.vocab_size), hidden, true) +
         "+fused argmax | greedy_finalize_i32 | decode as CUDA graph: " +
         (m.opts.use_graphs ? "yes" : "no") + ", PDL " + (m.opts.pdl ? "on" : "off");
}

std::string CudaModelRunner::describe() const {
  return "cuda gpt-oss on " + impl_->device_name +
         ": bf16 dense + MXFP4 expert weights resident, fp32 activations, bf16 paged KV; "
         "kernels (batch 1): " +
         kernel_path(1);
}

Status CudaModelRunner::Impl::upload_rows(int rows) {
  const size_t pitch = static_cast<size_t>(R_max) * sizeof(int32_t);  // tokens|pos|seq|logit rows
  return kern::cuda_status(cudaMemcpy2DAsync(in.tokens, pitch, h_in, pitch, rows * sizeof(int32_t),
                                             4, cudaMemcpyHostToDevice, stream),
                           "upload step rows");
}

Status CudaModelRunner::Impl::upload_tables(int seqs, int width) {
  const size_t pitch = static_cast<size_t>(max_blocks) * sizeof(int32_t);
  for (int32_t* dev : {in.tables_full, in.tables_sliding}) {
    const int32_t* host = h_in + (dev - in.tokens);
    GS_RETURN_IF_ERROR(kern::cuda_status(
        cudaMemcpy2DAsync(dev, pitch, host, pitch, static_cast<size_t>(width) * sizeof(int32_t),
                          static_cast<size_t>(seqs), cudaMemcpyHostToDevice, stream),
        "upload block tables"));
  }
  return Status::Ok();
}

Result<cudaGraphExec_t> CudaModelRunner::Impl::graph_for(int rows, bool feedback) {
  const auto key = std::make_pair(rows, feedback);
  if (auto it = graphs.find(key); it != graphs.end()) return it->second;
  GS_CUDA_RETURN(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  // Decode batches as large as a prefill forward take the GEMM path (cuBLASLt projections,
  // grouped MoE reading each routed expert once): the GEMV kernels re-read the weights per 8
  // rows and the decode MoE kernels per (row, expert) pair.
  const Status st = use_prefill(rows) ? enqueue_prefill(rows, rows, feedback)
                                      : enqueue_forward(rows, rows, feedback);
  cudaGraph_t g = nullptr;
  const cudaError_t e = cudaStreamEndCapture(stream, &g);
  GS_RETURN_IF_ERROR(st.With("capturing the decode graph"));
  GS_CUDA_RETURN(e);
  graph_defs.push_back(g);
  cudaGraphExec_t exec = nullptr;
  GS_CUDA_RETURN(cudaGraphInstantiate(&exec, g, 0));
  graphs[key] = exec;
  return exec;
}

namespace {

// Checks one chunk against the model and the cache; the message names the chunk and field.
Status check_chunk(const SeqChunk& c, size_t ci, const ModelConfig& cfg, const KvCacheSpec& kv,
                   int64_t max_seq_len, bool has_full, bool has_sliding) {
  const std::string ctx = "step: chunk " + std::to_string(ci) + ": ";
  if (c.tokens.empty()) return InvalidArgument(ctx + "no tokens");
  for (size_t j = 0; j < c.tokens.size(); ++j) {
    if (c.tokens[j] < 0 || c.tokens[j] >= cfg.vocab_size) {
      return InvalidArgument(ctx + "token " + std::to_string(j) + " id " +
                             std::to_string(c.tokens[j]) + " outside [0, " +
                             std::to_string(cfg.vocab_size) + ")");
    }
  }
  const int64_t end = c.pos0 + static_cast<int64_t>(c.tokens.size());
  if (c.pos0 < 0 || end > max_seq_len) {
    return OutOfRange(ctx + "positions [" + std::to_string(c.pos0) + ", " + std::to_string(end) +
                      ") outside [0, max_seq_len " + std::to_string(max_seq_len) + ")");
  }
  const int64_t bs = kv.block_size, last = (end - 1) / bs;
  auto check_table = [&](std::span<const int32_t> t, int64_t first, int64_t pool,
                         const char* name) {
    if (static_cast<int64_t>(t.size()) <= last) {
      return InvalidArgument(ctx + name + " block table has " + std::to_string(t.size()) +
                             " entries, position " + std::to_string(end - 1) + " needs " +
                             std::to_string(last + 1));
    }
    for (int64_t i = first; i <= last; ++i) {
      if (t[i] < 0 || t[i] >= pool) {
        return InvalidArgument(ctx + name + " block table entry " + std::to_string(i) + " = " +
                               std::to_string(t[i]) + " outside [0, " + std::to_string(pool) + ")");
      }
    }
    return Status::Ok();
  };
  if (has_full) GS_RETURN_IF_ERROR(check_table(c.blocks_full, 0, kv.num_blocks_full, "full"));
  if (has_sliding) {
    const int64_t first = std::max<int64_t>(0, c.pos0 - cfg.sliding_window + 1) / bs;
    GS_RETURN_IF_ERROR(check_table(c.blocks_sliding, first, kv.num_blocks_sliding, "sliding"));
  }
  return Status::Ok();
}

// Block tables: rows [0, chunks) x entries [0, width) are written and uploaded; a row's entries
// past its table are zeros (the kernels read entries up to each row's last position only).
Status upload_block_tables(CudaModelRunner::Impl& m, std::span<const SeqChunk> chunks) {
  int32_t* tf = m.h_in + (m.in.tables_full - m.in.tokens);
  int32_t* tsl = m.h_in + (m.in.tables_sliding - m.in.tokens);
  size_t width = 1;
  for (const SeqChunk& c : chunks)
    width = std::max({width, c.blocks_full.size(), c.blocks_sliding.size()});
  width = std::min<size_t>(width, m.max_blocks);
  for (size_t i = 0; i < chunks.size(); ++i) {
    int32_t* rf = tf + i * m.max_blocks;
    int32_t* rs = tsl + i * m.max_blocks;
    const size_t nf = std::min(chunks[i].blocks_full.size(), width);
    const size_t ns = std::min(chunks[i].blocks_sliding.size(), width);
    for (size_t j = 0; j < nf; ++j) rf[j] = chunks[i].blocks_full[j];
    for (size_t j = 0; j < ns; ++j) rs[j] = std::max(0, chunks[i].blocks_sliding[j]);
    std::fill(rf + nf, rf + width, 0);
    std::fill(rs + ns, rs + width, 0);
  }
  return m.upload_tables(static_cast<int>(chunks.size()), static_cast<int>(width));
}

// One row per token of the step, chunk after chunk; *decode: every chunk is one token whose
// logits are wanted (the graph path).
struct Row {
  int32_t tok, pos, seq;
  bool logit;
};
std::vector<Row> flatten_rows(std::span<const SeqChunk> chunks, bool* decode) {
  std::vector<Row> rows;
  for (size_t i = 0; i < chunks.size(); ++i) {
    const SeqChunk& c = chunks[i];
    *decode = *decode && c.tokens.size() == 1 && c.logits == LogitsMode::kLast;
    for (size_t j = 0; j < c.tokens.size(); ++j) {
      const bool logit = c.logits == LogitsMode::kAll ||
                         (c.logits == LogitsMode::kLast && j + 1 == c.tokens.size());
      rows.push_back(
          {c.tokens[j], static_cast<int32_t>(c.pos0 + j), static_cast<int32_t>(i), logit});
    }
  }
  return rows;
}

}  // namespace

Status CudaModelRunner::step(std::span<const SeqChunk> chunks, StepOutput* out) {
  Impl& m = *impl_;
  if (!out) return InvalidArgument("step: null output");
  if (chunks.empty()) return InvalidArgument("step: no chunks");
  if (static_cast<int64_t>(chunks.size()) > m.S_max) {
    return ResourceExhausted("step: " + std::to_string(chunks.size()) + " sequences > max_seqs " +
                             std::to_string(m.S_max));
  }
  bool has_full = false, has_sliding = false;
  for (const auto& L : m.layers) (L.sliding ? has_sliding : has_full) = true;
  for (size_t i = 0; i < chunks.size(); ++i) {
    GS_RETURN_IF_ERROR(
        check_chunk(chunks[i], i, m.cfg, m.kv, m.opts.max_seq_len, has_full, has_sliding));
  }
  GS_RETURN_IF_ERROR(upload_block_tables(m, chunks));
  bool decode = true;
  const std::vector<Row> rows = flatten_rows(chunks, &decode);
  int64_t total_logits = 0;
  for (const Row& r : rows) total_logits += r.logit;
  GS_RETURN_IF_ERROR(m.begin_sampling(chunks, total_logits, out));  // sizes out (sampling.cpp)
  int64_t done_logits = 0;
  int n = 0;
  for (size_t start = 0; start < rows.size(); start += static_cast<size_t>(n)) {
    // A forward takes up to R_max rows with up to L_max logits rows among them.
    int logit_count = 0;
    for (n = 0; start + n < rows.size() && n < m.R_max; ++n) {
      if (rows[start + n].logit && logit_count++ == m.L_max) break;
    }
    int L = 0;
    for (int r = 0; r < n; ++r) {
      const Row& row = rows[start + r];
      m.h_in[r] = row.tok;
      m.h_in[m.R_max + r] = row.pos;
      m.h_in[2 * m.R_max + r] = row.seq;
      if (row.logit) m.h_in[3 * m.R_max + L++] = r;
    }
    GS_RETURN_IF_ERROR(m.upload_rows(n));
    if (decode && m.opts.use_graphs) {
      GS_ASSIGN_OR_RETURN(cudaGraphExec_t g, m.graph_for(n, false));
      GS_CUDA_RETURN(cudaGraphLaunch(g, m.stream));
    } else if (m.use_prefill(n)) {
      GS_RETURN_IF_ERROR(m.enqueue_prefill(n, L));
    } else {
      GS_RETURN_IF_ERROR(m.enqueue_forward(n, L, false));
    }
    if (L > 0) GS_RETURN_IF_ERROR(m.after_forward(done_logits, L, out));  // sample / copy rows
    GS_CUDA_RETURN(cudaStreamSynchronize(m.stream));
    done_logits += L;
    m.last_logit_rows = L;
  }
  return m.end_sampling(out);
}

Result<std::vector<int32_t>> CudaModelRunner::last_greedy_tokens() {
  Impl& m = *impl_;
  std::vector<int32_t> t(m.last_logit_rows);
  if (!t.empty()) {
    GS_CUDA_RETURN(
        cudaMemcpy(t.data(), m.ws.sampled, t.size() * sizeof(int32_t), cudaMemcpyDeviceToHost));
  }
  return t;
}

Status CudaModelRunner::copy_block(bool sliding_pool, int32_t src, int32_t dst) {
  Impl& m = *impl_;
  const int64_t pool = sliding_pool ? m.kv.num_blocks_sliding : m.kv.num_blocks_full;
  if (src < 0 || dst < 0 || src >= pool || dst >= pool) {
    return InvalidArgument("copy_block: block ids " + std::to_string(src) + " -> " +
                           std::to_string(dst) + " outside [0, " + std::to_string(pool) + ")");
  }
  const size_t blk = static_cast<size_t>(m.cfg.num_key_value_heads) * m.kv.block_size * 64;
  for (const auto& L : m.layers) {
    if (L.sliding != sliding_pool) continue;
    for (uint16_t* c : {L.k, L.v}) {
      GS_CUDA_RETURN(cudaMemcpyAsync(c + dst * blk, c + src * blk, blk * 2,
                                     cudaMemcpyDeviceToDevice, m.stream));
    }
  }
  return kern::cuda_status(cudaStreamSynchronize(m.stream), "copy_block");
}

}  // namespace gossamer

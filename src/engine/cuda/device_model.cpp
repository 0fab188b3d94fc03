// Device memory of CudaModelRunner: KV pools, workspace, step inputs, and the weights (uploaded
// from a checkpoint through pinned staging, or generated on the GPU).
#include <algorithm>
#include <cstring>

#include "common/numerics.h"
#include "engine/cuda/runner_impl.h"
#include "engine/cuda/uploader.h"
#include "kernels/attention/params.h"
#include "kernels/common/cuda_check.h"

namespace gossamer {

using cudarun::DevLayer;

CudaModelRunner::Impl::~Impl() {
  for (auto& [key, g] : graphs) cudaGraphExecDestroy(g);
  for (cudaGraph_t g : graph_defs) cudaGraphDestroy(g);
  for (void* p : allocations) cudaFree(p);
  if (h_in) cudaFreeHost(h_in);
  if (stream) cudaStreamDestroy(stream);
}

Result<void*> CudaModelRunner::Impl::alloc(size_t bytes, const char* what) {
  void* p = nullptr;
  const cudaError_t e = cudaMalloc(&p, std::max<size_t>(bytes, 16));
  if (e != cudaSuccess) {
    cudaGetLastError();
    return ResourceExhausted(std::string("cuda runner: cudaMalloc of ") + std::to_string(bytes) +
                             " bytes for " + what + " failed: " + cudaGetErrorString(e));
  }
  allocations.push_back(p);
  return p;
}

int CudaModelRunner::Impl::splits_for(int rows) const {
  return kern::attention_splits(rows, static_cast<int>(cfg.num_key_value_heads), sms, 64);
}

namespace {

// The shapes the CUDA kernels take (a checkpoint outside them is refused here, by name).
Status check_cuda_shapes(const ModelConfig& cfg) {
  if (cfg.head_dim != 64)
    return Unsupported("cuda runner: head_dim must be 64, got " + std::to_string(cfg.head_dim));
  if (cfg.num_attention_heads % cfg.num_key_value_heads != 0 ||
      cfg.num_attention_heads / cfg.num_key_value_heads > 16) {
    return Unsupported("cuda runner: needs heads / kv_heads <= 16");
  }
  if (cfg.hidden_size % 32 != 0 || cfg.intermediate_size % 32 != 0) {
    return Unsupported("cuda runner: hidden_size and intermediate_size must be multiples of 32");
  }
  if (cfg.num_local_experts > 256 || cfg.experts_per_token > 8) {
    return Unsupported("cuda runner: at most 256 experts and 8 experts per token");
  }
  if (cfg.expert_format != ExpertFormat::kMxfp4) {
    return Unsupported("cuda runner: only MXFP4 expert weights are supported (got bf16 experts)");
  }
  return Status::Ok();
}

}  // namespace

Status CudaModelRunner::Impl::init_common(const ModelConfig& c, const CudaRunnerOptions& o) {
  cfg = c;
  opts = o;
  GS_RETURN_IF_ERROR(cfg.validate());
  GS_RETURN_IF_ERROR(opts.validate());
  GS_RETURN_IF_ERROR(check_cuda_shapes(cfg));
  GS_ASSIGN_OR_RETURN(rope, make_rope_table(cfg));
  GS_CUDA_RETURN(cudaSetDevice(opts.device));
  GS_CUDA_RETURN(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, opts.device));
  cudaDeviceProp prop{};
  GS_CUDA_RETURN(cudaGetDeviceProperties(&prop, opts.device));
  device_name = prop.name;
  GS_CUDA_RETURN(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  kv = opts.kv;
  const int64_t bs = kv.block_size;
  max_blocks = static_cast<int>((opts.max_seq_len + bs - 1) / bs);
  if (kv.num_blocks_full == 0) kv.num_blocks_full = opts.max_seqs * max_blocks;
  if (kv.num_blocks_sliding == 0) kv.num_blocks_sliding = opts.max_seqs * max_blocks;
  R_max = static_cast<int>(opts.max_step_tokens);
  S_max = static_cast<int>(opts.max_seqs);
  layers.resize(cfg.num_hidden_layers);
  for (int64_t l = 0; l < cfg.num_hidden_layers; ++l) {
    DevLayer& L = layers[l];
    L.sliding = cfg.layer_types[l] == LayerType::kSlidingAttention;
    const size_t blocks = L.sliding ? kv.num_blocks_sliding : kv.num_blocks_full;
    const size_t n = blocks * cfg.num_key_value_heads * bs * 64;
    GS_ASSIGN_OR_RETURN(L.k, alloc_n<uint16_t>(n, "K cache"));
    GS_ASSIGN_OR_RETURN(L.v, alloc_n<uint16_t>(n, "V cache"));
  }
  GS_RETURN_IF_ERROR(alloc_workspace());
  GS_RETURN_IF_ERROR(alloc_step_inputs());
  return init_prefill();
}

Status CudaModelRunner::Impl::alloc_workspace() {
  const size_t H = cfg.hidden_size, QD = cfg.num_attention_heads * 64, E = cfg.num_local_experts,
               K = cfg.experts_per_token, I = cfg.intermediate_size, V = cfg.vocab_size;
  const size_t kvh = cfg.num_key_value_heads;
  size_t part_rows = 0;
  for (int r = 1; r <= R_max; ++r)
    part_rows = std::max(part_rows, static_cast<size_t>(r) * splits_for(r));
  auto& w = ws;
  GS_ASSIGN_OR_RETURN(w.x, alloc_n<float>(R_max * H, "x"));
  GS_ASSIGN_OR_RETURN(w.xn, alloc_n<float>(R_max * H, "xn"));
  GS_ASSIGN_OR_RETURN(w.q, alloc_n<float>(R_max * QD, "q"));
  GS_ASSIGN_OR_RETURN(w.attn, alloc_n<float>(R_max * QD, "attn"));
  GS_ASSIGN_OR_RETURN(w.part_o, alloc_n<float>(part_rows * QD, "attention partials"));
  GS_ASSIGN_OR_RETURN(
      w.part_ml, alloc_n<float>(part_rows * cfg.num_attention_heads * 2, "attention partials"));
  GS_ASSIGN_OR_RETURN(w.attn_tickets, alloc_n<int32_t>(R_max * kvh, "attention tickets"));
  GS_CUDA_RETURN(cudaMemset(w.attn_tickets, 0, R_max * kvh * sizeof(int32_t)));
  GS_ASSIGN_OR_RETURN(w.router, alloc_n<float>(R_max * E, "router logits"));
  GS_ASSIGN_OR_RETURN(w.ids, alloc_n<int32_t>(R_max * K, "expert ids"));
  GS_ASSIGN_OR_RETURN(w.rw, alloc_n<float>(R_max * K, "expert weights"));
  GS_ASSIGN_OR_RETURN(w.act, alloc_n<float>(R_max * K * I, "expert activations"));
  // Grouped-MoE partials, only where grouped_moe() can pick a forward: prefill-path forwards of
  // at most min(64, E / k) rows.
  const int64_t grouped_rows = std::min<int64_t>({R_max, 64, static_cast<int64_t>(E / K)});
  if (opts.grouped_moe_small && opts.prefill_min_rows > 0 &&
      opts.prefill_min_rows <= grouped_rows) {
    GS_ASSIGN_OR_RETURN(w.moe_part, alloc_n<float>(grouped_rows * K * H, "grouped MoE partials"));
  }
  L_max = static_cast<int>(std::min<int64_t>(R_max, std::max(opts.max_logit_rows, opts.max_seqs)));
  GS_ASSIGN_OR_RETURN(w.logits, alloc_n<float>(L_max * V, "logits"));
  GS_ASSIGN_OR_RETURN(w.keys, alloc_n<unsigned long long>(R_max, "argmax keys"));
  if (opts.prefill_min_rows > 0 && H % 8 == 0) {  // lm_head GEMM rows (16-byte aligned rows)
    GS_ASSIGN_OR_RETURN(w.lm_x,
                        alloc_n<uint16_t>(2 * static_cast<size_t>(L_max) * H, "lm_head bf16 rows"));
  }
  GS_ASSIGN_OR_RETURN(w.sampled, alloc_n<int32_t>(R_max, "sampled tokens"));
  GS_CUDA_RETURN(cudaMemset(w.keys, 0, R_max * sizeof(unsigned long long)));
  return Status::Ok();
}

// The step's inputs in one device buffer (uploaded from the pinned h_in in one copy).
Status CudaModelRunner::Impl::alloc_step_inputs() {
  const size_t tab = static_cast<size_t>(S_max) * max_blocks;
  in.count = 4 * static_cast<size_t>(R_max) + 2 * tab;
  GS_ASSIGN_OR_RETURN(in.tokens, alloc_n<int32_t>(in.count, "step inputs"));
  in.pos = in.tokens + R_max;
  in.row_seq = in.pos + R_max;
  in.logit_rows = in.row_seq + R_max;
  in.tables_full = in.logit_rows + R_max;
  in.tables_sliding = in.tables_full + tab;
  GS_CUDA_RETURN(cudaMemset(in.tokens, 0, in.count * sizeof(int32_t)));  // steps upload parts
  GS_CUDA_RETURN(cudaMallocHost(&h_in, in.count * sizeof(int32_t)));
  std::memset(h_in, 0, in.count * sizeof(int32_t));
  return Status::Ok();
}

Status CudaModelRunner::Impl::alloc_weights() {
  const size_t H = cfg.hidden_size, QD = cfg.num_attention_heads * 64, E = cfg.num_local_experts,
               I = cfg.intermediate_size, V = cfg.vocab_size;
  const size_t QKV = (cfg.num_attention_heads + 2 * cfg.num_key_value_heads) * 64;
  GS_ASSIGN_OR_RETURN(embed, alloc_n<uint16_t>(V * H, "embedding"));
  GS_ASSIGN_OR_RETURN(final_norm, alloc_n<uint16_t>(H, "final norm"));
  GS_ASSIGN_OR_RETURN(lm_head, alloc_n<uint16_t>(V * H, "lm_head"));
  for (DevLayer& L : layers) {
    GS_ASSIGN_OR_RETURN(L.attn_norm, alloc_n<uint16_t>(H, "attn norm"));
    GS_ASSIGN_OR_RETURN(L.qkv_w, alloc_n<uint16_t>(QKV * H, "qkv weight"));
    GS_ASSIGN_OR_RETURN(L.qkv_b, alloc_n<float>(QKV, "qkv bias"));
    GS_ASSIGN_OR_RETURN(L.o_w, alloc_n<uint16_t>(H * QD, "o weight"));
    GS_ASSIGN_OR_RETURN(L.o_b, alloc_n<float>(H, "o bias"));
    GS_ASSIGN_OR_RETURN(L.sinks, alloc_n<float>(cfg.num_attention_heads, "sinks"));
    GS_ASSIGN_OR_RETURN(L.mlp_norm, alloc_n<uint16_t>(H, "mlp norm"));
    GS_ASSIGN_OR_RETURN(L.router_w, alloc_n<uint16_t>(E * H, "router weight"));
    GS_ASSIGN_OR_RETURN(L.router_b, alloc_n<float>(E, "router bias"));
    GS_ASSIGN_OR_RETURN(L.gu_blocks, alloc_n<uint8_t>(E * 2 * I * H / 2, "gate_up blocks"));
    GS_ASSIGN_OR_RETURN(L.gu_scales, alloc_n<uint8_t>(E * 2 * I * H / 32, "gate_up scales"));
    GS_ASSIGN_OR_RETURN(L.gu_b, alloc_n<float>(E * 2 * I, "gate_up bias"));
    GS_ASSIGN_OR_RETURN(L.dn_blocks, alloc_n<uint8_t>(E * H * I / 2, "down blocks"));
    GS_ASSIGN_OR_RETURN(L.dn_scales, alloc_n<uint8_t>(E * H * I / 32, "down scales"));
    GS_ASSIGN_OR_RETURN(L.dn_b, alloc_n<float>(E * H, "down bias"));
  }
  return Status::Ok();
}

Status CudaModelRunner::Impl::synth_weights(uint64_t seed) {
  const size_t H = cfg.hidden_size, QD = cfg.num_attention_heads * 64, E = cfg.num_local_experts,
               I = cfg.intermediate_size, V = cfg.vocab_size;
  const size_t QKV = (cfg.num_attention_heads + 2 * cfg.num_key_value_heads) * 64;
  cudaStream_t s = stream;
  uint64_t k = seed * 1000003u;
  const float a = 0.03f;
  GS_RETURN_IF_ERROR(cudarun::fill_bf16(embed, V * H, ++k, -1.f, 1.f, s));
  GS_RETURN_IF_ERROR(cudarun::fill_bf16(final_norm, H, ++k, 0.8f, 1.2f, s));
  GS_RETURN_IF_ERROR(cudarun::fill_bf16(lm_head, V * H, ++k, -a, a, s));
  for (DevLayer& L : layers) {
    GS_RETURN_IF_ERROR(cudarun::fill_bf16(L.attn_norm, H, ++k, 0.8f, 1.2f, s));
    GS_RETURN_IF_ERROR(cudarun::fill_bf16(L.qkv_w, QKV * H, ++k, -a, a, s));
    GS_RETURN_IF_ERROR(cudarun::fill_f32(L.qkv_b, QKV, ++k, -0.1f, 0.1f, s));
    GS_RETURN_IF_ERROR(cudarun::fill_bf16(L.o_w, H * QD, ++k, -a, a, s));
    GS_RETURN_IF_ERROR(cudarun::fill_f32(L.o_b, H, ++k, -0.1f, 0.1f, s));
    GS_RETURN_IF_ERROR(cudarun::fill_f32(L.sinks, cfg.num_attention_heads, ++k, -1.f, 1.f, s));
    GS_RETURN_IF_ERROR(cudarun::fill_bf16(L.mlp_norm, H, ++k, 0.8f, 1.2f, s));
    GS_RETURN_IF_ERROR(cudarun::fill_bf16(L.router_w, E * H, ++k, -a, a, s));
    GS_RETURN_IF_ERROR(cudarun::fill_f32(L.router_b, E, ++k, -0.1f, 0.1f, s));
    GS_RETURN_IF_ERROR(cudarun::fill_u8(L.gu_blocks, E * 2 * I * H / 2, ++k, 0, 255, s));
    GS_RETURN_IF_ERROR(cudarun::fill_u8(L.gu_scales, E * 2 * I * H / 32, ++k, 118, 121, s));
    GS_RETURN_IF_ERROR(cudarun::fill_f32(L.gu_b, E * 2 * I, ++k, -0.1f, 0.1f, s));
    GS_RETURN_IF_ERROR(cudarun::fill_u8(L.dn_blocks, E * H * I / 2, ++k, 0, 255, s));
    GS_RETURN_IF_ERROR(cudarun::fill_u8(L.dn_scales, E * H * I / 32, ++k, 118, 121, s));
    GS_RETURN_IF_ERROR(cudarun::fill_f32(L.dn_b, E * H, ++k, -0.1f, 0.1f, s));
  }
  GS_CUDA_RETURN(cudaStreamSynchronize(s));
  return Status::Ok();
}

Status CudaModelRunner::Impl::upload_weights(const LoadedModel& m) {
  const ModelWeights& w = m.weights;
  const size_t H = cfg.hidden_size, QD = cfg.num_attention_heads * 64, E = cfg.num_local_experts,
               I = cfg.intermediate_size, V = cfg.vocab_size;
  const size_t KD = cfg.num_key_value_heads * 64;
  // Bytes of every tensor below (progress total).
  const size_t total = 2 * V * H * 2 + H * 2 +
                       layers.size() * (2 * H * 2 + (QD + 2 * KD) * H * 2 + (QD + 2 * KD) * 4 +
                                        H * QD * 2 + H * 4 + cfg.num_attention_heads * 4 +
                                        E * H * 2 + E * 4 + E * 2 * I * H / 2 + E * 2 * I * H / 32 +
                                        E * 2 * I * 4 + E * H * I / 2 + E * H * I / 32 + E * H * 4);
  cudarun::Uploader up(stream, total, opts.progress);
  auto bf16_only = [](const TensorRef& t, const std::string& what) -> Status {
    if (t.dtype != DType::kBF16)
      return Unsupported("cuda runner: " + what + " must be bf16, got " + dtype_name(t.dtype));
    return Status::Ok();
  };
  GS_RETURN_IF_ERROR(bf16_only(w.embed, "embed"));
  GS_RETURN_IF_ERROR(bf16_only(w.lm_head, "lm_head"));
  GS_RETURN_IF_ERROR(up.raw(embed, w.embed, V * H * 2, "embed"));
  GS_RETURN_IF_ERROR(up.raw(lm_head, w.lm_head, V * H * 2, "lm_head"));
  for (size_t l = 0; l < layers.size(); ++l) {
    const LayerWeights& s = w.layers[l];
    DevLayer& L = layers[l];
    const std::string p = "layer " + std::to_string(l) + " ";
    for (const auto* t : {&s.attn_norm, &s.mlp_norm, &s.q_w, &s.k_w, &s.v_w, &s.o_w, &s.router_w}) {
      GS_RETURN_IF_ERROR(bf16_only(*t, p + "dense weights and norms"));
    }
    GS_RETURN_IF_ERROR(up.raw(L.attn_norm, s.attn_norm, H * 2, p + "attn_norm"));
    GS_RETURN_IF_ERROR(up.raw(L.qkv_w, s.q_w, QD * H * 2, p + "q_proj.weight"));
    GS_RETURN_IF_ERROR(up.raw(L.qkv_w + QD * H, s.k_w, KD * H * 2, p + "k_proj.weight"));
    GS_RETURN_IF_ERROR(up.raw(L.qkv_w + (QD + KD) * H, s.v_w, KD * H * 2, p + "v_proj.weight"));
    // attention_bias false: the projections have no bias (load_model binds none), i.e. zeros.
    auto bias = [&](float* dst, const TensorRef& t, size_t n, const char* name) {
      return cfg.attention_bias ? up.vec_f32(dst, t, n, p + name)
                                : up.zeros(dst, n * sizeof(float), p + name);
    };
    GS_RETURN_IF_ERROR(bias(L.qkv_b, s.q_b, QD, "q_proj.bias"));
    GS_RETURN_IF_ERROR(bias(L.qkv_b + QD, s.k_b, KD, "k_proj.bias"));
    GS_RETURN_IF_ERROR(bias(L.qkv_b + QD + KD, s.v_b, KD, "v_proj.bias"));
    GS_RETURN_IF_ERROR(up.raw(L.o_w, s.o_w, H * QD * 2, p + "o_proj.weight"));
    GS_RETURN_IF_ERROR(bias(L.o_b, s.o_b, H, "o_proj.bias"));
    GS_RETURN_IF_ERROR(up.vec_f32(L.sinks, s.sinks, cfg.num_attention_heads, p + "sinks"));
    GS_RETURN_IF_ERROR(up.raw(L.mlp_norm, s.mlp_norm, H * 2, p + "post_attention_layernorm"));
    GS_RETURN_IF_ERROR(up.raw(L.router_w, s.router_w, E * H * 2, p + "router.weight"));
    GS_RETURN_IF_ERROR(up.vec_f32(L.router_b, s.router_b, E, p + "router.bias"));
    if (s.gate_up.format != ExpertFormat::kMxfp4 || s.down.format != ExpertFormat::kMxfp4) {
      return Unsupported("cuda runner: " + p + "experts are not MXFP4");
    }
    GS_RETURN_IF_ERROR(
        up.raw(L.gu_blocks, s.gate_up.blocks, E * 2 * I * H / 2, p + "gate_up blocks"));
    GS_RETURN_IF_ERROR(
        up.raw(L.gu_scales, s.gate_up.scales, E * 2 * I * H / 32, p + "gate_up scales"));
    GS_RETURN_IF_ERROR(up.vec_f32(L.gu_b, s.gate_up_b, E * 2 * I, p + "gate_up bias"));
    GS_RETURN_IF_ERROR(up.raw(L.dn_blocks, s.down.blocks, E * H * I / 2, p + "down blocks"));
    GS_RETURN_IF_ERROR(up.raw(L.dn_scales, s.down.scales, E * H * I / 32, p + "down scales"));
    GS_RETURN_IF_ERROR(up.vec_f32(L.dn_b, s.down_b, E * H, p + "down bias"));
  }
  GS_RETURN_IF_ERROR(bf16_only(w.final_norm, "final norm"));
  GS_RETURN_IF_ERROR(up.raw(final_norm, w.final_norm, H * 2, "final norm"));
  return up.finish();
}

}  // namespace gossamer

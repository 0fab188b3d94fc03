// CudaModelRunner bench hooks: random KV fill, graph-replayed greedy decode loop, prefill timing,
// the byte model of a decode step, and device metadata.
#include <algorithm>
#include <chrono>
#include <random>

#include "engine/cuda/runner_impl.h"
#include "kernels/common/cuda_check.h"
#include "kernels/gemm/params.h"

namespace gossamer {

Status CudaModelRunner::fill_kv_random(uint64_t seed) {
  Impl& m = *impl_;
  const size_t blk = static_cast<size_t>(m.cfg.num_key_value_heads) * m.kv.block_size * 64;
  uint64_t k = seed * 7919u;
  for (const auto& L : m.layers) {
    const size_t n = blk * (L.sliding ? m.kv.num_blocks_sliding : m.kv.num_blocks_full);
    GS_RETURN_IF_ERROR(cudarun::fill_bf16(L.k, n, ++k, -1.f, 1.f, m.stream));
    GS_RETURN_IF_ERROR(cudarun::fill_bf16(L.v, n, ++k, -1.f, 1.f, m.stream));
  }
  return kern::cuda_status(cudaStreamSynchronize(m.stream), "fill_kv_random");
}

double CudaModelRunner::decode_bytes(int64_t depth) const {
  const ModelConfig& c = impl_->cfg;
  const double H = c.hidden_size, QD = c.num_attention_heads * 64.0, E = c.num_local_experts,
               K = c.experts_per_token, I = c.intermediate_size, V = c.vocab_size;
  const double QKV = (c.num_attention_heads + 2 * c.num_key_value_heads) * 64.0;
  const double kv_per_token = c.num_key_value_heads * 64.0 * 2 /*bf16*/ * 2 /*K,V*/;
  double bytes = H * 2 /*embed row*/ + H * 2 + V * H * 2 /*final norm, lm_head*/;
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    const bool sliding = c.layer_types[l] == LayerType::kSlidingAttention;
    const double keys = sliding ? std::min<double>(depth + 1, c.sliding_window) : depth + 1.0;
    bytes += 4 * H + QKV * H * 2 + QKV * 4 + H * QD * 2 + H * 4 + E * H * 2 + E * 4;
    bytes += K * ((2 * I * H + H * I) * 17.0 / 32 + (2 * I + H) * 4);
    bytes += keys * kv_per_token;
  }
  return bytes;
}

Result<DecodeBenchResult> CudaModelRunner::bench_decode(int batch, int64_t depth, int steps) {
  Impl& m = *impl_;
  const int64_t bs = m.kv.block_size, need = (depth + steps + 2 + bs - 1) / bs;
  if (batch <= 0 || batch > m.S_max || batch > m.R_max) {
    return InvalidArgument("bench_decode: batch must be in [1, min(max_seqs, max_step_tokens)]");
  }
  if (depth < 0 || steps <= 0 || depth + steps + 2 > m.opts.max_seq_len ||
      batch * need > std::min(m.kv.num_blocks_full, m.kv.num_blocks_sliding)) {
    return OutOfRange("bench_decode: depth + steps exceeds max_seq_len or the KV pools");
  }
  int32_t* tf = m.h_in + (m.in.tables_full - m.in.tokens);
  int32_t* tsl = m.h_in + (m.in.tables_sliding - m.in.tokens);
  for (int b = 0; b < batch; ++b)
    for (int64_t j = 0; j < need; ++j)
      tf[b * m.max_blocks + j] = tsl[b * m.max_blocks + j] = static_cast<int32_t>(b * need + j);
  std::mt19937 rng(1234);
  auto reset = [&] {
    for (int b = 0; b < batch; ++b) {
      m.h_in[b] = static_cast<int32_t>(rng() % m.cfg.vocab_size);
      m.h_in[m.R_max + b] = static_cast<int32_t>(depth);
      m.h_in[2 * m.R_max + b] = b;
      m.h_in[3 * m.R_max + b] = b;
    }
    return m.upload_rows(batch);
  };
  GS_RETURN_IF_ERROR(m.upload_tables(batch, static_cast<int>(need)));
  GS_RETURN_IF_ERROR(reset());
  GS_ASSIGN_OR_RETURN(cudaGraphExec_t g, m.graph_for(batch, true));
  for (int i = 0; i < 2; ++i) GS_CUDA_RETURN(cudaGraphLaunch(g, m.stream));  // warm-up
  GS_CUDA_RETURN(cudaStreamSynchronize(m.stream));
  GS_RETURN_IF_ERROR(reset());
  cudaEvent_t e0, e1;
  GS_CUDA_RETURN(cudaEventCreate(&e0));
  GS_CUDA_RETURN(cudaEventCreate(&e1));
  GS_CUDA_RETURN(cudaEventRecord(e0, m.stream));
  for (int i = 0; i < steps; ++i) GS_CUDA_RETURN(cudaGraphLaunch(g, m.stream));
  GS_CUDA_RETURN(cudaEventRecord(e1, m.stream));
  GS_CUDA_RETURN(cudaEventSynchronize(e1));
  float ms = 0;
  GS_CUDA_RETURN(cudaEventElapsedTime(&ms, e0, e1));
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  DecodeBenchResult r;
  r.ms = ms;
  r.bytes_per_token = decode_bytes(depth + steps / 2);
  r.last_tokens.resize(batch);
  GS_CUDA_RETURN(cudaMemcpy(r.last_tokens.data(), m.ws.sampled, batch * sizeof(int32_t),
                            cudaMemcpyDeviceToHost));
  return r;
}

Result<double> CudaModelRunner::bench_prefill(int64_t tokens, int64_t depth) {
  Impl& m = *impl_;
  const int64_t bs = m.kv.block_size, need = (depth + tokens + bs - 1) / bs;
  if (need > std::min(m.kv.num_blocks_full, m.kv.num_blocks_sliding) ||
      depth + tokens > m.opts.max_seq_len) {
    return OutOfRange("bench_prefill: depth + tokens exceeds max_seq_len or the KV pools");
  }
  std::vector<int32_t> toks(tokens), table(need);
  std::mt19937 rng(99);
  for (auto& t : toks) t = static_cast<int32_t>(rng() % m.cfg.vocab_size);
  for (int64_t j = 0; j < need; ++j) table[j] = static_cast<int32_t>(j);
  SeqChunk c{toks, depth, table, table, LogitsMode::kLast};
  StepOutput out;
  const auto t0 = std::chrono::steady_clock::now();
  GS_RETURN_IF_ERROR(step(std::span<const SeqChunk>(&c, 1), &out));
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

Result<CudaDeviceInfo> CudaModelRunner::device_info(int device) {
  CudaDeviceInfo d;
  cudaDeviceProp prop{};
  GS_CUDA_RETURN(cudaGetDeviceProperties(&prop, device));
  d.name = prop.name;
  d.sm_count = prop.multiProcessorCount;
  d.mem_gib = static_cast<double>(prop.totalGlobalMem) / (1ull << 30);
  int v = 0;
  GS_CUDA_RETURN(cudaDeviceGetAttribute(&v, cudaDevAttrClockRate, device));
  d.sm_clock_mhz = v / 1000;
  GS_CUDA_RETURN(cudaDeviceGetAttribute(&v, cudaDevAttrMemoryClockRate, device));
  d.mem_clock_mhz = v / 1000;
  GS_CUDA_RETURN(cudaDriverGetVersion(&v));
  d.driver = "CUDA driver API " + std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10);
  GS_CUDA_RETURN(cudaRuntimeGetVersion(&v));
  d.cuda_runtime = std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10);
  return d;
}

Result<double> CudaModelRunner::measure_copy_gbs(int device) {
  GS_CUDA_RETURN(cudaSetDevice(device));
  const size_t n = size_t{256} << 20;
  void *a = nullptr, *b = nullptr;
  GS_CUDA_RETURN(cudaMalloc(&a, n));
  if (cudaMalloc(&b, n) != cudaSuccess) {
    cudaFree(a);
    return ResourceExhausted("measure_copy_gbs: cudaMalloc failed");
  }
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  for (int i = 0; i < 3; ++i) cudaMemcpy(b, a, n, cudaMemcpyDeviceToDevice);
  cudaEventRecord(e0);
  const int iters = 20;
  for (int i = 0; i < iters; ++i) cudaMemcpy(b, a, n, cudaMemcpyDeviceToDevice);
  cudaEventRecord(e1);
  cudaEventSynchronize(e1);
  float ms = 0;
  cudaEventElapsedTime(&ms, e0, e1);
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  cudaFree(a);
  cudaFree(b);
  GS_CUDA_RETURN(cudaGetLastError());
  return 2.0 * static_cast<double>(n) * iters / (ms * 1e-3) / 1e9;
}

Result<double> CudaModelRunner::measure_gemm_tflops(int device, int n) {
  GS_CUDA_RETURN(cudaSetDevice(device));
  GS_ASSIGN_OR_RETURN(auto ctx, kern::GemmContext::create());
  const size_t nn = static_cast<size_t>(n) * n;
  uint16_t *a = nullptr, *w = nullptr;
  float* d = nullptr;
  auto cleanup = [&] {
    cudaFree(a);
    cudaFree(w);
    cudaFree(d);
  };
  if (cudaMalloc(&a, nn * 2) != cudaSuccess || cudaMalloc(&w, nn * 2) != cudaSuccess ||
      cudaMalloc(&d, nn * 4) != cudaSuccess) {
    cleanup();
    cudaGetLastError();
    return ResourceExhausted("measure_gemm_tflops: cudaMalloc failed");
  }
  // Random bf16 in [-1, 1] (tensor-core power, hence clocks, depends on the data).
  Status st = cudarun::fill_bf16(a, nn, 11, -1.f, 1.f, nullptr);
  if (st.ok()) st = cudarun::fill_bf16(w, nn, 12, -1.f, 1.f, nullptr);
  kern::GemmParams p;
  p.a = a;
  p.w = w;
  p.d = d;
  p.m = p.n = p.k = n;
  cudaEvent_t e0 = nullptr, e1 = nullptr;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  const int iters = 10;
  for (int i = 0; i < 3 && st.ok(); ++i) st = ctx->run(p, nullptr);
  cudaEventRecord(e0);
  for (int i = 0; i < iters && st.ok(); ++i) st = ctx->run(p, nullptr);
  cudaEventRecord(e1);
  cudaEventSynchronize(e1);
  float ms = 0;
  cudaEventElapsedTime(&ms, e0, e1);
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  cleanup();
  GS_RETURN_IF_ERROR(st);
  GS_CUDA_RETURN(cudaGetLastError());
  return 2.0 * n * static_cast<double>(n) * n * iters / (ms * 1e-3) / 1e12;
}

double CudaModelRunner::prefill_flops(int64_t tokens, int64_t depth) const {
  const ModelConfig& c = impl_->cfg;
  const double H = c.hidden_size, QD = c.num_attention_heads * 64.0, E = c.num_local_experts,
               K = c.experts_per_token, I = c.intermediate_size, V = c.vocab_size;
  const double QKV = (c.num_attention_heads + 2 * c.num_key_value_heads) * 64.0;
  const double per_layer = QKV * H + H * QD + E * H + K * (2 * I * H + H * I);
  double flops = 2.0 * per_layer * c.num_hidden_layers * tokens + 2.0 * V * H;
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    const bool sliding = c.layer_types[l] == LayerType::kSlidingAttention;
    // Keys attended by the query at position p: min(p + 1, window) (sliding) or p + 1.
    const int64_t w = sliding ? c.sliding_window : 0;
    double pairs = 0;
    const int64_t p0 = depth, p1 = depth + tokens;  // positions [p0, p1)
    if (w <= 0) {
      pairs = (static_cast<double>(p1) * (p1 + 1) - static_cast<double>(p0) * (p0 + 1)) / 2;
    } else {
      const int64_t ramp_end = std::min(p1, std::max(p0, w));  // p < w: p + 1 keys
      pairs =
          (static_cast<double>(ramp_end) * (ramp_end + 1) - static_cast<double>(p0) * (p0 + 1)) /
              2 +
          static_cast<double>(p1 - ramp_end) * w;
    }
    flops += 4.0 * 64 * c.num_attention_heads * pairs;
  }
  return flops;
}

Result<double> CudaModelRunner::device_mem_used_gib(int device) {
  GS_CUDA_RETURN(cudaSetDevice(device));
  size_t free = 0, total = 0;
  GS_CUDA_RETURN(cudaMemGetInfo(&free, &total));
  return static_cast<double>(total - free) / (1ull << 30);
}

}  // namespace gossamer

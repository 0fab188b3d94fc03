// CudaModelRunner: the CUDA backend of ModelRunner for gpt-oss (MXFP4 experts, bf16 rest).
// Weights stay resident in checkpoint precision; activations are fp32; the KV cache is bf16,
// paged ([num_blocks, kv_heads, block_size, 64] per layer and pool). A step is one forward over
// all its tokens (decode rows and token-batched prefill through the same kernels); pure decode
// steps run as a captured CUDA graph (one per row count) with no host sync inside.
// This header has no CUDA includes (the runtime and server include it).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "engine/model_runner.h"
#include "model/weights.h"

namespace gossamer {

// Largest CudaRunnerOptions::prefill_flash_variant: kern::kFlashAttnMaxVariant (checked where
// both are visible, prefill_forward.cpp; this header has no kernel includes).
inline constexpr int kMaxPrefillFlashVariant = 10;

struct CudaRunnerOptions {
  KvCacheSpec kv;                 // num_blocks_* == 0: sized from max_seqs * max_seq_len
  int64_t max_seq_len = 8192;     // longest sequence (block tables hold max_seq_len / block_size)
  int64_t max_seqs = 8;           // sequences per step (block-table rows)
  int64_t max_step_tokens = 256;  // rows per forward (<= 16384); longer steps are split
  // Logits rows per forward (the logits buffer is [max(max_logit_rows, max_seqs), vocab]
  // floats); a step with more kAll rows is split into more forwards.
  int64_t max_logit_rows = 256;
  // Forwards with at least this many rows take the prefill path (cuBLASLt GEMMs, grouped MoE,
  // flash attention: docs/prefill.md); smaller ones the decode kernels. 0 = never.
  // Decode steps of that many sequences replay a graph of the same path. 8: the measured
  // crossover of decode batches on the H100 (docs/prefill.md).
  int64_t prefill_min_rows = 8;
  // Inside the prefill path: use kernels/moe_prefill and kernels/flash_attn when they are built
  // (false, or not built: the decode MoE / attention kernels over all rows).
  bool prefill_grouped_moe = true;
  // Prefill-path forwards of at most min(64, n_experts / k) rows (decode batches of 8..32 for
  // gpt-oss-120b, 8 for 20b): the expert-grouped decode MoE kernels (kernels/moe pipe 9, each
  // routed expert streamed once for all its rows) instead of moe_prefill, whose tiles are mostly
  // empty at so few rows per expert (docs/moe-decode.md "Session 19").
  bool grouped_moe_small = true;
  bool prefill_flash_attn = true;
  // FlashAttnParams::variant for the prefill attention: 0 = the kernel's auto choice, 1..10 pin a
  // CTA shape (kernels/flash_attn/params.h; bench A/B: `gossamer bench --flash-variant N`).
  int prefill_flash_variant = 0;
  // Prefill GEMM activations as bf16 hi + lo pairs (two GEMMs each: ~fp32 activations, ~2x the
  // dense-projection cost) instead of plain bf16 (~3e-3 relative rounding; docs/prefill.md).
  bool prefill_split_bf16 = false;
  // Router GEMM only on hi + lo activations (~fp32 router logits: near-tied experts are picked
  // as in the fp32 reference; one extra router GEMM per layer). Implied by prefill_split_bf16.
  bool prefill_split_router = true;
  bool use_graphs = true;
  // Programmatic dependent launch between the decode kernels that support it
  // (kernels/common/pdl.h, docs/decode-overhead.md); false: plain stream order.
  bool pdl = true;
  // Sample kLast rows on the GPU when the scheduler asks (SeqChunk::sampling; sampling.cpp):
  // only tokens and logprobs come back, not the logits rows. false: samples_on_device() is false.
  bool device_sampling = true;
  bool progress = false;  // weight-upload progress lines on stderr
  int device = 0;
  Status validate() const;
};

struct CudaDeviceInfo {
  std::string name, driver, cuda_runtime;
  int sm_count = 0, sm_clock_mhz = 0, mem_clock_mhz = 0;
  double mem_gib = 0;
};

// Timing hooks for `gossamer bench` (not part of ModelRunner).
struct DecodeBenchResult {
  double ms = 0;               // GPU time for all steps (CUDA events around the graph replays)
  double bytes_per_token = 0;  // weights + KV read per decode step / batch (model estimate)
  std::vector<int32_t> last_tokens;  // greedy tokens of the last step (sanity)
};

class CudaModelRunner : public ModelRunner {
 public:
  ~CudaModelRunner() override;
  // Uploads a loaded checkpoint (through pinned staging buffers).
  static Result<std::unique_ptr<CudaModelRunner>> create(const LoadedModel& model,
                                                         const CudaRunnerOptions& opts);
  // Random weights of the config's real shapes, generated on the GPU (no file, no host copy).
  static Result<std::unique_ptr<CudaModelRunner>> create_synthetic(const ModelConfig& cfg,
                                                                   const CudaRunnerOptions& opts,
                                                                   uint64_t seed);

  const ModelConfig& config() const override;
  const KvCacheSpec& kv_spec() const override;
  std::string describe() const override;
  Status step(std::span<const SeqChunk> chunks, StepOutput* out) override;
  Status copy_block(bool sliding_pool, int32_t src, int32_t dst) override;
  bool samples_on_device() const override;  // opts.device_sampling (sampling.cpp)

  // Greedy tokens of the last step's logits rows, computed on the GPU (argmax fused in lm_head).
  Result<std::vector<int32_t>> last_greedy_tokens();

  // ---- bench hooks ----
  // Fills every KV pool with random bf16 values (what a prefill to `depth` would leave, for
  // timing purposes).
  Status fill_kv_random(uint64_t seed);
  // `steps` greedy decode steps for `batch` sequences starting at position `depth`: each step
  // is one CUDA graph replay that samples on the GPU and feeds the token to the next step.
  Result<DecodeBenchResult> bench_decode(int batch, int64_t depth, int steps);
  // One token-batched prefill of `tokens` tokens at `depth` (random tokens), GPU ms.
  Result<double> bench_prefill(int64_t tokens, int64_t depth);
  // Model bytes read per decode step at batch 1 and context `depth` (weights + KV).
  double decode_bytes(int64_t depth) const;
  static Result<CudaDeviceInfo> device_info(int device);
  // Device-to-device cudaMemcpy bandwidth (GB/s counting read + write), 256 MiB buffers.
  static Result<double> measure_copy_gbs(int device);
  // bf16 GEMM ceiling: TFLOP/s of an n^3 bf16 x bf16 -> f32 GEMM through the prefill GEMM
  // wrapper (kernels/gemm, cuBLASLt), mean of 10 after warm-up, random data.
  static Result<double> measure_gemm_tflops(int device, int n = 8192);
  // FLOPs of one prefill of `tokens` tokens at `depth`: 2 x active parameters per token (QKV,
  // O, router, k experts' gate_up + down; lm_head once, for the last row) + attention
  // 4 x 64 x heads x (query, key) pairs per layer (sliding layers capped by the window).
  double prefill_flops(int64_t tokens, int64_t depth) const;
  // Device memory in use (total - free, all processes), GiB.
  static Result<double> device_mem_used_gib(int device);
  // Which kernel variant each op uses for a batch of `rows` (kernel-path report).
  std::string kernel_path(int rows) const;
  // The prefill path's kernels (forwards of >= prefill_min_rows rows; docs/prefill.md).
  std::string prefill_path() const;

  struct Impl;

 private:
  explicit CudaModelRunner(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

const char* gossamer_git_sha();

}  // namespace gossamer

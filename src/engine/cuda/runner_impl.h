// Internal state of CudaModelRunner (device weights, KV pools, workspace, graphs). CUDA-aware;
// included only by the .cpp/.cu files of this folder.
#pragma once

#include <cuda_runtime.h>

#include <map>
#include <memory>
#include <vector>

#include "engine/cuda/cuda_runner.h"
#include "engine/rope.h"
#include "kernels/gemm/params.h"

namespace gossamer::cudarun {

// One layer's resident weights (checkpoint precision; small vectors converted to fp32).
struct DevLayer {
  uint16_t* attn_norm = nullptr;  // [H] bf16
  uint16_t* qkv_w = nullptr;      // [(nh + 2 kvh) * 64, H] bf16: rows q, then k, then v
  float* qkv_b = nullptr;         // [(nh + 2 kvh) * 64]
  uint16_t* o_w = nullptr;        // [H, nh * 64] bf16
  float* o_b = nullptr;           // [H]
  float* sinks = nullptr;         // [nh]
  uint16_t* mlp_norm = nullptr;   // [H] bf16
  uint16_t* router_w = nullptr;   // [E, H] bf16
  float* router_b = nullptr;      // [E]
  uint8_t* gu_blocks = nullptr;   // [E, 2I, H/32, 16]
  uint8_t* gu_scales = nullptr;   // [E, 2I, H/32]
  float* gu_b = nullptr;          // [E, 2I]
  uint8_t* dn_blocks = nullptr;   // [E, H, I/32, 16]
  uint8_t* dn_scales = nullptr;   // [E, H, I/32]
  float* dn_b = nullptr;          // [E, H]
  bool sliding = false;
  uint16_t* k = nullptr;  // this layer's KV pool: [num_blocks(pool), kvh, block_size, 64] bf16
  uint16_t* v = nullptr;
};

// Step inputs: one int32 device buffer (and a pinned host mirror) uploaded with one copy.
struct Inputs {
  int32_t* tokens = nullptr;          // [R_max]
  int32_t* pos = nullptr;             // [R_max]
  int32_t* row_seq = nullptr;         // [R_max] block-table row of each token row
  int32_t* logit_rows = nullptr;      // [R_max] rows whose logits are computed
  int32_t* tables_full = nullptr;     // [S_max, max_blocks]
  int32_t* tables_sliding = nullptr;  // [S_max, max_blocks]
  size_t count = 0;                   // int32 elements in total
};

struct Workspace {
  float* x = nullptr;                  // [R_max, H] residual stream
  float* xn = nullptr;                 // [R_max, H] normed
  float* q = nullptr;                  // [R_max, nh * 64]
  float* attn = nullptr;               // [R_max, nh * 64]
  float* part_o = nullptr;             // [max R*splits, nh, 64]
  float* part_ml = nullptr;            // [max R*splits, nh, 2]
  int32_t* attn_tickets = nullptr;     // [R_max, kvh] zero; decode attention re-zeroes them
  float* router = nullptr;             // [R_max, E]
  int32_t* ids = nullptr;              // [R_max, k]
  float* rw = nullptr;                 // [R_max, k]
  float* act = nullptr;                // [R_max, k, I]
  float* moe_part = nullptr;           // [min(R_max, 64), k, H] grouped MoE down partials
  float* logits = nullptr;             // [L_max, V]
  unsigned long long* keys = nullptr;  // [R_max] argmax keys (kept zero between steps)
  int32_t* sampled = nullptr;          // [R_max]
  // Prefill path (prefill_forward.cpp): bf16 GEMM inputs and the QKV GEMM output.
  uint16_t* xb = nullptr;     // [R_max, max(H, nh * 64)] bf16
  uint16_t* xb_lo = nullptr;  // same: the bf16 residual x - xb (opts.prefill_split_bf16 only)
  float* qkv = nullptr;       // [R_max, (nh + 2 kvh) * 64] f32 (bias added)
  void* moe_ws = nullptr;     // kernels/moe_prefill workspace (when built), moe_ws_bytes
  size_t moe_ws_bytes = 0;
  uint16_t* lm_x = nullptr;  // [2, L_max, H] bf16 hi / lo of the normed logits rows (lm_head.cpp)
};

// Device-sampling state (sampling.cpp): pinned and device buffers grown on demand.
struct SamplingState;
struct SamplingStateDeleter {
  void operator()(SamplingState* s) const;
};

}  // namespace gossamer::cudarun

namespace gossamer {

struct CudaModelRunner::Impl {
  ModelConfig cfg;
  CudaRunnerOptions opts;
  KvCacheSpec kv;
  RopeTable rope;
  cudaStream_t stream = nullptr;
  int sms = 0;
  int max_blocks = 0;  // block-table width (max_seq_len / block_size)
  int R_max = 0, S_max = 0;
  int L_max = 0;                            // logits rows per forward (ws.logits rows)
  std::unique_ptr<kern::GemmContext> gemm;  // cuBLASLt handle + workspace (prefill GEMMs)
  std::vector<void*> allocations;
  uint16_t* embed = nullptr;       // [V, H] bf16
  uint16_t* final_norm = nullptr;  // [H] bf16
  uint16_t* lm_head = nullptr;     // [V, H] bf16 (may alias embed)
  std::vector<cudarun::DevLayer> layers;
  cudarun::Inputs in;
  int32_t* h_in = nullptr;  // pinned mirror of `in`
  cudarun::Workspace ws;
  std::map<std::pair<int, bool>, cudaGraphExec_t> graphs;  // (rows, feedback) -> graph
  std::vector<cudaGraph_t> graph_defs;
  int last_logit_rows = 0;
  std::string device_name;

  ~Impl();
  // cudaMalloc tracked in `allocations` (freed by the destructor).
  Result<void*> alloc(size_t bytes, const char* what);
  template <class T>
  Result<T*> alloc_n(size_t n, const char* what) {
    GS_ASSIGN_OR_RETURN(void* p, alloc(n * sizeof(T), what));
    return static_cast<T*>(p);
  }
  Status init_common(const ModelConfig& c, const CudaRunnerOptions& o);  // KV, workspace, inputs
  Status alloc_workspace();    // activations, partials, logits (sized for R_max rows)
  Status alloc_step_inputs();  // tokens, positions, row maps, block tables (`in`, `h_in`)
  Status alloc_weights();      // every DevLayer buffer (uninitialised)
  Status upload_weights(const LoadedModel& m);
  Status synth_weights(uint64_t seed);
  int splits_for(int rows) const;
  // The MoE kernels a prefill-path forward of `rows` rows launches (kernel_path).
  std::string moe_path(int rows) const;
  // Enqueues one forward over `rows` token rows (inputs already on the device) producing
  // `logit_rows` rows of logits and their greedy tokens; feedback: sampled tokens become the
  // next inputs and positions advance (bench loop).
  Status enqueue_forward(int rows, int logit_rows, bool feedback);
  // The tensor-core prefill forward (prefill_forward.cpp): same op sequence, dense projections
  // as cuBLASLt GEMMs, grouped MoE / flash attention when built. Used for forwards with at least
  // opts.prefill_min_rows rows, also inside the decode graphs of batches that large.
  Status enqueue_prefill(int rows, int logit_rows, bool feedback = false);
  bool use_prefill(int rows) const {
    return opts.prefill_min_rows > 0 && rows >= opts.prefill_min_rows;
  }
  // Prefill-path forwards that run the expert-grouped decode MoE kernels instead of moe_prefill
  // (CudaRunnerOptions::grouped_moe_small): at most 64 rows and at most one routed pair per
  // expert on average (rows k <= E).
  bool grouped_moe(int rows) const {
    return ws.moe_part != nullptr && use_prefill(rows) && rows <= 64 &&
           rows * cfg.experts_per_token <= cfg.num_local_experts;
  }
  Status init_prefill();  // GEMM context, prefill workspace (prefill_forward.cpp)
  Result<cudaGraphExec_t> graph_for(int rows, bool feedback);
  // Device sampling (sampling.cpp). begin: validates the chunks' SeqChunk::sampling, sizes
  // out->logits / rows (host rows only) and out->sampled, uploads the row params and penalty
  // lists. after_forward: for logits rows [first, first + n) now in ws.logits, samples the
  // device rows and queues the copies of the host rows (no sync). end: fills out->sampled.
  std::unique_ptr<cudarun::SamplingState, cudarun::SamplingStateDeleter> sampling;
  Status begin_sampling(std::span<const SeqChunk> chunks, int64_t total_logits, StepOutput* out);
  Status after_forward(int64_t first, int n, StepOutput* out);
  Status end_sampling(StepOutput* out);
  // Step inputs, pinned h_in -> in: the first `rows` entries of the four per-row arrays, and the
  // first `seqs` rows x `width` entries of both block tables (nothing else is read by the
  // kernels; a full upload of the tables was ~4 MB per step at max_seq_len 131072).
  Status upload_rows(int rows);
  Status upload_tables(int seqs, int width);
};

namespace cudarun {
// Deterministic pseudo-random fills on the device (splitmix64 of seed and index).
Status fill_bf16(uint16_t* p, size_t n, uint64_t seed, float lo, float hi, cudaStream_t s);
Status fill_f32(float* p, size_t n, uint64_t seed, float lo, float hi, cudaStream_t s);
Status fill_u8(uint8_t* p, size_t n, uint64_t seed, int lo, int hi, cudaStream_t s);
}  // namespace cudarun

}  // namespace gossamer

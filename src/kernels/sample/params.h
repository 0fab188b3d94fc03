// Greedy sampling on the GPU, without copying logits to the host:
//  argmax_f32: keys[b] = max over v of (logits[b, v], lowest index on ties) as a packed 64-bit
//    key (the same key the lm_head GEMV's fused argmax produces; see gemv/params.h);
//  greedy_finalize: tokens[b] = index(keys[b]); optionally feeds the next decode step on the
//    device (next_tokens[b] = tokens[b], pos[b] += 1) and clears the keys for the next step.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

#include "common/status.h"

namespace gossamer::kern {

struct ArgmaxParams {
  const float* logits = nullptr;       // [batch, ld] f32 (first `vocab` columns used)
  unsigned long long* keys = nullptr;  // [batch], zeroed before the launch
  int batch = 0, vocab = 0, ld = 0;
  Status validate() const;
};

struct GreedyFinalizeParams {
  unsigned long long* keys = nullptr;  // [batch] (cleared to 0 after reading)
  int32_t* tokens = nullptr;           // [batch] out
  int32_t* next_tokens = nullptr;      // [batch] or null: the next step's input tokens
  int32_t* pos = nullptr;              // [batch] or null: incremented
  int batch = 0;
  Status validate() const;
};

Status launch_argmax(const ArgmaxParams& p, cudaStream_t stream);  // kernel argmax_f32
Status launch_greedy_finalize(const GreedyFinalizeParams& p, cudaStream_t stream);

std::vector<int32_t> argmax_ref(const std::vector<float>& logits, int batch, int vocab);

// ---- Full sampling on the device (sampler.cu / finish.cu; see sample_core.cuh) ----
// Per row, the reference CPU sampler's rule (runtime/sampler.h): z = logits with ids >=
// vocab_limit masked, plus the logit_bias and minus the presence/frequency penalties of the
// row's (token, count[, bias]) list: z[t] = (z[t] + bias) - (presence + frequency * count);
// logprobs from log_softmax(z); temperature 0 = argmax (lowest id on ties); otherwise
// w = exp((z - max z) / T), the top_k largest (ties: lower id first), the shortest prefix of
// those reaching top_p of their mass, those with w >= min_p; one draw over the survivors from
// splitmix64(seed, counter). Thresholds come from radix-select histogram passes over the
// 64-bit key (orderable f32 bits of z, ~id): no sort. Masses are 2^-40 fixed point (integer
// atomics: the same inputs give the same token on every run). Four launches: three passes over
// the row by ceil(vocab / 2048) blocks per row, then one block per row finishes over at most
// kSampleCandidates candidate keys (or over the whole row when more are needed).
inline constexpr int kMaxTopLogprobs = 20;
inline constexpr int kSampleCandidates = 24576;  // candidate keys per row (finish kernel)

struct SampleRowParams {  // one row's request, in device memory
  float temperature = 1.f, top_p = 1.f, min_p = 0.f;
  float presence = 0.f, frequency = 0.f;
  int32_t top_k = 0;         // 0 = off
  int32_t top_logprobs = 0;  // 0..kMaxTopLogprobs alternatives
  int32_t vocab_limit = 0;   // ids >= vocab_limit are masked (0 = the whole row)
  int32_t pen_offset = 0;    // this row's (token, count) pairs: [pen_offset, + pen_count)
  int32_t pen_count = 0;
  int32_t active = 1;  // 0: the row is skipped (logits untouched, output not written)
  // >= 0: scoring, not sampling: the output reports this id (token = force_token, logprob =
  // log_softmax(z)[force_token], -inf at or past vocab_limit) with the top_logprobs as usual;
  // nothing is drawn (give temperature 0 so that no filter pass runs). -1: sample.
  int32_t force_token = -1;
  uint64_t seed = 0, counter = 0;
  Status validate(int vocab) const;  // host-side; the message names the field
};

enum SampleStatus : int32_t { kSampleOk = 0, kSampleNonFinite = 1, kSampleAllMasked = 2 };

struct SampleRowOut {
  int32_t token = -1;
  float logprob = 0.f;  // log_softmax(z)[token]
  int32_t status = 0;   // SampleStatus
  int32_t n_top = 0;
  int32_t top_ids[kMaxTopLogprobs];
  float top_logprobs[kMaxTopLogprobs];  // descending (ties: lower id first)
};

struct SampleParams {
  float* logits = nullptr;               // [rows, ld] f32; bias / penalties applied IN PLACE
  const SampleRowParams* row = nullptr;  // [rows] (device)
  const int32_t* pen_tokens = nullptr;   // [total pairs] distinct ids per row (device)
  const int32_t* pen_counts = nullptr;   // [total pairs]
  SampleRowOut* out = nullptr;           // [rows] (device)
  float* debug_probs = nullptr;          // [rows, ld] or null: survivor probability, -1 elsewhere
  int rows = 0, vocab = 0, ld = 0;
  void* workspace = nullptr;   // sample_workspace_bytes(rows) of device memory (no init needed;
  size_t workspace_bytes = 0;  // one launch at a time per workspace)
  const float* pen_bias = nullptr;  // [total pairs] or null: logit_bias added per pair (device)
  Status validate() const;
};

// Device workspace for `rows` rows (about 160 KB per row).
size_t sample_workspace_bytes(int rows);

// No host sync, graph-capturable (all per-row inputs live in device memory): kernels
// sample_stats, sample_hist, sample_compact, sample_finish on `stream`.
Status launch_sample(const SampleParams& p, cudaStream_t stream);

// splitmix64 (the draw's generator; shared by host tests and the kernel).
__host__ __device__ inline constexpr uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}
__host__ __device__ inline constexpr uint64_t sample_random64(uint64_t seed, uint64_t counter) {
  return splitmix64(seed ^ splitmix64(counter));
}

}  // namespace gossamer::kern

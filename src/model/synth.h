// Synthetic gpt-oss checkpoints: a complete Hugging Face model directory (config.json,
// safetensors shards + index, tokenizer files) filled with deterministic pseudo-random weights.
//
// Every element is a pure function of (seed, tensor key, element index) (counter-based hashing),
// so the output is identical for any chunking, thread count or shard size, and a tensor can be
// generated piecewise straight into the file in bounded memory.
//
// The MoE expert weights are defined once, as MXFP4 (E2M1 codes + E8M0 block scales). The
// kMxfp4 format writes them packed (*_blocks / *_scales); the kBf16 format writes their exact
// dequantization in HF's transposed layout, so both formats describe the same model.
// The statistics of every tensor are documented in docs/synth.md and synth.cpp.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "model/config.h"
#include "model/safetensors_writer.h"

namespace gossamer {

// How the values of one tensor are generated.
enum class FillKind {
  kNormal,          // bf16: mean + std * z, z ~ approx. N(0,1) (Irwin-Hall, 4 uniforms)
  kUniform,         // bf16: uniform in [lo, hi)
  kMxfp4Blocks,     // u8 [E, rows, cols/32, 16]: two E2M1 codes per byte, low nibble first
  kMxfp4Scales,     // u8 [E, rows, cols/32]: E8M0 exponents
  kMxfp4DenseBf16,  // bf16 [E, cols, rows]: exact dequantization of the two above, transposed
};

struct FillSpec {
  FillKind kind = FillKind::kNormal;
  uint64_t key = 0;            // kNormal/kUniform: tensor key; MXFP4 kinds: key of the codes
  uint64_t scale_key = 0;      // MXFP4 kinds: key of the scales
  float mean = 0, std = 0;     // kNormal
  float lo = 0, hi = 0;        // kUniform
  int64_t rows = 0, cols = 0;  // MXFP4 kinds: per-expert matrix, rows outputs x cols inputs
  double log2_scale = 0;       // MXFP4 kinds: log2 of the typical block scale, see synth.cpp
  int scale_floor = 0;         // MXFP4 kinds: floor(log2_scale)
  double scale_up_prob = 0;    // MXFP4 kinds: P(exponent floor + 1), makes E[scale^2] exact
};

struct SynthTensor {
  TensorSpec spec;
  FillSpec fill;
};

// Every tensor of the checkpoint implied by cfg (names, dtypes, shapes as in weights.h), in file
// order: embed, layer 0..n-1, final norm, lm_head (absent when tie_word_embeddings).
std::vector<SynthTensor> synth_tensors(const ModelConfig& cfg, uint64_t seed);

// Writes elements [begin, end) (row-major in the tensor's own layout) of t to out, which must
// hold (end - begin) * dtype_size bytes. Pure: depends only on t and the element indices.
void synth_fill(const SynthTensor& t, int64_t begin, int64_t end, void* out);

// Counter-based hash (splitmix64-style finaliser of key + counter * golden ratio).
uint64_t synth_hash(uint64_t key, uint64_t counter);
// Key of a named random stream under a seed.
uint64_t synth_key(uint64_t seed, const std::string& name);

struct SynthOptions {
  ModelConfig config;
  uint64_t seed = 0;
  std::string out_dir;
  std::string tokenizer_path;              // optional tokenizer.json to copy in
  int64_t shard_bytes = int64_t{4} << 30;  // max data bytes per shard
  int64_t chunk_bytes = int64_t{8} << 20;  // generation buffer (two of them are live)
  int threads = 0;                         // 0: hardware concurrency
  bool progress = false;                   // progress lines on stderr
  Status validate() const;
};

// Writes the checkpoint into opts.out_dir (created if needed). Files of an earlier synth run
// there (model*.safetensors, the index) are replaced. Returns the first error (naming the file).
Status write_synth_checkpoint(const SynthOptions& opts);

}  // namespace gossamer

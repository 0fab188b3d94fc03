// Synthetic checkpoints: tensor names/shapes (the weights.h layout contract) and the counter-based
// value generators. The streaming, sharded checkpoint writer is in synth_writer.cpp.
//
// Statistics (chosen so activations stay O(1) through all layers of the real shapes):
//  embed_tokens            N(0, 1)              (rows are RMS-normalised before use)
//  *_layernorm, norm       1 + N(0, 0.1)
//  q/k/v/o_proj.weight     N(0, 1/sqrt(fan_in))  -> projections keep unit scale
//  every bias              N(0, 0.1)
//  self_attn.sinks         U(-3, 3)               (both signs, a few units)
//  mlp.router.weight       N(0, 1/sqrt(hidden))  -> router logits ~N(0,1): top-k varies by token
//  lm_head                 N(0, 1/sqrt(hidden))  -> logits ~N(0,1)
//  experts (MXFP4)         codes uniform over all 16 E2M1 codes (E[v^2] = 8.5625); block
//                          exponent floor(c) + B + d with B ~ Bernoulli((4^frac(c) - 1) / 3),
//                          d in {-1,0,0,+1} and c = log2(1/sqrt(fan_in) / (sqrt(8.5625) * 1.25)).
//                          B makes E[4^(floor(c)+B)] = 4^c exactly and the 1.25 undoes the spread
//                          of d (E[4^d] = 1.5625), so the dequantised variance is exactly
//                          1/fan_in in expectation, while block scales span ~4 binades.
// "N" is the Irwin-Hall approximation sqrt(3) * (u1+u2+u3+u4 - 2) (exact mean/variance, |z| <=
// 3.46): cheap and deterministic.
#include "model/synth.h"

#include <cmath>

#include "common/numerics.h"

namespace gossamer {
namespace {

constexpr uint64_t kGolden = 0x9e3779b97f4a7c15ull;
constexpr double kCodeRms = 2.9261749776799064;  // sqrt(E[e2m1^2]) = sqrt(68.5 / 8)
constexpr double kSpreadRms = 1.25;              // sqrt(E[4^d]) for d in {-1,0,0,+1}

uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

uint64_t fnv1a(const std::string& s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char ch : s) h = (h ^ ch) * 0x100000001b3ull;
  return h;
}

// Approximately standard normal from 64 random bits (four 16-bit uniforms, Irwin-Hall).
float approx_normal(uint64_t h) {
  const uint32_t s = static_cast<uint32_t>(h & 0xffff) + static_cast<uint32_t>((h >> 16) & 0xffff) +
                     static_cast<uint32_t>((h >> 32) & 0xffff) + static_cast<uint32_t>(h >> 48);
  // each u_k = (x_k + 0.5) / 65536, so sum u = (s + 2) / 65536
  const double sum = (static_cast<double>(s) + 2.0) / 65536.0;
  return static_cast<float>((sum - 2.0) * 1.7320508075688772);
}

float unit_uniform(uint64_t h) {
  return static_cast<float>((h >> 40) * (1.0 / 16777216.0));
}

// E8M0 byte of block j.
uint8_t scale_byte(const FillSpec& f, int64_t j) {
  const uint64_t h = synth_hash(f.scale_key, static_cast<uint64_t>(j));
  const double u = static_cast<double>(h >> 40) * (1.0 / 16777216.0);
  const int low = static_cast<int>(h & 3);
  const int d = low == 0 ? -1 : (low == 3 ? 1 : 0);
  int e = 127 + f.scale_floor + (u < f.scale_up_prob ? 1 : 0) + d;
  e = e < 1 ? 1 : (e > 254 ? 254 : e);
  return static_cast<uint8_t>(e);
}

// Byte b of the packed codes: byte (b mod 8) of hash(key, b / 8). Its low nibble is element 2b,
// the high nibble element 2b+1 (so element i's code is nibble (i mod 16) of hash(key, i / 16)).
uint8_t code_byte(const FillSpec& f, int64_t b) {
  const uint64_t h = synth_hash(f.key, static_cast<uint64_t>(b >> 3));
  return static_cast<uint8_t>(h >> (8 * (b & 7)));
}

void fill_blocks(const FillSpec& f, int64_t begin, int64_t end, uint8_t* out) {
  for (int64_t b = begin; b < end; ++b) out[b - begin] = code_byte(f, b);
}

void fill_scales(const FillSpec& f, int64_t begin, int64_t end, uint8_t* out) {
  for (int64_t j = begin; j < end; ++j) out[j - begin] = scale_byte(f, j);
}

// Output layout [E, cols, rows]; element (e, c, r) is W_e[r, c] of the MXFP4 matrix whose flat
// index in [E, rows, cols] is i = (e * rows + r) * cols + c.
void fill_dense_experts(const FillSpec& f, int64_t begin, int64_t end, uint16_t* out) {
  const int64_t per_expert = f.rows * f.cols;
  for (int64_t o = begin; o < end; ++o) {
    const int64_t e = o / per_expert;
    const int64_t rem = o - e * per_expert;
    const int64_t c = rem / f.rows, r = rem - c * f.rows;
    const int64_t i = (e * f.rows + r) * f.cols + c;
    const uint8_t byte = code_byte(f, i >> 1);
    const uint8_t code = (i & 1) ? (byte >> 4) : (byte & 0xf);
    const float v = e2m1_to_float(code) * e8m0_to_float(scale_byte(f, i / 32));
    out[o - begin] = float_to_bf16(v);  // exact: 3 significant bits, exponent in range
  }
}

SynthTensor dense(std::string name, std::vector<int64_t> shape, uint64_t seed, float mean,
                  float std) {
  SynthTensor t;
  t.fill.key = synth_key(seed, name);
  t.fill.kind = FillKind::kNormal;
  t.fill.mean = mean;
  t.fill.std = std;
  t.spec = {std::move(name), DType::kBF16, std::move(shape)};
  return t;
}

float inv_sqrt(int64_t n) {
  return static_cast<float>(1.0 / std::sqrt(static_cast<double>(n)));
}

// The expert matrix `base` (e.g. "model.layers.0.mlp.experts.gate_up_proj") with `rows` outputs
// and `cols` inputs, in the config's format; appends its tensors (without the bias).
void add_expert_matrix(const ModelConfig& cfg, uint64_t seed, const std::string& base, int64_t rows,
                       int64_t cols, std::vector<SynthTensor>* out) {
  const int64_t E = cfg.num_local_experts;
  FillSpec f;
  f.key = synth_key(seed, base + ".codes");
  f.scale_key = synth_key(seed, base + ".scales");
  f.rows = rows;
  f.cols = cols;
  f.log2_scale = std::log2(inv_sqrt(cols) / (kCodeRms * kSpreadRms));
  f.scale_floor = static_cast<int>(std::floor(f.log2_scale));
  f.scale_up_prob = (std::exp2(2.0 * (f.log2_scale - f.scale_floor)) - 1.0) / 3.0;
  if (cfg.expert_format == ExpertFormat::kMxfp4) {
    SynthTensor blocks{{base + "_blocks", DType::kU8, {E, rows, cols / 32, 16}}, f};
    blocks.fill.kind = FillKind::kMxfp4Blocks;
    SynthTensor scales{{base + "_scales", DType::kU8, {E, rows, cols / 32}}, f};
    scales.fill.kind = FillKind::kMxfp4Scales;
    out->push_back(std::move(blocks));
    out->push_back(std::move(scales));
  } else {
    SynthTensor d{{base, DType::kBF16, {E, cols, rows}}, f};
    d.fill.kind = FillKind::kMxfp4DenseBf16;
    out->push_back(std::move(d));
  }
}

void add_layer(const ModelConfig& cfg, uint64_t seed, int64_t layer,
               std::vector<SynthTensor>* out) {
  const std::string p = "model.layers." + std::to_string(layer) + ".";
  const int64_t H = cfg.hidden_size, I = cfg.intermediate_size, E = cfg.num_local_experts;
  const int64_t q = cfg.num_attention_heads * cfg.head_dim;
  const int64_t kv = cfg.num_key_value_heads * cfg.head_dim;
  const float kBias = 0.1f;
  out->push_back(dense(p + "input_layernorm.weight", {H}, seed, 1.0f, 0.1f));
  const std::pair<const char*, int64_t> projs[] = {{"q_proj", q}, {"k_proj", kv}, {"v_proj", kv}};
  for (const auto& [name, rows] : projs) {
    out->push_back(dense(p + "self_attn." + name + ".weight", {rows, H}, seed, 0, inv_sqrt(H)));
    out->push_back(dense(p + "self_attn." + name + ".bias", {rows}, seed, 0, kBias));
  }
  out->push_back(dense(p + "self_attn.o_proj.weight", {H, q}, seed, 0, inv_sqrt(q)));
  out->push_back(dense(p + "self_attn.o_proj.bias", {H}, seed, 0, kBias));
  SynthTensor sinks = dense(p + "self_attn.sinks", {cfg.num_attention_heads}, seed, 0, 0);
  sinks.fill.kind = FillKind::kUniform;
  sinks.fill.lo = -3.0f;
  sinks.fill.hi = 3.0f;
  out->push_back(std::move(sinks));
  out->push_back(dense(p + "post_attention_layernorm.weight", {H}, seed, 1.0f, 0.1f));
  out->push_back(dense(p + "mlp.router.weight", {E, H}, seed, 0, inv_sqrt(H)));
  out->push_back(dense(p + "mlp.router.bias", {E}, seed, 0, kBias));
  add_expert_matrix(cfg, seed, p + "mlp.experts.gate_up_proj", 2 * I, H, out);
  out->push_back(dense(p + "mlp.experts.gate_up_proj_bias", {E, 2 * I}, seed, 0, kBias));
  add_expert_matrix(cfg, seed, p + "mlp.experts.down_proj", H, I, out);
  out->push_back(dense(p + "mlp.experts.down_proj_bias", {E, H}, seed, 0, kBias));
}

}  // namespace

uint64_t synth_hash(uint64_t key, uint64_t counter) {
  return mix64(key + (counter + 1) * kGolden);
}

uint64_t synth_key(uint64_t seed, const std::string& name) {
  return mix64(mix64(seed ^ kGolden) ^ fnv1a(name));
}

std::vector<SynthTensor> synth_tensors(const ModelConfig& cfg, uint64_t seed) {
  std::vector<SynthTensor> out;
  const int64_t H = cfg.hidden_size, V = cfg.vocab_size;
  out.push_back(dense("model.embed_tokens.weight", {V, H}, seed, 0, 1.0f));
  for (int64_t l = 0; l < cfg.num_hidden_layers; ++l) add_layer(cfg, seed, l, &out);
  out.push_back(dense("model.norm.weight", {H}, seed, 1.0f, 0.1f));
  if (!cfg.tie_word_embeddings)
    out.push_back(dense("lm_head.weight", {V, H}, seed, 0, inv_sqrt(H)));
  return out;
}

void synth_fill(const SynthTensor& t, int64_t begin, int64_t end, void* out) {
  const FillSpec& f = t.fill;
  switch (f.kind) {
    case FillKind::kNormal: {
      auto* o = static_cast<uint16_t*>(out);
      for (int64_t i = begin; i < end; ++i) {
        const float z = approx_normal(synth_hash(f.key, static_cast<uint64_t>(i)));
        o[i - begin] = float_to_bf16(f.mean + f.std * z);
      }
      return;
    }
    case FillKind::kUniform: {
      auto* o = static_cast<uint16_t*>(out);
      for (int64_t i = begin; i < end; ++i) {
        const float u = unit_uniform(synth_hash(f.key, static_cast<uint64_t>(i)));
        o[i - begin] = float_to_bf16(f.lo + (f.hi - f.lo) * u);
      }
      return;
    }
    case FillKind::kMxfp4Blocks:
      fill_blocks(f, begin, end, static_cast<uint8_t*>(out));
      return;
    case FillKind::kMxfp4Scales:
      fill_scales(f, begin, end, static_cast<uint8_t*>(out));
      return;
    case FillKind::kMxfp4DenseBf16:
      fill_dense_experts(f, begin, end, static_cast<uint16_t*>(out));
      return;
  }
}

}  // namespace gossamer

// Synthetic checkpoints: tensor names/shapes (the weights.h layout contract), the counter-based
// value generators, and the streaming, sharded checkpoint writer.
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

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <future>
#include <nlohmann/json.hpp>

#include "common/numerics.h"
#include "common/thread_pool.h"

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

// ---- writing ----------------------------------------------------------------------------------
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

// Progress lines on stderr: bytes written / total, rate, ETA. At most one line per second.
class Progress {
 public:
  Progress(bool enabled, int64_t total) : enabled_(enabled), total_(total) {}
  void add(int64_t n) {
    done_ += n;
    if (!enabled_) return;
    const auto now = Clock::now();
    if (done_ < total_ && now - last_ < std::chrono::seconds(1)) return;
    last_ = now;
    const double secs = std::chrono::duration<double>(now - start_).count();
    const double rate = secs > 0 ? done_ / secs : 0.0;
    const double eta = rate > 0 ? (total_ - done_) / rate : 0.0;
    std::fprintf(stderr, "synth: %.2f / %.2f GB (%.1f%%), %.0f MB/s, ETA %.0f s\n", done_ / 1e9,
                 total_ / 1e9, total_ > 0 ? 100.0 * done_ / total_ : 100.0, rate / 1e6, eta);
  }

 private:
  bool enabled_;
  int64_t total_, done_ = 0;
  Clock::time_point start_ = Clock::now(), last_ = start_;
};

// Generation buffers and the writer of the previous chunk (generation of chunk k+1 overlaps the
// write of chunk k). Declared before the future so the future (which may still use a buffer) is
// destroyed first.
struct Pipeline {
  ThreadPool* pool;
  Progress* progress;
  int64_t chunk_bytes;
  std::vector<uint8_t> buf[2];
  int next = 0;
  std::future<Status> pending;
};

Status write_tensor(const SynthTensor& t, SafetensorsFileWriter* w, Pipeline* p) {
  const int64_t es = dtype_size(t.spec.dtype);
  const int64_t n = t.spec.numel();
  const int64_t chunk = std::max<int64_t>(1, p->chunk_bytes / es);
  for (int64_t begin = 0; begin < n; begin += chunk) {
    const int64_t count = std::min(chunk, n - begin);
    std::vector<uint8_t>& buf = p->buf[p->next];
    p->next ^= 1;
    buf.resize(static_cast<size_t>(count * es));
    uint8_t* data = buf.data();
    p->pool->parallel_for(
        count, [&](int64_t a, int64_t b) { synth_fill(t, begin + a, begin + b, data + a * es); });
    if (p->pending.valid()) GS_RETURN_IF_ERROR(p->pending.get());
    const size_t len = buf.size();
    p->pending = std::async(std::launch::async, [w, data, len] { return w->append(data, len); });
    p->progress->add(count * es);
  }
  return Status::Ok();
}

Status write_shard(const std::string& path, const std::vector<SynthTensor>& tensors,
                   const std::vector<size_t>& items, Pipeline* p) {
  std::vector<TensorSpec> specs;
  for (size_t i : items) specs.push_back(tensors[i].spec);
  GS_ASSIGN_OR_RETURN(SafetensorsFileWriter w,
                      SafetensorsFileWriter::open(path, std::move(specs), {{"format", "pt"}}));
  Status s;
  for (size_t i : items) {
    s = write_tensor(tensors[i], &w, p);
    if (!s.ok()) break;
  }
  if (p->pending.valid()) {  // always drain: the async append uses w and a buffer
    Status last = p->pending.get();
    if (s.ok()) s = last;
  }
  GS_RETURN_IF_ERROR(s.With("writing " + path));
  return w.finish();
}

Status write_text(const fs::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  out.close();
  if (!out) return IoError(path.string() + ": cannot write");
  return Status::Ok();
}

constexpr const char* kMarker = "gossamer_synth.json";  // marks a directory synth wrote

// Removes what an earlier run may have left (other shard counts, partial files, the index, and
// config.json, which is rewritten last as the completion marker). Refuses to delete checkpoint
// files from a directory that synth did not write (e.g. a real model snapshot).
Status remove_stale(const fs::path& dir) {
  std::error_code ec;
  std::vector<fs::path> stale;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string n = entry.path().filename().string();
    const bool shard = n.rfind("model", 0) == 0 &&
                       (n.ends_with(".safetensors") || n.ends_with(".safetensors.partial"));
    if (shard || n == "model.safetensors.index.json" || n == "config.json") {
      stale.push_back(entry.path());
    }
  }
  if (ec) return IoError(dir.string() + ": cannot list: " + ec.message());
  if (!stale.empty() && !fs::exists(dir / kMarker, ec)) {
    return InvalidArgument(dir.string() + " holds a checkpoint (" +
                           stale.front().filename().string() +
                           ") not written by gossamer synth; refusing to overwrite it");
  }
  for (const fs::path& p : stale) {
    if (!fs::remove(p, ec))
      return IoError(p.string() + ": cannot remove stale file: " + ec.message());
  }
  return Status::Ok();
}

// Copies src to dst, replacing dst even when it (or src) is read-only.
Status replace_file(const fs::path& src, const fs::path& dst) {
  std::error_code ec;
  fs::remove(dst, ec);
  fs::copy_file(src, dst, ec);
  if (!ec)
    fs::permissions(dst, fs::perms::owner_read | fs::perms::owner_write, fs::perm_options::add, ec);
  if (ec) return IoError("copying " + src.string() + " to " + dst.string() + ": " + ec.message());
  return Status::Ok();
}

Status copy_tokenizer(const std::string& tokenizer, const fs::path& out) {
  std::error_code ec;
  const fs::path src(tokenizer);
  if (!fs::is_regular_file(src, ec)) return NotFound(tokenizer + ": tokenizer file not found");
  GS_RETURN_IF_ERROR(replace_file(src, out / "tokenizer.json"));
  const fs::path cfg = src.parent_path() / "tokenizer_config.json";
  if (fs::is_regular_file(cfg, ec))
    GS_RETURN_IF_ERROR(replace_file(cfg, out / "tokenizer_config.json"));
  return Status::Ok();
}

// generation_config.json as in the real snapshots (only when the real special-token ids exist).
std::string generation_config_json() {
  const nlohmann::json j = {{"bos_token_id", 199998},
                            {"do_sample", true},
                            {"eos_token_id", {200002, 199999, 200012}},
                            {"pad_token_id", 199999}};
  return j.dump(2) + "\n";
}

}  // namespace

Status SynthOptions::validate() const {
  GS_RETURN_IF_ERROR(config.validate().With("synth config"));
  if (config.hidden_size % 32 != 0 || config.intermediate_size % 32 != 0) {
    return InvalidArgument(
        "synth: hidden_size and intermediate_size must be multiples of 32 "
        "(synthetic experts are defined in MXFP4 blocks of 32)");
  }
  if (out_dir.empty()) return InvalidArgument("synth: no output directory given");
  std::error_code ec;
  if (!tokenizer_path.empty() && !fs::is_regular_file(tokenizer_path, ec)) {
    return NotFound("synth: tokenizer file not found: " + tokenizer_path);
  }
  if (shard_bytes <= 0) return InvalidArgument("synth: shard size must be > 0");
  if (chunk_bytes < 64 || chunk_bytes > (int64_t{1} << 30)) {
    return InvalidArgument("synth: chunk size must be in [64 B, 1 GiB]");
  }
  return Status::Ok();
}

Status write_synth_checkpoint(const SynthOptions& opts) {
  GS_RETURN_IF_ERROR(opts.validate());
  const fs::path out(opts.out_dir);
  std::error_code ec;
  fs::create_directories(out, ec);
  if (ec || !fs::is_directory(out)) {
    return IoError(opts.out_dir + ": cannot create output directory: " + ec.message());
  }
  GS_RETURN_IF_ERROR(remove_stale(out));
  const nlohmann::json marker = {{"seed", opts.seed}, {"shard_bytes", opts.shard_bytes}};
  GS_RETURN_IF_ERROR(write_text(out / kMarker, marker.dump(2) + "\n"));
  const std::vector<SynthTensor> tensors = synth_tensors(opts.config, opts.seed);
  std::vector<TensorSpec> specs;
  for (const SynthTensor& t : tensors) specs.push_back(t.spec);
  GS_ASSIGN_OR_RETURN(ShardPlan plan, plan_shards(specs, opts.shard_bytes));
  ThreadPool pool(opts.threads);
  Progress progress(opts.progress, plan.total_bytes);
  Pipeline pipe{&pool, &progress, opts.chunk_bytes, {}, 0, {}};
  for (size_t k = 0; k < plan.items.size(); ++k) {
    GS_RETURN_IF_ERROR(
        write_shard((out / plan.file_names[k]).string(), tensors, plan.items[k], &pipe));
  }
  if (plan.items.size() > 1) {
    GS_RETURN_IF_ERROR(
        write_text(out / "model.safetensors.index.json", shard_index_json(specs, plan)));
  }
  if (opts.config.vocab_size > 200012) {
    GS_RETURN_IF_ERROR(write_text(out / "generation_config.json", generation_config_json()));
  }
  if (!opts.tokenizer_path.empty()) GS_RETURN_IF_ERROR(copy_tokenizer(opts.tokenizer_path, out));
  // config.json last: its presence means the weights are complete.
  return write_text(out / "config.json", config_to_json(opts.config));
}

}  // namespace gossamer

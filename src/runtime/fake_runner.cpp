#include "runtime/fake_runner.h"

#include <algorithm>
#include <string>
#include <thread>

namespace gossamer {

namespace {

uint64_t mix(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ULL;
  x ^= x >> 33;
  return x;
}

uint64_t hash_tokens(std::span<const int32_t> t) {
  uint64_t h = 0x1234567;
  for (int32_t v : t) h = mix(h ^ static_cast<uint32_t>(v)) + 0x9e37;
  return h;
}

void logits_from_hashes(uint64_t h_full, uint64_t h_win, std::span<float> out) {
  const uint64_t seed = mix(h_full * 31 + h_win);
  for (size_t v = 0; v < out.size(); ++v) {
    out[v] = 8.0f * static_cast<float>(mix(seed + v) >> 40) / 16777216.0f;  // [0, 8)
  }
}

}  // namespace

ModelConfig fake_model_config(int64_t vocab, int64_t sliding_window, int64_t max_len) {
  ModelConfig c;
  c.vocab_size = vocab;
  c.hidden_size = 64;
  c.intermediate_size = 64;
  c.num_hidden_layers = 2;
  c.num_attention_heads = 2;
  c.num_key_value_heads = 1;
  c.head_dim = 32;
  c.num_local_experts = 4;
  c.experts_per_token = 2;
  c.sliding_window = sliding_window;
  c.max_position_embeddings = max_len;
  c.initial_context_length = max_len;
  c.rope_theta = 150000;
  c.rms_norm_eps = 1e-5;
  c.swiglu_limit = 7;
  c.layer_types = {LayerType::kSlidingAttention, LayerType::kFullAttention};
  return c;
}

void fake_reference_logits(std::span<const int32_t> seq, int64_t sliding_window,
                           std::span<float> out) {
  const size_t w = std::min<size_t>(seq.size(), static_cast<size_t>(sliding_window));
  logits_from_hashes(hash_tokens(seq), hash_tokens(seq.subspan(seq.size() - w)), out);
}

FakeRunner::FakeRunner(ModelConfig cfg, KvCacheSpec spec, std::chrono::microseconds step_delay)
    : cfg_(std::move(cfg)),
      spec_(spec),
      delay_(step_delay),
      full_kv_(spec.num_blocks_full * spec.block_size, -1),
      sliding_kv_(spec.num_blocks_sliding * spec.block_size, -1) {}

Result<int32_t> FakeRunner::read(bool sliding, std::span<const int32_t> table, int64_t pos) const {
  const int64_t b = pos / spec_.block_size;
  const int64_t nblocks = sliding ? spec_.num_blocks_sliding : spec_.num_blocks_full;
  if (b >= (int64_t)table.size() || table[b] < 0 || table[b] >= nblocks) {
    return Internal(std::string(sliding ? "sliding" : "full") + " block table has no block for " +
                    "position " + std::to_string(pos));
  }
  const int32_t v =
      (sliding ? sliding_kv_ : full_kv_)[table[b] * spec_.block_size + pos % spec_.block_size];
  if (v < 0) return Internal("position " + std::to_string(pos) + " was never written");
  return v;
}

Status FakeRunner::write(bool sliding, std::span<const int32_t> table, int64_t pos, int32_t tok) {
  const int64_t b = pos / spec_.block_size;
  const int64_t nblocks = sliding ? spec_.num_blocks_sliding : spec_.num_blocks_full;
  if (b >= (int64_t)table.size() || table[b] < 0 || table[b] >= nblocks) {
    return Internal(std::string(sliding ? "sliding" : "full") + " block table has no block to " +
                    "write position " + std::to_string(pos));
  }
  (sliding ? sliding_kv_ : full_kv_)[table[b] * spec_.block_size + pos % spec_.block_size] = tok;
  return Status::Ok();
}

Status FakeRunner::step(std::span<const SeqChunk> chunks, StepOutput* out) {
  ++steps_;
  if (delay_.count() > 0) std::this_thread::sleep_for(delay_);
  const int64_t vocab = cfg_.vocab_size;
  const int64_t w = cfg_.sliding_window;
  for (const SeqChunk& c : chunks) {
    for (size_t i = 0; i < c.tokens.size(); ++i) {
      GS_RETURN_IF_ERROR(write(false, c.blocks_full, c.pos0 + (int64_t)i, c.tokens[i]));
      GS_RETURN_IF_ERROR(write(true, c.blocks_sliding, c.pos0 + (int64_t)i, c.tokens[i]));
    }
  }
  out->logits.clear();
  out->rows = 0;
  std::vector<int32_t> seq, win;
  for (const SeqChunk& c : chunks) {
    if (c.logits == LogitsMode::kNone || c.tokens.empty()) continue;
    const int64_t last = c.pos0 + (int64_t)c.tokens.size() - 1;
    const int64_t first_row = c.logits == LogitsMode::kAll ? c.pos0 : last;
    for (int64_t p = first_row; p <= last; ++p) {
      seq.clear();
      win.clear();
      for (int64_t q = 0; q <= p; ++q) {
        GS_ASSIGN_OR_RETURN(int32_t t, read(false, c.blocks_full, q));
        seq.push_back(t);
      }
      for (int64_t q = std::max<int64_t>(0, p - w + 1); q <= p; ++q) {
        GS_ASSIGN_OR_RETURN(int32_t t, read(true, c.blocks_sliding, q));
        win.push_back(t);
      }
      out->logits.resize((out->rows + 1) * vocab);
      logits_from_hashes(hash_tokens(seq), hash_tokens(win),
                         std::span<float>(out->logits).subspan(out->rows * vocab, vocab));
      ++out->rows;
    }
  }
  return Status::Ok();
}

Status FakeRunner::copy_block(bool sliding_pool, int32_t src, int32_t dst) {
  auto& kv = sliding_pool ? sliding_kv_ : full_kv_;
  const int64_t bs = spec_.block_size;
  if (src < 0 || dst < 0 || (src + 1) * bs > (int64_t)kv.size() ||
      (dst + 1) * bs > (int64_t)kv.size()) {
    return InvalidArgument("copy_block: block id out of range");
  }
  std::copy_n(kv.begin() + src * bs, bs, kv.begin() + dst * bs);
  return Status::Ok();
}

}  // namespace gossamer

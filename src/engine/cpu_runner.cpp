#include "engine/cpu_runner.h"

#include <algorithm>
#include <filesystem>

#include "common/thread_pool.h"
#include "engine/cpu_forward.h"

namespace gossamer {
namespace {

using cpu::KvPool;
using cpu::TokenSlot;

class CpuModelRunner final : public ModelRunner {
 public:
  CpuModelRunner(std::shared_ptr<LoadedModel> model, cpu::PreparedModel prepared, KvCacheSpec spec,
                 const CpuRunnerOptions& opts)
      : model_(std::move(model)),
        prepared_(std::move(prepared)),
        spec_(spec),
        pool_(opts.threads),
        dump_dir_(opts.dump_dir),
        kv_bf16_(opts.kv_bf16) {
    const ModelConfig& c = model_->config;
    kv_full_ = KvPool{spec.num_blocks_full,
                      prepared_.n_full,
                      spec.block_size,
                      c.num_key_value_heads,
                      c.head_dim,
                      {},
                      {}};
    kv_sliding_ = KvPool{spec.num_blocks_sliding,
                         prepared_.n_sliding,
                         spec.block_size,
                         c.num_key_value_heads,
                         c.head_dim,
                         {},
                         {}};
    kv_full_.allocate();
    kv_sliding_.allocate();
  }

  const ModelConfig& config() const override { return model_->config; }
  const KvCacheSpec& kv_spec() const override { return spec_; }
  std::string describe() const override {
    return "cpu-reference fp32 (" + std::to_string(pool_.size()) + " threads, experts " +
           (model_->config.expert_format == ExpertFormat::kMxfp4 ? "mxfp4" : "bf16") +
           " dequantized on the fly)";
  }

  Status step(std::span<const SeqChunk> chunks, StepOutput* out) override;
  Status copy_block(bool sliding_pool, int32_t src, int32_t dst) override;

 private:
  Status check_chunk(const SeqChunk& ch, size_t index) const;
  Status check_table(std::span<const int32_t> table, int64_t first_pos, int64_t end_pos,
                     int64_t num_blocks, const char* pool, size_t index) const;
  Status final_logits(std::span<const SeqChunk> chunks, const std::vector<float>& x,
                      const cpu::Dumper& dumper, StepOutput* out);

  std::shared_ptr<LoadedModel> model_;
  cpu::PreparedModel prepared_;
  KvCacheSpec spec_;
  ThreadPool pool_;
  std::string dump_dir_;
  bool kv_bf16_ = false;
  int64_t steps_ = 0;
  KvPool kv_full_, kv_sliding_;
};

Status CpuModelRunner::check_table(std::span<const int32_t> table, int64_t first_pos,
                                   int64_t end_pos, int64_t num_blocks, const char* pool,
                                   size_t index) const {
  const int64_t bs = spec_.block_size;
  for (int64_t b = first_pos / bs; b <= (end_pos - 1) / bs; ++b) {
    if (b >= static_cast<int64_t>(table.size())) {
      return InvalidArgument("chunk " + std::to_string(index) + ": " + pool + " block table has " +
                             std::to_string(table.size()) + " entries, position " +
                             std::to_string(end_pos - 1) + " needs " + std::to_string(b + 1));
    }
    const int32_t phys = table[static_cast<size_t>(b)];
    if (phys < 0 || phys >= num_blocks) {
      return InvalidArgument("chunk " + std::to_string(index) + ": " + pool +
                             " block table entry " + std::to_string(b) + " = " +
                             std::to_string(phys) + " is not a block of the pool (0.." +
                             std::to_string(num_blocks - 1) + ")");
    }
  }
  return Status::Ok();
}

Status CpuModelRunner::check_chunk(const SeqChunk& ch, size_t index) const {
  const ModelConfig& c = model_->config;
  const std::string where = "chunk " + std::to_string(index);
  if (ch.tokens.empty()) return InvalidArgument(where + ": no tokens");
  if (ch.pos0 < 0) return InvalidArgument(where + ": negative pos0");
  for (size_t i = 0; i < ch.tokens.size(); ++i) {
    if (ch.tokens[i] < 0 || ch.tokens[i] >= c.vocab_size) {
      return InvalidArgument(where + ": token " + std::to_string(i) + " id " +
                             std::to_string(ch.tokens[i]) + " outside the vocabulary [0, " +
                             std::to_string(c.vocab_size) + ")");
    }
  }
  const int64_t end = ch.pos0 + static_cast<int64_t>(ch.tokens.size());
  if (prepared_.n_full > 0) {
    GS_RETURN_IF_ERROR(check_table(ch.blocks_full, 0, end, spec_.num_blocks_full, "full", index));
  }
  if (prepared_.n_sliding > 0) {
    const int64_t first = std::max<int64_t>(0, ch.pos0 - c.sliding_window + 1);
    GS_RETURN_IF_ERROR(
        check_table(ch.blocks_sliding, first, end, spec_.num_blocks_sliding, "sliding", index));
  }
  return Status::Ok();
}

Status CpuModelRunner::step(std::span<const SeqChunk> chunks, StepOutput* out) {
  if (out == nullptr) return InvalidArgument("step: null output");
  out->logits.clear();
  out->rows = 0;
  for (size_t i = 0; i < chunks.size(); ++i) GS_RETURN_IF_ERROR(check_chunk(chunks[i], i));
  const ModelConfig& c = model_->config;
  std::vector<TokenSlot> tokens;
  for (const SeqChunk& ch : chunks) {
    for (size_t i = 0; i < ch.tokens.size(); ++i) {
      tokens.push_back({ch.pos0 + static_cast<int64_t>(i), &ch});
    }
  }
  if (tokens.empty()) return Status::Ok();
  cpu::Dumper dumper{dump_dir_, steps_++};
  if (dumper.enabled()) {
    std::error_code ec;
    std::filesystem::create_directories(dump_dir_, ec);
    if (ec) return IoError("cannot create dump dir " + dump_dir_ + ": " + ec.message());
  }
  const int64_t T = static_cast<int64_t>(tokens.size()), hd = c.hidden_size;
  std::vector<float> x(static_cast<size_t>(T * hd));  // [T, hidden] residual stream
  {
    size_t t = 0;
    for (const SeqChunk& ch : chunks) {
      for (int32_t id : ch.tokens) prepared_.embed.row_f32(id, &x[t++ * hd]);
    }
  }
  cpu::ForwardCtx ctx{&c, &prepared_, &pool_, &kv_full_, &kv_sliding_, tokens, &dumper, kv_bf16_};
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    GS_RETURN_IF_ERROR(cpu::attention_block(ctx, l, x));
    GS_RETURN_IF_ERROR(cpu::moe_block(ctx, l, x));
  }
  return final_logits(chunks, x, dumper, out);
}

Status CpuModelRunner::final_logits(std::span<const SeqChunk> chunks, const std::vector<float>& x,
                                    const cpu::Dumper& dumper, StepOutput* out) {
  const ModelConfig& c = model_->config;
  const int64_t hd = c.hidden_size;
  std::vector<int64_t> rows;  // token indices (into the flattened batch) that want logits
  int64_t t0 = 0;
  for (const SeqChunk& ch : chunks) {
    const int64_t n = static_cast<int64_t>(ch.tokens.size());
    if (ch.logits == LogitsMode::kAll) {
      for (int64_t i = 0; i < n; ++i) rows.push_back(t0 + i);
    } else if (ch.logits == LogitsMode::kLast) {
      rows.push_back(t0 + n - 1);
    }
    t0 += n;
  }
  const int64_t R = static_cast<int64_t>(rows.size());
  std::vector<float> h(static_cast<size_t>(R * hd));  // [R, hidden]
  for (int64_t r = 0; r < R; ++r) {
    cpu::rmsnorm(&x[rows[r] * hd], prepared_.final_norm.data(), hd,
                 static_cast<float>(c.rms_norm_eps), &h[r * hd]);
  }
  GS_RETURN_IF_ERROR(dumper.dump(-1, "final_norm", h.data(), {R, hd}));
  out->logits.assign(static_cast<size_t>(R * c.vocab_size), 0.0f);
  out->rows = R;
  if (R > 0) cpu::linear(pool_, prepared_.lm_head, {}, h.data(), R, out->logits.data());
  GS_RETURN_IF_ERROR(dumper.dump(-1, "logits", out->logits.data(), {R, c.vocab_size}));
  return Status::Ok();
}

Status CpuModelRunner::copy_block(bool sliding_pool, int32_t src, int32_t dst) {
  KvPool& p = sliding_pool ? kv_sliding_ : kv_full_;
  if (src < 0 || src >= p.num_blocks || dst < 0 || dst >= p.num_blocks) {
    return InvalidArgument(std::string("copy_block: ") + (sliding_pool ? "sliding" : "full") +
                           " pool has blocks 0.." + std::to_string(p.num_blocks - 1) +
                           ", got src=" + std::to_string(src) + " dst=" + std::to_string(dst));
  }
  if (src == dst) return Status::Ok();
  const int64_t n = p.layers * p.block_size * p.kv_heads * p.head_dim;
  std::copy_n(p.k.begin() + p.offset(src, 0, 0), n, p.k.begin() + p.offset(dst, 0, 0));
  std::copy_n(p.v.begin() + p.offset(src, 0, 0), n, p.v.begin() + p.offset(dst, 0, 0));
  return Status::Ok();
}

}  // namespace

int64_t cpu_kv_bytes_per_block(const ModelConfig& cfg, int64_t block_size, bool sliding) {
  int64_t layers = 0;
  for (LayerType t : cfg.layer_types) {
    layers += (t == LayerType::kSlidingAttention) == sliding ? 1 : 0;
  }
  return 2 * layers * block_size * cfg.num_key_value_heads * cfg.head_dim *
         static_cast<int64_t>(sizeof(float));
}

Result<std::unique_ptr<ModelRunner>> make_cpu_runner(std::shared_ptr<LoadedModel> model,
                                                     KvCacheSpec spec, int threads) {
  CpuRunnerOptions o;
  o.threads = threads;
  return make_cpu_runner(std::move(model), spec, o);
}

Result<std::unique_ptr<ModelRunner>> make_cpu_runner(std::shared_ptr<LoadedModel> model,
                                                     KvCacheSpec spec,
                                                     const CpuRunnerOptions& options) {
  if (!model) return InvalidArgument("make_cpu_runner: null model");
  if (spec.block_size <= 0 || spec.num_blocks_full < 0 || spec.num_blocks_sliding < 0) {
    return InvalidArgument("make_cpu_runner: block_size must be > 0 and block counts >= 0");
  }
  GS_ASSIGN_OR_RETURN(cpu::PreparedModel prepared,
                      cpu::prepare_model(model->config, model->weights));
  if (prepared.n_full > 0 && spec.num_blocks_full == 0) {
    return InvalidArgument(
        "make_cpu_runner: the model has full-attention layers but "
        "num_blocks_full is 0");
  }
  if (prepared.n_sliding > 0 && spec.num_blocks_sliding == 0) {
    return InvalidArgument(
        "make_cpu_runner: the model has sliding-window layers but "
        "num_blocks_sliding is 0");
  }
  std::unique_ptr<ModelRunner> r =
      std::make_unique<CpuModelRunner>(std::move(model), std::move(prepared), spec, options);
  return r;
}

}  // namespace gossamer

// CudaModelRunner device sampling: SeqChunk::sampling rows are sampled by kern::launch_sample
// (kernels/sample) right after the forward that produced their logits (after the decode graph
// replay, on the same stream); only SampleRowOut records come back. Rows without sampling have
// their logits rows copied to StepOutput::logits as before.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "engine/cuda/runner_impl.h"
#include "kernels/common/cuda_check.h"
#include "kernels/sample/params.h"

namespace gossamer::cudarun {

// A pinned host array and its device twin, grown (never shrunk) on demand.
template <class T>
struct Mirror {
  T* host = nullptr;
  T* dev = nullptr;
  size_t cap = 0;
  Status reserve(size_t n, const char* what) {
    if (n <= cap) return Status::Ok();
    release();
    const size_t c = std::max<size_t>(n, 2 * cap);
    GS_RETURN_IF_ERROR(kern::cuda_status(cudaMallocHost(&host, c * sizeof(T)), what));
    GS_RETURN_IF_ERROR(kern::cuda_status(cudaMalloc(&dev, c * sizeof(T)), what));
    cap = c;
    return Status::Ok();
  }
  void release() {
    if (host) cudaFreeHost(host);
    if (dev) cudaFree(dev);
    host = nullptr, dev = nullptr, cap = 0;
  }
};

struct SamplingState {
  // Per logits row of the step: copied to host row `index`, or sampled / scored on the device
  // (out->sampled / out->scored entry `index`).
  enum class Kind : uint8_t { kHost, kSampled, kScored };
  struct Dest {
    Kind kind;
    int64_t index;
  };
  std::vector<Dest> dest;
  int64_t device_rows = 0, scored_rows = 0;
  int64_t pen_pairs = 0;               // penalty pairs of the step (pen: tokens, then counts)
  Mirror<kern::SampleRowParams> rows;  // [logits rows of the step]
  Mirror<kern::SampleRowOut> outs;     // [logits rows of the step]
  Mirror<int32_t> pen;                 // tokens then counts, [2 * pairs]
  Mirror<float> bias;                  // [pairs] logit_bias per pair (when any row has one)
  bool any_bias = false;
  void* ws = nullptr;  // kern::sample_workspace_bytes(rows) (device)
  size_t ws_bytes = 0;
  Status reserve_ws(int64_t n_rows) {
    const size_t need = kern::sample_workspace_bytes(static_cast<int>(n_rows));
    if (need <= ws_bytes) return Status::Ok();
    if (ws) cudaFree(ws);
    ws = nullptr, ws_bytes = 0;
    GS_RETURN_IF_ERROR(kern::cuda_status(cudaMalloc(&ws, need), "sampling workspace"));
    ws_bytes = need;
    return Status::Ok();
  }
  ~SamplingState() {
    rows.release();
    outs.release();
    pen.release();
    bias.release();
    if (ws) cudaFree(ws);
  }
};

void SamplingStateDeleter::operator()(SamplingState* s) const {
  delete s;
}

namespace {

// The fields a sampled and a scored row share: top_logprobs and vocab_limit (0: the whole row),
// out-of-range values kept out of range so that SampleRowParams::validate names them.
void set_logprobs_and_limit(int64_t top_logprobs, int64_t vocab_limit, int64_t vocab,
                            kern::SampleRowParams* r) {
  r->top_logprobs = static_cast<int32_t>(std::clamp<int64_t>(top_logprobs, -1, 1000));
  r->vocab_limit = static_cast<int32_t>(vocab_limit >= vocab ? 0 : vocab_limit);
  if (vocab_limit < 0) r->vocab_limit = -1;
}

// DeviceSampling -> the kernel's row record (validated; the message names chunk and field).
Result<kern::SampleRowParams> row_params(const DeviceSampling& d, size_t ci, int64_t vocab,
                                         int32_t pen_offset) {
  const std::string ctx = "step: chunk " + std::to_string(ci) + ": ";
  if (d.penalty_tokens.size() != d.penalty_counts.size() ||
      (!d.penalty_bias.empty() && d.penalty_bias.size() != d.penalty_tokens.size())) {
    return InvalidArgument(ctx +
                           "sampling penalty_tokens, penalty_counts and penalty_bias "
                           "differ in length");
  }
  for (float b : d.penalty_bias) {
    if (!std::isfinite(b)) return InvalidArgument(ctx + "sampling logit_bias is not finite");
  }
  if (d.top_k < 0 || d.top_k > vocab) return InvalidArgument(ctx + "sampling top_k out of range");
  kern::SampleRowParams r;
  r.temperature = static_cast<float>(d.temperature);
  r.top_p = static_cast<float>(d.top_p);
  r.min_p = static_cast<float>(d.min_p);
  r.presence = static_cast<float>(d.presence_penalty);
  r.frequency = static_cast<float>(d.frequency_penalty);
  r.top_k = static_cast<int32_t>(d.top_k);
  set_logprobs_and_limit(d.top_logprobs, d.vocab_limit, vocab, &r);
  r.pen_offset = pen_offset;
  r.pen_count = static_cast<int32_t>(d.penalty_tokens.size());
  r.seed = d.seed;
  r.counter = d.counter;
  GS_RETURN_IF_ERROR(r.validate(static_cast<int>(vocab)).With(ctx.substr(0, ctx.size() - 2)));
  for (size_t j = 0; j < d.penalty_tokens.size(); ++j) {
    if (d.penalty_tokens[j] < 0 || d.penalty_tokens[j] >= vocab) {
      return InvalidArgument(ctx + "sampling penalty token " + std::to_string(j) + " id " +
                             std::to_string(d.penalty_tokens[j]) + " outside the vocabulary");
    }
  }
  return r;
}

// Row j of a scored chunk: a greedy row that reports targets[j] instead of drawing.
Result<kern::SampleRowParams> score_params(const DeviceScoring& d, size_t ci, size_t j,
                                           int64_t vocab) {
  kern::SampleRowParams r;
  r.temperature = 0.f;
  set_logprobs_and_limit(d.top_logprobs, d.vocab_limit, vocab, &r);
  r.force_token = std::clamp<int32_t>(d.targets[j], -1, static_cast<int32_t>(vocab));
  Status st = r.validate(static_cast<int>(vocab));
  if (!st.ok())
    return st.With("step: chunk " + std::to_string(ci) + " scored row " + std::to_string(j));
  return r;
}

}  // namespace

}  // namespace gossamer::cudarun

namespace gossamer {

bool CudaModelRunner::samples_on_device() const {
  return impl_->opts.device_sampling;
}

namespace cudarun {
namespace {

// The step's device rows as they are collected: row params, penalty lists (tokens, counts,
// logit_bias aligned with tokens).
struct RowLists {
  std::vector<kern::SampleRowParams> rp;
  std::vector<int32_t> toks, counts;
  std::vector<float> bias;
  Status add_sampled(const DeviceSampling& d, size_t ci, int64_t V) {
    GS_ASSIGN_OR_RETURN(kern::SampleRowParams r,
                        row_params(d, ci, V, static_cast<int32_t>(toks.size())));
    toks.insert(toks.end(), d.penalty_tokens.begin(), d.penalty_tokens.end());
    counts.insert(counts.end(), d.penalty_counts.begin(), d.penalty_counts.end());
    if (d.penalty_bias.empty()) bias.resize(toks.size(), 0.f);
    bias.insert(bias.end(), d.penalty_bias.begin(), d.penalty_bias.end());
    rp.push_back(r);
    return Status::Ok();
  }
};

// Chunk ci's logits rows: where each goes (host copy, sampled, scored) and its row params.
Status plan_chunk(const SeqChunk& c, size_t ci, int64_t V, bool device, SamplingState& st,
                  RowLists& l, int64_t* host_rows) {
  const std::string ctx = "step: chunk " + std::to_string(ci) + ": ";
  if (c.sampling && !(device && c.logits == LogitsMode::kLast)) {
    return InvalidArgument(ctx + "sampling needs LogitsMode::kLast and device_sampling");
  }
  if (c.scoring && !(device && c.logits == LogitsMode::kAll)) {
    return InvalidArgument(ctx + "scoring needs LogitsMode::kAll and device_sampling");
  }
  if (c.scoring && c.scoring->targets.size() != c.tokens.size()) {
    return InvalidArgument(ctx + "scoring has " + std::to_string(c.scoring->targets.size()) +
                           " targets for " + std::to_string(c.tokens.size()) + " tokens");
  }
  const int64_t n = c.logits == LogitsMode::kAll    ? static_cast<int64_t>(c.tokens.size())
                    : c.logits == LogitsMode::kLast ? 1
                                                    : 0;
  using Kind = SamplingState::Kind;
  for (int64_t j = 0; j < n; ++j) {
    if (c.sampling) {
      GS_RETURN_IF_ERROR(l.add_sampled(*c.sampling, ci, V));
      st.dest.push_back({Kind::kSampled, st.device_rows++});
    } else if (c.scoring && c.scoring->targets[static_cast<size_t>(j)] >= 0) {
      GS_ASSIGN_OR_RETURN(kern::SampleRowParams r,
                          score_params(*c.scoring, ci, static_cast<size_t>(j), V));
      l.rp.push_back(r);
      st.dest.push_back({Kind::kScored, st.scored_rows++});
    } else {
      l.rp.emplace_back().active = 0;
      st.dest.push_back({Kind::kHost, (*host_rows)++});
    }
  }
  return Status::Ok();
}

}  // namespace
}  // namespace cudarun

Status CudaModelRunner::Impl::begin_sampling(std::span<const SeqChunk> chunks, int64_t total_logits,
                                             StepOutput* out) {
  if (!sampling) sampling.reset(new cudarun::SamplingState());
  cudarun::SamplingState& st = *sampling;
  const int64_t V = cfg.vocab_size;
  st.dest.clear();
  st.device_rows = st.scored_rows = 0;
  cudarun::RowLists l;
  int64_t host_rows = 0;
  for (size_t i = 0; i < chunks.size(); ++i) {
    GS_RETURN_IF_ERROR(
        cudarun::plan_chunk(chunks[i], i, V, opts.device_sampling, st, l, &host_rows));
  }
  if (static_cast<int64_t>(st.dest.size()) != total_logits) {
    return Internal("step: sampling rows " + std::to_string(st.dest.size()) + " != logits rows " +
                    std::to_string(total_logits));
  }
  out->rows = host_rows;
  out->logits.resize(static_cast<size_t>(host_rows * V));
  out->sampled.assign(static_cast<size_t>(st.device_rows), SampledToken{});
  out->scored.assign(static_cast<size_t>(st.scored_rows), SampledToken{});
  if (st.device_rows + st.scored_rows == 0) return Status::Ok();
  const std::vector<kern::SampleRowParams>& rp = l.rp;
  const std::vector<int32_t>&toks = l.toks, &counts = l.counts;
  GS_RETURN_IF_ERROR(st.rows.reserve(rp.size(), "sampling row params"));
  GS_RETURN_IF_ERROR(st.outs.reserve(rp.size(), "sampling outputs"));
  GS_RETURN_IF_ERROR(st.pen.reserve(2 * toks.size() + 1, "sampling penalty lists"));
  GS_RETURN_IF_ERROR(st.reserve_ws(static_cast<int64_t>(std::min<size_t>(rp.size(), L_max))));
  std::copy(rp.begin(), rp.end(), st.rows.host);
  std::copy(toks.begin(), toks.end(), st.pen.host);
  std::copy(counts.begin(), counts.end(), st.pen.host + toks.size());
  GS_CUDA_RETURN(cudaMemcpyAsync(st.rows.dev, st.rows.host, rp.size() * sizeof(rp[0]),
                                 cudaMemcpyHostToDevice, stream));
  if (!toks.empty()) {
    GS_CUDA_RETURN(cudaMemcpyAsync(st.pen.dev, st.pen.host, 2 * toks.size() * sizeof(int32_t),
                                   cudaMemcpyHostToDevice, stream));
  }
  st.pen_pairs = static_cast<int64_t>(toks.size());
  st.any_bias = std::any_of(l.bias.begin(), l.bias.end(), [](float b) { return b != 0.f; });
  if (st.any_bias) {
    GS_RETURN_IF_ERROR(st.bias.reserve(l.bias.size(), "sampling logit_bias lists"));
    std::copy(l.bias.begin(), l.bias.end(), st.bias.host);
    GS_CUDA_RETURN(cudaMemcpyAsync(st.bias.dev, st.bias.host, l.bias.size() * sizeof(float),
                                   cudaMemcpyHostToDevice, stream));
  }
  return Status::Ok();
}

Status CudaModelRunner::Impl::after_forward(int64_t first, int n, StepOutput* out) {
  cudarun::SamplingState& st = *sampling;
  const int64_t V = cfg.vocab_size;
  const size_t row_bytes = static_cast<size_t>(V) * sizeof(float);
  bool any_device = false;
  using Kind = cudarun::SamplingState::Kind;
  for (int r = 0; r < n;) {  // runs of consecutive host rows: one copy each
    const cudarun::SamplingState::Dest dr = st.dest[first + r];
    if (dr.kind != Kind::kHost) {
      any_device = true;
      ++r;
      continue;
    }
    const int64_t d = dr.index;
    int e = r + 1;
    while (e < n && st.dest[first + e].kind == Kind::kHost &&
           st.dest[first + e].index == d + (e - r))
      ++e;
    GS_CUDA_RETURN(cudaMemcpyAsync(out->logits.data() + d * V, ws.logits + r * V,
                                   row_bytes * (e - r), cudaMemcpyDeviceToHost, stream));
    r = e;
  }
  if (!any_device) return Status::Ok();
  kern::SampleParams p;
  p.logits = ws.logits;
  p.row = st.rows.dev + first;
  p.pen_tokens = st.pen.dev;
  p.pen_counts = st.pen.dev + st.pen_pairs;
  p.pen_bias = st.any_bias ? st.bias.dev : nullptr;
  p.out = st.outs.dev + first;
  p.rows = n;
  p.vocab = static_cast<int>(V);
  p.ld = static_cast<int>(V);
  p.workspace = st.ws;
  p.workspace_bytes = st.ws_bytes;
  GS_RETURN_IF_ERROR(kern::launch_sample(p, stream));
  GS_CUDA_RETURN(cudaMemcpyAsync(st.outs.host + first, st.outs.dev + first,
                                 n * sizeof(kern::SampleRowOut), cudaMemcpyDeviceToHost, stream));
  return Status::Ok();
}

Status CudaModelRunner::Impl::end_sampling(StepOutput* out) {
  const cudarun::SamplingState& st = *sampling;
  using Kind = cudarun::SamplingState::Kind;
  for (size_t g = 0; g < st.dest.size(); ++g) {
    const cudarun::SamplingState::Dest d = st.dest[g];
    if (d.kind == Kind::kHost) continue;
    const kern::SampleRowOut& o = st.outs.host[g];
    SampledToken& t = (d.kind == Kind::kSampled ? out->sampled : out->scored)[d.index];
    t.token = o.status == kern::kSampleOk ? o.token : -1;
    t.logprob = o.logprob;
    t.top.clear();
    for (int j = 0; j < std::min(o.n_top, kern::kMaxTopLogprobs); ++j) {
      t.top.push_back({o.top_ids[j], o.top_logprobs[j]});
    }
  }
  return Status::Ok();
}

}  // namespace gossamer

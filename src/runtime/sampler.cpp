#include "runtime/sampler.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>

namespace gossamer {

Status check_sampling_params(const GenerationParams& p) {
  if (!(p.temperature >= 0) || !std::isfinite(p.temperature)) {
    return InvalidArgument("temperature must be a finite number >= 0, got " +
                           std::to_string(p.temperature));
  }
  if (!(p.top_p > 0 && p.top_p <= 1)) {
    return InvalidArgument("top_p must be in (0, 1], got " + std::to_string(p.top_p));
  }
  if (!(p.min_p >= 0 && p.min_p <= 1)) {
    return InvalidArgument("min_p must be in [0, 1], got " + std::to_string(p.min_p));
  }
  if (p.top_k < 0) return InvalidArgument("top_k must be >= 0, got " + std::to_string(p.top_k));
  if (!std::isfinite(p.presence_penalty) || !std::isfinite(p.frequency_penalty)) {
    return InvalidArgument("presence_penalty / frequency_penalty must be finite");
  }
  if (p.top_logprobs < 0) return InvalidArgument("top_logprobs must be >= 0");
  if (p.vocab_limit < 0) return InvalidArgument("vocab_limit must be >= 0");
  for (const auto& [id, bias] : p.logit_bias) {
    if (!std::isfinite(bias)) return InvalidArgument("logit_bias must be finite");
  }
  return Status::Ok();
}

namespace {

// The row without the ids >= vocab_limit (vocab_limit 0: all of it), checked: not empty, no
// NaN or +inf, not every logit -inf. Shared by sampling (penalised) and scoring (score_token);
// *max_out (when given) receives the row's largest logit, found on the way.
Result<std::span<const float>> checked_row(std::span<const float> logits, int64_t vocab_limit,
                                           float* max_out = nullptr) {
  if (logits.empty()) return InvalidArgument("sampler: empty logits row");
  if (vocab_limit > 0 && static_cast<size_t>(vocab_limit) < logits.size()) {
    logits = logits.first(static_cast<size_t>(vocab_limit));  // ids >= vocab_limit: masked
  }
  float mx = -INFINITY;
  for (size_t i = 0; i < logits.size(); ++i) {
    if (std::isnan(logits[i]) || logits[i] == INFINITY) {
      return InvalidArgument("sampler: logits[" + std::to_string(i) + "] is " +
                             (std::isnan(logits[i]) ? "NaN" : "+inf"));
    }
    mx = std::max(mx, logits[i]);
  }
  if (mx == -INFINITY) {
    return InvalidArgument("sampler: every logit is -inf (nothing can be sampled)");
  }
  if (max_out != nullptr) *max_out = mx;
  return logits;
}

// The k largest of value(0 .. n-1), descending, ties to the lower id: one pass keeping a sorted
// list of at most k (k <= 20 here, n ~200k).
template <class Value>
std::vector<int32_t> top_ids(size_t n, size_t k, const Value& value) {
  std::vector<int32_t> best;
  best.reserve(k + 1);
  for (size_t i = 0; i < n && k > 0; ++i) {
    if (best.size() == k && !(value(i) > value(static_cast<size_t>(best.back())))) continue;
    auto at = std::upper_bound(best.begin(), best.end(), value(i), [&](auto v, int32_t b) {
      return v > value(static_cast<size_t>(b));
    });
    best.insert(at, static_cast<int32_t>(i));
    if (best.size() > k) best.pop_back();
  }
  return best;
}

// z = logits + logit_bias, with penalties applied (the row checked by checked_row).
Result<std::vector<double>> penalised(std::span<const float> logits, const GenerationParams& p,
                                      std::span<const int32_t> generated) {
  GS_RETURN_IF_ERROR(check_sampling_params(p).With("sampler"));
  GS_ASSIGN_OR_RETURN(logits, checked_row(logits, p.vocab_limit));
  std::vector<double> z(logits.begin(), logits.end());
  for (const auto& [id, bias] : p.logit_bias) {
    if (id >= 0 && static_cast<size_t>(id) < z.size()) z[static_cast<size_t>(id)] += bias;
  }
  if (p.presence_penalty != 0 || p.frequency_penalty != 0) {
    std::vector<int64_t> count(z.size(), 0);
    for (int32_t t : generated) {
      if (t >= 0 && static_cast<size_t>(t) < z.size()) ++count[static_cast<size_t>(t)];
    }
    for (size_t i = 0; i < z.size(); ++i) {
      if (count[i] > 0) {
        z[i] -= p.presence_penalty + p.frequency_penalty * static_cast<double>(count[i]);
      }
    }
  }
  return z;
}

int32_t argmax(const std::vector<double>& z) {
  return static_cast<int32_t>(std::max_element(z.begin(), z.end()) - z.begin());
}

// log_softmax in double.
std::vector<double> log_softmax(const std::vector<double>& z) {
  const double mx = *std::max_element(z.begin(), z.end());
  double sum = 0;
  for (double v : z) sum += std::exp(v - mx);
  const double lse = mx + std::log(sum);
  std::vector<double> out(z.size());
  for (size_t i = 0; i < z.size(); ++i) out[i] = z[i] - lse;
  return out;
}

SamplingDistribution filtered(const std::vector<double>& z, const GenerationParams& p) {
  SamplingDistribution d;
  if (p.temperature == 0) {
    d.ids = {argmax(z)};
    d.probs = {1.0};
    return d;
  }
  // (z - max) / T <= 0: no overflow to +inf (and NaN probabilities) at a tiny T such as 1e-320.
  const double zmax = *std::max_element(z.begin(), z.end());
  std::vector<double> scaled(z.size());
  for (size_t i = 0; i < z.size(); ++i) scaled[i] = (z[i] - zmax) / p.temperature;
  std::vector<double> prob = log_softmax(scaled);
  for (double& v : prob) v = std::exp(v);
  std::vector<int32_t> idx(z.size());
  std::iota(idx.begin(), idx.end(), 0);
  size_t keep = idx.size();
  if (p.top_k > 0) keep = std::min(keep, static_cast<size_t>(p.top_k));
  // Descending z, ties to the lower id: a total order, so results are reproducible. Ordering by z
  // rather than by prob keeps the order when exp() rounds distinct logits to equal probabilities
  // (underflow to 0 at small T or |z| ~ 1e4, or a huge T); the GPU orders by the same key.
  std::partial_sort(idx.begin(), idx.begin() + static_cast<std::ptrdiff_t>(keep), idx.end(),
                    [&](int32_t a, int32_t b) { return z[a] > z[b] || (z[a] == z[b] && a < b); });
  double mass = 0;
  for (size_t i = 0; i < keep; ++i) mass += prob[idx[i]];
  if (p.top_p < 1) {
    double cum = 0;
    size_t n = 0;
    while (n < keep) {
      cum += prob[idx[n++]] / mass;
      if (cum >= p.top_p) break;
    }
    keep = std::max<size_t>(n, 1);
  }
  if (p.min_p > 0) {
    const double floor_p = p.min_p * prob[idx[0]];
    size_t n = 1;
    while (n < keep && prob[idx[n]] >= floor_p) ++n;
    keep = n;
  }
  double total = 0;
  for (size_t i = 0; i < keep; ++i) total += prob[idx[i]];
  for (size_t i = 0; i < keep; ++i) {
    d.ids.push_back(idx[i]);
    d.probs.push_back(prob[idx[i]] / total);
  }
  return d;
}

}  // namespace

std::mt19937_64 make_request_rng(std::optional<uint64_t> seed) {
  if (seed) return std::mt19937_64(*seed);
  std::random_device rd;
  const uint64_t s = (static_cast<uint64_t>(rd()) << 32) ^ rd();
  return std::mt19937_64(s);
}

double uniform01(std::mt19937_64& rng) {
  return static_cast<double>(rng() >> 11) * (1.0 / 9007199254740992.0);  // 2^-53
}

int32_t draw_token(const SamplingDistribution& d, double u) {
  size_t last = 0;  // the last survivor with a positive probability
  for (size_t i = 0; i < d.ids.size(); ++i) {
    if (!(d.probs[i] > 0)) continue;  // masked (-inf) or underflowed: never drawn
    last = i;
    u -= d.probs[i];
    if (u < 0) return d.ids[i];
  }
  return d.ids[last];  // rounding left u past the last cumulative sum (u close to 1)
}

Result<SamplingDistribution> sampling_distribution(std::span<const float> logits,
                                                   const GenerationParams& p,
                                                   std::span<const int32_t> generated) {
  GS_ASSIGN_OR_RETURN(std::vector<double> z, penalised(logits, p, generated));
  return filtered(z, p);
}

Result<SampledToken> sample_token(std::span<const float> logits, const GenerationParams& p,
                                  std::span<const int32_t> generated, std::mt19937_64& rng) {
  GS_ASSIGN_OR_RETURN(std::vector<double> z, penalised(logits, p, generated));
  const SamplingDistribution d = filtered(z, p);
  SampledToken out;
  out.token = d.ids.size() > 1 ? draw_token(d, uniform01(rng)) : d.ids[0];
  const std::vector<double> lp = log_softmax(z);
  out.logprob = static_cast<float>(lp[static_cast<size_t>(out.token)]);
  if (p.logprobs && p.top_logprobs > 0) {
    for (int32_t id :
         top_ids(lp.size(), static_cast<size_t>(p.top_logprobs), [&](size_t i) { return lp[i]; })) {
      out.top.push_back({id, static_cast<float>(lp[static_cast<size_t>(id)])});
    }
  }
  return out;
}

Result<SampledToken> score_token(std::span<const float> logits, int32_t token, int64_t top,
                                 int64_t vocab_limit) {
  float row_max = 0;
  GS_ASSIGN_OR_RETURN(logits, checked_row(logits, vocab_limit, &row_max));
  // log_softmax's arithmetic (max, then the sum of exp(v - max) in id order) without copying the
  // row: the same logprobs as sample_token's, bit for bit (a float's max is exact as a double).
  const double mx = row_max;
  double sum = 0;
  for (float v : logits) sum += std::exp(static_cast<double>(v) - mx);
  const double lse = mx + std::log(sum);
  SampledToken out;
  out.token = token;
  out.logprob = token >= 0 && static_cast<size_t>(token) < logits.size()
                    ? static_cast<float>(static_cast<double>(logits[token]) - lse)
                    : -INFINITY;
  for (int32_t id : top_ids(logits.size(), static_cast<size_t>(std::max<int64_t>(top, 0)),
                            [&](size_t i) { return logits[i]; })) {
    out.top.push_back({id, static_cast<float>(static_cast<double>(logits[id]) - lse)});
  }
  return out;
}

}  // namespace gossamer

// The reference CPU sampler: one token from a row of logits under OpenAI-style parameters
// (GenerationParams in runtime/request.h). Deterministic for a given generator state; each request
// owns its generator (make_request_rng), so a fixed seed reproduces a completion.
//
// Order of operations (ids >= p.vocab_limit, when it is > 0, are masked out first: never
// sampled, not part of the softmax):
//  0. logit_bias: z[t] = logits[t] + bias[t] (ids listed in p.logit_bias)
//  1. penalties over the tokens generated so far: z[t] -= presence * (count[t] > 0)
//                                                        + frequency * count[t]
//  2. logprobs reported to clients: log_softmax(z) (after penalties, before temperature/filters)
//  3. temperature == 0: greedy argmax of z (ties: lowest id)
//     otherwise p = softmax((z - max z) / temperature), then keep the top_k most likely (0 =
//     all), then the smallest prefix whose renormalised mass reaches top_p, then those with
//     p >= min_p * max p (transformers' order; ties to the lower id); draw from the
//     renormalised survivors.
#pragma once

#include <cstdint>
#include <optional>
#include <random>
#include <span>
#include <vector>

#include "common/status.h"
#include "runtime/request.h"

namespace gossamer {

// Checks the sampling fields of `p` (temperature >= 0, top_p in (0, 1], min_p in [0, 1],
// top_k >= 0, finite penalties, top_logprobs >= 0); the message names the field.
Status check_sampling_params(const GenerationParams& p);

// A request's generator: seeded from `seed` when given, else from std::random_device.
std::mt19937_64 make_request_rng(std::optional<uint64_t> seed);

// The candidate tokens and their renormalised probabilities after steps 1 and 3 (descending
// penalised logit z, ties to the lower id, so descending probability; a single token with
// probability 1 for greedy). Every filter cuts this order, so top_k keeps exactly k ids even
// when the k-th is tied. Survivors may have probability 0 (-inf logits when nothing else cuts
// them, or exp underflow). Exposed for tests and debugging.
struct SamplingDistribution {
  std::vector<int32_t> ids;
  std::vector<double> probs;
};
Result<SamplingDistribution> sampling_distribution(std::span<const float> logits,
                                                   const GenerationParams& p,
                                                   std::span<const int32_t> generated);

// The survivor of `d` whose cumulative interval (in d's order) holds u in [0, 1): the draw of
// sample_token. Ids of probability 0 (-inf logits, underflow) are never returned, even when
// rounding leaves the probabilities' running sum below u. `d` must not be empty.
int32_t draw_token(const SamplingDistribution& d, double u);

// Samples one token. Errors: empty logits, NaN logits, parameters out of range (named).
// top_logprobs alternatives are filled when p.logprobs is set.
Result<SampledToken> sample_token(std::span<const float> logits, const GenerationParams& p,
                                  std::span<const int32_t> generated, std::mt19937_64& rng);

// A prompt token's logprob (Completions echo + logprobs): log_softmax(logits[0, vocab_limit))
// at `token` (vocab_limit 0: the whole row) and the `top` most likely ids (descending, ties to
// the lower id), computed as sample_token computes a generated token's logprobs but without
// logit_bias and penalties. A token outside the masked row gets -inf. Errors: as sample_token's
// (empty row, NaN or +inf logits, every logit -inf).
Result<SampledToken> score_token(std::span<const float> logits, int32_t token, int64_t top,
                                 int64_t vocab_limit);

// Uniform double in [0, 1) from 53 bits of the generator (portable, unlike the std distributions).
double uniform01(std::mt19937_64& rng);

}  // namespace gossamer

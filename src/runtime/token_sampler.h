// The runtime's sampling hook. The scheduler calls a TokenSampler once per generated token with
// that row of logits; make_default_sampler() wraps the reference CPU sampler (runtime/sampler.h:
// greedy, temperature, top-k, top-p, min-p, presence/frequency penalties, seed, logprobs).
#pragma once

#include <cstdint>
#include <memory>
#include <random>
#include <span>

#include "runtime/request.h"

namespace gossamer {

class TokenSampler {
 public:
  virtual ~TokenSampler() = default;
  // logits: [vocab] float32. generated: the request's output tokens so far (for penalties).
  // rng: the request's generator (seeded from params.seed when given).
  virtual Result<SampledToken> sample(std::span<const float> logits, const GenerationParams& params,
                                      std::span<const int32_t> generated, std::mt19937_64& rng) = 0;
};

std::unique_ptr<TokenSampler> make_default_sampler();

}  // namespace gossamer

#include "runtime/token_sampler.h"

#include "runtime/sampler.h"

namespace gossamer {

namespace {

class DefaultSampler final : public TokenSampler {
 public:
  Result<SampledToken> sample(std::span<const float> logits, const GenerationParams& p,
                              std::span<const int32_t> generated, std::mt19937_64& rng) override {
    return sample_token(logits, p, generated, rng);
  }
};

}  // namespace

std::unique_ptr<TokenSampler> make_default_sampler() {
  return std::make_unique<DefaultSampler>();
}

}  // namespace gossamer

#include "runtime/request.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <string>

namespace gossamer {

Status GenerationParams::validate() const {
  if (!std::isfinite(temperature) || temperature < 0 || temperature > 2) {
    return InvalidArgument("temperature must be in [0, 2]");
  }
  if (!std::isfinite(top_p) || top_p <= 0 || top_p > 1) {
    return InvalidArgument("top_p must be in (0, 1]");
  }
  if (top_k < 0) return InvalidArgument("top_k must be >= 0");
  if (!std::isfinite(min_p) || min_p < 0 || min_p > 1) {
    return InvalidArgument("min_p must be in [0, 1]");
  }
  if (!std::isfinite(presence_penalty) || presence_penalty < -2 || presence_penalty > 2) {
    return InvalidArgument("presence_penalty must be in [-2, 2]");
  }
  if (!std::isfinite(frequency_penalty) || frequency_penalty < -2 || frequency_penalty > 2) {
    return InvalidArgument("frequency_penalty must be in [-2, 2]");
  }
  if (top_logprobs < 0 || top_logprobs > 20) {
    return InvalidArgument("top_logprobs must be in [0, 20]");
  }
  if (prompt_logprobs < -1 || prompt_logprobs > 20) {
    return InvalidArgument("prompt_logprobs must be -1 (off) or in [0, 20]");
  }
  if (max_tokens < 0 || (max_tokens == 0 && prompt_logprobs < 0)) {
    return InvalidArgument("max_tokens must be >= 1 (0 only when scoring the prompt)");
  }
  if (vocab_limit < 0) return InvalidArgument("vocab_limit must be >= 0");
  std::vector<int32_t> ids;
  for (const auto& [id, bias] : logit_bias) {
    if (id < 0)
      return InvalidArgument("logit_bias token id " + std::to_string(id) + " is negative");
    if (!std::isfinite(bias) || bias < -100 || bias > 100) {
      return InvalidArgument("logit_bias for token " + std::to_string(id) +
                             " must be in [-100, 100], got " + std::to_string(bias));
    }
    ids.push_back(id);
  }
  std::sort(ids.begin(), ids.end());
  if (std::adjacent_find(ids.begin(), ids.end()) != ids.end()) {
    return InvalidArgument("logit_bias lists token " +
                           std::to_string(*std::adjacent_find(ids.begin(), ids.end())) + " twice");
  }
  return Status::Ok();
}

const char* finish_reason_name(FinishReason r) {
  switch (r) {
    case FinishReason::kNone:
      return "none";
    case FinishReason::kStop:
      return "stop";
    case FinishReason::kLength:
      return "length";
    case FinishReason::kCancelled:
      return "cancelled";
    case FinishReason::kTimeout:
      return "timeout";
    case FinishReason::kError:
      return "error";
  }
  return "unknown";
}

void RequestStream::push(const SampledToken& t) {
  std::lock_guard<std::mutex> lock(mu_);
  pending_.tokens.push_back(t);
  news_ = true;
  cv_.notify_all();
}

void RequestStream::push_prompt_logprobs(std::vector<SampledToken> entries) {
  std::lock_guard<std::mutex> lock(mu_);
  auto& dst = pending_.prompt_logprobs;
  dst.insert(dst.end(), std::make_move_iterator(entries.begin()),
             std::make_move_iterator(entries.end()));
  news_ = true;
  cv_.notify_all();
}

void RequestStream::set_prompt_info(int64_t prompt_tokens, int64_t cached_tokens) {
  std::lock_guard<std::mutex> lock(mu_);
  pending_.prompt_tokens = prompt_tokens;
  pending_.cached_tokens = cached_tokens;
}

void RequestStream::finish(FinishReason reason, int32_t stop_token, std::string error) {
  std::lock_guard<std::mutex> lock(mu_);
  if (finished_) return;
  finished_ = true;
  pending_.finished = true;
  pending_.reason = reason;
  pending_.stop_token = stop_token;
  pending_.error = std::move(error);
  news_ = true;
  cv_.notify_all();
}

bool RequestStream::wait(StreamChunk* out, std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  if (!cv_.wait_for(lock, timeout, [this] { return news_; })) return false;
  *out = std::move(pending_);
  pending_ = StreamChunk{};
  pending_.prompt_tokens = out->prompt_tokens;
  pending_.cached_tokens = out->cached_tokens;
  pending_.finished = out->finished;
  pending_.reason = out->reason;
  news_ = false;
  return true;
}

void RequestStream::cancel() {
  std::lock_guard<std::mutex> lock(mu_);
  cancelled_ = true;
}

void RequestStream::stop_early() {
  std::lock_guard<std::mutex> lock(mu_);
  cancelled_ = true;
  stopped_early_ = true;
}

bool RequestStream::cancelled() const {
  std::lock_guard<std::mutex> lock(mu_);
  return cancelled_;
}

bool RequestStream::stopped_early() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stopped_early_;
}

bool RequestStream::finished() const {
  std::lock_guard<std::mutex> lock(mu_);
  return finished_;
}

}  // namespace gossamer

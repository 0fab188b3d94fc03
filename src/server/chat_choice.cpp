#include "server/chat_choice.h"

#include <algorithm>

namespace gossamer::server {

ChatChoice::ChatChoice(std::shared_ptr<RequestStream> stream, harmony::StreamingParser parser,
                       std::vector<std::string> stop)
    : stream_(std::move(stream)), parser_(std::move(parser)), stop_(std::move(stop)) {}

ChatChoice::~ChatChoice() {
  if (stream_ && !stream_->finished()) stream_->cancel();
}

void ChatChoice::cancel() {
  if (stream_) stream_->cancel();
}

void ChatChoice::prefill(const std::vector<int32_t>& ids, std::vector<Delta>* out) {
  std::vector<harmony::ParserEvent> ev;
  for (int32_t id : ids) {
    parser_.push(id, ev);
    on_events(ev, nullptr, out);
    ev.clear();
  }
}

void ChatChoice::on_events(std::vector<harmony::ParserEvent>& ev, const SampledToken* tok,
                           std::vector<Delta>* out) {
  using harmony::EventType;
  bool counted_content = false;
  for (auto& e : ev) {
    switch (e.type) {
      case EventType::kReasoningDelta:
        in_reasoning_ = true;
        reasoning_ += e.text;
        out->push_back({Delta::Kind::kReasoning, std::move(e.text), "", -1});
        break;
      case EventType::kContentDelta: {
        if (stop_hit_) break;
        bool hit = false;
        std::string text = stop_.push(e.text, &hit);
        if (tok && !counted_content) {
          content_tokens_.push_back(*tok);
          counted_content = true;
        }
        if (!text.empty()) {
          content_ += text;
          out->push_back({Delta::Kind::kContent, std::move(text), "", -1});
        }
        if (hit) stop_hit_ = true;
        break;
      }
      case EventType::kToolCallStart:
        out->push_back({Delta::Kind::kToolStart, e.text, e.call_id, e.tool_index});
        break;
      case EventType::kToolCallArgumentsDelta:
        out->push_back({Delta::Kind::kToolArgs, e.text, e.call_id, e.tool_index});
        break;
      case EventType::kToolCallEnd:
        break;
      case EventType::kMessageEnd:
        in_reasoning_ = false;
        break;
    }
  }
}

void ChatChoice::end(std::vector<Delta>* out) {
  std::vector<harmony::ParserEvent> ev;
  parser_.finish(ev);
  on_events(ev, nullptr, out);
  std::string rest = stop_.flush();
  if (!rest.empty()) {
    content_ += rest;
    out->push_back({Delta::Kind::kContent, std::move(rest), "", -1});
  }
  done_ = true;
}

bool ChatChoice::poll(std::chrono::milliseconds timeout, std::vector<Delta>* out) {
  if (done_) return true;
  StreamChunk c;
  if (!stream_->wait(&c, timeout)) return false;
  prompt_tokens_ = c.prompt_tokens;
  cached_tokens_ = c.cached_tokens;
  std::vector<harmony::ParserEvent> ev;
  for (const SampledToken& t : c.tokens) {
    if (stop_hit_) break;
    ++completion_tokens_;
    if (std::find(silent_stops_.begin(), silent_stops_.end(), t.token) != silent_stops_.end()) {
      continue;
    }
    const bool was_reasoning = in_reasoning_;
    parser_.push(t.token, ev);
    on_events(ev, &t, out);
    if (was_reasoning || in_reasoning_) ++reasoning_tokens_;
    ev.clear();
  }
  if (stop_hit_) {
    stream_->stop_early();
    end(out);
    return true;
  }
  if (c.finished) {
    engine_reason_ = c.reason;
    if (c.reason == FinishReason::kError) error_ = c.error.empty() ? "engine error" : c.error;
    if (c.reason == FinishReason::kCancelled) error_ = "the request was cancelled";
    end(out);
    return true;
  }
  return false;
}

std::string ChatChoice::finish_reason() const {
  if (stop_hit_) return "stop";
  if (engine_reason_ == FinishReason::kLength || engine_reason_ == FinishReason::kTimeout) {
    return "length";
  }
  if (!parser_.result().tool_calls.empty()) return "tool_calls";
  return "stop";
}

}  // namespace gossamer::server

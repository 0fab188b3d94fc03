#include "server/chat_choice.h"

#include <algorithm>

#include "harmony/header.h"

namespace gossamer::server {

namespace {

// pending_ holds at most a header (the parser gives up on one after 64 tokens) and the bytes of a
// split character; only a run of special tokens dropped outside a message grows it further, and
// the oldest of those can no longer become text.
constexpr size_t kMaxPending = 96;

std::string as_is(std::string_view s) {
  return std::string(s);
}

std::string squeezed(std::string_view s) {
  std::string t = harmony::sanitize_utf8(s);
  t.erase(std::remove_if(t.begin(), t.end(), [](char c) { return harmony::is_ascii_space(c); }),
          t.end());
  return t;
}

}  // namespace

std::pair<size_t, size_t> text_source(const std::vector<std::string>& pieces,
                                      std::string_view text) {
  const size_t n = pieces.size();
  for (auto norm : {as_is, harmony::sanitize_utf8, squeezed}) {
    const std::string want = norm(text);
    if (want.empty()) continue;
    for (size_t len = 1; len <= n; ++len) {
      for (size_t b = n - len + 1; b-- > 0;) {
        std::string run;
        for (size_t k = b; k < b + len; ++k) run += pieces[k];
        if (norm(run).find(want) != std::string::npos) return {b, b + len};
      }
    }
  }
  return {n, n};
}

ChatChoice::ChatChoice(std::shared_ptr<RequestStream> stream, harmony::StreamingParser parser,
                       std::vector<std::string> stop, std::shared_ptr<const Tokenizer> tok)
    : stream_(std::move(stream)),
      parser_(std::move(parser)),
      stop_(std::move(stop)),
      tok_(std::move(tok)) {}

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

// A token's text may reach the content only with a later push (a header given up on, bytes of a
// split character): tokens wait in pending_ until some event shows where their text went.
void ChatChoice::attribute(const std::vector<harmony::ParserEvent>& ev, const SampledToken* tok) {
  if (tok != nullptr && tok->token >= 0 && tok->token < tok_->vocab_size()) {
    pending_.push_back(*tok);
    if (pending_.size() > kMaxPending) pending_.erase(pending_.begin());
  }
  if (ev.empty()) return;
  std::string text;
  for (const auto& e : ev) {
    if (e.type == harmony::EventType::kContentDelta) text += e.text;
  }
  if (!text.empty() && !stop_hit_) {
    std::vector<std::string> pieces;
    for (const SampledToken& t : pending_) {
      Result<std::string> b = tok_->token_bytes(t.token);
      pieces.push_back(b.ok() ? *b : std::string());
    }
    auto [begin, end] = text_source(pieces, text);
    for (size_t i = 0; i < pending_.size(); ++i) {
      // No run matched (the text starts with held-back bytes of a token already counted, or was
      // rewritten): every pending token that is not a special token.
      const bool take = begin < end ? i >= begin && i < end : !tok_->is_special(pending_[i].token);
      if (take) content_tokens_.push_back(pending_[i]);
    }
  }
  pending_.clear();  // the rest went to reasoning, tool calls or header fields
}

void ChatChoice::on_events(std::vector<harmony::ParserEvent>& ev, const SampledToken* tok,
                           std::vector<Delta>* out) {
  using harmony::EventType;
  attribute(ev, tok);
  for (auto& e : ev) {
    switch (e.type) {
      case EventType::kReasoningDelta:
        in_reasoning_ = true;
        reasoning_ += e.text;
        out->push_back({Delta::Kind::kReasoning, std::move(e.text), "", -1, 0});
        break;
      case EventType::kContentDelta: {
        if (stop_hit_) break;
        bool hit = false;
        std::string text = stop_.push(e.text, &hit);
        if (!text.empty()) {
          content_ += text;
          out->push_back({Delta::Kind::kContent, std::move(text), "", -1, content_tokens_.size()});
        }
        if (hit) stop_hit_ = true;
        break;
      }
      case EventType::kToolCallStart:
        out->push_back({Delta::Kind::kToolStart, e.text, e.call_id, e.tool_index, 0});
        break;
      case EventType::kToolCallArgumentsDelta:
        out->push_back({Delta::Kind::kToolArgs, e.text, e.call_id, e.tool_index, 0});
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
    out->push_back({Delta::Kind::kContent, std::move(rest), "", -1, content_tokens_.size()});
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

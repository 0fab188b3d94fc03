// One choice of a chat (or responses) call: the engine's token stream fed through the harmony
// streaming parser and the stop-string filter, turned into OpenAI-style deltas.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "harmony/parser.h"
#include "runtime/request.h"
#include "server/stop_filter.h"
#include "tokenizer/tokenizer.h"

namespace gossamer::server {

struct Delta {
  enum class Kind { kReasoning, kContent, kToolStart, kToolArgs };
  Kind kind = Kind::kContent;
  std::string text;  // deltas: text; kToolStart: function name
  std::string call_id;
  int tool_index = -1;
  // kContent: ChatChoice::content_tokens() entries [0, lp_end) came with or before this text.
  size_t lp_end = 0;
};

// Which tokens produced the content text `text` a parser emitted: `pieces` are the bytes of the
// tokens pushed since the last attribution, in order. The fewest consecutive pieces whose bytes
// contain the text, the latest such run first; compared as bytes, then with invalid UTF-8
// replaced (the parser sanitises header text), then also without ASCII whitespace (header words
// kept as content are re-joined by single spaces). {n, n} when no run matches.
std::pair<size_t, size_t> text_source(const std::vector<std::string>& pieces,
                                      std::string_view text);

class ChatChoice {
 public:
  ChatChoice(std::shared_ptr<RequestStream> stream, harmony::StreamingParser parser,
             std::vector<std::string> stop, std::shared_ptr<const Tokenizer> tok);
  ~ChatChoice();  // cancels the engine request if it is still running

  // Tokens the server appended to the prompt to steer the answer (e.g. a tool-call header):
  // the parser sees them first, as if the model had written them.
  void prefill(const std::vector<int32_t>& ids, std::vector<Delta>* out);
  // Stop ids (e.g. generation_config eos) that end the request without being parsed as text.
  void set_silent_stop_ids(std::vector<int32_t> ids) { silent_stops_ = std::move(ids); }
  // Waits up to `timeout` for output; appends deltas. Returns true once the choice is done.
  bool poll(std::chrono::milliseconds timeout, std::vector<Delta>* out);
  void cancel();

  bool done() const { return done_; }
  // "stop", "length" or "tool_calls" (valid when done and not failed).
  std::string finish_reason() const;
  bool failed() const { return !error_.empty(); }
  // Ended by the per-request deadline (--request-timeout): the output is incomplete.
  bool timed_out() const { return engine_reason_ == FinishReason::kTimeout; }
  const std::string& error() const { return error_; }
  const harmony::ParseResult& result() const { return parser_.result(); }
  // Final texts after stop strings (the parser's result is before them).
  const std::string& content() const { return content_; }
  const std::string& reasoning() const { return reasoning_; }
  // Generated tokens whose text went to the content, in order (for logprobs): also those the
  // parser held back and emitted later (a header given up on, bytes of a split character).
  const std::vector<SampledToken>& content_tokens() const { return content_tokens_; }
  int64_t completion_tokens() const { return completion_tokens_; }
  int64_t reasoning_tokens() const { return reasoning_tokens_; }
  int64_t prompt_tokens() const { return prompt_tokens_; }
  int64_t cached_tokens() const { return cached_tokens_; }

 private:
  void on_events(std::vector<harmony::ParserEvent>& ev, const SampledToken* tok,
                 std::vector<Delta>* out);
  void attribute(const std::vector<harmony::ParserEvent>& ev, const SampledToken* tok);
  void end(std::vector<Delta>* out);

  std::shared_ptr<RequestStream> stream_;
  harmony::StreamingParser parser_;
  StopFilter stop_;
  bool done_ = false;
  bool stop_hit_ = false;
  bool in_reasoning_ = false;
  FinishReason engine_reason_ = FinishReason::kNone;
  std::string error_;
  std::string content_, reasoning_;
  std::vector<SampledToken> content_tokens_;
  std::shared_ptr<const Tokenizer> tok_;
  std::vector<SampledToken> pending_;  // pushed tokens that have not produced any event yet
  std::vector<int32_t> silent_stops_;
  int64_t completion_tokens_ = 0, reasoning_tokens_ = 0, prompt_tokens_ = 0, cached_tokens_ = 0;
};

}  // namespace gossamer::server

// Streaming parser of gpt-oss (harmony) output: token ids in, events out.
//
//   auto parser = harmony::StreamingParser::create(tokenizer).value();  // after <|start|>assistant
//   std::vector<harmony::ParserEvent> ev;
//   for (int32_t id : generated) {
//     bool stop = parser.push(id, ev);   // appends 0..n events; true on <|return|> / <|call|>
//     send(ev); ev.clear();
//     if (stop) break;
//   }
//   parser.finish(ev);                     // always call: flushes held-back UTF-8, closes state
//   const harmony::ParseResult& r = parser.result();  // == concatenation of all events
//
// Events: kReasoningDelta (analysis channel text), kContentDelta (final channel, and commentary
// without recipient = preambles), kToolCallStart (recipient functions.NAME: name + generated
// call id), kToolCallArgumentsDelta, kToolCallEnd, kMessageEnd (every message, with its channel).
// All text is valid UTF-8 (bytes of a split character are held back until complete).
//
// Never fails on what the model emits: recipients before or after <|channel|>, with or without
// <|constrain|>json, several messages / tool calls per generation. Malformed output (missing
// channel, unknown recipient, header without <|message|>, stray special tokens, text after the
// end, truncation) degrades to content and is recorded in ParseResult::warnings.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "tokenizer/tokenizer.h"

namespace gossamer::harmony {

enum class EventType {
  kReasoningDelta,
  kContentDelta,
  kToolCallStart,
  kToolCallArgumentsDelta,
  kToolCallEnd,
  kMessageEnd,
};
const char* event_type_name(EventType t);

struct ParserEvent {
  EventType type = EventType::kContentDelta;
  std::string text;     // deltas: the text; kToolCallStart: the function name
  std::string call_id;  // tool call events
  int tool_index = -1;  // tool call events: index of the call in this generation
  std::string channel;  // kMessageEnd: channel of the message ("" if it had none)
};

enum class FinishReason { kNone, kStop, kToolCalls, kLength };
const char* finish_reason_name(FinishReason r);

struct ToolCall {
  std::string id;
  std::string name;
  std::string arguments;  // raw text the model wrote (normally JSON)
};

struct ParseResult {
  std::string reasoning;  // all analysis text
  std::string content;    // all final (+ preamble) text
  std::vector<ToolCall> tool_calls;
  FinishReason finish = FinishReason::kNone;  // set by finish()
  bool stopped = false;                       // a stop token (<|return|> or <|call|>) was seen
  bool truncated = false;  // finish() came before any stop token (token budget ran out)
  // Generation ended with reasoning but no content and no tool call (e.g. the budget was spent
  // thinking): the answer is empty and the caller should say so rather than hide it.
  bool reasoning_only = false;
  std::vector<std::string> warnings;  // what was odd, in order
};

struct ParserOptions {
  // true: the prompt ended with "<|start|>assistant", so output begins with a header.
  bool starts_in_header = true;
  std::string call_id_prefix = "call_";
  uint64_t call_id_seed = 0;  // 0 = seed from std::random_device
  // Longer "headers" are given up on and become content (a call header with a 64-byte tool name
  // spelled one token per byte still fits).
  size_t max_header_tokens = 128;
  // The request's tools: a recipient that is one of these names without the "functions." prefix
  // is still read as a call of it.
  std::vector<std::string> tool_names;
};

class StreamingParser {
 public:
  static Result<StreamingParser> create(std::shared_ptr<const Tokenizer> tok,
                                        ParserOptions opt = {});

  // Feeds one generated token; appends events. Returns true if it was a stop token.
  bool push(int32_t id, std::vector<ParserEvent>& events);
  // End of generation: flushes pending bytes, closes an open message, sets finish/truncated.
  void finish(std::vector<ParserEvent>& events);

  const ParseResult& result() const { return result_; }
  bool stopped() const { return result_.stopped; }

 private:
  enum class State { kExpectStart, kHeader, kContent };
  enum class Kind { kReasoning, kContent, kToolCall };
  struct Ids {
    int32_t start, end, message, channel, constrain, ret, call;
  };
  struct Header {
    std::string channel, recipient, content_type;
    std::string leftover;  // words that are not header fields
    bool syntax = false;   // HeaderFields::syntax
  };

  StreamingParser(std::shared_ptr<const Tokenizer> tok, ParserOptions opt, Ids ids);
  void warn(std::string w) { result_.warnings.push_back(std::move(w)); }
  void emit(std::vector<ParserEvent>& ev, ParserEvent e);
  void emit_text(std::vector<ParserEvent>& ev, std::string text);
  Header parse_header(const std::string& text);
  std::string header_text();
  void begin_message(const Header& h, std::vector<ParserEvent>& ev);
  void begin_implicit_content(std::vector<ParserEvent>& ev, const std::string& why);
  void close_message(std::vector<ParserEvent>& ev);
  // cut: generation ended inside the header (finish() or a stop token), so it is incomplete.
  void header_abandoned(std::vector<ParserEvent>& ev, const std::string& why, bool cut);
  std::string call_name(const std::string& recipient);
  void on_expect_start(int32_t id, std::vector<ParserEvent>& ev);
  void on_header(int32_t id, std::vector<ParserEvent>& ev);
  bool on_content(int32_t id, std::vector<ParserEvent>& ev);
  bool on_stop(int32_t id, std::vector<ParserEvent>& ev);
  std::string next_call_id();
  std::string token_text(int32_t id);

  std::shared_ptr<const Tokenizer> tok_;
  ParserOptions opt_;
  Ids ids_;
  State state_;
  Kind kind_ = Kind::kContent;
  std::string channel_;
  std::vector<int32_t> header_ids_;
  std::optional<IncrementalDecoder> decoder_;
  ParseResult result_;
  bool after_return_ = false;  // <|return|> seen: anything later is "after the end"
  bool warned_after_end_ = false;
  bool finished_ = false;
  uint64_t id_state_ = 0;
};

// Whole completion at once (same rules; the events are discarded).
Result<ParseResult> parse_completion(const std::vector<int32_t>& ids,
                                     std::shared_ptr<const Tokenizer> tok, ParserOptions opt = {});

}  // namespace gossamer::harmony

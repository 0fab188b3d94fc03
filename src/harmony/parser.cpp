#include "harmony/parser.h"

#include <random>
#include <utility>

#include "harmony/header.h"

namespace gossamer::harmony {
namespace {

std::string quoted(const std::string& s) {
  constexpr size_t kMax = 120;
  return "'" + (s.size() > kMax ? s.substr(0, kMax) + "..." : s) + "'";
}

std::string trimmed(const std::string& s) {
  size_t b = 0, e = s.size();
  while (b < e && is_ascii_space(s[b])) ++b;
  while (e > b && is_ascii_space(s[e - 1])) --e;
  return s.substr(b, e - b);
}

uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

}  // namespace

const char* event_type_name(EventType t) {
  switch (t) {
    case EventType::kReasoningDelta:
      return "reasoning_delta";
    case EventType::kContentDelta:
      return "content_delta";
    case EventType::kToolCallStart:
      return "tool_call_start";
    case EventType::kToolCallArgumentsDelta:
      return "tool_call_arguments_delta";
    case EventType::kToolCallEnd:
      return "tool_call_end";
    case EventType::kMessageEnd:
      return "message_end";
  }
  return "unknown";
}

const char* finish_reason_name(FinishReason r) {
  switch (r) {
    case FinishReason::kNone:
      return "none";
    case FinishReason::kStop:
      return "stop";
    case FinishReason::kToolCalls:
      return "tool_calls";
    case FinishReason::kLength:
      return "length";
  }
  return "none";
}

Result<StreamingParser> StreamingParser::create(std::shared_ptr<const Tokenizer> tok,
                                                ParserOptions opt) {
  if (!tok) return InvalidArgument("harmony parser: tokenizer is null");
  Ids ids{};
  const std::pair<const char*, int32_t*> need[] = {{"<|start|>", &ids.start},
                                                   {"<|end|>", &ids.end},
                                                   {"<|message|>", &ids.message},
                                                   {"<|channel|>", &ids.channel},
                                                   {"<|constrain|>", &ids.constrain},
                                                   {"<|return|>", &ids.ret},
                                                   {"<|call|>", &ids.call}};
  for (const auto& [name, slot] : need) {
    auto id = tok->special_id(name);
    if (!id) return NotFound(std::string("harmony parser: tokenizer lacks special token ") + name);
    *slot = *id;
  }
  if (opt.call_id_seed == 0) {
    std::random_device rd;
    opt.call_id_seed = (static_cast<uint64_t>(rd()) << 32) ^ rd();
  }
  return StreamingParser(std::move(tok), std::move(opt), ids);
}

StreamingParser::StreamingParser(std::shared_ptr<const Tokenizer> tok, ParserOptions opt, Ids ids)
    : tok_(std::move(tok)),
      opt_(std::move(opt)),
      ids_(ids),
      state_(opt_.starts_in_header ? State::kHeader : State::kExpectStart),
      id_state_(opt_.call_id_seed) {}

std::string StreamingParser::next_call_id() {
  static constexpr char kAlphabet[] =
      "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
  std::string id = opt_.call_id_prefix;
  for (int i = 0; i < 24; ++i) id.push_back(kAlphabet[splitmix64(id_state_) % 62]);
  return id;
}

std::string StreamingParser::token_text(int32_t id) {
  auto b = tok_->token_bytes(id);
  return b.ok() ? sanitize_utf8(*b) : "#" + std::to_string(id);
}

void StreamingParser::emit(std::vector<ParserEvent>& ev, ParserEvent e) {
  switch (e.type) {
    case EventType::kReasoningDelta:
      result_.reasoning += e.text;
      break;
    case EventType::kContentDelta:
      result_.content += e.text;
      break;
    case EventType::kToolCallStart:
      result_.tool_calls.push_back(ToolCall{e.call_id, e.text, ""});
      break;
    case EventType::kToolCallArgumentsDelta:
      result_.tool_calls[static_cast<size_t>(e.tool_index)].arguments += e.text;
      break;
    case EventType::kToolCallEnd:
    case EventType::kMessageEnd:
      break;
  }
  ev.push_back(std::move(e));
}

void StreamingParser::emit_text(std::vector<ParserEvent>& ev, std::string text) {
  if (text.empty()) return;
  ParserEvent e;
  e.text = std::move(text);
  if (kind_ == Kind::kReasoning) {
    e.type = EventType::kReasoningDelta;
  } else if (kind_ == Kind::kToolCall) {
    e.type = EventType::kToolCallArgumentsDelta;
    e.tool_index = static_cast<int>(result_.tool_calls.size()) - 1;
    e.call_id = result_.tool_calls.back().id;
  } else {
    e.type = EventType::kContentDelta;
  }
  emit(ev, std::move(e));
}

std::string StreamingParser::header_text() {
  std::string raw;
  for (int32_t id : header_ids_) {
    auto b = tok_->token_bytes(id);
    if (b.ok()) raw += *b;
  }
  return sanitize_utf8(raw);
}

StreamingParser::Header StreamingParser::parse_header(const std::string& text) {
  HeaderFields f = parse_header_text(text);
  for (auto& w : f.warnings) warn(std::move(w));
  return Header{std::move(f.channel), std::move(f.recipient), std::move(f.content_type),
                std::move(f.leftover), f.syntax};
}

std::string StreamingParser::call_name(const std::string& recipient) {
  static constexpr std::string_view kFunctions = "functions.";
  if (recipient.rfind(kFunctions, 0) == 0) return recipient.substr(kFunctions.size());
  for (const std::string& name : opt_.tool_names) {
    if (recipient == name) {
      warn("recipient " + quoted(recipient) + " without 'functions.': read as a call of that tool");
      return name;
    }
  }
  return "";
}

void StreamingParser::begin_message(const Header& h, std::vector<ParserEvent>& ev) {
  state_ = State::kContent;
  channel_ = h.channel;
  decoder_.emplace(tok_);
  const bool analysis = h.channel == "analysis";
  if (!h.recipient.empty() && h.recipient != "all") {
    if (std::string name = call_name(h.recipient); !name.empty()) {
      kind_ = Kind::kToolCall;
      ParserEvent e;
      e.type = EventType::kToolCallStart;
      e.text = std::move(name);
      e.call_id = next_call_id();
      e.tool_index = static_cast<int>(result_.tool_calls.size());
      emit(ev, std::move(e));
    } else {
      // Analysis stays reasoning whoever it is addressed to (it is never for the user).
      warn("unknown recipient " + quoted(h.recipient) + ": message treated as " +
           (analysis ? "reasoning" : "content"));
      kind_ = analysis ? Kind::kReasoning : Kind::kContent;
    }
  } else if (analysis) {
    kind_ = Kind::kReasoning;
  } else if (h.channel == "final" || h.channel == "commentary") {
    kind_ = Kind::kContent;
  } else {
    warn(h.channel.empty() ? std::string("message without a channel: treated as content")
                           : "unknown channel " + quoted(h.channel) + ": treated as content");
    kind_ = Kind::kContent;
  }
  if (!h.leftover.empty()) {
    warn("unexpected words in message header kept as content: " + quoted(h.leftover));
    ParserEvent e;
    e.type = EventType::kContentDelta;
    e.text = h.leftover;
    emit(ev, std::move(e));
  }
}

void StreamingParser::begin_implicit_content(std::vector<ParserEvent>& ev, const std::string& why) {
  warn(why);
  Header h;
  h.channel = "final";  // degraded: treated like final content, no warning about the channel
  begin_message(h, ev);
  channel_.clear();
}

void StreamingParser::close_message(std::vector<ParserEvent>& ev) {
  if (state_ != State::kContent) return;
  emit_text(ev, decoder_->flush());
  if (kind_ == Kind::kToolCall) {
    ParserEvent e;
    e.type = EventType::kToolCallEnd;
    e.tool_index = static_cast<int>(result_.tool_calls.size()) - 1;
    e.call_id = result_.tool_calls.back().id;
    emit(ev, std::move(e));
  }
  ParserEvent end;
  end.type = EventType::kMessageEnd;
  end.channel = channel_;
  emit(ev, std::move(end));
  decoder_.reset();
  state_ = State::kExpectStart;
}

void StreamingParser::header_abandoned(std::vector<ParserEvent>& ev, const std::string& why,
                                       bool cut) {
  std::string text = header_text();
  header_ids_.clear();
  state_ = State::kExpectStart;
  if (text.empty()) return;
  Header h = parse_header(text);
  warn(why + " (header " + quoted(text) + ")");
  // Text that never looked like a header (no channel, recipient or marker) is kept verbatim, less
  // the role after <|start|>; of a header, only the words that are not header fields are kept,
  // and none of one cut off before it was complete (as openai-harmony, which yields no message).
  // (A channel or a recipient implies header syntax.)
  std::string keep = h.syntax ? (cut ? "" : h.leftover) : text;
  if (!h.syntax && keep.rfind("assistant", 0) == 0 &&
      (keep.size() == 9 || is_ascii_space(keep[9]))) {
    keep.erase(0, 9);  // the role after <|start|>
  }
  if (const std::string word = trimmed(keep); cut && !h.syntax && (word == "t" || word == "to")) {
    keep.clear();  // cut off while writing "to=" (a recipient)
  }
  if (keep.empty()) return;
  begin_implicit_content(ev, "header text kept as content: " + quoted(keep));
  channel_ = h.channel;
  emit_text(ev, keep);
  close_message(ev);
}

void StreamingParser::on_expect_start(int32_t id, std::vector<ParserEvent>& ev) {
  if (id == ids_.start) {
    state_ = State::kHeader;
    header_ids_.clear();
  } else if (id == ids_.channel) {
    warn("missing <|start|> before <|channel|>");
    state_ = State::kHeader;
    header_ids_.assign(1, id);
  } else if (tok_->is_special(id)) {
    warn("unexpected special token " + token_text(id) + " outside a message: dropped");
  } else {
    begin_implicit_content(ev, "text outside a message: treated as content");
    on_content(id, ev);
  }
}

void StreamingParser::on_header(int32_t id, std::vector<ParserEvent>& ev) {
  if (id == ids_.message) {
    Header h = parse_header(header_text());
    header_ids_.clear();
    begin_message(h, ev);
  } else if (id == ids_.start) {
    header_abandoned(ev, "<|start|> inside a message header", false);
    state_ = State::kHeader;
  } else if (id == ids_.end) {
    header_abandoned(ev, "message ended before <|message|>", false);
  } else {
    header_ids_.push_back(id);
    if (header_ids_.size() > opt_.max_header_tokens) {
      std::string text = header_text();
      header_ids_.clear();
      begin_implicit_content(ev, "no <|message|> after " + std::to_string(opt_.max_header_tokens) +
                                     " header tokens: header text treated as content");
      emit_text(ev, text);
    }
  }
}

bool StreamingParser::on_content(int32_t id, std::vector<ParserEvent>& ev) {
  if (id == ids_.end) {
    close_message(ev);
  } else if (id == ids_.start || id == ids_.channel) {
    warn(token_text(id) + " before the message ended: message closed");
    close_message(ev);
    state_ = State::kHeader;
    header_ids_.clear();
    if (id == ids_.channel) header_ids_.push_back(id);
  } else if (tok_->is_special(id)) {
    warn("unexpected special token " + token_text(id) + " in message content: dropped");
  } else {
    auto text = decoder_->push(id);
    if (!text.ok()) {
      warn("token " + std::to_string(id) + ": " + text.status().message());
    } else {
      emit_text(ev, std::move(*text));
    }
  }
  return false;
}

bool StreamingParser::on_stop(int32_t id, std::vector<ParserEvent>& ev) {
  const bool call = id == ids_.call;
  if (state_ == State::kContent) {
    if (call && kind_ != Kind::kToolCall) warn("<|call|> ended a message that is not a tool call");
    if (!call && kind_ == Kind::kToolCall) warn("<|return|> ended a tool call message");
    close_message(ev);
  } else if (state_ == State::kHeader) {
    header_abandoned(ev, "generation stopped inside a message header", true);
  }
  state_ = State::kExpectStart;
  result_.stopped = true;
  if (!call) after_return_ = true;
  return true;
}

bool StreamingParser::push(int32_t id, std::vector<ParserEvent>& ev) {
  if (finished_) {
    warn("token " + std::to_string(id) + " pushed after finish(): ignored");
    return false;
  }
  if (id < 0 || id >= tok_->vocab_size()) {
    warn("token id " + std::to_string(id) + " is outside the vocabulary: dropped");
    return false;
  }
  if (result_.stopped && !warned_after_end_ &&
      (after_return_ || (state_ == State::kExpectStart && id != ids_.start))) {
    warn("tokens after the end of generation");
    warned_after_end_ = true;
  }
  if (id == ids_.ret || id == ids_.call) return on_stop(id, ev);
  switch (state_) {
    case State::kExpectStart:
      on_expect_start(id, ev);
      break;
    case State::kHeader:
      on_header(id, ev);
      break;
    case State::kContent:
      on_content(id, ev);
      break;
  }
  return false;
}

void StreamingParser::finish(std::vector<ParserEvent>& ev) {
  if (finished_) return;
  finished_ = true;
  if (state_ == State::kContent) {
    if (!result_.stopped && kind_ == Kind::kToolCall) {
      warn("generation ended inside a tool call: arguments may be incomplete");
    }
    close_message(ev);
  } else if (state_ == State::kHeader) {
    header_abandoned(ev, "generation ended inside a message header", true);
  }
  result_.truncated = !result_.stopped;
  if (!result_.stopped) {
    result_.finish = FinishReason::kLength;
  } else {
    result_.finish = result_.tool_calls.empty() ? FinishReason::kStop : FinishReason::kToolCalls;
  }
  result_.reasoning_only =
      result_.content.empty() && result_.tool_calls.empty() && !result_.reasoning.empty();
}

Result<ParseResult> parse_completion(const std::vector<int32_t>& ids,
                                     std::shared_ptr<const Tokenizer> tok, ParserOptions opt) {
  GS_ASSIGN_OR_RETURN(StreamingParser p, StreamingParser::create(std::move(tok), std::move(opt)));
  std::vector<ParserEvent> ev;
  for (int32_t id : ids) {
    p.push(id, ev);
    ev.clear();
  }
  p.finish(ev);
  return p.result();
}

}  // namespace gossamer::harmony

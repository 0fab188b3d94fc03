// Streaming harmony parser: hand-written cases, and properties over random well-formed and
// malformed token sequences (byte-level test tokenizer, so UTF-8 characters are split across
// tokens), plus a realistic generation through the real gpt-oss tokenizer.
#include "harmony/parser.h"

#include <gtest/gtest.h>

#include <random>

#include "harmony/test_util.h"

namespace gossamer::harmony {
namespace {

using testing::ByteTokenizer;
using testing::valid_utf8;

constexpr int32_t kStart = 200006, kEnd = 200007, kMessage = 200008, kChannel = 200005,
                  kConstrain = 200003, kReturn = 200002, kCall = 200012;

std::shared_ptr<const Tokenizer> byte_tok() {
  return std::make_shared<ByteTokenizer>();
}

struct Run {
  std::vector<ParserEvent> events;
  ParseResult result;
};

Run run(const std::shared_ptr<const Tokenizer>& tok, const std::vector<int32_t>& ids,
        ParserOptions opt = {}) {
  opt.call_id_seed = opt.call_id_seed ? opt.call_id_seed : 42;
  auto p = StreamingParser::create(tok, opt);
  EXPECT_TRUE(p.ok()) << p.status().ToString();
  Run r;
  for (int32_t id : ids) {
    if (p->push(id, r.events)) break;
  }
  p->finish(r.events);
  r.result = p->result();
  return r;
}

std::vector<int32_t> enc(const std::string& s) {
  return ByteTokenizer().encode(s, true);
}

// Independent accumulation of an event stream; checks event well-formedness on the way.
ParseResult accumulate(const std::vector<ParserEvent>& events) {
  ParseResult r;
  int open_call = -1;
  for (const auto& e : events) {
    switch (e.type) {
      case EventType::kReasoningDelta:
        EXPECT_TRUE(valid_utf8(e.text));
        EXPECT_FALSE(e.text.empty());
        r.reasoning += e.text;
        break;
      case EventType::kContentDelta:
        EXPECT_TRUE(valid_utf8(e.text));
        EXPECT_FALSE(e.text.empty());
        r.content += e.text;
        break;
      case EventType::kToolCallStart:
        EXPECT_EQ(open_call, -1);
        EXPECT_EQ(e.tool_index, static_cast<int>(r.tool_calls.size()));
        open_call = e.tool_index;
        r.tool_calls.push_back(ToolCall{e.call_id, e.text, ""});
        break;
      case EventType::kToolCallArgumentsDelta:
        EXPECT_TRUE(valid_utf8(e.text));
        EXPECT_EQ(e.tool_index, open_call);
        if (open_call >= 0) r.tool_calls[static_cast<size_t>(open_call)].arguments += e.text;
        break;
      case EventType::kToolCallEnd:
        EXPECT_EQ(e.tool_index, open_call);
        open_call = -1;
        break;
      case EventType::kMessageEnd:
        EXPECT_EQ(open_call, -1);
        break;
    }
  }
  return r;
}

void expect_same(const ParseResult& streamed, const ParseResult& result) {
  EXPECT_EQ(streamed.reasoning, result.reasoning);
  EXPECT_EQ(streamed.content, result.content);
  ASSERT_EQ(streamed.tool_calls.size(), result.tool_calls.size());
  for (size_t i = 0; i < streamed.tool_calls.size(); ++i) {
    EXPECT_EQ(streamed.tool_calls[i].id, result.tool_calls[i].id);
    EXPECT_EQ(streamed.tool_calls[i].name, result.tool_calls[i].name);
    EXPECT_EQ(streamed.tool_calls[i].arguments, result.tool_calls[i].arguments);
  }
}

TEST(HarmonyParser, ReasoningThenFinal) {
  auto r = run(byte_tok(), enc("<|channel|>analysis<|message|>think <|end|>"
                               "<|start|>assistant<|channel|>final<|message|>Answer: 4<|return|>"));
  EXPECT_EQ(r.result.reasoning, "think ");
  EXPECT_EQ(r.result.content, "Answer: 4");
  EXPECT_TRUE(r.result.stopped);
  EXPECT_FALSE(r.result.truncated);
  EXPECT_EQ(r.result.finish, FinishReason::kStop);
  EXPECT_TRUE(r.result.warnings.empty());
  ASSERT_EQ(r.events.back().type, EventType::kMessageEnd);
  EXPECT_EQ(r.events.back().channel, "final");
}

TEST(HarmonyParser, ToolCallRecipientBeforeOrAfterChannel) {
  for (const char* header : {"<|channel|>commentary to=functions.get_weather <|constrain|>json",
                             " to=functions.get_weather<|channel|>commentary <|constrain|>json",
                             " to=functions.get_weather<|channel|>commentary json",
                             "<|channel|>commentary to=functions.get_weather<|constrain|>json",
                             "<|channel|>commentary to=functions.get_weather"}) {
    SCOPED_TRACE(header);
    auto r = run(byte_tok(), enc(std::string(header) + "<|message|>{\"city\":\"Zürich\"}<|call|>"));
    ASSERT_EQ(r.result.tool_calls.size(), 1u);
    EXPECT_EQ(r.result.tool_calls[0].name, "get_weather");
    EXPECT_EQ(r.result.tool_calls[0].arguments, "{\"city\":\"Zürich\"}");
    EXPECT_EQ(r.result.tool_calls[0].id.rfind("call_", 0), 0u);
    EXPECT_EQ(r.result.tool_calls[0].id.size(), 5u + 24u);
    EXPECT_EQ(r.result.finish, FinishReason::kToolCalls);
    EXPECT_TRUE(r.result.warnings.empty()) << r.result.warnings[0];
    EXPECT_TRUE(r.result.content.empty());
  }
}

TEST(HarmonyParser, SeveralToolCallsAfterReasoning) {
  auto r = run(byte_tok(),
               enc("<|channel|>analysis<|message|>need two<|end|>"
                   "<|start|>assistant<|channel|>commentary to=functions.a <|constrain|>json"
                   "<|message|>{}<|call|><|start|>assistant<|channel|>commentary to=functions.b"
                   "<|message|>[1]<|call|>"),
               ParserOptions{});
  // run() stops at the first stop token, as a server would; feed the rest to one parser.
  EXPECT_EQ(r.result.tool_calls.size(), 1u);
  auto p = StreamingParser::create(byte_tok()).value();
  std::vector<ParserEvent> ev;
  for (int32_t id : enc("<|channel|>analysis<|message|>need two<|end|>"
                        "<|start|>assistant<|channel|>commentary to=functions.a <|constrain|>json"
                        "<|message|>{}<|call|><|start|>assistant<|channel|>commentary "
                        "to=functions.b<|message|>[1]<|call|>")) {
    p.push(id, ev);
  }
  p.finish(ev);
  const auto& res = p.result();
  ASSERT_EQ(res.tool_calls.size(), 2u);
  EXPECT_EQ(res.tool_calls[0].name, "a");
  EXPECT_EQ(res.tool_calls[1].name, "b");
  EXPECT_EQ(res.tool_calls[1].arguments, "[1]");
  EXPECT_NE(res.tool_calls[0].id, res.tool_calls[1].id);
  EXPECT_EQ(res.reasoning, "need two");
  EXPECT_TRUE(res.warnings.empty());
  expect_same(accumulate(ev), res);
}

TEST(HarmonyParser, BudgetExhaustedWhileReasoning) {
  auto r = run(byte_tok(), enc("<|channel|>analysis<|message|>still thinking ab"));
  EXPECT_EQ(r.result.reasoning, "still thinking ab");
  EXPECT_TRUE(r.result.content.empty());
  EXPECT_TRUE(r.result.truncated);
  EXPECT_TRUE(r.result.reasoning_only);
  EXPECT_FALSE(r.result.stopped);
  EXPECT_EQ(r.result.finish, FinishReason::kLength);
}

TEST(HarmonyParser, PreambleOnCommentaryIsContent) {
  auto r = run(byte_tok(), enc("<|channel|>commentary<|message|>Checking.<|end|><|start|>assistant"
                               "<|channel|>commentary to=functions.f<|message|>{}<|call|>"));
  EXPECT_EQ(r.result.content, "Checking.");
  EXPECT_EQ(r.result.tool_calls.size(), 1u);
  EXPECT_TRUE(r.result.warnings.empty());
}

// Structured output: the body is held to JSON, so a content type in the header must not leak
// into the content ("<|channel|>final json" once gave content "json{...}").
TEST(HarmonyParser, ContentTypeOnFinalIsNotContent) {
  for (const char* header : {"<|channel|>final json", "<|channel|>final <|constrain|>json",
                             "<|channel|>final<|constrain|>json", "<|channel|>final  json "}) {
    SCOPED_TRACE(header);
    auto r = run(byte_tok(), enc(std::string(header) + "<|message|>{\"a\":1}<|return|>"));
    EXPECT_EQ(r.result.content, "{\"a\":1}");
    EXPECT_TRUE(r.result.warnings.empty()) << r.result.warnings[0];
  }
  auto r = run(byte_tok(), enc("<|channel|>final note<|message|>{}<|return|>"));
  EXPECT_EQ(r.result.content, "note{}");  // other words are still kept (degraded mode)
  EXPECT_EQ(r.result.warnings.size(), 1u);
}

TEST(HarmonyParser, MalformedDegradesToContentWithWarnings) {
  struct Case {
    std::string text, content;
    bool starts_in_header = true;
  } cases[] = {
      {"<|message|>no channel<|return|>", "no channel"},                     // missing channel
      {"<|channel|>commentary to=browser.search<|message|>q<|call|>", "q"},  // unknown recipient
      {"<|channel|>final<|message|>a<|return|>trailing", "atrailing"},       // text after end
      {"<|channel|>final<|message|>x<|constrain|>y<|return|>", "xy"},        // stray special
      {"<|channel|>final<|message|>one<|start|>assistant<|channel|>final<|message|>two",
       "onetwo"},  // missing <|end|>
      {"plain words without a header<|return|>", "plain words without a header"},
      {"<|channel|>final words but no message token<|end|>", "words but no message token"},
      {"hello", "hello", false},                     // outside message
      {"<|channel|>weird<|message|>w<|end|>", "w"},  // unknown channel
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.text);
    ParserOptions opt;
    opt.starts_in_header = c.starts_in_header;
    auto p = StreamingParser::create(byte_tok(), opt).value();
    std::vector<ParserEvent> ev;
    for (int32_t id : enc(c.text)) p.push(id, ev);
    p.finish(ev);
    EXPECT_EQ(p.result().content, c.content);
    EXPECT_FALSE(p.result().warnings.empty());
    expect_same(accumulate(ev), p.result());
  }
}

TEST(HarmonyParser, TruncatedToolCallAndBadIds) {
  auto r = run(byte_tok(), enc("<|channel|>commentary to=functions.f<|message|>{\"a\":"));
  ASSERT_EQ(r.result.tool_calls.size(), 1u);
  EXPECT_EQ(r.result.tool_calls[0].arguments, "{\"a\":");
  EXPECT_TRUE(r.result.truncated);
  EXPECT_EQ(r.result.finish, FinishReason::kLength);
  EXPECT_FALSE(r.result.warnings.empty());
  auto bad = run(byte_tok(), {kChannel, 'f', 'i', 'n', 'a', 'l', kMessage, 'o', -5, 999999, 1000,
                              'k', kReturn});
  EXPECT_EQ(bad.result.content, "ok");
  EXPECT_EQ(bad.result.warnings.size(), 3u);
}

// Generation cut off inside a header (budget or stop token): the partial header is not text
// (openai-harmony yields no message for it); header-less text is still kept.
TEST(HarmonyParser, HeaderCutOffLeavesNoText) {
  const std::string thought = "<|channel|>analysis<|message|>Thinking<|end|>";
  for (const std::string tail :
       {"<|start|>assistant<|channel|>", "<|start|>assistant", "<|start|>assistant to",
        "<|start|>assistant t", "<|start|>assistant to=", "<|start|>assistant to=functions.f",
        "<|start|>assistant<|channel|>commentary to", "<|start|>assistant<|channel|>final json",
        "<|start|><|channel|>commentary to=functions.get_weather <|constrain|>json"}) {
    for (bool stop_token : {false, true}) {
      SCOPED_TRACE(tail + (stop_token ? " + <|return|>" : ""));
      auto ids = enc(thought + tail);
      if (stop_token) ids.push_back(kReturn);
      auto r = run(byte_tok(), ids);
      EXPECT_EQ(r.result.reasoning, "Thinking");
      EXPECT_EQ(r.result.content, "");
      EXPECT_TRUE(r.result.tool_calls.empty());
      EXPECT_TRUE(r.result.reasoning_only);
      EXPECT_EQ(r.result.finish, stop_token ? FinishReason::kStop : FinishReason::kLength);
      expect_same(accumulate(r.events), r.result);
    }
  }
  EXPECT_EQ(run(byte_tok(), {kChannel}).result.content, "");
  // A model that skips the header: its words are text, cut off or not.
  EXPECT_EQ(run(byte_tok(), enc("Hello to")).result.content, "Hello to");
  EXPECT_EQ(run(byte_tok(), enc("<|start|>assistant Hello")).result.content, " Hello");
  // A header ended by <|end|> (not cut) still keeps its non-header words.
  EXPECT_EQ(run(byte_tok(), enc("<|channel|>final words<|end|>")).result.content, "words");
}

TEST(HarmonyParser, RecipientsOtherThanFunctions) {
  // Analysis is reasoning whoever it is addressed to; elsewhere an unknown recipient's body is
  // content (degraded mode).
  auto py = run(byte_tok(), enc("<|channel|>analysis to=python<|message|>print(1)<|call|>"));
  EXPECT_EQ(py.result.reasoning, "print(1)");
  EXPECT_EQ(py.result.content, "");
  EXPECT_EQ(py.result.warnings.size(), 2u);  // unknown recipient; <|call|> ends a non-call
  // A declared tool's bare name is a call of it; an undeclared bare name is not.
  const std::string bare = "<|channel|>commentary to=get_weather <|constrain|>json<|message|>{}";
  ParserOptions opt;
  opt.tool_names = {"lookup", "get_weather"};
  auto call = run(byte_tok(), enc(bare + "<|call|>"), opt);
  ASSERT_EQ(call.result.tool_calls.size(), 1u);
  EXPECT_EQ(call.result.tool_calls[0].name, "get_weather");
  EXPECT_EQ(call.result.tool_calls[0].arguments, "{}");
  EXPECT_EQ(call.result.finish, FinishReason::kToolCalls);
  auto undeclared = run(byte_tok(), enc(bare + "<|call|>"));
  EXPECT_TRUE(undeclared.result.tool_calls.empty());
  EXPECT_EQ(undeclared.result.content, "{}");
}

TEST(HarmonyParser, LongestToolNameFitsTheHeaderLimit) {
  // A 64-byte name (the request limit) written one token per byte is still a header.
  std::string name;
  for (int i = 0; name.size() < 64; ++i) name += (i % 2 ? "_" : "a");
  auto r = run(byte_tok(), enc("<|channel|>commentary to=functions." + name +
                               " <|constrain|>json<|message|>{\"a\":1}<|call|>"));
  ASSERT_EQ(r.result.tool_calls.size(), 1u);
  EXPECT_EQ(r.result.tool_calls[0].name, name);
  EXPECT_EQ(r.result.tool_calls[0].arguments, "{\"a\":1}");
}

TEST(HarmonyParser, SplitUtf8IsHeldBackThenEmittedWhole) {
  auto p = StreamingParser::create(byte_tok()).value();
  std::vector<ParserEvent> ev;
  for (int32_t id : enc("<|channel|>final<|message|>")) p.push(id, ev);
  const std::string smile = "\xF0\x9F\x98\x80";
  for (size_t i = 0; i < 3; ++i) {
    p.push(static_cast<unsigned char>(smile[i]), ev);
    EXPECT_TRUE(ev.empty());  // nothing decodable yet
  }
  p.push(static_cast<unsigned char>(smile[3]), ev);
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].text, smile);
  p.push(0xE2, ev);  // a dangling lead byte at the end becomes U+FFFD on finish
  p.finish(ev);
  EXPECT_EQ(p.result().content, smile + "\xEF\xBF\xBD");
}

// Random well-formed generations: the parse must reproduce exactly what was written.
TEST(HarmonyParser, PropertyWellFormedRoundTrip) {
  const uint32_t seed = std::random_device{}();
  std::printf("seed=%u\n", seed);
  std::mt19937 rng(seed);
  const std::vector<std::string> pieces = {
      "a", " ", "\n", "Zürich", "日本", "😀", "{\"k\": [1, 2]}", "<", "|", "to=x", "é", "\t", "end"};
  auto text = [&] {
    std::string s;
    for (int n = static_cast<int>(rng() % 8); n > 0; --n) s += pieces[rng() % pieces.size()];
    return s;
  };
  for (int iter = 0; iter < 300; ++iter) {
    std::string gen, reasoning, content;
    std::vector<std::pair<std::string, std::string>> calls;
    const int n = 1 + static_cast<int>(rng() % 4);
    bool last_call = false;
    for (int m = 0; m < n; ++m) {
      if (m > 0) gen += "<|start|>assistant";
      const int kind = static_cast<int>(rng() % 4);
      std::string body = text();
      last_call = kind == 3;
      if (kind == 0) {
        gen += "<|channel|>analysis<|message|>" + body;
        reasoning += body;
      } else if (kind == 1 || kind == 2) {
        gen += std::string("<|channel|>") + (kind == 1 ? "final" : "commentary") + "<|message|>" +
               body;
        content += body;
      } else {
        std::string name = "fn" + std::to_string(rng() % 100);
        const char* forms[] = {"<|channel|>commentary to=functions.", " to=functions."};
        bool after = rng() % 2;
        gen += after ? forms[0] + name : forms[1] + name + "<|channel|>commentary";
        gen += (rng() % 2) ? " <|constrain|>json" : "";
        gen += "<|message|>" + body;
        calls.emplace_back(name, body);
      }
      gen += (m + 1 < n) ? (last_call ? "<|call|>" : "<|end|>")
                         : (last_call ? "<|call|>" : "<|return|>");
    }
    auto p = StreamingParser::create(byte_tok()).value();
    std::vector<ParserEvent> ev;
    for (int32_t id : enc(gen)) p.push(id, ev);
    p.finish(ev);
    const auto& r = p.result();
    ASSERT_EQ(r.reasoning, reasoning) << gen;
    ASSERT_EQ(r.content, content) << gen;
    ASSERT_EQ(r.tool_calls.size(), calls.size()) << gen;
    for (size_t i = 0; i < calls.size(); ++i) {
      EXPECT_EQ(r.tool_calls[i].name, calls[i].first);
      EXPECT_EQ(r.tool_calls[i].arguments, calls[i].second);
    }
    ASSERT_TRUE(r.warnings.empty()) << gen << "\n" << r.warnings[0];
    EXPECT_EQ(r.finish, calls.empty() ? FinishReason::kStop : FinishReason::kToolCalls);
    expect_same(accumulate(ev), r);
  }
}

// Random malformed sequences (biased to special tokens): never crash, every delta valid UTF-8,
// events concatenate to the result, parsing is deterministic, and text-only input is kept whole.
TEST(HarmonyParser, PropertyMalformedNeverLosesOrCorrupts) {
  const uint32_t seed = std::random_device{}();
  std::printf("seed=%u\n", seed);
  std::mt19937 rng(seed);
  const int32_t specials[] = {kStart, kEnd, kMessage, kChannel, kConstrain, kReturn, kCall, 199999};
  const std::string words[] = {"analysis", "final",     "commentary", " to=functions.f",
                               "json",     "assistant", " ",          "x\xC3",
                               "\xA9",     "\xF0\x9F"};
  for (int iter = 0; iter < 400; ++iter) {
    std::vector<int32_t> ids;
    for (int n = static_cast<int>(rng() % 40); n > 0; --n) {
      const uint32_t r = rng() % 10;
      if (r < 4) {
        ids.push_back(specials[rng() % 8]);
      } else if (r < 8) {
        for (int32_t id : enc(words[rng() % 10])) ids.push_back(id);
      } else {
        ids.push_back(static_cast<int32_t>(rng() % 256));
      }
    }
    ParserOptions opt;
    opt.starts_in_header = rng() % 2;
    opt.max_header_tokens = 1 + rng() % 20;
    auto a = run(byte_tok(), ids, opt);
    auto b = run(byte_tok(), ids, opt);
    expect_same(accumulate(a.events), a.result);
    expect_same(a.result, b.result);
    EXPECT_EQ(a.result.warnings, b.result.warnings);
    EXPECT_TRUE(valid_utf8(a.result.content));
    EXPECT_EQ(a.result.truncated, !a.result.stopped);
  }
  // Text alone (no special tokens) outside any message comes back unchanged.
  for (int iter = 0; iter < 100; ++iter) {
    std::string s;
    for (int n = static_cast<int>(rng() % 30); n > 0; --n)
      s.push_back(static_cast<char>(32 + rng() % 90));
    ParserOptions opt;
    opt.starts_in_header = false;
    EXPECT_EQ(run(byte_tok(), enc(s), opt).result.content, s);
  }
}

TEST(HarmonyParser, RealTokenizerGeneration) {
  auto tok = Tokenizer::load(GOSSAMER_TEST_TOKENIZER);
  ASSERT_TRUE(tok.ok()) << tok.status().ToString();
  const std::string reasoning = "The user wants the weather in Zürich 🌦; call get_weather.";
  const std::string args = "{\"location\":\"Zürich, CH\",\"unit\":\"celsius\"}";
  auto ids = (*tok)->encode("<|channel|>analysis<|message|>" + reasoning +
                                "<|end|><|start|>assistant<|channel|>commentary "
                                "to=functions.get_weather <|constrain|>json<|message|>" +
                                args + "<|call|>",
                            /*allow_special=*/true);
  EXPECT_EQ(ids.back(), kCall);
  auto r = parse_completion(ids, *tok);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->reasoning, reasoning);
  ASSERT_EQ(r->tool_calls.size(), 1u);
  EXPECT_EQ(r->tool_calls[0].name, "get_weather");
  EXPECT_EQ(r->tool_calls[0].arguments, args);
  EXPECT_TRUE(r->warnings.empty());
  EXPECT_EQ(r->finish, FinishReason::kToolCalls);
}

}  // namespace
}  // namespace gossamer::harmony

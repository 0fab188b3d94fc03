// Differential test: which message bodies JsonConstraint holds (the final body to the response
// schema, a strict tool's call arguments to that tool's schema) against how the output parser
// (harmony::StreamingParser, fed the same tokens as the server feeds it) classifies the same
// message. Headers are built at random from the pieces the model can emit (role words,
// <|channel|> with usual and odd channel names, recipients before or after the channel, "to="
// glued to other words, <|constrain|>json and bare json, extra words, runs of whitespace, a stray
// special token) after the streams that lead to a header (start of the generation, a message
// closed by <|end|> with or without <|start|>, a message cut short by <|channel|>); the
// regression cases name each class where the two once disagreed.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "common/test_seed.h"
#include "harmony/parser.h"
#include "server/json_constraint.h"
#include "server/token_fixture_test_util.h"

namespace gossamer::server {
namespace {

using testing::encode_specials;
using testing::token_fixture;

// A constraint whose targets start with different bytes: the final body is an array ('['),
// tool f takes an object ('{'), tool g a string ('"'); tool h exists but is not held.
std::shared_ptr<JsonConstraint> make_constraint() {
  const auto& f = token_fixture();
  auto compile = [](const char* schema) {
    const json s = json::parse(schema);
    auto c = compile_json_schema(&s);
    EXPECT_TRUE(c.ok()) << c.status().ToString();
    return c.ok() ? *c : nullptr;
  };
  JsonConstraintOptions o;
  o.compiled = compile(R"({"type": "array"})");
  o.tools = {{"f", compile(R"({"type": "object"})")}, {"g", compile(R"({"type": "string"})")}};
  auto c = JsonConstraint::create(*f.tok, f.pieces, f.trie, o);
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  return c.ok() ? *c : nullptr;
}

// What the constraint does with the body that starts after `gen` (which ends with <|message|>):
// "final", "f", "g", "free", or "?" when the allowed set fits none of them.
std::string constraint_view(JsonConstraint& c, const std::vector<int32_t>& gen) {
  auto a = c.allowed(gen);
  if (!a) return "free";
  auto has = [&](const char* s) {
    const std::vector<int32_t> ids = token_fixture().tok->encode(s);
    return ids.size() == 1 && std::find(a->begin(), a->end(), ids[0]) != a->end();
  };
  const int n = has("[") + has("{") + has("\"");
  if (n != 1) return "?";
  return has("[") ? "final" : has("{") ? "f" : "g";
}

// What the parser makes of the same body: "f" / "g" for a call to a held tool, "final" for
// final-channel content, "free" for anything else (reasoning, commentary, other calls).
std::string parser_view(const std::vector<int32_t>& gen) {
  const auto& f = token_fixture();
  auto p = harmony::StreamingParser::create(f.tok);
  EXPECT_TRUE(p.ok());
  if (!p.ok()) return "?";
  std::vector<harmony::ParserEvent> ev;
  for (int32_t id : gen) p->push(id, ev);
  ev.clear();
  p->push(f.tok->encode("7")[0], ev);  // a body token: its delta shows the message's kind
  p->push(*f.tok->special_id("<|end|>"), ev);
  std::string kind = "free", channel;
  for (const harmony::ParserEvent& e : ev) {
    if (e.type == harmony::EventType::kToolCallArgumentsDelta) {
      const std::string& name = p->result().tool_calls.back().name;
      kind = name == "f" || name == "g" ? name : "free";
    } else if (e.type == harmony::EventType::kContentDelta && e.text == "7") {
      kind = "content";
    } else if (e.type == harmony::EventType::kMessageEnd) {
      channel = e.channel;
    }
  }
  if (kind == "content") return channel == "final" ? "final" : "free";
  return kind;
}

// Pieces of a header, concatenated at random (0 to 6 of them).
const std::vector<std::string>& header_pieces() {
  static const std::vector<std::string> pieces = {
      "assistant",
      " assistant",
      "user",
      "functions.f",
      "<|channel|>analysis",
      "<|channel|>commentary",
      "<|channel|>final",
      "<|channel|>",
      "<|channel|>Final",
      "<|channel|>finals",
      "final",
      " final",
      "commentary",
      " to=functions.f",
      "to=functions.f",
      " to=functions.g",
      " to=functions.h",
      " to=functions.",
      " to=browser.search",
      " to=all",
      " to=",
      "xto=functions.f",
      " auto=functions.g",
      "proto=functions.f",
      " <|constrain|>json",
      "<|constrain|>json",
      "<|constrain|>",
      " json",
      "json",
      " extra",
      " words here",
      " ",
      "   ",
      "\t",
      "\n",
      "<|reserved_200013|>",
      "<|endoftext|>",
      "<",
      ".",
      "x",
  };
  return pieces;
}

// What comes before the header: nothing (the prompt ended with "<|start|>assistant"), a closed
// message and <|start|>, a closed message without <|start|>, an unclosed analysis message.
const std::vector<std::string>& befores() {
  static const std::vector<std::string> b = {
      "",
      "<|channel|>analysis<|message|>Think.<|end|><|start|>",
      "<|channel|>analysis<|message|>Think.<|end|><|start|>assistant",
      "<|channel|>analysis<|message|>Think.<|end|>",
      "<|channel|>analysis<|message|>Think.",
      "<|channel|>commentary to=functions.f<|message|>{}<|call|><|start|>functions.f "
      "to=assistant<|channel|>commentary<|message|>1<|end|><|start|>assistant",
  };
  return b;
}

TEST(JsonConstraintHeader, AgreesWithTheParserOnRandomHeaders) {
  const auto& f = token_fixture();
  ASSERT_TRUE(f.trie) << "tokenizer not found at " << GOSSAMER_TEST_TOKENIZER;
  const uint64_t seed = gossamer::testing::fresh_seed("JsonConstraintHeader.Random");
  std::mt19937_64 rng(seed);
  auto c = make_constraint();
  ASSERT_TRUE(c);
  const auto& pieces = header_pieces();
  std::map<std::string, int> seen;  // how often each classification came up
  int failures = 0;
  for (int it = 0; it < 4000 && failures < 20; ++it) {
    std::string text = befores()[rng() % befores().size()];
    const size_t n = rng() % 7;
    for (size_t k = 0; k < n; ++k) text += pieces[rng() % pieces.size()];
    text += "<|message|>";
    const std::vector<int32_t> gen = encode_specials(text);
    const std::string want = parser_view(gen), got = constraint_view(*c, gen);
    ++seen[want];
    if (got != want) {
      ++failures;
      ADD_FAILURE() << "seed " << seed << ": " << ::testing::PrintToString(text) << ": parser "
                    << want << ", constraint " << got;
    }
  }
  // The generator reaches every classification.
  for (const char* k : {"final", "f", "g", "free"}) {
    std::printf("%-5s %d\n", k, seen[k]);
    EXPECT_GT(seen[k], 50) << k;
  }
}

struct Case {
  std::string text;  // generated text, ending with <|message|>
  std::string want;  // "final", "f", "g" or "free"
};

// One case per class where the constraint's own header helpers once disagreed with the parser,
// and the usual forms they always agreed on.
TEST(JsonConstraintHeader, RegressionCases) {
  ASSERT_TRUE(token_fixture().trie) << "tokenizer not found at " << GOSSAMER_TEST_TOKENIZER;
  auto c = make_constraint();
  ASSERT_TRUE(c);
  std::string long_header;
  for (int i = 0; i < 140; ++i) long_header += " x";
  const Case cases[] = {
      // The usual forms.
      {"<|channel|>final<|message|>", "final"},
      {"<|channel|>final <|constrain|>json<|message|>", "final"},
      {"<|channel|>final json<|message|>", "final"},
      {"<|channel|>commentary to=functions.f <|constrain|>json<|message|>", "f"},
      {"<|channel|>commentary to=functions.g<|constrain|>json<|message|>", "g"},
      {" to=functions.f<|channel|>commentary json<|message|>", "f"},
      {"assistant   to=functions.g\t<|channel|>commentary\n<|constrain|>json<|message|>", "g"},
      {"<|channel|>commentary to=functions.h <|constrain|>json<|message|>", "free"},
      {"<|channel|>commentary<|message|>", "free"},
      {"<|channel|>analysis<|message|>", "free"},
      {"<|channel|>final to=browser.search<|message|>", "final"},
      {"<|channel|>final to=all<|message|>", "final"},
      // A recipient functions.NAME makes a tool call whatever the channel.
      {"<|channel|>final to=functions.g<|message|>", "g"},
      {" to=functions.f<|channel|>final<|message|>", "f"},
      {"<|channel|>final to=functions.h<|message|>", "free"},
      // "to=" counts only at the start of a word.
      {"<|channel|>commentary xto=functions.f<|message|>", "free"},
      {"<|channel|>final auto=functions.f<|message|>", "final"},
      {"<|channel|>commentary proto=functions.f to=functions.g<|message|>", "g"},
      // An empty "to=" does not hide a later recipient.
      {"<|channel|>commentary to= to=functions.f<|message|>", "f"},
      // The channel name ends at '<' as well as at a special token.
      {"<|channel|>final<<|message|>", "final"},
      // A special token other than <|constrain|> glued to the recipient is part of it.
      {"<|channel|>commentary to=functions.f<|reserved_200013|><|message|>", "free"},
      {"<|channel|>final<|reserved_200013|><|message|>", "final"},
      // <|channel|> inside a message closes it and opens the next header.
      {"<|channel|>analysis<|message|>Think.<|channel|>final<|message|>", "final"},
      {"<|channel|>analysis<|message|>Think.<|channel|>commentary to=functions.f<|message|>", "f"},
      // Text after <|end|> without <|start|> is content; the header starts at <|channel|>.
      {"<|channel|>analysis<|message|>Think.<|end|>to=functions.f<|channel|>commentary"
       "<|message|>",
       "free"},
      {"<|channel|>analysis<|message|>Think.<|end|>x<|channel|>final<|message|>", "final"},
      // A header of more than 128 tokens is given up on (content).
      {"<|channel|>final" + long_header + "<|message|>", "free"},
      {"<|channel|>final" + long_header.substr(0, 240) + "<|message|>", "final"},
  };
  for (const Case& k : cases) {
    const std::vector<int32_t> gen = encode_specials(k.text);
    EXPECT_EQ(parser_view(gen), k.want) << ::testing::PrintToString(k.text);
    EXPECT_EQ(constraint_view(*c, gen), k.want) << ::testing::PrintToString(k.text);
  }
}

}  // namespace
}  // namespace gossamer::server

// ChatChoice's logprobs: every generated token whose text reaches the content has its entry in
// content_tokens(), in order, also when the harmony parser emits that text only later (a header
// given up on, the bytes of a split character); streamed deltas carry the entries up to them.
#include "server/chat_choice.h"

#include <gtest/gtest.h>

#include <random>

#include "common/test_seed.h"
#include "harmony/header.h"
#include "server/token_fixture_test_util.h"

namespace gossamer::server {
namespace {

const Tokenizer& tok() {
  return *testing::token_fixture().tok;
}

struct Outcome {
  std::string content;
  std::vector<int32_t> pushed, lp_ids;  // generated ids; ids of the logprob entries
  std::vector<float> lps;
  std::vector<Delta> deltas;
};

// Feeds `ids` as generated tokens (logprob -1, -2, ...) through a chat choice whose parser
// starts in the header (the prompt ended with <|start|>assistant), as the server does.
Outcome run(const std::vector<int32_t>& ids, std::vector<std::string> stop = {}) {
  Outcome r;
  auto stream = std::make_shared<RequestStream>();
  for (size_t i = 0; i < ids.size(); ++i) {
    stream->push(SampledToken{ids[i], -1.f - static_cast<float>(i), {}});
  }
  stream->finish(FinishReason::kLength);
  auto parser = harmony::StreamingParser::create(testing::token_fixture().tok);
  EXPECT_TRUE(parser.ok());
  ChatChoice c(stream, std::move(parser).value(), std::move(stop), testing::token_fixture().tok);
  while (!c.poll(std::chrono::milliseconds(10), &r.deltas)) {
  }
  r.content = c.content();
  r.pushed = ids;
  for (const SampledToken& t : c.content_tokens()) {
    r.lp_ids.push_back(t.token);
    r.lps.push_back(t.logprob);
  }
  return r;
}

std::vector<int32_t> enc(const std::string& s) {
  return tok().encode(s, /*allow_special=*/true);
}

std::string bytes_of(const std::vector<int32_t>& ids) {
  std::string s;
  for (int32_t id : ids) s += *tok().token_bytes(id);
  return s;
}

int32_t byte_token(unsigned char b) {
  for (int32_t id = 0; id < tok().vocab_size(); ++id) {
    Result<std::string> s = tok().token_bytes(id);
    if (s.ok() && s->size() == 1 && static_cast<unsigned char>((*s)[0]) == b) return id;
  }
  return -1;
}

TEST(ChatChoiceLogprobs, FinalMessageHasOnlyItsTextTokens) {
  ASSERT_TRUE(testing::token_fixture().tok) << "tokenizer not found at " << GOSSAMER_TEST_TOKENIZER;
  const std::vector<int32_t> answer = enc("Hello there, world");
  std::vector<int32_t> ids = enc("<|channel|>analysis<|message|>Let me think.<|end|>");
  for (int32_t id : enc("<|start|>assistant<|channel|>final<|message|>")) ids.push_back(id);
  const size_t first = ids.size();
  ids.insert(ids.end(), answer.begin(), answer.end());
  ids.push_back(*tok().special_id("<|return|>"));
  Outcome r = run(ids);
  EXPECT_EQ(r.content, "Hello there, world");
  EXPECT_EQ(r.lp_ids, answer);
  ASSERT_EQ(r.lps.size(), answer.size());
  EXPECT_EQ(r.lps[0], -1.f - static_cast<float>(first));  // the entries are those tokens' own
}

TEST(ChatChoiceLogprobs, AbandonedHeaderKeptAsContentHasItsTokens) {
  ASSERT_TRUE(testing::token_fixture().tok) << "tokenizer not found at " << GOSSAMER_TEST_TOKENIZER;
  // Generation ends inside the header (a random model): the header text becomes the content
  // when the parser finishes; before the fix the logprobs were empty.
  const std::vector<int32_t> ids = enc(" noise words 42 here");
  Outcome r = run(ids);
  EXPECT_EQ(r.content, " noise words 42 here");
  EXPECT_EQ(r.lp_ids, ids);
  EXPECT_EQ(bytes_of(r.lp_ids), r.content);
  // Given up on at <|end|> after a final message: "assistant" (the role) and the specials are
  // not content; the words are.
  const std::vector<int32_t> hi = enc("Hi");
  const std::vector<int32_t> words = enc(" more text");
  std::vector<int32_t> ids2 = enc("<|channel|>final<|message|>");
  ids2.insert(ids2.end(), hi.begin(), hi.end());
  for (int32_t id : enc("<|end|><|start|>assistant")) ids2.push_back(id);
  ids2.insert(ids2.end(), words.begin(), words.end());
  ids2.push_back(*tok().special_id("<|end|>"));
  Outcome r2 = run(ids2);
  EXPECT_EQ(r2.content, "Hi more text");
  std::vector<int32_t> want = hi;
  want.insert(want.end(), words.begin(), words.end());
  EXPECT_EQ(r2.lp_ids, want);
}

TEST(ChatChoiceLogprobs, LongHeaderTurnedContentKeepsEveryToken) {
  ASSERT_TRUE(testing::token_fixture().tok) << "tokenizer not found at " << GOSSAMER_TEST_TOKENIZER;
  std::string text;
  for (int i = 0; i < 40; ++i) text += " w" + std::to_string(i);  // > 64 tokens, no <|message|>
  const std::vector<int32_t> ids = enc(text);
  ASSERT_GT(ids.size(), 64u);
  Outcome r = run(ids);
  EXPECT_EQ(r.content, text);
  EXPECT_EQ(r.lp_ids, ids);
}

TEST(ChatChoiceLogprobs, SplitCharacterCountsEveryByteToken) {
  ASSERT_TRUE(testing::token_fixture().tok) << "tokenizer not found at " << GOSSAMER_TEST_TOKENIZER;
  const int32_t e2 = byte_token(0xE2), x82 = byte_token(0x82), xac = byte_token(0xAC);
  ASSERT_TRUE(e2 >= 0 && x82 >= 0 && xac >= 0);
  std::vector<int32_t> ids = enc("<|channel|>final<|message|>a");
  const size_t first = ids.size() - 1;
  for (int32_t id : {e2, x82, xac}) ids.push_back(id);  // U+20AC in three tokens
  for (int32_t id : enc(" b")) ids.push_back(id);
  ids.push_back(e2);  // a dangling lead byte: U+FFFD when the message ends
  ids.push_back(*tok().special_id("<|return|>"));
  Outcome r = run(ids);
  EXPECT_EQ(r.content, "a\xE2\x82\xAC b\xEF\xBF\xBD");
  const std::vector<int32_t> want(ids.begin() + static_cast<long>(first), ids.end() - 1);
  EXPECT_EQ(r.lp_ids, want);
  EXPECT_EQ(bytes_of(r.lp_ids), "a\xE2\x82\xAC b\xE2");
}

TEST(ChatChoiceLogprobs, DeltasCarryTheEntriesUpToThem) {
  ASSERT_TRUE(testing::token_fixture().tok) << "tokenizer not found at " << GOSSAMER_TEST_TOKENIZER;
  const std::vector<int32_t> ids = enc(" alpha beta gamma");
  Outcome r = run(ids);
  size_t last = 0, n = 0;
  std::string text;
  for (const Delta& d : r.deltas) {
    if (d.kind != Delta::Kind::kContent) continue;
    EXPECT_GE(d.lp_end, last);
    last = d.lp_end;
    text += d.text;
    ++n;
  }
  EXPECT_GT(n, 0u);
  EXPECT_EQ(text, r.content);
  EXPECT_EQ(last, r.lp_ids.size());
}

// Random ordinary tokens from the header on: whenever the parser passes every generated byte
// through unchanged, the entries are exactly the generated tokens; always, they are a
// subsequence of them (each at most once, in order).
TEST(ChatChoiceLogprobs, RandomTokensProperty) {
  ASSERT_TRUE(testing::token_fixture().tok) << "tokenizer not found at " << GOSSAMER_TEST_TOKENIZER;
  std::mt19937_64 rng(gossamer::testing::fresh_seed("chat_choice random tokens"));
  const int32_t end = *tok().special_id("<|end|>");
  int passed_through = 0;
  for (int round = 0; round < 60; ++round) {
    std::vector<int32_t> ids;
    const size_t n = 1 + rng() % 90;
    while (ids.size() < n) {
      const auto id = static_cast<int32_t>(rng() % static_cast<uint64_t>(tok().vocab_size()));
      if (!tok().is_special(id)) ids.push_back(id);
      if (rng() % 40 == 0) ids.push_back(end);
    }
    Outcome r = run(ids);
    size_t j = 0;
    for (int32_t id : r.lp_ids) {
      while (j < ids.size() && ids[j] != id) ++j;
      ASSERT_LT(j, ids.size()) << "entry " << id << " is not a later generated token";
      ++j;
    }
    std::vector<int32_t> text_ids;
    for (int32_t id : ids) {
      if (id != end) text_ids.push_back(id);
    }
    EXPECT_TRUE(r.content.empty() || !r.lp_ids.empty()) << "content without logprobs";
    if (r.content == bytes_of(text_ids)) {
      ++passed_through;
      EXPECT_EQ(r.lp_ids, text_ids);
    }
  }
  EXPECT_GT(passed_through, 0);
}

TEST(TextSource, FewestLatestTokensContainingTheText) {
  using P = std::pair<size_t, size_t>;
  EXPECT_EQ(text_source({"<|start|>", "x", "Hi"}, "Hi"), P(2, 3));
  EXPECT_EQ(text_source({"ab", " c", "ab"}, "ab"), P(2, 3));  // the latest
  EXPECT_EQ(text_source({"a", " b", " c", "<|end|>"}, " b c"), P(1, 3));
  EXPECT_EQ(text_source({"\xE2", "\x82\xAC"}, "\xE2\x82\xAC"), P(0, 2));
  EXPECT_EQ(text_source({"x", "\x82 y"}, "\xEF\xBF\xBD y"), P(1, 2));              // sanitised
  EXPECT_EQ(text_source({"final", " junk", "\n\nwords"}, "junk words"), P(1, 3));  // re-joined
  EXPECT_EQ(text_source({"\x82\xAC y"}, "\xE2\x82\xAC y"), P(1, 1));               // none
  EXPECT_EQ(text_source({}, "x"), P(0, 0));
}

}  // namespace
}  // namespace gossamer::server

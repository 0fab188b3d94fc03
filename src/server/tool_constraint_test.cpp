// ToolNameConstraint with the real o200k_harmony vocabulary: random walks through the allowed
// sets always end in "NAME <|constrain|>json<|message|>" for one of the tools, and every allowed
// set equals a brute-force scan of the whole vocabulary.
#include "server/tool_constraint.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <random>
#include <set>

#include "common/test_seed.h"
#include "server/token_fixture_test_util.h"

namespace gossamer::server {
namespace {

using Fixture = testing::TokenFixture;
const Fixture& fixture() {
  return testing::token_fixture();
}

// Oracle: every ordinary token whose bytes keep `text` a prefix of some "NAME ".
std::vector<int32_t> brute_force(const Tokenizer& tok, const std::string& text,
                                 const std::vector<std::string>& names) {
  std::vector<int32_t> out;
  for (int32_t id = 0; id < tok.vocab_size(); ++id) {
    if (tok.is_special(id)) continue;
    auto b = tok.token_bytes(id);
    if (!b.ok() || b->empty()) continue;
    const std::string t = text + *b;
    for (const auto& n : names) {
      const std::string target = n + " ";
      if (t.size() <= target.size() && target.compare(0, t.size(), t) == 0) {
        out.push_back(id);
        break;
      }
    }
  }
  return out;
}

TEST(ToolConstraint, RandomWalksAlwaysSpellAToolCall) {
  const Fixture& f = fixture();
  ASSERT_TRUE(f.tok && f.pieces) << "tokenizer not found at " << GOSSAMER_TEST_TOKENIZER;
  const std::vector<std::string> names = {"get_weather", "get_time", "get", "lookup_user-2"};
  auto c = ToolNameConstraint::create(*f.tok, f.pieces, names);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  std::mt19937_64 rng(
      gossamer::testing::fresh_seed("ToolConstraint.RandomWalksAlwaysSpellAToolCall"));
  std::set<std::string> seen;
  int checked = 0;
  for (int walk = 0; walk < 400; ++walk) {
    std::vector<int32_t> gen;
    std::string name_text;
    for (int step = 0; step < 64; ++step) {
      auto allowed = (*c)->allowed(gen);
      if (!allowed) break;
      ASSERT_FALSE(allowed->empty());
      if (walk < 2 && checked < 8 &&
          allowed->size() > 1) {  // the allowed set is exactly the vocabulary scan
        EXPECT_EQ(*allowed, brute_force(*f.tok, name_text, names)) << "after '" << name_text;
        ++checked;
      }
      const int32_t t = (*allowed)[rng() % allowed->size()];
      gen.push_back(t);
      if (!f.tok->is_special(t)) name_text += f.tok->token_bytes(t).value();
    }
    auto text = f.tok->decode(gen);
    ASSERT_TRUE(text.ok());
    bool ok = false;
    for (const auto& n : names) {
      if (*text == n + " <|constrain|>json<|message|>") {
        ok = true;
        seen.insert(n);
      }
    }
    ASSERT_TRUE(ok) << "walk " << walk << " wrote '" << *text << "'";
  }
  EXPECT_GE(checked, 4);
  EXPECT_GE(seen.size(), 2u);  // not stuck on one name
}

TEST(ToolConstraint, LeavesTheGrammarAndClosingTokens) {
  const Fixture& f = fixture();
  ASSERT_TRUE(f.tok && f.pieces);
  auto c = ToolNameConstraint::create(*f.tok, f.pieces, {"alpha", "beta"});
  ASSERT_TRUE(c.ok());
  // An off-grammar token (the runtime ignored the constraint): no restriction any more.
  const std::vector<int32_t> off = f.tok->encode("zzz");
  EXPECT_FALSE((*c)->allowed(off).has_value());
  // A complete "alpha " then exactly the closing tokens, one at a time, then free.
  std::vector<int32_t> gen = f.tok->encode("alpha ");
  const auto& tail = (*c)->closing_tokens();
  ASSERT_EQ(f.tok->decode(tail).value(), "<|constrain|>json<|message|>");
  for (int32_t want : tail) {
    auto a = (*c)->allowed(gen);
    ASSERT_TRUE(a.has_value());
    EXPECT_EQ(*a, std::vector<int32_t>{want});
    gen.push_back(want);
  }
  EXPECT_FALSE((*c)->allowed(gen).has_value());
  // A wrong closing token: free from there on.
  std::vector<int32_t> bad = f.tok->encode("beta ");
  bad.push_back(f.tok->encode("x")[0]);
  EXPECT_FALSE((*c)->allowed(bad).has_value());
}

TEST(ToolConstraint, RejectsBadNames) {
  const Fixture& f = fixture();
  ASSERT_TRUE(f.tok && f.pieces);
  auto empty = ToolNameConstraint::create(*f.tok, f.pieces, {"ok", ""});
  EXPECT_FALSE(empty.ok());
  auto space = ToolNameConstraint::create(*f.tok, f.pieces, {"has space"});
  ASSERT_FALSE(space.ok());
  EXPECT_NE(space.status().message().find("has space"), std::string::npos);
  EXPECT_FALSE(ToolNameConstraint::create(*f.tok, f.pieces, {}).ok());
  EXPECT_FALSE(ToolNameConstraint::create(*f.tok, nullptr, {"a"}).ok());
}

}  // namespace
}  // namespace gossamer::server

// JsonConstraint with the real o200k_harmony vocabulary: random walks through the allowed sets
// always write a document that parses and fits its schema; hand-written documents are accepted
// (valid ones) or refused at some token (invalid ones); the harmony phases around the final
// body; the time per allowed() call in the expensive states. The schemas and documents are in
// json_constraint_cases_test.cpp.
//
// GOSSAMER_JSON_WALK_OUT=<dir>: the walks also append {"schema", "document"} lines to
// <dir>/walks.jsonl, which tests/python/test_json_constraint.py validates with jsonschema.
#include "server/json_constraint.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <random>

#include "common/test_seed.h"
#include "server/json_constraint_cases_test_util.h"
#include "server/token_fixture_test_util.h"

namespace gossamer::server {
namespace {

using Fixture = testing::TokenFixture;
const Fixture& fixture() {
  return testing::token_fixture();
}

std::shared_ptr<JsonConstraint> make(const json* schema, bool force = false) {
  const Fixture& f = fixture();
  JsonConstraintOptions o;
  o.schema = schema;
  o.force_final_after_end = force;
  auto c = JsonConstraint::create(*f.tok, f.pieces, f.trie, o);
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  return c.ok() ? *c : nullptr;
}

std::vector<int32_t> final_header() {
  return fixture().tok->encode("<|channel|>final<|message|>", true);
}

bool has(const std::vector<int32_t>& v, int32_t id) {
  return std::find(v.begin(), v.end(), id) != v.end();
}

using testing::SchemaCase;

// Feeds the final header and `doc`'s tokens; true when every token was allowed and
// <|return|> is allowed at the end.
bool accepts(JsonConstraint& c, const std::string& doc, std::string* why) {
  const Fixture& f = fixture();
  std::vector<int32_t> gen = final_header();
  for (int32_t id : f.tok->encode(doc)) {
    auto a = c.allowed(gen);
    if (!a || !has(*a, id)) {
      *why = "token '" + f.tok->decode({id}).value() + "' after '" + f.tok->decode(gen).value() +
             "' not allowed";
      return false;
    }
    gen.push_back(id);
  }
  auto a = c.allowed(gen);
  *why = "<|return|> not allowed at the end";
  return a && has(*a, c.return_token());
}

TEST(JsonConstraint, AcceptsValidAndRefusesInvalidDocuments) {
  ASSERT_TRUE(fixture().trie) << "tokenizer not found at " << GOSSAMER_TEST_TOKENIZER;
  for (const SchemaCase& sc : testing::json_schema_cases()) {
    const json schema = sc.schema ? json::parse(sc.schema) : json();
    auto c = make(sc.schema ? &schema : nullptr);
    ASSERT_TRUE(c) << sc.name;
    for (const std::string& doc : sc.valid) {
      std::string why;
      EXPECT_TRUE(accepts(*c, doc, &why)) << sc.name << ": " << doc << ": " << why;
      const json d = json::parse(doc, nullptr, false);
      ASSERT_FALSE(d.is_discarded()) << doc;  // the test's own documents are valid JSON
      EXPECT_TRUE(sc.check(d)) << sc.name << ": " << doc;
    }
    for (const std::string& doc : sc.invalid) {
      std::string why;
      EXPECT_FALSE(accepts(*c, doc, &why)) << sc.name << ": accepted " << doc;
    }
  }
}

std::string body_text(const std::vector<int32_t>& body) {
  std::string s;
  for (int32_t id : body) s += *fixture().pieces->bytes(id);
  return s;
}

// A random walk: mostly uniform over the allowed set; in 3 of 5 steps uniform over the allowed
// tokens that hold a delimiter (so that strings and containers also get closed).
std::vector<int32_t> walk(JsonConstraint& c, std::mt19937_64& rng, bool* complete) {
  const Fixture& f = fixture();
  std::vector<int32_t> gen = final_header();
  const size_t head = gen.size();
  static const std::vector<char> delimiter = [&f] {  // per id: its bytes hold '"', ']', '}', ','
    std::vector<char> d(static_cast<size_t>(f.tok->vocab_size()), 0);
    for (size_t id = 0; id < d.size(); ++id) {
      const std::string* b = f.pieces->bytes(static_cast<int32_t>(id));
      d[id] = b != nullptr && b->find_first_of("\"]},") != std::string::npos;
    }
    return d;
  }();
  *complete = false;
  for (int step = 0; step < 300; ++step) {
    auto a = c.allowed(gen);
    EXPECT_TRUE(a.has_value() && !a->empty());
    if (!a || a->empty()) break;
    if (*a == std::vector<int32_t>{c.return_token()}) {
      *complete = true;
      break;
    }
    std::vector<int32_t> pick;
    if (rng() % 5 < 3) {
      for (int32_t id : *a) {
        if (id == c.return_token() || delimiter[static_cast<size_t>(id)]) pick.push_back(id);
      }
    }
    const std::vector<int32_t>& from = pick.empty() ? *a : pick;
    const int32_t t = from[rng() % from.size()];
    if (t == c.return_token()) {
      *complete = true;
      break;
    }
    gen.push_back(t);
  }
  return std::vector<int32_t>(gen.begin() + static_cast<std::ptrdiff_t>(head), gen.end());
}

TEST(JsonConstraint, RandomWalksWriteDocumentsThatFitTheSchema) {
  ASSERT_TRUE(fixture().trie) << "tokenizer not found at " << GOSSAMER_TEST_TOKENIZER;
  const uint64_t seed = gossamer::testing::fresh_seed("JsonConstraint.RandomWalks");
  std::mt19937_64 rng(seed);
  std::ofstream out;
  if (const char* dir = std::getenv("GOSSAMER_JSON_WALK_OUT")) {
    out.open(std::string(dir) + "/walks.jsonl", std::ios::app);
    ASSERT_TRUE(out.good()) << dir;
  }
  for (const SchemaCase& sc : testing::json_schema_cases()) {
    const json schema = sc.schema ? json::parse(sc.schema) : json();
    auto c = make(sc.schema ? &schema : nullptr);
    ASSERT_TRUE(c);
    int complete = 0;
    const int kWalks = 20;
    for (int w = 0; w < kWalks; ++w) {
      bool done = false;
      const std::string doc = body_text(walk(*c, rng, &done));
      if (!done) continue;  // 300 tokens without finishing (a long string): not a document
      ++complete;
      const json d = json::parse(doc, nullptr, false);
      ASSERT_FALSE(d.is_discarded()) << sc.name << " seed " << seed << ": " << doc;
      EXPECT_TRUE(sc.check(d)) << sc.name << " seed " << seed << ": " << doc;
      if (out.is_open()) {
        json line = {{"case", sc.name},
                     {"schema", sc.schema ? schema : json{{"type", "object"}}},
                     {"document", doc}};
        out << line.dump() << "\n";
      }
    }
    EXPECT_GE(complete, kWalks / 2) << sc.name << " seed " << seed;
  }
}

TEST(JsonConstraint, HarmonyPhases) {
  const Fixture& f = fixture();
  ASSERT_TRUE(f.trie) << "tokenizer not found at " << GOSSAMER_TEST_TOKENIZER;
  auto tok = [&](const std::string& s) { return f.tok->encode(s, true); };
  const std::vector<int32_t> analysis = tok("<|channel|>analysis<|message|>Think {\"x\": 1}.");
  const std::vector<int32_t> brace = f.tok->encode("{");
  ASSERT_EQ(brace.size(), 1u);
  for (bool force : {false, true}) {
    auto c = make(nullptr, force);
    ASSERT_TRUE(c);
    std::vector<int32_t> gen;
    for (int32_t id : analysis) {  // reasoning is free
      EXPECT_FALSE(c->allowed(gen).has_value());
      gen.push_back(id);
    }
    EXPECT_FALSE(c->allowed(gen).has_value());
    gen.push_back(*f.tok->special_id("<|end|>"));
    if (!force) {
      EXPECT_FALSE(c->allowed(gen).has_value());
      continue;
    }
    const std::vector<int32_t> header = tok("<|start|>assistant<|channel|>final<|message|>");
    EXPECT_EQ(c->forced_header(), header);
    for (int32_t id : header) {
      auto a = c->allowed(gen);
      ASSERT_TRUE(a.has_value());
      EXPECT_EQ(*a, std::vector<int32_t>{id});
      gen.push_back(id);
    }
    auto body = c->allowed(gen);  // the final body: JSON objects only
    ASSERT_TRUE(body.has_value());
    EXPECT_TRUE(has(*body, brace[0]));
    EXPECT_FALSE(has(*body, c->return_token()));
    EXPECT_FALSE(has(*body, f.tok->encode("[")[0]));
    // Not an extension of the previous call: starts over (reasoning again, so free).
    EXPECT_FALSE(c->allowed(analysis).has_value());
    // A deviation from the forced header ends the forcing.
    std::vector<int32_t> dev = analysis;
    dev.push_back(*f.tok->special_id("<|end|>"));
    dev.push_back(*f.tok->special_id("<|start|>"));
    dev.push_back(f.tok->encode("user")[0]);
    EXPECT_FALSE(c->allowed(dev).has_value());
  }
  auto c = make(nullptr);
  // A constrained final header, then after the body <|return|> only; commentary is free.
  std::vector<int32_t> gen = tok("<|channel|>final <|constrain|>json<|message|>");
  auto a = c->allowed(gen);
  ASSERT_TRUE(a.has_value());
  EXPECT_TRUE(has(*a, brace[0]));
  for (int32_t id : f.tok->encode("{\"a\": [1, \"b\"]}")) gen.push_back(id);
  a = c->allowed(gen);
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(*a, std::vector<int32_t>{c->return_token()});
  gen.push_back(c->return_token());
  EXPECT_FALSE(c->allowed(gen).has_value());
  EXPECT_FALSE(c->allowed(tok("<|channel|>commentary to=functions.f<|message|>")).has_value());
  // A prompt that already opened the final body.
  JsonConstraintOptions o;
  o.start_in_body = true;
  auto in_body = JsonConstraint::create(*f.tok, f.pieces, f.trie, o);
  ASSERT_TRUE(in_body.ok());
  a = (*in_body)->allowed({});
  ASSERT_TRUE(a.has_value());
  EXPECT_TRUE(has(*a, brace[0]));
  EXPECT_FALSE(has(*a, f.tok->encode("[")[0]));
  // A token the sampler was not allowed to pick: the body can only end.
  std::vector<int32_t> bad = tok("<|channel|>final<|message|>");
  bad.push_back(f.tok->encode("[")[0]);
  EXPECT_EQ(c->allowed(bad), std::vector<int32_t>{c->return_token()});
}

TEST(JsonConstraint, ErrorsAndMissingPieces) {
  const Fixture& f = fixture();
  ASSERT_TRUE(f.trie) << "tokenizer not found at " << GOSSAMER_TEST_TOKENIZER;
  JsonConstraintOptions o;
  const json bad = json::parse(R"({"properties": {"a": {"allOf": [{}, {}]}}})");
  o.schema = &bad;
  auto c = JsonConstraint::create(*f.tok, f.pieces, f.trie, o);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().message(),
            "response_format schema: unsupported keyword \"allOf\" at /properties/a");
  o.schema = nullptr;
  EXPECT_EQ(JsonConstraint::create(*f.tok, f.pieces, nullptr, o).status().code(),
            StatusCode::kInternal);
  EXPECT_EQ(JsonConstraint::create(*f.tok, nullptr, f.trie, o).status().code(),
            StatusCode::kInternal);
}

// Time per allowed() call in the states that keep most of the vocabulary (no assertion: the
// numbers depend on the build and the machine).
TEST(JsonConstraint, AllowedTiming) {
  const Fixture& f = fixture();
  ASSERT_TRUE(f.trie) << "tokenizer not found at " << GOSSAMER_TEST_TOKENIZER;
  json many = {{"type", "object"}, {"additionalProperties", false}};
  for (int i = 0; i < 200; ++i) {
    many["properties"]["field_" + std::to_string(i)] = {{"type", "string"}};
  }
  struct Probe {
    const char* what;
    const json* schema;
    std::string body;
  };
  const Probe probes[] = {
      {"inside a free string", nullptr, "{\"a\": \"some text"},
      {"inside a free key", nullptr, "{\"ab"},
      {"at a value start", nullptr, "{\"a\": "},
      {"after a value", nullptr, "{\"a\": 1"},
      {"inside a key, 200 names left", &many, "{\""},
  };
  const auto b0 = std::chrono::steady_clock::now();
  ASSERT_TRUE(TokenTrie::build(*f.pieces, f.tok->vocab_size()).ok());
  const auto b1 = std::chrono::steady_clock::now();
  std::printf("TokenTrie::build %.1f ms\n",
              std::chrono::duration<double, std::milli>(b1 - b0).count());
  std::printf(
      "token trie: %zu nodes, max depth %d; %zu plain string tokens, %zu nodes for the rest\n",
      f.trie->all().size(), f.trie->all().max_depth, f.trie->plain().size(),
      f.trie->not_plain().size());
  for (const Probe& p : probes) {
    auto c = make(p.schema);
    ASSERT_TRUE(c);
    std::vector<int32_t> gen = final_header();
    for (int32_t id : f.tok->encode(p.body)) gen.push_back(id);
    size_t n = 0;
    const int kReps = 10;
    const auto t0 = std::chrono::steady_clock::now();
    for (int r = 0; r < kReps; ++r) n = c->allowed(gen)->size();
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    std::printf("allowed() %-30s %7zu ids  %6.2f ms/call\n", p.what, n, ms / kReps);
    RecordProperty(std::string("ms_") + std::to_string(&p - probes), std::to_string(ms / kReps));
  }
}

}  // namespace
}  // namespace gossamer::server

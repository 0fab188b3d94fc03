// Tool-call arguments held to the tool's parameters schema (JsonConstraintOptions::tools), with
// the real o200k_harmony vocabulary: random walks from the server's steering prefixes (a named
// tool; "required" with several tools, where a ToolNameConstraint picks the name first) always
// write arguments that parse and fit the chosen tool's schema, then <|call|>; messages to other
// recipients, and the final channel when it is not constrained, stay free.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "common/test_seed.h"
#include "server/json_constraint.h"
#include "server/json_constraint_cases_test_util.h"
#include "server/token_fixture_test_util.h"

namespace gossamer::server {
namespace {

using testing::encode_specials;
using testing::token_fixture;

bool has(const std::vector<int32_t>& v, int32_t id) {
  return std::find(v.begin(), v.end(), id) != v.end();
}

using testing::is_int;

// get_weather(city: string, unit?: "c" | "f", days?: integer); no other keys.
const char* kWeather = R"({"type": "object", "properties": {"city": {"type": "string"},
    "unit": {"enum": ["c", "f"]}, "days": {"type": "integer"}}, "required": ["city"],
    "additionalProperties": false})";
bool weather_ok(const json& d) {
  if (!d.is_object() || !d.contains("city") || !d["city"].is_string()) return false;
  for (auto it = d.begin(); it != d.end(); ++it) {
    if (it.key() == "unit" && it.value() != "c" && it.value() != "f") return false;
    if (it.key() == "days" && !is_int(it.value())) return false;
    if (it.key() != "city" && it.key() != "unit" && it.key() != "days") return false;
  }
  return true;
}
// add(xs: number[] with 1..3 items); no other keys.
const char* kAdd = R"({"type": "object", "properties": {"xs": {"type": "array",
    "items": {"type": "number"}, "minItems": 1, "maxItems": 3}}, "required": ["xs"],
    "additionalProperties": false})";
bool add_ok(const json& d) {
  return d.is_object() && d.size() == 1 && d.contains("xs") && d["xs"].is_array() &&
         !d["xs"].empty() && d["xs"].size() <= 3 &&
         std::all_of(d["xs"].begin(), d["xs"].end(), [](const json& x) { return x.is_number(); });
}

ToolArgsSchema tool(const std::string& name, const char* schema) {
  const json s = json::parse(schema);
  auto c = compile_json_schema(&s);
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  return {name, c.ok() ? *c : nullptr};
}

std::shared_ptr<JsonConstraint> make(std::vector<ToolArgsSchema> tools,
                                     std::vector<int32_t> prefix = {}) {
  const auto& f = token_fixture();
  JsonConstraintOptions o;
  o.constrain_final = false;
  o.tools = std::move(tools);
  o.prefix = std::move(prefix);
  auto c = JsonConstraint::create(*f.tok, f.pieces, f.trie, o);
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  return c.ok() ? *c : nullptr;
}

// A random walk through the allowed sets until <|call|> (or 300 tokens); half of the steps
// prefer tokens holding a delimiter so that strings and containers get closed. Returns the
// generated tokens; *called: the walk ended with <|call|>.
std::vector<int32_t> walk(TokenConstraint& c, int32_t call, std::mt19937_64& rng, bool* called) {
  const auto& f = token_fixture();
  std::vector<int32_t> gen;
  *called = false;
  for (int step = 0; step < 300; ++step) {
    auto a = c.allowed(gen);
    EXPECT_TRUE(a.has_value() && !a->empty()) << "step " << step;
    if (!a || a->empty()) break;
    std::vector<int32_t> pick;
    if (rng() % 2 == 0) {
      for (int32_t id : *a) {
        const std::string* b = f.pieces->bytes(id);
        if (id == call || (b != nullptr && b->find_first_of("\"]},") != std::string::npos)) {
          pick.push_back(id);
        }
      }
    }
    const std::vector<int32_t>& from = pick.empty() ? *a : pick;
    const int32_t t = from[rng() % from.size()];
    gen.push_back(t);
    if (t == call) {
      *called = true;
      break;
    }
  }
  return gen;
}

// The text of the tokens between the last <|message|> and the closing <|call|>.
std::string arguments(const std::vector<int32_t>& gen) {
  const auto& f = token_fixture();
  const int32_t message = *f.tok->special_id("<|message|>");
  auto it = std::find(gen.rbegin(), gen.rend(), message);
  std::string s;
  for (auto k = it.base(); k != gen.end(); ++k) {
    if (const std::string* b = f.pieces->bytes(*k)) s += *b;
  }
  return s;
}

TEST(ToolArgsConstraint, NamedToolWalksWriteArgumentsThatFit) {
  ASSERT_TRUE(token_fixture().trie) << "tokenizer not found at " << GOSSAMER_TEST_TOKENIZER;
  const uint64_t seed = gossamer::testing::fresh_seed("ToolArgsConstraint.Named");
  std::mt19937_64 rng(seed);
  auto c = make({tool("get_weather", kWeather), tool("add", kAdd)},
                encode_specials(
                    "<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>"));
  ASSERT_TRUE(c);
  int complete = 0;
  for (int w = 0; w < 20; ++w) {
    bool called = false;
    const std::vector<int32_t> gen = walk(*c, c->call_token(), rng, &called);
    EXPECT_FALSE(has(gen, c->return_token())) << "seed " << seed;
    if (!called) continue;  // a long string: 300 tokens without finishing
    ++complete;
    const std::string args = arguments(gen);
    const json d = json::parse(args, nullptr, false);
    EXPECT_TRUE(weather_ok(d)) << "seed " << seed << ": " << args;
  }
  EXPECT_GE(complete, 10) << "seed " << seed;
}

TEST(ToolArgsConstraint, RequiredToolWalksPickANameThenFitItsSchema) {
  const auto& f = token_fixture();
  ASSERT_TRUE(f.trie) << "tokenizer not found at " << GOSSAMER_TEST_TOKENIZER;
  const uint64_t seed = gossamer::testing::fresh_seed("ToolArgsConstraint.Required");
  std::mt19937_64 rng(seed);
  int complete = 0, weather = 0;
  for (int w = 0; w < 24; ++w) {
    auto names = ToolNameConstraint::create(*f.tok, f.pieces, {"get_weather", "add"});
    ASSERT_TRUE(names.ok()) << names.status().ToString();
    auto args = make({tool("get_weather", kWeather), tool("add", kAdd)},
                     encode_specials("<|channel|>commentary to=functions."));
    ASSERT_TRUE(args);
    FirstOfConstraint c({*names, args});
    bool called = false;
    const std::vector<int32_t> gen = walk(c, args->call_token(), rng, &called);
    if (!called) continue;
    ++complete;
    std::string name;  // the name tokens come before <|constrain|>
    for (int32_t id : gen) {
      const std::string* b = f.pieces->bytes(id);
      if (b == nullptr) break;
      name += *b;
    }
    const json d = json::parse(arguments(gen), nullptr, false);
    if (name == "get_weather ") {
      ++weather;
      EXPECT_TRUE(weather_ok(d)) << "seed " << seed << ": " << arguments(gen);
    } else {
      EXPECT_EQ(name, "add ") << "seed " << seed;
      EXPECT_TRUE(add_ok(d)) << "seed " << seed << ": " << arguments(gen);
    }
  }
  EXPECT_GE(complete, 12) << "seed " << seed;
  EXPECT_GT(weather, 0) << "seed " << seed;
  EXPECT_LT(weather, complete) << "seed " << seed;
}

TEST(ToolArgsConstraint, OnlyTheNamedRecipientsAreHeld) {
  const auto& f = token_fixture();
  ASSERT_TRUE(f.trie) << "tokenizer not found at " << GOSSAMER_TEST_TOKENIZER;
  auto c = make({tool("add", kAdd)});
  ASSERT_TRUE(c);
  const int32_t brace = f.tok->encode("{")[0], bracket = f.tok->encode("[")[0];
  // Reasoning, then a call to add in either header form: held to add's schema.
  for (const char* head : {"<|channel|>commentary to=functions.add <|constrain|>json<|message|>",
                           " to=functions.add<|channel|>commentary json<|message|>"}) {
    std::vector<int32_t> gen = encode_specials(
        std::string("<|channel|>analysis<|message|>Think.<|end|>") + "<|start|>assistant" + head);
    auto a = c->allowed(gen);
    ASSERT_TRUE(a.has_value()) << head;
    EXPECT_TRUE(has(*a, brace));
    EXPECT_FALSE(has(*a, bracket));
    EXPECT_FALSE(has(*a, c->call_token()));
    for (int32_t id : f.tok->encode("{\"xs\": [1, -2.5e3]}")) gen.push_back(id);
    EXPECT_EQ(c->allowed(gen), std::vector<int32_t>{c->call_token()});
    gen.push_back(c->call_token());
    EXPECT_FALSE(c->allowed(gen).has_value());
  }
  // Other recipients, commentary without one, and the (unconstrained) final channel are free.
  for (const char* text : {"<|channel|>commentary to=functions.sub <|constrain|>json<|message|>",
                           "<|channel|>commentary to=functions.adder<|message|>",
                           "<|channel|>commentary<|message|>", "<|channel|>final<|message|>"}) {
    EXPECT_FALSE(c->allowed(encode_specials(text)).has_value()) << text;
  }
}

TEST(ToolArgsConstraint, FinalAndToolsTogether) {
  const auto& f = token_fixture();
  ASSERT_TRUE(f.trie) << "tokenizer not found at " << GOSSAMER_TEST_TOKENIZER;
  JsonConstraintOptions o;
  const json schema = json::parse(R"({"type": "array", "items": {"type": "integer"}})");
  o.schema = &schema;
  o.tools = {tool("add", kAdd)};
  auto c = JsonConstraint::create(*f.tok, f.pieces, f.trie, o);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  std::vector<int32_t> gen = encode_specials("<|channel|>commentary to=functions.add<|message|>");
  for (int32_t id : f.tok->encode("{\"xs\":[3]}")) gen.push_back(id);
  EXPECT_EQ((*c)->allowed(gen), std::vector<int32_t>{(*c)->call_token()});
  for (int32_t id :
       encode_specials("<|call|><|start|>functions.add to=assistant<|channel|>commentary"
                       "<|message|>3<|end|><|start|>assistant<|channel|>final<|message|>[1")) {
    gen.push_back(id);
  }
  auto a = (*c)->allowed(gen);
  ASSERT_TRUE(a.has_value());
  EXPECT_TRUE(has(*a, f.tok->encode(",")[0]));
  EXPECT_FALSE(has(*a, (*c)->call_token()));
  gen.push_back(f.tok->encode("]")[0]);
  EXPECT_EQ((*c)->allowed(gen), std::vector<int32_t>{(*c)->return_token()});
}

}  // namespace
}  // namespace gossamer::server

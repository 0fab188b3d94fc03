// compile_json_schema: unsupported and malformed schemas are refused with the keyword and its
// JSON pointer; annotations are accepted. JsonMatcher::collect (the token-trie walk) equals a
// brute-force scan of the whole vocabulary in a few states.
#include "server/json_schema.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "server/json_matcher.h"
#include "server/token_fixture_test_util.h"

namespace gossamer::server {
namespace {

using Fixture = testing::TokenFixture;
const Fixture& fixture() {
  return testing::token_fixture();
}

TEST(JsonSchema, RefusesUnsupportedKeywordsWithTheirPath) {
  struct Case {
    const char* schema;
    const char* keyword;
    const char* path;
  };
  const Case cases[] = {
      {R"({"properties": {"a": {"allOf": [{}, {"type": "string"}]}}})", "\"allOf\"",
       "/properties/a"},
      {R"({"not": {"type": "string"}})", "\"not\"", "the root"},
      {R"({"items": {"if": {}, "then": {}}})", "\"if\"", "/items"},
      {R"({"patternProperties": {"^a": {}}})", "\"patternProperties\"", "the root"},
      {R"({"dependentRequired": {"a": ["b"]}})", "\"dependentRequired\"", "the root"},
      {R"({"prefixItems": [{"uniqueItems": true}]})", "\"uniqueItems\"", "/prefixItems/0"},
      {R"({"propertyNames": {"maxLength": 3}})", "\"propertyNames\"", "the root"},
      {R"({"properties": {"a/b": {"$ref": "https://x.test/s.json"}}})", "\"$ref\"",
       "/properties/a~1b"},
      {R"({"$ref": "#/properties/a", "properties": {"a": {}}})", "\"$ref\"", "the root"},
      {R"({"$ref": "#/$defs/missing"})", "\"$ref\"", "the root"},
      {R"({"anyOf": [{"type": "string"}], "type": "string"})", "\"type\"", "the root"},
      {R"({"anyOf": [{"contains": {}}]})", "\"contains\"", "/anyOf/0"},
      {R"({"$defs": {"x": {"unevaluatedProperties": false}}, "$ref": "#/$defs/x"})",
       "\"unevaluatedProperties\"", "/$defs/x"},
      {R"({"type": "strng"})", "\"strng\"", "the root"},
      {R"({"properties": {"a": {"type": ["string", 3]}}})", "3", "/properties/a"},
      {R"({"properties": {"a": 5}})", "a schema must be", "/properties/a"},
      {R"({"type": "object", "properties": {"a": {}}, "required": ["a", "b"],
           "additionalProperties": false})",
       "\"required\"", "the root"},
      {R"({"type": "array", "minItems": -1})", "\"minItems\"", "the root"},
      {R"({"anyOf": []})", "\"anyOf\"", "the root"},
      {R"({"nullable": "yes"})", "\"nullable\"", "the root"},
  };
  for (const Case& c : cases) {
    const json s = json::parse(c.schema);
    const Status st = check_json_schema(s);
    ASSERT_EQ(st.code(), StatusCode::kInvalidArgument) << c.schema << " -> " << st.ToString();
    EXPECT_NE(st.message().find(c.keyword), std::string::npos) << st.message();
    EXPECT_NE(st.message().find(std::string("at ") + c.path), std::string::npos) << st.message();
    EXPECT_EQ(st.message().find("response_format"), std::string::npos) << st.message();
    EXPECT_EQ(compile_json_schema(&s).status().code(), StatusCode::kInvalidArgument);
  }
  EXPECT_FALSE(check_json_schema(json(5)).ok());
  EXPECT_FALSE(check_json_schema(json(false)).ok());  // admits nothing
  // Unsatisfiable through recursion without a base case.
  EXPECT_FALSE(check_json_schema(json::parse(R"({"$defs": {"n": {"type": "object",
      "properties": {"c": {"$ref": "#/$defs/n"}}, "required": ["c"]}}, "$ref": "#/$defs/n"})"))
                   .ok());
}

TEST(JsonSchema, AcceptsAnnotationsAndTheSupportedSubset) {
  const char* ok[] = {
      "true",
      "{}",
      R"({"type": "string", "minLength": 3, "maxLength": 9, "pattern": "^a", "format": "email",
          "title": "t", "description": "d", "default": "abc", "examples": ["abc"]})",
      R"({"type": "number", "minimum": 0, "exclusiveMaximum": 5, "multipleOf": 0.5})",
      R"({"$schema": "https://json-schema.org/draft/2020-12/schema", "$id": "x", "type": "array",
          "uniqueItems": false, "items": {"type": "integer"}, "minItems": 1, "maxItems": 3})",
      R"({"allOf": [{"$ref": "#/definitions/a"}], "description": "one-member allOf",
          "definitions": {"a": {"type": "boolean", "nullable": true}}})",
      R"({"oneOf": [{"type": "string"}, {"type": "null"}], "strict": true})",
      R"({"type": "object", "properties": {"child": {"$ref": "#"}}})",  // a recursive root
      R"({"type": "array", "prefixItems": [{"const": 1}], "items": false})",
      R"({"type": "array", "items": [{"type": "string"}], "additionalItems": false})",
  };
  for (const char* s : ok) {
    const json j = json::parse(s);
    EXPECT_TRUE(check_json_schema(j).ok()) << s << " -> " << check_json_schema(j).ToString();
  }
}

TEST(JsonSchema, PrunesWhatCanNeverBeWritten) {
  const json s = json::parse(R"({"type": ["object", "array"], "properties": {"a": false,
      "b": {"type": "string"}}, "additionalProperties": false,
      "prefixItems": [{"type": "integer"}, false], "items": {"type": "string"}})");
  auto c = compile_json_schema(&s);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  const JsonSchemaNode& n = (*c)->nodes[(*c)->nodes[(*c)->root].alts.at(0)];
  ASSERT_EQ(n.names, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(n.blocked.at(0), 1u);  // "a" can never be written
  EXPECT_EQ(n.max_items, 1u);      // the second element cannot be written
  EXPECT_EQ(n.types, kTypeObject | kTypeArray);
}

// Every token whose bytes a fresh copy of the matcher accepts (the oracle for collect()).
std::vector<int32_t> brute_force(const Fixture& f, const JsonMatcher& base) {
  std::vector<int32_t> out;
  for (int32_t id = 0; id < f.tok->vocab_size(); ++id) {
    const std::string* b = f.pieces->bytes(id);
    if (b == nullptr) continue;
    JsonMatcher m = base;
    if (m.feed(*b)) out.push_back(id);
  }
  return out;
}

TEST(JsonMatcher, TrieWalkEqualsAVocabularyScan) {
  const Fixture& f = fixture();
  ASSERT_TRUE(f.trie) << "tokenizer not found at " << GOSSAMER_TEST_TOKENIZER;
  const json s = json::parse(R"({"type": "object", "properties": {
      "name": {"type": "string"}, "n": {"type": "integer"}, "tags": {"type": "array",
      "items": {"enum": ["x", "xy", 10, 1]}, "maxItems": 2}, "nested": {"anyOf": [
      {"type": "object", "properties": {"k": {"type": "null"}}, "additionalProperties": false},
      {"type": "object", "properties": {"k": {"type": "boolean"}, "j": {"type": "number"}},
       "additionalProperties": false}]}}, "required": ["name"]})");
  auto c = compile_json_schema(&s);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  const char* prefixes[] = {
      "",
      "{",
      "{\"na",
      "{\"name\":\"a\\u00",
      "{\"name\":\"\xe6\x97",
      "{\"n\": -1",
      "{\"n\":12, \"tags\":[1",
      "{\"tags\":[\"x\",",
      "{\"nested\":{\"k\":",
      "{\"name\":\"\",\"extra\":[{\"q\":1.5e",
      "{\"name\":\"plain text",
      "{\"free key",
      "{\"name\":\"\",\"x\":{\"k\": \"\\ud83d\\ude00 ",
  };
  for (const char* p : prefixes) {
    JsonMatcher m(*c);
    ASSERT_TRUE(m.feed(p)) << p;
    const JsonMatcher base = m;
    std::vector<int32_t> got;
    m.collect(*f.trie, &got);
    std::sort(got.begin(), got.end());
    EXPECT_EQ(got, brute_force(f, base)) << "after '" << p << "'";
    EXPECT_FALSE(got.empty()) << p;
    // collect() leaves the state as it was.
    std::vector<int32_t> again;
    m.collect(*f.trie, &again);
    std::sort(again.begin(), again.end());
    EXPECT_EQ(again, got);
  }
}

// Long documents leave superseded frames behind; compaction must keep what is still live.
TEST(JsonMatcher, LongDocumentsKeepTheirState) {
  const json s = json::parse(R"({"type": "object", "properties": {"list": {"type": "array",
      "items": {"type": "object", "properties": {"id": {"type": "integer"}},
      "required": ["id"], "additionalProperties": false}, "maxItems": 3000}},
      "required": ["list"]})");
  auto c = compile_json_schema(&s);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  JsonMatcher m(*c);
  ASSERT_TRUE(m.feed("{\"k0\":0"));
  for (int i = 1; i < 1500; ++i) {
    ASSERT_TRUE(m.feed(",\"k" + std::to_string(i) + "\":" + std::to_string(i))) << i;
  }
  ASSERT_TRUE(m.feed(",\"list\":["));
  for (int i = 0; i < 2500; ++i) ASSERT_TRUE(m.feed(i ? ",{\"id\":1}" : "{\"id\":1}")) << i;
  for (const char* bad : {",\"k7\"", ",\"k1499\"", "]]", ",{\"id\":1,\"id\""}) {
    JsonMatcher copy = m;
    EXPECT_FALSE(copy.feed(bad)) << bad;
  }
  JsonMatcher copy = m;
  EXPECT_TRUE(copy.feed(",{\"id\":2}],\"k1500\":[],\"list2\":{}}"));
  EXPECT_TRUE(copy.closed() && copy.can_end());
  ASSERT_TRUE(m.feed("],\"lis"));  // the array closes; "list" is a duplicate now
  EXPECT_FALSE(m.feed("t\""));
}

}  // namespace
}  // namespace gossamer::server

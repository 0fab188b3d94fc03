// The schema cases of json_constraint_test.cpp (json_constraint_cases_test_util.h): nested
// objects, arrays, enums, anyOf, recursive $ref, escapes / unicode, extra keys, tuples,
// json_object mode.
#include <algorithm>

#include "server/json_constraint_cases_test_util.h"

namespace gossamer::server::testing {
namespace {

bool keys_within(const json& o, std::initializer_list<const char*> keys) {
  for (auto it = o.begin(); it != o.end(); ++it) {
    if (std::find_if(keys.begin(), keys.end(), [&](const char* k) { return it.key() == k; }) ==
        keys.end()) {
      return false;
    }
  }
  return true;
}

bool tree_ok(const json& n, int depth) {
  if (!n.is_object() || !keys_within(n, {"value", "children"}) || !n.contains("value") ||
      !is_int(n["value"]) || depth > 60) {
    return false;
  }
  if (!n.contains("children")) return true;
  const json& c = n["children"];
  if (!c.is_array() || c.size() > 3) return false;
  return std::all_of(c.begin(), c.end(), [&](const json& k) { return tree_ok(k, depth + 1); });
}

std::vector<SchemaCase> first_cases() {
  return {
      {"json_object",
       nullptr,
       [](const json& d) { return d.is_object(); },
       {"{}", R"({"a":[1,2.5e-3,{"b":null}],"c":true,"d":-0.0E+1})",
        R"({"k":"\ud83d\ude00 emoji 😀 \/ \b\f\n\r\t \u00e9"})", R"({"":0, "x" : { } })",
        "{\n\t\"deep\": [[[[\"\xe6\x97\xa5\xe6\x9c\xac\"]]]]\n}"},
       {"[1]", "\"str\"", R"({"a":1,"a":2})", R"({"a":01})", R"({"a":tru})", "{'a':1}",
        R"({"a":1,})", R"({"a":"\x"})", "{\"a\":\"\x01\"}", R"({"a":"\udc00"})",
        R"({"a":"\ud800x"})", "{\"a\":\"\xc3\x28\"}", "{          \"a\":1}", "{} ", "{\"a\":1"}},
      {"nested",
       R"({"type": "object", "properties": {"name": {"type": "string"},
           "age": {"type": "integer"}, "address": {"type": "object", "properties": {
           "city": {"type": "string"}, "zip": {"type": "string"}}, "required": ["city"],
           "additionalProperties": false}}, "required": ["name", "address"],
           "additionalProperties": false})",
       [](const json& d) {
         return d.is_object() && keys_within(d, {"name", "age", "address"}) && d.contains("name") &&
                d["name"].is_string() && d.contains("address") && d["address"].is_object() &&
                keys_within(d["address"], {"city", "zip"}) && d["address"].contains("city") &&
                d["address"]["city"].is_string() && (!d.contains("age") || is_int(d["age"]));
       },
       {R"({"name":"Ann","address":{"city":"Paris"}})",
        R"({"address": {"zip": "75001", "city": "Paris"}, "age": 31, "name": "Zoë \"Z\" \\ \u00e9\n"})",
        "{\n  \"name\": \"日本語\",\n  \"address\": {\n    \"city\": \"東京\"\n  }\n}",
        R"({"name":"x","age":-0,"address":{"city":""}})"},
       {R"({"name":"Ann"})", R"({"name":"Ann","nick":"A","address":{"city":"P"}})",
        R"({"name":5,"address":{"city":"P"}})", R"({"name":"Ann","address":{"city":"P"},})",
        R"({"name":"A","age":1.5,"address":{"city":"P"}})", R"({"name":"Ann)",
        R"({"name":"A","name":"B","address":{"city":"P"}})",
        R"({"name":"a\qb","address":{"city":"P"}})", R"({"address":{"city":"P","zip":1}})",
        R"({"name":"A","address":{"zip":"1"}})", R"({"name":"A","address":{"city":"P"}} )"}},
      {"array",
       R"({"type": "array", "items": {"type": "number"}, "minItems": 2, "maxItems": 4})",
       [](const json& d) {
         return d.is_array() && d.size() >= 2 && d.size() <= 4 &&
                std::all_of(d.begin(), d.end(), [](const json& x) { return x.is_number(); });
       },
       {"[1,2]", "[1.5, -2e10, 0, 3]", "[ 1 , 2 ]", "[\n1,\n2\n]", "[1E99, -0.5e-99]",
        "[" + std::string(64, '7') + ", 1]"},
       // Numbers are capped at 64 integer digits and 2 exponent digits (always a finite double).
       {"[1]", "[1,2,3,4,5]", "[1,\"a\"]", "[]", "[1,2,]", "[1 2]", "[-,1]", "[1.,2]", "[1E100, 1]",
        "[1, 2e-308]", "[" + std::string(65, '7') + ", 1]"}},
      {"enum",
       R"({"enum": ["red", 1, 10, 2.5, null, true, {"a": [1, 2]}, [1, "x"], "r\u00e9d"]})",
       [](const json& d) {
         const json e = json::parse(R"(["red", 1, 10, 2.5, null, true, {"a": [1, 2]},
                                         [1, "x"], "réd"])");
         return std::find(e.begin(), e.end(), d) != e.end();
       },
       {"\"red\"", "1", "10", "2.5", "null", "true", R"({"a":[1,2]})", R"([1,"x"])",
        "\"r\xc3\xa9\x64\""},
       {"\"blue\"", "2", "100", "false", "\"re\"", "[1]", "{}"}},
      {"string_or_null",
       R"({"type": "object", "properties": {"v": {"anyOf": [{"type": "string"},
           {"type": "null"}]}}, "required": ["v"], "additionalProperties": false})",
       [](const json& d) {
         return d.is_object() && d.size() == 1 && d.contains("v") &&
                (d["v"].is_string() || d["v"].is_null());
       },
       {R"({"v":null})", R"({"v":"x"})", R"({ "v" : "null" })"},
       {R"({"v":1})", R"({"v":nul})", R"({"v":[]})", "{}"}},
      {"integer_number",
       R"({"type": "object", "properties": {"i": {"type": "integer"}, "n": {"type": "number"},
           "opt": {"type": ["integer", "boolean"], "nullable": true}},
           "required": ["i", "n"], "additionalProperties": false})",
       [](const json& d) {
         return d.is_object() && keys_within(d, {"i", "n", "opt"}) && d.contains("i") &&
                is_int(d["i"]) && d.contains("n") && d["n"].is_number() &&
                (!d.contains("opt") || is_int(d["opt"]) || d["opt"].is_boolean() ||
                 d["opt"].is_null());
       },
       {R"({"i":1,"n":1.5})", R"({"n":-2E-3,"i":-40,"opt":null})", R"({"i":0,"n":0,"opt":7})"},
       {R"({"i":1.5,"n":1})", R"({"i":1e3,"n":1})", R"({"i":1,"n":"1"})",
        R"({"i":1,"n":1,"opt":"x"})"}},
  };
}

std::vector<SchemaCase> more_cases() {
  return {
      {"tree",
       R"({"$defs": {"node": {"type": "object", "properties": {"value": {"type": "integer"},
           "children": {"type": "array", "items": {"$ref": "#/$defs/node"}, "maxItems": 3}},
           "required": ["value"], "additionalProperties": false}}, "$ref": "#/$defs/node"})",
       [](const json& d) { return tree_ok(d, 0); },
       {R"({"value":1,"children":[{"value":2},{"value":3,"children":[]}]})",
        R"({"children":[{"children":[{"value":9}],"value":8}],"value":7})"},
       {R"({"value":1,"children":[{"children":[]}]})",
        R"({"value":1,"children":[{"value":1},{"value":1},{"value":1},{"value":1}]})",
        R"({"value":1,"child":{}})"}},
      {"text",
       R"({"type": "object", "properties": {"text": {"type": "string", "minLength": 1,
           "description": "any text"}}, "required": ["text"], "additionalProperties": false})",
       [](const json& d) { return d.is_object() && d.size() == 1 && d["text"].is_string(); },
       {R"({"text":"tab\there \"quoted\" back\\slash \u0000 \uD83D\uDE00 ✓"})",
        R"({"text":"Ελληνικά, русский, 中文, עברית 🎉"})"},
       {R"({"text":"\u12"})", R"({"text":"\uD83D"})", "{\"text\":\"a\nb\"}"}},
      {"tagged_union",
       R"({"anyOf": [{"type": "object", "properties": {"kind": {"const": "a"},
           "x": {"type": "integer"}}, "required": ["kind", "x"], "additionalProperties": false},
           {"type": "object", "properties": {"kind": {"const": "b"}, "y": {"type": "string"}},
           "required": ["kind", "y"], "additionalProperties": false}]})",
       [](const json& d) {
         return d.is_object() && d.size() == 2 &&
                ((d.value("kind", "") == "a" && d.contains("x") && is_int(d["x"])) ||
                 (d.value("kind", "") == "b" && d.contains("y") && d["y"].is_string()));
       },
       {R"({"kind":"a","x":1})", R"({"y":"s","kind":"b"})"},
       {R"({"kind":"a","y":"s"})", R"({"kind":"b","x":1})", R"({"x":1,"y":"s"})"}},
      {"extra_keys",
       R"({"type": "object", "properties": {"id": {"type": "integer"}}, "required": ["id"],
           "additionalProperties": {"type": "boolean"}, "maxProperties": 3})",
       [](const json& d) {
         if (!d.is_object() || d.size() > 3 || !d.contains("id") || !is_int(d["id"])) {
           return false;
         }
         for (auto it = d.begin(); it != d.end(); ++it) {
           if (it.key() != "id" && !it->is_boolean()) return false;
         }
         return true;
       },
       {R"({"id":1,"a":true,"b":false})", R"({"x":true,"id":2})", R"({"id":3,"i":true})",
        R"({"id":4,"q\"\n":false})"},
       {R"({"id":1,"a":1})", R"({"id":1,"a":true,"b":true,"c":true})",
        R"({"a":true,"b":true,"c":true})", R"({"id":1,"a":true,"a":false})",
        R"({"id":1,"\u0061":true})"}},
      {"tuple",
       R"({"type": "array", "prefixItems": [{"type": "string"}, {"type": "integer"}],
           "items": false, "minItems": 2})",
       [](const json& d) {
         return d.is_array() && d.size() == 2 && d[0].is_string() && is_int(d[1]);
       },
       {R"(["a",1])", R"([ "", -5 ])"},
       {R"(["a"])", R"(["a",1,2])", R"([1,"a"])"}},
      {"top_level_integer",
       R"({"type": "integer"})",
       [](const json& d) { return is_int(d); },
       {"42", "-7", "0"},
       {"4.2", "01", "\"4\"", "42 "}},
  };
}

}  // namespace

const std::vector<SchemaCase>& json_schema_cases() {
  static const std::vector<SchemaCase> kCases = [] {
    std::vector<SchemaCase> v = first_cases();
    for (SchemaCase& c : more_cases()) v.push_back(std::move(c));
    return v;
  }();
  return kCases;
}

}  // namespace gossamer::server::testing

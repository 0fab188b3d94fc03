// Renderer pieces checked against hand-derived expectations from the harmony format spec
// (the token-exact comparison with openai-harmony lives in tests/python/test_harmony_render.py).
#include "harmony/render.h"

#include <gtest/gtest.h>

#include "harmony/chat_request.h"
#include "harmony/test_util.h"
#include "harmony/typescript_schema.h"

namespace gossamer::harmony {
namespace {

using Json = nlohmann::ordered_json;

TEST(HarmonyTypescript, ObjectWithOptionalEnumAndDefault) {
  auto schema = Json::parse(R"({"type":"object","properties":{
      "location":{"type":"string","description":"The city"},
      "unit":{"type":"string","enum":["c","f"],"default":"c"},
      "days":{"type":"integer","default":3},
      "tags":{"type":"array","items":{"type":"string"}}},"required":["location"]})");
  EXPECT_EQ(json_schema_to_typescript(schema, ""),
            "{\n// The city\nlocation: string,\nunit?: \"c\" | \"f\", // default: c\n"
            "days?: number, // default: 3\ntags?: string[],\n}");
}

TEST(HarmonyTypescript, NestedObjectIndentsAndTypeArrays) {
  auto schema = Json::parse(R"({"type":"object","properties":{
      "a":{"type":"object","properties":{"b":{"type":["integer","null"]}},"required":["b"]},
      "c":{"anyOf":[{"type":"string"}]},"d":{"type":"string","nullable":true}}})");
  EXPECT_EQ(json_schema_to_typescript(schema, ""),
            "{\na?: {\n    b: number | null,\n    },\nc?: any,\nd?: string | null,\n}");
}

TEST(HarmonyTypescript, OneOfProperty) {
  auto schema = Json::parse(R"({"type":"object","properties":{"v":{"description":"val",
      "oneOf":[{"type":"string"},{"type":"number","description":"num"}]}}})");
  EXPECT_EQ(json_schema_to_typescript(schema, ""),
            "{\n// val\nv?:\n | string\n | number // num\n,\n}");
}

TEST(HarmonyTypescript, CompactJsonLikeSerde) {
  EXPECT_EQ(compact_json(Json::parse("1.0")), "1.0");
  EXPECT_EQ(compact_json(Json::parse("0.25")), "0.25");
  EXPECT_EQ(compact_json(Json::parse("1e21")), "1e21");
  EXPECT_EQ(compact_json(Json::parse("1e-7")), "1e-7");
  EXPECT_EQ(compact_json(Json::parse("1.5e300")), "1.5e300");
  EXPECT_EQ(compact_json(Json::parse("1e15")), "1000000000000000.0");
  EXPECT_EQ(compact_json(Json::parse("0.0001")), "0.0001");
  EXPECT_EQ(compact_json(Json::parse("-12")), "-12");
  EXPECT_EQ(compact_json(Json::parse(R"({"b":[1,"x\n\u0001"],"a":null})")),
            "{\"b\":[1,\"x\\n\\u0001\"],\"a\":null}");
}

TEST(HarmonyRender, SystemAndDeveloperText) {
  auto req = parse_chat_request(std::string(R"({"messages":[{"role":"system","content":"Be nice."},
      {"role":"user","content":"hi"}],"reasoning_effort":"low",
      "tools":[{"type":"function","function":{"name":"f","description":"Does f.\nTwice."}}]})"));
  ASSERT_TRUE(req.ok()) << req.status().ToString();
  RenderOptions opt;
  opt.date = "2024-01-02";
  EXPECT_EQ(render_system_text(*req, opt),
            "You are ChatGPT, a large language model trained by OpenAI.\nKnowledge cutoff: "
            "2024-06\nCurrent date: 2024-01-02\n\nReasoning: low\n\n# Valid channels: analysis, "
            "commentary, final. Channel must be included for every message.\nCalls to these tools "
            "must go to the commentary channel: 'functions'.");
  EXPECT_EQ(render_developer_text(*req),
            "# Instructions\n\nBe nice.\n\n# Tools\n\n## functions\n\nnamespace functions {\n\n"
            "// Does f.\n// Twice.\ntype f = () => any;\n\n} // namespace functions");
}

TEST(HarmonyRender, ResponseFormatEndsTheDeveloperMessage) {
  // harmony docs/format.md, "Structured output": "# Response Formats\n\n## {format name}\n\n
  // // {description or context}\n{schema}" at the end of the developer message.
  auto req = parse_chat_request(std::string(R"({"messages":[{"role":"user","content":"hi"}],
      "response_format":{"type":"json_schema","json_schema":{"name":"shopping_list",
      "description":"Entries to buy","strict":true,"schema":{"type":"object",
      "properties":{"items":{"type":"array","items":{"type":"string"}}}}}}})"));
  ASSERT_TRUE(req.ok()) << req.status().ToString();
  EXPECT_EQ(render_developer_text(*req),
            "# Response Formats\n\n## shopping_list\n\n// Entries to buy\n{\"type\":\"object\","
            "\"properties\":{\"items\":{\"type\":\"array\",\"items\":{\"type\":\"string\"}}}}");
  EXPECT_EQ(build_conversation(*req, RenderOptions{}).size(), 3u) << "system, developer, user";
  req = parse_chat_request(std::string(R"({"messages":[{"role":"system","content":"Be nice."},
      {"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"f"}}],
      "response_format":{"type":"json_schema","json_schema":{"name":"n"}}})"));
  ASSERT_TRUE(req.ok()) << req.status().ToString();
  EXPECT_EQ(render_developer_text(*req),
            "# Instructions\n\nBe nice.\n\n# Tools\n\n## functions\n\nnamespace functions {\n\n"
            "type f = () => any;\n\n} // namespace functions\n\n# Response Formats\n\n## n\n\n{}");
  for (const char* rf : {R"({"type":"json_object"})", R"({"type":"text"})", "null"}) {
    req = parse_chat_request(std::string(R"({"messages":[{"role":"user","content":"hi"}],)") +
                             R"("response_format":)" + rf + "}");
    ASSERT_TRUE(req.ok()) << rf << ": " << req.status().ToString();
    EXPECT_EQ(build_conversation(*req, RenderOptions{}).size(), 2u) << rf << ": no developer";
  }
}

TEST(HarmonyRender, ToolCallSegmentsAndGenerationPrefix) {
  HarmonyMessage call{Role::kAssistant, "", "functions.f", "commentary", "<|constrain|>json", "{}"};
  HarmonyMessage result{Role::kTool, "functions.f", "assistant", "commentary", "", "ok"};
  std::string text;
  for (const auto& s : render_segments({call, result})) text += (s.special ? "[" : "") + s.text;
  EXPECT_EQ(text,
            "[<|start|>assistant to=functions.f[<|channel|>commentary [<|constrain|>json"
            "[<|message|>{}[<|call|>[<|start|>functions.f to=assistant[<|channel|>commentary"
            "[<|message|>ok[<|end|>[<|start|>assistant");
}

TEST(HarmonyRender, DropsAnalysisBeforeFirstFinalOnlyWhenLastAssistantIsFinal) {
  auto m = [](Role r, const char* ch) { return HarmonyMessage{r, "", "", ch, "", ch}; };
  const auto u = Role::kUser, a = Role::kAssistant;
  // Finished turns: the analysis before the first final goes, a later one stays.
  auto out = drop_earlier_analysis(
      {m(u, ""), m(a, "analysis"), m(a, "final"), m(u, ""), m(a, "analysis"), m(a, "final")});
  ASSERT_EQ(out.size(), 5u);
  EXPECT_EQ(out[1].channel, "final");
  EXPECT_EQ(out[3].channel, "analysis");
  // Ongoing tool loop (last assistant message is a call): nothing is dropped.
  auto loop = drop_earlier_analysis(
      {m(u, ""), m(a, "analysis"), m(a, "final"), m(u, ""), m(a, "analysis"), m(a, "commentary")});
  EXPECT_EQ(loop.size(), 6u);
}

TEST(HarmonyRequest, ErrorsNameTheField) {
  struct Case {
    const char* json;
    const char* field;
  } cases[] = {
      {R"({"messages":[{"role":"bot","content":"x"}]})", "messages[0].role"},
      {R"({"messages":[{"role":"user","content":"x"},{"role":"tool","tool_call_id":"q","content":"r"}]})",
       "messages[1].tool_call_id"},
      {R"({"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"f","parameters":3}}]})",
       "tools[0].function.parameters"},
      {R"({"messages":[{"role":"user","content":"x"}],"reasoning_effort":"max"})",
       "reasoning_effort"},
      {R"({"messages":[{"role":"user","content":"x"}],"tools":[{"type":"retrieval"}]})",
       "tools[0].type"},
      {R"({"messages":[{"role":"user","content":"x"}],"tools":[{"function":{"name":"get weather"}}]})",
       "tools[0].function.name"},
      {R"({"messages":[{"role":"user","content":"x"}],"tools":[{"function":{"name":"f"}},{"function":{"name":"g<|end|>"}}]})",
       "tools[1].function.name"},
      {R"({"messages":[{"role":"user","content":"x"}],"tools":[{"function":{"name":"f\n"}}]})",
       "tools[0].function.name"},
      {R"({"messages":[{"role":"user","content":"x"}],"tools":[{"function":{"name":"a123456789b123456789c123456789d123456789e123456789f123456789g1234"}}]})",
       "tools[0].function.name: 65 bytes"},
      {R"({"messages":[{"role":"assistant","tool_calls":[{"function":{"name":"f","arguments":7}}]}]})",
       "messages[0].tool_calls[0].function.arguments"},
      {R"({"messages":[{"role":"user","content":"x"}],"response_format":{"type":"xml"}})",
       "response_format.type"},
      {R"({"messages":[{"role":"user","content":"x"}],"response_format":"json"})",
       "response_format"},
      {R"({"messages":[{"role":"user","content":"x"}],"response_format":{"type":"json_schema"}})",
       "response_format.json_schema"},
      {R"({"messages":[{"role":"user","content":"x"}],"response_format":{"type":"json_schema","json_schema":{"name":"a b"}}})",
       "response_format.json_schema.name"},
      {R"({"messages":[{"role":"user","content":"x"}],"response_format":{"type":"json_schema","json_schema":{"name":"a","schema":[1]}}})",
       "response_format.json_schema.schema"},
      {R"([1,2])", "request"},
      {R"({"messages":[)", "invalid JSON at byte"},
  };
  for (const auto& c : cases) {
    auto r = parse_chat_request(std::string(c.json));
    ASSERT_FALSE(r.ok()) << c.json;
    EXPECT_NE(r.status().message().find(c.field), std::string::npos) << r.status().message();
  }
  // Nested 100,000 deep (ordered_json would overflow the stack copying it): an error, not a
  // crash; 100 levels of a tool's parameters still parse.
  const std::string deep = R"({"messages":[{"role":"user","content":"x"}],"tools":)" +
                           std::string(100000, '[') + std::string(100000, ']') + "}";
  auto r = parse_chat_request(deep);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("nests deeper than"), std::string::npos);
  std::string params = "{}";
  for (int i = 0; i < 100; ++i) params = R"({"type":"object","properties":{"a":)" + params + "}}";
  auto ok = parse_chat_request(
      R"({"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"f","parameters":)" +
      params + "}}]}");
  EXPECT_TRUE(ok.ok()) << ok.status().ToString();
}

TEST(HarmonyRequest, AssistantMapping) {
  auto req = parse_chat_request(std::string(R"({"messages":[{"role":"user","content":"q"},
      {"role":"assistant","content":"pre","reasoning":"think","tool_calls":[
        {"id":"c1","type":"function","function":{"name":"f","arguments":{"a":1}}}]},
      {"role":"tool","tool_call_id":"c1","content":[{"type":"text","text":"r1"},{"type":"text","text":"r2"}]}]})"));
  ASSERT_TRUE(req.ok()) << req.status().ToString();
  ASSERT_EQ(req->turns.size(), 5u);
  EXPECT_EQ(req->turns[1].channel, "analysis");
  EXPECT_EQ(req->turns[2].channel, "commentary");
  EXPECT_EQ(req->turns[2].text, "pre");
  EXPECT_EQ(req->turns[3].recipient, "functions.f");
  EXPECT_EQ(req->turns[3].text, "{\"a\":1}");
  EXPECT_EQ(req->turns[4].author_name, "functions.f");
  EXPECT_EQ(req->turns[4].text, "r1r2");
}

TEST(HarmonyRender, RealTokenizerSpecialsAndPrefix) {
  auto tok = Tokenizer::load(GOSSAMER_TEST_TOKENIZER);
  ASSERT_TRUE(tok.ok()) << tok.status().ToString();
  RenderOptions opt;
  opt.date = "2025-06-28";
  auto r = render_chat_request(std::string(R"({"messages":[{"role":"user","content":"<|end|>"}]})"),
                               **tok, opt);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_GT(r->ids.size(), 4u);
  EXPECT_EQ(r->ids.front(), 200006);             // <|start|>
  EXPECT_EQ(r->ids[r->ids.size() - 2], 200006);  // <|start|> before the generation role
  EXPECT_EQ((*tok)->decode({r->ids.back()}).value(), "assistant");
  // User text that spells a special token stays ordinary text: exactly 4 specials per message.
  int specials = 0;
  for (int32_t id : r->ids) specials += (*tok)->is_special(id) ? 1 : 0;
  EXPECT_EQ(specials, 2 * 3 + 1);
  auto text = (*tok)->decode(r->ids);
  ASSERT_TRUE(text.ok());
  EXPECT_EQ(*text, r->text);
  RenderOptions bad;
  bad.date = "28/06/2025";
  EXPECT_FALSE(render_chat_request(std::string(R"({"messages":[{"role":"user","content":"x"}]})"),
                                   **tok, bad)
                   .ok());
}

}  // namespace
}  // namespace gossamer::harmony

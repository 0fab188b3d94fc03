// SSE framing, OpenAI error shape, bearer check, UTF-8 validation, Content-Length values,
// request-field validation, submit errors and stop-string filtering.
#include <gtest/gtest.h>

#include "common/test_seed.h"
#include "server/cors.h"
#include "server/http_util.h"
#include "server/params.h"
#include "server/responses_request.h"
#include "server/stop_filter.h"

namespace gossamer::server {
namespace {

TEST(Sse, FramesDataAndDone) {
  json j{{"a", 1}, {"b", "x\ny"}};
  const std::string s = sse_data(j);
  EXPECT_EQ(s, "data: {\"a\":1,\"b\":\"x\\ny\"}\n\n");  // newline escaped: one data line
  EXPECT_EQ(std::string(kSseDone), "data: [DONE]\n\n");
  EXPECT_EQ(sse_event("response.created", json{{"k", 2}}),
            "event: response.created\ndata: {\"k\":2}\n\n");
}

TEST(Sse, InvalidUtf8IsReplacedNotThrown) {
  json j{{"t", std::string("ok\xff")}};
  std::string s;
  ASSERT_NO_THROW(s = dump(j));
  EXPECT_NE(s.find("\xEF\xBF\xBD"), std::string::npos);
}

TEST(Errors, OpenAiShape) {
  json e = error_body(bad_request("bad 'x'", "x"));
  ASSERT_TRUE(e.contains("error"));
  EXPECT_EQ(e["error"]["message"], "bad 'x'");
  EXPECT_EQ(e["error"]["type"], "invalid_request_error");
  EXPECT_EQ(e["error"]["param"], "x");
  EXPECT_TRUE(e["error"]["code"].is_null());
  EXPECT_EQ(from_status(ResourceExhausted("q")).http_status, 429);
  EXPECT_EQ(from_status(InvalidArgument("q")).http_status, 400);
  // A request asking for what the server does not offer (an image part) is the client's error.
  EXPECT_EQ(from_status(Unsupported("q")).http_status, 400);
  EXPECT_EQ(from_status(Unsupported("q")).type, "invalid_request_error");
  EXPECT_EQ(from_status(Internal("q")).http_status, 500);
}

TEST(Errors, ParamFromTheMessagesFieldPath) {
  // Request parsers (harmony's chat request) start messages with the field's JSON path.
  EXPECT_EQ(from_status(InvalidArgument("messages[0].role: unknown role 'x'")).param,
            "messages[0].role");
  EXPECT_EQ(from_status(Unsupported("messages[3].content[12].type: image_url")).param,
            "messages[3].content[12].type");
  EXPECT_EQ(from_status(InvalidArgument("tool_choice: 'required' but no tools")).param,
            "tool_choice");
  // Not a path: no param.
  EXPECT_EQ(from_status(InvalidArgument("this model's maximum context length: 9")).param, "");
  EXPECT_EQ(from_status(InvalidArgument("messages[x]: y")).param, "");
  EXPECT_EQ(from_status(InvalidArgument("messages")).param, "");
  EXPECT_EQ(from_status(InvalidArgument("0abc: y")).param, "");
  EXPECT_EQ(from_status(Internal("engine: failed")).param, "");  // 500s name no field
}

TEST(Cors, OnlyListedOriginsGetHeaders) {
  const CorsPolicy none{};
  EXPECT_TRUE(cors_headers(none, "http://a.example").empty());
  const CorsPolicy some{{"http://a.example", "https://b.example:8443"}};
  EXPECT_EQ(cors_headers(some, "http://a.example"),
            (HeaderList{{"Access-Control-Allow-Origin", "http://a.example"}, {"Vary", "Origin"}}));
  EXPECT_TRUE(cors_headers(some, "http://a.example.evil").empty());  // exact match only
  EXPECT_TRUE(cors_headers(some, "https://b.example").empty());      // the port is part of it
  EXPECT_TRUE(cors_headers(some, "").empty());                       // no Origin: no CORS
  const CorsPolicy any{{"*"}};
  EXPECT_EQ(any.allow_origin("http://x.example"), "*");
  const HeaderList pre = preflight_headers(any, "http://x.example", "POST", "");
  ASSERT_EQ(pre.size(), 4u);
  EXPECT_EQ(pre[1],
            (std::pair<std::string, std::string>{"Access-Control-Allow-Methods", "POST, OPTIONS"}));
  EXPECT_EQ(pre[2].second, "Authorization, Content-Type");
  EXPECT_TRUE(preflight_headers(some, "http://c.example", "POST", "x").empty());
}

TEST(Auth, BearerConstantTimeCompare) {
  EXPECT_TRUE(bearer_matches("Bearer sekret", "sekret"));
  EXPECT_FALSE(bearer_matches("Bearer sekreT", "sekret"));
  EXPECT_FALSE(bearer_matches("Bearer sekret2", "sekret"));
  EXPECT_FALSE(bearer_matches("Bearer sekre", "sekret"));
  EXPECT_FALSE(bearer_matches("sekret", "sekret"));
  EXPECT_FALSE(bearer_matches("", "sekret"));
  EXPECT_FALSE(bearer_matches("Bearer ", ""));
  EXPECT_TRUE(bearer_matches("bearer sekret", "sekret"));  // the scheme is case-insensitive
  EXPECT_TRUE(bearer_matches("BEARER sekret", "sekret"));
  EXPECT_FALSE(bearer_matches("Bearer", "sekret"));
  EXPECT_FALSE(bearer_matches("Bearxr sekret", "sekret"));
}

TEST(Json, NestingDepthIgnoresBracketsInStrings) {
  EXPECT_FALSE(json_nesting_exceeds(R"({"a":[1,{"b":[]}]})", 4));
  EXPECT_TRUE(json_nesting_exceeds(R"({"a":[1,{"b":[]}]})", 3));
  EXPECT_FALSE(json_nesting_exceeds(R"({"a":"[[[[{{{{\"[[["})", 1));  // inside a string
  EXPECT_FALSE(json_nesting_exceeds(R"([[]] [[]] [[]])", 2));         // depth, not count
  const int n = kMaxJsonDepth + 1 + static_cast<int>(testing::fresh_seed("nesting") % 1000);
  EXPECT_TRUE(json_nesting_exceeds(std::string(n, '[') + std::string(n, ']')));
  EXPECT_FALSE(
      json_nesting_exceeds(std::string(kMaxJsonDepth, '[') + std::string(kMaxJsonDepth, ']')));
}

TEST(Utf8, Validation) {
  EXPECT_TRUE(valid_utf8("héllo ✓ 🎉"));
  EXPECT_FALSE(valid_utf8("\xff"));
  EXPECT_FALSE(valid_utf8("\xc3"));          // truncated
  EXPECT_FALSE(valid_utf8("\xc0\xaf"));      // overlong
  EXPECT_FALSE(valid_utf8("\xed\xa0\x80"));  // surrogate
  EXPECT_FALSE(valid_utf8("a\xe2\x82"));     // truncated at the end
}

TEST(Params, ParsesAndValidatesFields) {
  RequestOptions ro;
  ApiError err;
  json b = json::parse(R"({"temperature":0.5,"top_p":0.9,"top_k":40,"min_p":0.1,"seed":7,
      "max_completion_tokens":33,"stop":["a","b"],"n":2,"stream":true,
      "stream_options":{"include_usage":true},"logprobs":true,"top_logprobs":3,
      "presence_penalty":0.5,"frequency_penalty":-0.5,"ignore_eos":true,
      "logit_bias":{"50256":-100,"7":2.5}})");
  ASSERT_TRUE(parse_request_options(b, Endpoint::kChat, 100, &ro, &err)) << err.message;
  EXPECT_DOUBLE_EQ(ro.gen.temperature, 0.5);
  EXPECT_EQ(ro.gen.top_k, 40);
  EXPECT_EQ(*ro.gen.seed, 7u);
  EXPECT_EQ(ro.gen.max_tokens, 33);
  EXPECT_EQ(ro.stop.size(), 2u);
  EXPECT_EQ(ro.n, 2);
  EXPECT_TRUE(ro.stream && ro.include_usage && ro.gen.logprobs);
  EXPECT_EQ(ro.gen.top_logprobs, 3);
  EXPECT_TRUE(ro.ignore_eos);
  using Bias = std::vector<std::pair<int32_t, float>>;
  EXPECT_EQ(ro.gen.logit_bias, (Bias{{50256, -100.f}, {7, 2.5f}}));
  RequestOptions d;
  ASSERT_TRUE(parse_request_options(json::object(), Endpoint::kChat, 100, &d, &err));
  EXPECT_EQ(d.gen.max_tokens, 100);
  EXPECT_FALSE(d.max_tokens_given);
  EXPECT_FALSE(d.ignore_eos);
}

TEST(Params, RejectsWrongTypesAndRanges) {
  const char* bad[][2] = {
      {R"({"temperature":"hot"})", "temperature"},
      {R"({"temperature":3})", "temperature"},
      {R"({"top_p":0})", "top_p"},
      {R"({"max_tokens":0})", "max_tokens"},
      {R"({"max_tokens":1.5})", "max_tokens"},
      {R"({"n":0})", "n"},
      {R"({"stop":[1]})", "stop"},
      {R"({"stop":["a","b","c","d","e"]})", "stop"},
      {R"({"stream":"yes"})", "stream"},
      {R"({"top_logprobs":2})", "top_logprobs"},
      {R"({"top_logprobs":21,"logprobs":true})", "top_logprobs"},
      {R"({"stream_options":3})", "stream_options"},
      {R"({"seed":"x"})", "seed"},
      {R"({"ignore_eos":1})", "ignore_eos"},
      {R"({"logit_bias":[1]})", "logit_bias"},
      {R"({"logit_bias":{"x":1}})", "logit_bias"},
      {R"({"logit_bias":{"-5":1}})", "logit_bias"},
      {R"({"logit_bias":{"1e3":1}})", "logit_bias"},
      {R"({"logit_bias":{"12":"1"}})", "logit_bias"},
      {R"({"logit_bias":{"12":100.5}})", "logit_bias"},
      {R"({"logit_bias":{"12":-101}})", "logit_bias"},
      {R"({"logit_bias":{"99999999999":1}})", "logit_bias"},
      {R"({"logit_bias":{"7":1,"07":2}})", "logit_bias"},
      {R"({"logit_bias":{"1000":1}})", "logit_bias"},  // vocab 1000 below
      {R"({"n":18446744073709551615})", "n"},          // above INT64_MAX: not wrapped
      {R"({"max_tokens":9223372036854775808})", "max_tokens"},
      {R"({"seed":9223372036854775808})", "seed"},
      {R"({"stream_options":{"include_usage":1}})", "stream_options.include_usage"},
  };
  for (auto& [body, field] : bad) {
    RequestOptions ro;
    ApiError err;
    EXPECT_FALSE(parse_request_options(json::parse(body), Endpoint::kChat, 100, &ro, &err, 1000))
        << body;
    EXPECT_EQ(err.http_status, 400);
    EXPECT_EQ(err.param, field) << body;
    EXPECT_NE(err.message.find(field), std::string::npos) << err.message;
    EXPECT_EQ(err.message.find("got -"), std::string::npos) << err.message;  // no wrapped value
  }
}

TEST(Params, StreamOptionsOnlyWithStream) {
  for (Endpoint ep : {Endpoint::kChat, Endpoint::kCompletions}) {
    for (const char* body : {R"({"stream_options":{"include_usage":true}})",
                             R"({"stream":false,"stream_options":{}})"}) {
      RequestOptions ro;
      ApiError err;
      EXPECT_FALSE(parse_request_options(json::parse(body), ep, 100, &ro, &err)) << body;
      EXPECT_EQ(err.param, "stream_options");
      EXPECT_EQ(err.message,
                "The 'stream_options' parameter is only allowed when 'stream' is enabled.");
    }
    for (const char* body : {R"({"stream":true,"stream_options":{"include_usage":true}})",
                             R"({"stream_options":null})", R"({"stream":false})"}) {
      RequestOptions ro;
      ApiError err;
      EXPECT_TRUE(parse_request_options(json::parse(body), ep, 100, &ro, &err)) << body;
    }
  }
}

TEST(Params, SubmitErrorNamesTheEndpointsField) {
  const Status too_long = OutOfRange("this model's maximum context length is 10 tokens");
  EXPECT_EQ(submit_error(too_long, Endpoint::kChat, 4, 10).param, "max_tokens");
  EXPECT_EQ(submit_error(too_long, Endpoint::kChat, 10, 10).param, "messages");
  EXPECT_EQ(submit_error(too_long, Endpoint::kCompletions, 4, 10).param, "max_tokens");
  EXPECT_EQ(submit_error(too_long, Endpoint::kCompletions, 11, 10).param, "prompt");
  EXPECT_EQ(submit_error(too_long, Endpoint::kResponses, 4, 10).param, "max_output_tokens");
  EXPECT_EQ(submit_error(too_long, Endpoint::kResponses, 12, 10).param, "input");
  const ApiError e = submit_error(too_long, Endpoint::kChat, 4, 10);
  EXPECT_EQ(e.http_status, 400);
  EXPECT_EQ(e.message, too_long.message());
  EXPECT_EQ(e.code, "context_length_exceeded");
  EXPECT_EQ(
      submit_error(OutOfRange("prompt + max_tokens = 9 does not fit"), Endpoint::kResponses, 4, 10)
          .message,
      "prompt + max_output_tokens = 9 does not fit");
  // The scheduler's other rejections name the field they are about.
  const Status vocab = InvalidArgument("prompt token 0 = 200006 is outside the vocabulary");
  EXPECT_EQ(submit_error(vocab, Endpoint::kChat, 4, 10).param, "messages");
  EXPECT_EQ(submit_error(vocab, Endpoint::kCompletions, 4, 10).param, "prompt");
  EXPECT_EQ(submit_error(InvalidArgument("logit_bias token id 9 is outside the vocabulary"),
                         Endpoint::kCompletions, 4, 10)
                .param,
            "logit_bias");
  // A message naming its field keeps it; other errors name none.
  EXPECT_EQ(submit_error(InvalidArgument("stop[2]: bad"), Endpoint::kChat, 4, 10).param, "stop[2]");
  const ApiError full =
      submit_error(ResourceExhausted("the request queue is full"), Endpoint::kCompletions, 4, 10);
  EXPECT_EQ(full.http_status, 429);
  EXPECT_EQ(full.param, "");
}

// Chat request errors reported on /v1/responses name the Responses API's (flat) tool fields.
TEST(Errors, ResponsesNameTheirToolFields) {
  ApiError e = bad_request("tools[12].function.name: 'a b' contains whitespace", "");
  e.param = "tools[12].function.name";
  to_responses_fields(&e);
  EXPECT_EQ(e.param, "tools[12].name");
  EXPECT_EQ(e.message, "tools[12].name: 'a b' contains whitespace");
  ApiError c = bad_request("tool_choice.function.name: 'g' is not one of the request's tools",
                           "tool_choice.function.name");
  to_responses_fields(&c);
  EXPECT_EQ(c.param, "tool_choice.name");
  ApiError m = bad_request("messages[0].role: unknown role", "messages[0].role");
  to_responses_fields(&m);
  EXPECT_EQ(m.param, "messages[0].role");  // other fields unchanged
  ApiError f = bad_request("response_format.json_schema.schema: not an object",
                           "response_format.json_schema.schema");
  to_responses_fields(&f);
  EXPECT_EQ(f.param, "text.format.schema");
  EXPECT_EQ(f.message, "text.format.schema: not an object");
}

TEST(Http, ContentLengthMustBeOneDecimalCount) {
  using V = std::vector<std::string>;
  EXPECT_TRUE(valid_content_length(V{}));
  EXPECT_TRUE(valid_content_length(V{"0"}));
  EXPECT_TRUE(valid_content_length(V{"1234"}));
  EXPECT_TRUE(valid_content_length(V{"17", "17"}));
  EXPECT_TRUE(valid_content_length(V{"999999999999999999"}));  // 18 digits
  for (const V& bad : {V{"-5"}, V{"abc"}, V{"+5"}, V{""}, V{"5 "}, V{"1e3"}, V{"0x10"}, V{"5, 5"},
                       V{"17", "18"}, V{"9999999999999999999"}}) {
    EXPECT_FALSE(valid_content_length(bad)) << bad[0];
  }
}

TEST(StopFilter, HoldsBackSplitStopStrings) {
  StopFilter f({"STOP", "xy"});
  bool hit = false;
  std::string out;
  out += f.push("hello S", &hit);
  EXPECT_FALSE(hit);
  out += f.push("TO", &hit);
  EXPECT_FALSE(hit);
  out += f.push("P and more", &hit);
  EXPECT_TRUE(hit);
  EXPECT_EQ(out, "hello ");
  EXPECT_EQ(f.push("later", &hit), "");
  EXPECT_EQ(f.flush(), "");
}

TEST(StopFilter, NoStopReleasesEverything) {
  StopFilter f({"zzz"});
  bool hit = false;
  std::string out = f.push("abc", &hit);
  out += f.push("déf", &hit);
  out += f.flush();
  EXPECT_FALSE(hit);
  EXPECT_EQ(out, "abcdéf");
  StopFilter none({});
  EXPECT_EQ(none.push("x", &hit), "x");
}

}  // namespace
}  // namespace gossamer::server

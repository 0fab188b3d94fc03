// Small helpers shared by the HTTP handlers: OpenAI-shaped errors, SSE framing, safe JSON
// serialisation, bearer-token checks. No httplib types here (unit-testable).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "common/json_depth.h"  // json_nesting_exceeds, kMaxJsonDepth (server.cpp)
#include "common/status.h"

namespace gossamer::server {

using json = nlohmann::ordered_json;

// An error the handlers turn into an HTTP response: status code + OpenAI error body.
struct ApiError {
  int http_status = 400;
  std::string message;
  std::string type = "invalid_request_error";  // OpenAI: invalid_request_error, ...
  std::string param;                           // "" -> null
  std::string code;                            // "" -> null
};

ApiError bad_request(std::string message, std::string param = "");
// Maps a Status (InvalidArgument -> 400, ResourceExhausted -> 429, Cancelled -> 503, ...). A 400
// whose message starts with a field path ("messages[0].role: ...") gets it as `param`.
ApiError from_status(const Status& st);
// {"error": {"message", "type", "param", "code"}}
json error_body(const ApiError& e);

// JSON text with invalid UTF-8 replaced by U+FFFD (never throws).
std::string dump(const json& j);
// One server-sent event: "data: <json>\n\n".
std::string sse_data(const json& j);
inline constexpr std::string_view kSseDone = "data: [DONE]\n\n";
// Named event (Responses API): "event: <name>\ndata: <json>\n\n".
std::string sse_event(const std::string& name, const json& j);

// Constant-time comparison of the Authorization header with "Bearer <key>".
bool bearer_matches(std::string_view header, std::string_view key);

// Checks that a string is valid UTF-8.
bool valid_utf8(std::string_view s);

// The Content-Length header values of a request frame its body: none, or values that are all
// the same 1*DIGIT (RFC 9110 8.6) below 2^63. cpp-httplib reads "-5" with strtoull (2^64 - 5)
// and "abc" as 0, so the server checks the values itself before the body is read.
bool valid_content_length(const std::vector<std::string>& values);

}  // namespace gossamer::server

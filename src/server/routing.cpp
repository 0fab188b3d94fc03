// Before and around the route handlers: body framing (Content-Length), CORS preflights, the
// shutdown gate and the API key before httplib reads a body; httplib's own errors (no route,
// wrong method, body too large) and exceptions escaping a handler as OpenAI errors.
#include "server/cors.h"
#include "server/handlers.h"

namespace gossamer::server {
namespace {

bool needs_auth(const std::string& path) {
  return path.rfind("/v1/", 0) == 0 || path == "/tokenize" || path == "/detokenize" ||
         path == "/apply-template";
}

const char* status_message(int status) {
  switch (status) {
    case 400:  // httplib could not read the request
      return "malformed HTTP request (request line, headers or body framing)";
    case 413:
      return "the request body is too large";
    case 414:
      return "the request URI is too long";
    default:
      return "the request could not be handled";
  }
}

// The methods a known route accepts ("" for an unknown path: a 404, else a 405).
std::string allowed_methods(const std::string& path) {
  static const char* const kPost[] = {"/v1/chat/completions", "/v1/completions",
                                      "/v1/responses",        "/tokenize",
                                      "/detokenize",          "/apply-template"};
  for (const char* p : kPost) {
    if (path == p) return "POST";
  }
  if (path == "/health" || path == "/metrics" || path.rfind("/v1/models", 0) == 0) {
    return "GET, HEAD";
  }
  const std::string resp = "/v1/responses/";
  if (path.size() > resp.size() && path.rfind(resp, 0) == 0) return "GET, HEAD, DELETE";
  return "";
}

// A request whose body httplib would wait for in vain, or that it would read past the limit:
// answered before the body is read (true). httplib itself takes a Content-Length of "-5" for
// 2^64 - 5 bytes and "abc" for 0, and reads a POST without a length until its read timeout.
bool framing_error(const Ctx& ctx, const httplib::Request& req, httplib::Response& res) {
  std::vector<std::string> lengths;
  for (size_t i = 0; i < req.get_header_value_count("Content-Length"); ++i) {
    lengths.push_back(req.get_header_value("Content-Length", i));
  }
  if (!valid_content_length(lengths)) {
    res.set_header("Connection", "close");  // the body was not read: the framing is lost
    send_error(res, bad_request("invalid Content-Length header: " + lengths[0] +
                                " (a decimal byte count, one value)"));
    return true;
  }
  const bool has_body = req.method == "POST" || req.method == "PUT" || req.method == "PATCH";
  if (has_body && lengths.empty() && !req.has_header("Transfer-Encoding")) {
    res.set_header("Connection", "close");
    send_error(res, ApiError{411,
                             "a " + req.method + " needs a Content-Length header or a " +
                                 "chunked body (Transfer-Encoding: chunked)",
                             "invalid_request_error", "", "length_required"});
    return true;
  }
  if (!lengths.empty() &&
      std::stoull(lengths[0]) > static_cast<uint64_t>(ctx.opts.max_body_bytes)) {
    res.set_header("Connection", "close");  // the body is not read
    send_error(res, ApiError{413,
                             "request body of " + lengths[0] + " bytes is larger than the " +
                                 "server's limit of " + std::to_string(ctx.opts.max_body_bytes) +
                                 " bytes (--max-body-bytes)",
                             "invalid_request_error", "", "request_too_large"});
    return true;
  }
  return false;
}

bool starts_generation(const httplib::Request& req) {
  return req.method == "POST" && (req.path == "/v1/chat/completions" ||
                                  req.path == "/v1/completions" || req.path == "/v1/responses");
}

// OPTIONS: a CORS preflight (answered without the API key, which browsers do not send with it);
// the CORS headers only for an allowed Origin, so that the browser refuses the others.
void preflight(const Ctx& ctx, const httplib::Request& req, httplib::Response& res) {
  const std::string allow = allowed_methods(req.path);
  if (allow.empty()) {
    return send_error(
        res, ApiError{404, "no route OPTIONS " + req.path, "invalid_request_error", "", ""});
  }
  res.status = 204;
  res.set_header("Allow", allow + ", OPTIONS");
  const CorsPolicy cors{ctx.opts.allowed_origins};
  for (const auto& [k, v] :
       preflight_headers(cors, req.get_header_value("Origin"), allow,
                         req.get_header_value("Access-Control-Request-Headers"))) {
    res.set_header(k, v);
  }
}

}  // namespace

// An httplib error (no route, body too large) as an OpenAI error; a known path: 405 + Allow.
void route_error(const httplib::Request& req, httplib::Response& res) {
  if (!res.body.empty()) return;
  const std::string allow = res.status == 404 ? allowed_methods(req.path) : std::string();
  if (!allow.empty() && allow.find(req.method) == std::string::npos) {
    res.status = 405;
    res.set_header("Allow", allow);
    return send_error(res, ApiError{405,
                                    "method " + req.method + " is not allowed on " + req.path +
                                        " (allowed: " + allow + ")",
                                    "invalid_request_error", "", "method_not_allowed"});
  }
  const std::string message =
      res.status == 404 ? "no route " + req.method + " " + req.path : status_message(res.status);
  res.set_content(dump(error_body(ApiError{res.status, message, "invalid_request_error", "", ""})),
                  "application/json");
}

// Before httplib reads the body: framing, CORS preflight, shutting down, the API key.
httplib::Server::HandlerResponse pre_route(const Ctx& ctx, const httplib::Request& req,
                                           httplib::Response& res) {
  if (framing_error(ctx, req, res)) return httplib::Server::HandlerResponse::Handled;
  if (req.method == "OPTIONS") {
    preflight(ctx, req, res);
    return httplib::Server::HandlerResponse::Handled;
  }
  if (ctx.stopping && starts_generation(req)) {
    res.set_header("Connection", "close");
    send_error(res, ApiError{503, "the server is shutting down", "server_error", "",
                             "server_shutting_down"});
    return httplib::Server::HandlerResponse::Handled;
  }
  if (ctx.opts.api_key.empty() || !needs_auth(req.path))
    return httplib::Server::HandlerResponse::Unhandled;
  if (bearer_matches(req.get_header_value("Authorization"), ctx.opts.api_key)) {
    return httplib::Server::HandlerResponse::Unhandled;
  }
  send_error(res, ApiError{401, "invalid or missing API key (Authorization: Bearer <key>)",
                           "invalid_request_error", "", "invalid_api_key"});
  return httplib::Server::HandlerResponse::Handled;
}

// An exception escaping a handler: a JSON type error in a request field is the client's (400),
// anything else a 500 naming what was thrown.
void handler_exception(httplib::Response& res, std::exception_ptr ep) {
  std::string what = "internal error";
  try {
    if (ep) std::rethrow_exception(ep);
  } catch (const json::type_error& e) {
    // A request field of an unexpected JSON type that a handler read without checking:
    // the client's error, not the server's.
    return send_error(
        res, bad_request(std::string("a request field has the wrong JSON type: ") + e.what()));
  } catch (const std::exception& e) {
    what = e.what();
  } catch (...) {
  }
  send_error(res, ApiError{500, what, "server_error", "", ""});
}

bool read_body(const Ctx& ctx, const httplib::ContentReader& read, std::string* body,
               httplib::Response& res) {
  const auto max = static_cast<size_t>(ctx.opts.max_body_bytes);
  bool over = false;
  const bool ok = read([&](const char* data, size_t n) {
    if (body->size() + n > max) return over = true, false;
    body->append(data, n);
    return true;
  });
  if (over) {
    res.set_header("Connection", "close");  // the rest is not read
    send_error(res, ApiError{413,
                             "the request body is larger than the server's limit of " +
                                 std::to_string(max) + " bytes (--max-body-bytes; counted " +
                                 "after a chunked or compressed body is decoded)",
                             "invalid_request_error", "", "request_too_large"});
    return false;
  }
  if (!ok) {
    res.set_header("Connection", "close");
    send_error(res, bad_request("the request body could not be read (broken chunked framing "
                                "or compression)"));
  }
  return ok;
}

void post_route(const Ctx& ctx, const httplib::Request& req, httplib::Response& res) {
  if (res.has_header("Access-Control-Allow-Origin")) return;  // a preflight's
  const CorsPolicy cors{ctx.opts.allowed_origins};
  for (const auto& [k, v] : cors_headers(cors, req.get_header_value("Origin"))) {
    res.set_header(k, v);
  }
}

}  // namespace gossamer::server

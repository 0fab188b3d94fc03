// Cross-origin requests from browsers (CORS): which origins may call the server, the headers
// that tell the browser so, and the preflight (OPTIONS) answer. No httplib types here.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace gossamer::server {

// --allowed-origin: exact origins ("https://app.example.com") or "*" (any). Empty: no CORS
// headers, so browsers keep pages of other origins from reading the responses (the default: a
// server on localhost is not exposed to every web page the user opens).
struct CorsPolicy {
  std::vector<std::string> origins;
  // The Access-Control-Allow-Origin value for a request's Origin header ("" = none).
  std::string allow_origin(const std::string& origin) const;
};

using HeaderList = std::vector<std::pair<std::string, std::string>>;

// Headers for an actual (non-preflight) response to a request with this Origin.
HeaderList cors_headers(const CorsPolicy& p, const std::string& origin);
// Headers for a preflight of a route that accepts `allowed_methods` ("POST", "GET, HEAD", ...):
// the methods, the requested headers (Authorization, Content-Type, ...) and a max-age.
HeaderList preflight_headers(const CorsPolicy& p, const std::string& origin,
                             const std::string& allowed_methods,
                             const std::string& requested_headers);

}  // namespace gossamer::server

#include "server/cors.h"

namespace gossamer::server {

std::string CorsPolicy::allow_origin(const std::string& origin) const {
  if (origin.empty()) return "";
  for (const std::string& o : origins) {
    if (o == "*") return "*";
    if (o == origin) return origin;
  }
  return "";
}

HeaderList cors_headers(const CorsPolicy& p, const std::string& origin) {
  const std::string allow = p.allow_origin(origin);
  if (allow.empty()) return {};
  HeaderList h{{"Access-Control-Allow-Origin", allow}};
  if (allow != "*") h.emplace_back("Vary", "Origin");
  return h;
}

HeaderList preflight_headers(const CorsPolicy& p, const std::string& origin,
                             const std::string& allowed_methods,
                             const std::string& requested_headers) {
  HeaderList h = cors_headers(p, origin);
  if (h.empty()) return h;
  h.emplace_back("Access-Control-Allow-Methods", allowed_methods + ", OPTIONS");
  // The SDKs send Authorization, Content-Type and their own x-stainless-* headers: allow what
  // the browser asks for (a header it names is checked against this list).
  h.emplace_back("Access-Control-Allow-Headers",
                 requested_headers.empty() ? "Authorization, Content-Type" : requested_headers);
  h.emplace_back("Access-Control-Max-Age", "600");
  return h;
}

}  // namespace gossamer::server

// POST /v1/responses (placeholder until the full subset lands).
#include "server/handlers.h"

namespace gossamer::server {

void handle_responses(Ctx& ctx, const httplib::Request& req, httplib::Response& res) {
  json body;
  ApiError err;
  if (!parse_body(ctx, req, &body, &err)) return send_error(res, err);
  send_error(res, ApiError{501, "not implemented yet", "server_error", "", ""});
}

}  // namespace gossamer::server

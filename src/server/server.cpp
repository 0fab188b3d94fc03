// The server: options, the shared handler helpers, the route table and the small endpoints
// (/v1/models, /health, /metrics); the checks around the routes are in routing.cpp, /tokenize,
// /detokenize and /apply-template in tokenize_handler.cpp.
#include "server/server.h"

#include <sys/socket.h>

#include <algorithm>
#include <chrono>
#include <random>

#include "server/handlers.h"

namespace gossamer::server {

Status ServerOptions::validate() const {
  if (port < 0 || port > 65535) return InvalidArgument("--port must be in [0, 65535]");
  if (max_body_bytes < 1024) return InvalidArgument("max body size must be >= 1024 bytes");
  if (request_timeout.count() < 1) return InvalidArgument("--request-timeout must be >= 1 s");
  if (model_name.empty()) return InvalidArgument("the served model name is empty");
  if (responses_store_max < 0 || responses_store_bytes < 0) {
    return InvalidArgument("the responses store limits must be >= 0");
  }
  for (const std::string& o : allowed_origins) {
    if (o != "*" && o.rfind("http://", 0) != 0 && o.rfind("https://", 0) != 0) {
      return InvalidArgument("--allowed-origin '" + o +
                             "': an origin is '*' or scheme://host[:port], e.g. "
                             "http://localhost:3000");
    }
  }
  return render.validate();
}

void send_error(httplib::Response& res, const ApiError& e) {
  res.status = e.http_status;
  if (e.http_status == 429) res.set_header("Retry-After", "1");
  // A timed-out request would time out again: tell SDK clients (openai-python) not to retry.
  if (e.code == "timeout") res.set_header("x-should-retry", "false");
  res.set_content(dump(error_body(e)), "application/json");
}

std::string make_id(Ctx& ctx, const char* prefix) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%016llx",
                (unsigned long long)(ctx.next_id++ * 0x9e3779b97f4a7c15ULL));
  return std::string(prefix) + buf;
}

Result<std::shared_ptr<const TokenPieceIndex>> token_pieces(Ctx& ctx) {
  std::call_once(ctx.pieces_once, [&ctx] { ctx.pieces = TokenPieceIndex::build(*ctx.tok); });
  return ctx.pieces;
}

Result<std::shared_ptr<const TokenTrie>> token_trie(Ctx& ctx) {
  GS_ASSIGN_OR_RETURN(auto pieces, token_pieces(ctx));
  std::call_once(ctx.trie_once,
                 [&ctx, &pieces] { ctx.trie = TokenTrie::build(*pieces, ctx.tok->vocab_size()); });
  return ctx.trie;
}

PeerWatch watch_peer(const httplib::Request& req) {
  return PeerWatch(PeerAddress{req.remote_addr, req.remote_port, req.local_addr, req.local_port});
}

ApiError timeout_error(const Ctx& ctx, int64_t generated, bool streamed) {
  return ApiError{504,
                  "the request ran past the server's request timeout (" +
                      std::to_string(ctx.opts.request_timeout.count()) +
                      " s, --request-timeout) after generating " + std::to_string(generated) +
                      " tokens" + (streamed ? "" : "; the partial output is discarded"),
                  "timeout_error", "", "timeout"};
}

ApiError generation_error(const Ctx& ctx, const std::string& what) {
  if (ctx.stopping) {
    return ApiError{503,
                    "the server is shutting down and cancelled the request after its "
                    "--shutdown-grace period (" +
                        what + ")",
                    "server_error", "", "server_shutting_down"};
  }
  return ApiError{500, what, "server_error", "", ""};
}

void client_gone(httplib::Response& res) {
  res.status = 499;
  res.set_content(dump(error_body(ApiError{499, "the client closed the connection",
                                           "invalid_request_error", "", "client_closed"})),
                  "application/json");
}

int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

bool json_object_body(const httplib::Request& req, json* body, ApiError* err) {
  if (!valid_utf8(req.body))
    return *err = bad_request("the request body is not valid UTF-8"), false;
  if (json_nesting_exceeds(req.body)) {
    *err = bad_request("the request body nests JSON arrays / objects deeper than " +
                       std::to_string(kMaxJsonDepth) + " levels");
    return false;
  }
  if (size_t nul = json_nul_byte(req.body); nul != std::string::npos) {
    return *err = bad_request("the request body is not valid JSON (a NUL byte at byte offset " +
                              std::to_string(nul) + ")"),
           false;
  }
  *body = json::parse(req.body, nullptr, /*allow_exceptions=*/false);
  if (body->is_discarded()) return *err = bad_request("the request body is not valid JSON"), false;
  if (!body->is_object())
    return *err = bad_request("the request body must be a JSON object"), false;
  return true;
}

namespace {

ApiError model_not_found(const Ctx& ctx, const std::string& id) {
  return ApiError{
      404,
      "The model '" + id + "' does not exist (this server serves '" + ctx.opts.model_name + "')",
      "invalid_request_error", "model", "model_not_found"};
}

}  // namespace

bool parse_body(const Ctx& ctx, const httplib::Request& req, json* body, ApiError* err) {
  if (!json_object_body(req, body, err)) return false;
  auto m = body->find("model");
  if (m == body->end() || !m->is_string()) {
    *err = bad_request("'model' is required and must be a string", "model");
    return false;
  }
  if (m->get<std::string>() != ctx.opts.model_name) {
    return *err = model_not_found(ctx, m->get<std::string>()), false;
  }
  return true;
}

struct Server::Impl {
  Ctx ctx;
  httplib::Server http;
  int bound_port = -1;
  int listen_fd = -1;  // the listening socket (see Server::bind)
};

namespace {

json model_json(const Ctx& ctx) {
  return json{{"id", ctx.opts.model_name},
              {"object", "model"},
              {"created", unix_now()},
              {"owned_by", "gossamer"},
              {"max_model_len", ctx.engine->max_model_len()}};
}

void handle_models(Ctx& ctx, httplib::Response& res) {
  json list{{"object", "list"}, {"data", json::array({model_json(ctx)})}};
  res.set_content(dump(list), "application/json");
}

// GET /v1/models/{id}: the served model, or 404 model_not_found.
void handle_model(Ctx& ctx, const httplib::Request& req, httplib::Response& res) {
  const std::string id = req.matches.size() > 1 ? req.matches[1].str() : std::string();
  if (id != ctx.opts.model_name) return send_error(res, model_not_found(ctx, id));
  res.set_content(dump(model_json(ctx)), "application/json");
}

void install_routes(Server::Impl& s) {
  Ctx& ctx = s.ctx;
  auto& h = s.http;
  h.set_pre_routing_handler(
      [&ctx](const httplib::Request& q, httplib::Response& r) { return pre_route(ctx, q, r); });
  h.set_error_handler([](const httplib::Request& q, httplib::Response& r) { route_error(q, r); });
  h.set_post_routing_handler(
      [&ctx](const httplib::Request& q, httplib::Response& r) { post_route(ctx, q, r); });
  h.set_exception_handler([](const httplib::Request&, httplib::Response& r, std::exception_ptr ep) {
    handler_exception(r, ep);
  });
  h.Get("/health", [&ctx](const httplib::Request&, httplib::Response& res) {
    res.status = ctx.stopping ? 503 : 200;
    res.set_content(ctx.stopping ? "{\"status\":\"stopping\"}" : "{\"status\":\"ok\"}",
                    "application/json");
  });
  h.Get("/metrics", [&ctx](const httplib::Request&, httplib::Response& res) {
    res.set_content(ctx.engine->metrics().prometheus(ctx.opts.model_name),
                    "text/plain; version=0.0.4");
  });
  h.Get("/v1/models",
        [&ctx](const httplib::Request&, httplib::Response& res) { handle_models(ctx, res); });
  h.Get(R"(/v1/models/(.+))",
        [&ctx](const httplib::Request& q, httplib::Response& r) { handle_model(ctx, q, r); });
  // Every POST body is read through read_body (at most --max-body-bytes once decoded).
  using PostHandler = void (*)(Ctx&, const httplib::Request&, httplib::Response&);
  const auto post = [&h, &ctx](const char* path, PostHandler fn) {
    h.Post(path, [&ctx, fn](const httplib::Request& q, httplib::Response& r,
                            const httplib::ContentReader& read) {
      httplib::Request with_body = q;
      if (read_body(ctx, read, &with_body.body, r)) fn(ctx, with_body, r);
    });
  };
  post("/v1/chat/completions", handle_chat);
  post("/v1/completions", handle_completions);
  post("/v1/responses", handle_responses);
  h.Get(
      R"(/v1/responses/([A-Za-z0-9_.\-]+))",
      [&ctx](const httplib::Request& q, httplib::Response& r) { handle_get_response(ctx, q, r); });
  h.Delete(R"(/v1/responses/([A-Za-z0-9_.\-]+))",
           [&ctx](const httplib::Request& q, httplib::Response& r) {
             handle_delete_response(ctx, q, r);
           });
  post("/tokenize", handle_tokenize);
  post("/detokenize", handle_detokenize);
  post("/apply-template", handle_apply_template);
}

}  // namespace

Server::Server(Engine* engine, std::shared_ptr<const Tokenizer> tok, ServerOptions opts)
    : impl_(std::make_unique<Impl>()) {
  Ctx& ctx = impl_->ctx;
  ctx.engine = engine;
  ctx.tok = std::move(tok);
  ctx.opts = std::move(opts);
  std::random_device rd;  // ids differ between server runs too (make_id's map is a bijection)
  ctx.next_id = (static_cast<uint64_t>(rd()) << 32) | rd();
  for (const char* s : {"<|return|>", "<|call|>"}) {
    if (auto id = ctx.tok->special_id(s)) ctx.chat_stop_ids.push_back(*id);
  }
  std::vector<int32_t> eos;
  for (int64_t e : engine->config().eos_token_ids) eos.push_back(static_cast<int32_t>(e));
  eos.insert(eos.end(), ctx.opts.extra_stop_ids.begin(), ctx.opts.extra_stop_ids.end());
  auto add = [](std::vector<int32_t>& v, int32_t id) {
    if (std::find(v.begin(), v.end(), id) == v.end()) v.push_back(id);
  };
  for (int32_t e : eos) {
    add(ctx.completion_stop_ids, e);
    add(ctx.chat_stop_ids, e);
  }
  for (int32_t id : ctx.chat_stop_ids) {  // the parser needs the harmony terminators
    if (id != ctx.tok->special_id("<|return|>") && id != ctx.tok->special_id("<|call|>")) {
      ctx.chat_silent_stop_ids.push_back(id);
    }
  }
  ctx.store =
      std::make_unique<ResponseStore>(ctx.opts.responses_store_max, ctx.opts.responses_store_bytes);
  auto& h = impl_->http;
  h.set_payload_max_length(static_cast<size_t>(ctx.opts.max_body_bytes));
  h.set_read_timeout(std::chrono::seconds(30));
  h.set_write_timeout(std::chrono::seconds(30));
  h.set_keep_alive_max_count(1000);
  int threads = ctx.opts.http_threads;
  if (threads <= 0) threads = 64;
  h.new_task_queue = [threads] { return new httplib::ThreadPool(static_cast<size_t>(threads)); };
  install_routes(*impl_);
}

Server::~Server() {
  stop();
}

// The listening socket gets SO_REUSEADDR (a restart binds over connections in TIME_WAIT; a port
// a live server holds is refused, where httplib's default SO_REUSEPORT would share it), and a
// backlog of kListenBacklog: httplib 0.11 listens with 5 (compiled into the library), so a burst
// of more simultaneous connects had SYNs dropped and retried after the kernel's 1 s timeout (a
// ~1 s TTFT p99 at 64 concurrent clients). The socket-options hook sees the socket before bind;
// listen() on it again after bind enlarges the backlog in place (Linux).
Status Server::bind() {
  constexpr int kListenBacklog = 4096;  // the kernel caps it at net.core.somaxconn
  const auto& o = impl_->ctx.opts;
  GS_RETURN_IF_ERROR(o.validate());
  int* fd = &impl_->listen_fd;
  impl_->http.set_socket_options([fd](socket_t sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
    *fd = sock;
  });
  int p = o.port == 0 ? impl_->http.bind_to_any_port(o.host) : o.port;
  if (o.port != 0 && !impl_->http.bind_to_port(o.host, o.port)) p = -1;
  if (p < 0) {
    return IoError("cannot listen on " + o.host + ":" + std::to_string(o.port) +
                   " (address in use or not available)");
  }
  if (impl_->listen_fd >= 0 && ::listen(impl_->listen_fd, kListenBacklog) != 0) {
    return IoError("cannot set the listen backlog on " + o.host + ":" + std::to_string(p));
  }
  impl_->bound_port = p;
  return Status::Ok();
}

int Server::port() const {
  return impl_->bound_port;
}

void Server::run() {
  impl_->http.listen_after_bind();
}

void Server::begin_shutdown() {
  impl_->ctx.stopping = true;
}

int64_t Server::in_flight() const {
  return impl_->ctx.in_flight.load();
}

void Server::stop() {
  impl_->ctx.stopping = true;
  if (impl_->http.is_running()) impl_->http.stop();
}

}  // namespace gossamer::server

// Internal to the server module: the handler context and the per-endpoint handlers.
#pragma once

#include <httplib.h>

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "runtime/engine.h"
#include "server/chat_choice.h"
#include "server/http_util.h"
#include "server/json_constraint.h"
#include "server/params.h"
#include "server/peer_watch.h"
#include "server/response_store.h"
#include "server/server.h"
#include "server/tool_constraint.h"

namespace gossamer::server {

struct Ctx {
  Engine* engine = nullptr;
  std::shared_ptr<const Tokenizer> tok;
  ServerOptions opts;
  std::vector<int32_t> chat_stop_ids;         // <|return|>, <|call|> and the config's eos ids
  std::vector<int32_t> completion_stop_ids;   // the config's eos ids
  std::vector<int32_t> chat_silent_stop_ids;  // chat stop ids other than <|return|>, <|call|>
  std::atomic<uint64_t> next_id{1};
  std::atomic<bool> stopping{false};     // shutting down: new generations get 503
  std::atomic<int64_t> in_flight{0};     // generation requests not yet answered in full
  std::unique_ptr<ResponseStore> store;  // /v1/responses with store: true
  std::once_flag pieces_once;            // token_pieces() builds `pieces` on first use
  Result<std::shared_ptr<const TokenPieceIndex>> pieces{Internal("not built")};
  std::once_flag trie_once;  // token_trie() builds `trie` on first use
  Result<std::shared_ptr<const TokenTrie>> trie{Internal("not built")};
};

// The token index for grammar steering (built once, on first use; thread-safe).
Result<std::shared_ptr<const TokenPieceIndex>> token_pieces(Ctx& ctx);
// The token trie for structured output (built once, on first use; thread-safe).
Result<std::shared_ptr<const TokenTrie>> token_trie(Ctx& ctx);
// Watches the connection of a non-streaming request for a client that went away.
PeerWatch watch_peer(const httplib::Request& req);
// Counts a generation request as in flight while it lives (held by the handler, or by a
// streaming response's content provider until the stream ends): a graceful stop waits for them.
struct InFlight {
  explicit InFlight(Ctx& c) : ctx(c) { ++ctx.in_flight; }
  ~InFlight() { --ctx.in_flight; }
  InFlight(const InFlight&) = delete;
  InFlight& operator=(const InFlight&) = delete;
  Ctx& ctx;
};
// 504 with code "timeout": the request ran past --request-timeout (`generated` tokens so far;
// `streamed`: they were sent, else they are discarded).
ApiError timeout_error(const Ctx& ctx, int64_t generated, bool streamed = false);
// A generation that ended in an error: 503 (code "server_shutting_down") when the server
// cancelled it to shut down, else 500.
ApiError generation_error(const Ctx& ctx, const std::string& what);
// Status 499 (client closed request): the body is never read, the handler just returns.
void client_gone(httplib::Response& res);

// routing.cpp: before a route's handler (body framing, CORS preflight, shutdown gate, API key:
// Handled when answered), httplib's own errors (404 / 405 / 413 ...) as OpenAI errors, an
// exception escaping a handler (400 for a JSON type error, else 500), and after every response
// (CORS headers).
httplib::Server::HandlerResponse pre_route(const Ctx& ctx, const httplib::Request& req,
                                           httplib::Response& res);
void route_error(const httplib::Request& req, httplib::Response& res);
void handler_exception(httplib::Response& res, std::exception_ptr ep);
void post_route(const Ctx& ctx, const httplib::Request& req, httplib::Response& res);
// A POST body into `body`, at most --max-body-bytes once decoded (httplib 0.11 limits only a
// Content-Length body: a chunked or gzip one grew without bound). False: answered (413 / 400).
bool read_body(const Ctx& ctx, const httplib::ContentReader& read, std::string* body,
               httplib::Response& res);

// Writes an OpenAI error response (429 adds Retry-After).
void send_error(httplib::Response& res, const ApiError& e);
// The body as a JSON object (UTF-8, nesting depth and JSON syntax checked). False (with err)
// otherwise.
bool json_object_body(const httplib::Request& req, json* body, ApiError* err);
// json_object_body, then checks "model". False (with err) otherwise.
bool parse_body(const Ctx& ctx, const httplib::Request& req, json* body, ApiError* err);
std::string make_id(Ctx& ctx, const char* prefix);
int64_t unix_now();

// A prepared chat generation: n choices already submitted to the engine.
struct ChatJob {
  RequestOptions ro;
  std::vector<std::unique_ptr<ChatChoice>> choices;
  std::vector<std::vector<Delta>> prefill_deltas;  // per choice
  std::string id;
  int64_t created = 0;
};
// Renders the Chat Completions request `body`, applies tool_choice steering and submits it.
bool start_chat_job(Ctx& ctx, const json& body, Endpoint ep, ChatJob* job, ApiError* err);
// Waits for every choice of a non-streaming job, handing each delta to on_delta (choice index,
// delta) when given; false (all cancelled) when the client left.
bool wait_chat_job(ChatJob& job, PeerWatch& peer,
                   const std::function<void(size_t, const Delta&)>& on_delta = {});
// The usage object for a finished job.
json chat_usage(const ChatJob& job);
// token string / bytes / logprob entry (OpenAI logprobs.content item).
json logprob_entry(const Tokenizer& tok, const SampledToken& t, bool with_top);
// The entries of tokens[*sent, min(end, size)) as a JSON array, advancing *sent: streamed deltas
// hand out each content token's entry once (chat chunks, Responses output_text).
json logprob_entries(const Tokenizer& tok, const std::vector<SampledToken>& tokens, size_t* sent,
                     size_t end, bool with_top);

void handle_chat(Ctx& ctx, const httplib::Request& req, httplib::Response& res);
void handle_completions(Ctx& ctx, const httplib::Request& req, httplib::Response& res);
void handle_responses(Ctx& ctx, const httplib::Request& req, httplib::Response& res);
void handle_get_response(Ctx& ctx, const httplib::Request& req, httplib::Response& res);
void handle_delete_response(Ctx& ctx, const httplib::Request& req, httplib::Response& res);
void handle_tokenize(Ctx& ctx, const httplib::Request& req, httplib::Response& res);
void handle_detokenize(Ctx& ctx, const httplib::Request& req, httplib::Response& res);
void handle_apply_template(Ctx& ctx, const httplib::Request& req, httplib::Response& res);

}  // namespace gossamer::server

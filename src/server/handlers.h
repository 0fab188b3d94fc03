// Internal to the server module: the handler context and the per-endpoint handlers.
#pragma once

#include <httplib.h>

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "runtime/engine.h"
#include "server/chat_choice.h"
#include "server/http_util.h"
#include "server/params.h"
#include "server/server.h"

namespace gossamer::server {

struct Ctx {
  Engine* engine = nullptr;
  std::shared_ptr<const Tokenizer> tok;
  ServerOptions opts;
  std::vector<int32_t> chat_stop_ids;        // <|return|>, <|call|> and the config's eos ids
  std::vector<int32_t> completion_stop_ids;  // the config's eos ids
  std::atomic<uint64_t> next_id{1};
  std::atomic<bool> stopping{false};
};

// Writes an OpenAI error response (429 adds Retry-After).
void send_error(httplib::Response& res, const ApiError& e);
// Parses the body as a JSON object, checks "model". False (with err) otherwise.
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
// The usage object for a finished job.
json chat_usage(const ChatJob& job);
// token string / bytes / logprob entry (OpenAI logprobs.content item).
json logprob_entry(const Tokenizer& tok, const SampledToken& t, bool with_top);

void handle_chat(Ctx& ctx, const httplib::Request& req, httplib::Response& res);
void handle_completions(Ctx& ctx, const httplib::Request& req, httplib::Response& res);
void handle_responses(Ctx& ctx, const httplib::Request& req, httplib::Response& res);

}  // namespace gossamer::server

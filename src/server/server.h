// The OpenAI-compatible HTTP server (cpp-httplib): routes, API-key check, body limit, admission
// errors, graceful stop. It talks to the Engine only through Engine::submit and RequestStreams.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "harmony/render.h"
#include "runtime/engine.h"
#include "tokenizer/tokenizer.h"

namespace gossamer::server {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8000;      // 0: any free port (see Server::port())
  std::string api_key;  // non-empty: /v1/* and the utility endpoints need "Bearer <key>"
  std::string model_name = "gossamer";
  int64_t max_body_bytes = int64_t{8} << 20;
  std::chrono::seconds request_timeout{600};
  int64_t default_max_tokens = 0;  // when a request sets none: 0 = up to the context limit
  int http_threads = 0;            // 0: sized from the engine's queue and batch limits
  // More stop ids for chat and completions (e.g. generation_config.json's eos_token_id), on top
  // of the model config's eos ids (and <|return|>, <|call|> for chat).
  std::vector<int32_t> extra_stop_ids;
  int64_t responses_store_max = 1024;                 // stored /v1/responses results at most
  int64_t responses_store_bytes = int64_t{64} << 20;  // and their JSON size at most
  harmony::RenderOptions render;
  // Origins whose browser pages may call the server (CORS); "*" = any; empty = none.
  std::vector<std::string> allowed_origins;
  Status validate() const;
};

class Server {
 public:
  Server(Engine* engine, std::shared_ptr<const Tokenizer> tok, ServerOptions opts);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Binds the listening socket (IoError naming host:port on failure).
  Status bind();
  int port() const;
  // Serves until stop(). Blocks.
  void run();
  // Thread-safe. Graceful stop, step 1: /health turns 503 and new generation requests get 503
  // (code server_shutting_down) while the ones in flight run on and the listener stays open.
  void begin_shutdown();
  // Generation requests not yet answered in full (streams count until their last event).
  int64_t in_flight() const;
  // Thread-safe; makes run() return after in-flight handlers finish. A stream still running is
  // cut off: stop the engine first (its requests then end with an error event) and wait for
  // in_flight() to reach 0.
  void stop();

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace gossamer::server

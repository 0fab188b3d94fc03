// Sampling / stop / streaming fields shared by /v1/chat/completions, /v1/completions and
// /v1/responses, parsed with type and range checks (errors name the field).
#pragma once

#include <string>
#include <vector>

#include "runtime/request.h"
#include "server/http_util.h"

namespace gossamer::server {

enum class Endpoint { kChat, kCompletions, kResponses };

struct RequestOptions {
  GenerationParams gen;
  bool max_tokens_given = false;
  std::vector<std::string> stop;  // stop strings (at most 4), matched on the output text
  int64_t n = 1;
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  // vLLM extension: stop tokens (eos ids, harmony terminators) do not end the generation; it runs
  // to max_tokens (fixed-length benchmarks). Stop strings still apply.
  bool ignore_eos = false;
  // /v1/completions only: return the prompt before the completion (and, with logprobs, the
  // prompt tokens' logprobs); allows max_tokens 0 (score the prompt only).
  bool echo = false;
};

// Parses the fields; `ep` selects the spelling (max_tokens / max_completion_tokens /
// max_output_tokens; logprobs bool vs int). Unknown fields are ignored, as OpenAI's servers do
// for forward compatibility. Returns an ApiError (400) naming the field on bad input.
// default_max_tokens: used when no limit is given.
// vocab > 0: logit_bias ids must be below it (the tokenizer's vocabulary size).
bool parse_request_options(const json& body, Endpoint ep, int64_t default_max_tokens,
                           RequestOptions* out, ApiError* err, int64_t vocab = 0);

// The request fields that hold the prompt ("messages", "prompt", "input") and the token limit
// ("max_tokens"; Responses: "max_output_tokens"), as error params.
const char* prompt_param(Endpoint ep);
const char* max_tokens_param(Endpoint ep);
// An error of Engine::submit as an OpenAI error. A 400 that names no field (the request does not
// fit the context or the KV cache) names the prompt when it alone leaves no room for a token,
// else the token limit.
ApiError submit_error(const Status& st, Endpoint ep, int64_t prompt_tokens, int64_t max_model_len);

}  // namespace gossamer::server

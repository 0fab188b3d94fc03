#include "server/params.h"

#include <algorithm>
#include <cmath>
#include <regex>
#include <string>

namespace gossamer::server {

namespace {

// Reads an optional number field into *v; false (with err) on a wrong type or range.
bool get_number(const json& b, const char* key, double lo, double hi, double* v, ApiError* err) {
  auto it = b.find(key);
  if (it == b.end() || it->is_null()) return true;
  if (!it->is_number()) {
    *err = bad_request(std::string("'") + key + "' must be a number", key);
    return false;
  }
  const double x = it->get<double>();
  if (!std::isfinite(x) || x < lo || x > hi) {
    *err = bad_request(std::string("'") + key + "' must be in [" + json(lo).dump() + ", " +
                           json(hi).dump() + "], got " + it->dump(),
                       key);
    return false;
  }
  *v = x;
  return true;
}

bool get_int(const json& b, const char* key, int64_t lo, int64_t hi, int64_t* v, bool* given,
             ApiError* err) {
  auto it = b.find(key);
  if (it == b.end() || it->is_null()) return true;
  if (!it->is_number_integer()) {
    *err = bad_request(std::string("'") + key + "' must be an integer", key);
    return false;
  }
  // An unsigned value above INT64_MAX would wrap to a negative int64_t: out of range as given.
  const bool too_big = it->is_number_unsigned() && it->get<uint64_t>() > INT64_MAX;
  const int64_t x = too_big ? INT64_MAX : it->get<int64_t>();
  if (too_big || x < lo || x > hi) {
    *err = bad_request(std::string("'") + key + "' must be in [" + std::to_string(lo) + ", " +
                           std::to_string(hi) + "], got " + it->dump(),
                       key);
    return false;
  }
  *v = x;
  if (given) *given = true;
  return true;
}

bool get_bool(const json& b, const char* key, bool* v, ApiError* err) {
  auto it = b.find(key);
  if (it == b.end() || it->is_null()) return true;
  if (!it->is_boolean()) {
    *err = bad_request(std::string("'") + key + "' must be a boolean", key);
    return false;
  }
  *v = it->get<bool>();
  return true;
}

bool get_stop(const json& b, std::vector<std::string>* stop, ApiError* err) {
  auto it = b.find("stop");
  if (it == b.end() || it->is_null()) return true;
  if (it->is_string()) {
    if (!it->get<std::string>().empty()) stop->push_back(it->get<std::string>());
    return true;
  }
  if (!it->is_array() || it->size() > 4) {
    *err = bad_request("'stop' must be a string or an array of at most 4 strings", "stop");
    return false;
  }
  for (const auto& s : *it) {
    if (!s.is_string()) {
      *err = bad_request("'stop' must contain only strings", "stop");
      return false;
    }
    if (!s.get<std::string>().empty()) stop->push_back(s.get<std::string>());
  }
  return true;
}

bool get_logprobs(const json& b, Endpoint ep, GenerationParams* g, ApiError* err) {
  if (ep == Endpoint::kCompletions) {  // legacy: logprobs is the number of alternatives
    int64_t k = -1;
    if (!get_int(b, "logprobs", 0, 20, &k, nullptr, err)) return false;
    if (k >= 0) {
      g->logprobs = true;
      g->top_logprobs = k;
    }
    return true;
  }
  if (!get_bool(b, "logprobs", &g->logprobs, err)) return false;
  if (!get_int(b, "top_logprobs", 0, 20, &g->top_logprobs, nullptr, err)) return false;
  if (g->top_logprobs > 0 && !g->logprobs) {
    *err = bad_request("'top_logprobs' requires 'logprobs': true", "top_logprobs");
    return false;
  }
  return true;
}

// logit_bias: {"<token id>": bias in [-100, 100], ...}, at most kMaxLogitBias distinct ids, each
// below `vocab` when given (the scheduler checks the model's vocabulary again at submission).
bool get_logit_bias(const json& b, int64_t vocab, GenerationParams* g, ApiError* err) {
  constexpr size_t kMaxLogitBias = 1024;
  auto it = b.find("logit_bias");
  if (it == b.end() || it->is_null()) return true;
  if (!it->is_object() || it->size() > kMaxLogitBias) {
    *err = bad_request("'logit_bias' must be an object of at most " +
                           std::to_string(kMaxLogitBias) + " token id -> bias entries",
                       "logit_bias");
    return false;
  }
  for (const auto& [key, v] : it->items()) {
    const bool digits =
        !key.empty() && key.size() <= 9 &&
        std::all_of(key.begin(), key.end(), [](char c) { return c >= '0' && c <= '9'; });
    if (!digits) {
      *err =
          bad_request("'logit_bias' keys must be token ids (decimal integers), got \"" + key + "\"",
                      "logit_bias");
      return false;
    }
    if (!v.is_number() || !std::isfinite(v.get<double>()) || v.get<double>() < -100 ||
        v.get<double>() > 100) {
      *err = bad_request("'logit_bias' value for token " + key + " must be a number in [-100, 100]",
                         "logit_bias");
      return false;
    }
    const int32_t id = std::stoi(key);
    if (vocab > 0 && id >= vocab) {
      *err = bad_request("'logit_bias' token id " + key + " is outside the vocabulary [0, " +
                             std::to_string(vocab) + ")",
                         "logit_bias");
      return false;
    }
    for (const auto& [other, bias] : g->logit_bias) {
      if (other == id) {
        *err = bad_request("'logit_bias' lists token " + key + " twice", "logit_bias");
        return false;
      }
    }
    g->logit_bias.emplace_back(id, static_cast<float>(v.get<double>()));
  }
  return true;
}

// Legacy-completions fields with no equivalent here: chat-only constraints (response_format,
// tools, vLLM's guided_*), a non-empty `suffix` (insert mode) and
// `best_of` above n (ranking extra completions) are 400s rather than silently ignored; `best_of`
// below n is a 400 as with OpenAI, equal to n (or null) means n.
bool completions_extras(const json& b, int64_t n, ApiError* err) {
  // Chat features a raw completion cannot honour: a 400 rather than unconstrained output.
  for (const char* k : {"response_format", "tools", "tool_choice", "guided_json", "guided_regex",
                        "guided_choice", "guided_grammar"}) {
    if (auto f = b.find(k); f != b.end() && !f->is_null()) {
      *err = bad_request(std::string("'") + k +
                             "' is not supported on /v1/completions (use /v1/chat/completions or "
                             "/v1/responses, which enforce structured output and tool calls)",
                         k);
      return false;
    }
  }
  if (auto s = b.find("suffix"); s != b.end() && !s->is_null()) {
    if (!s->is_string()) return *err = bad_request("'suffix' must be a string", "suffix"), false;
    if (!s->get_ref<const std::string&>().empty()) {
      *err = bad_request("'suffix' (insert mode) is not supported for gpt-oss", "suffix");
      return false;
    }
  }
  int64_t best_of = n;
  if (!get_int(b, "best_of", 1, 16, &best_of, nullptr, err)) return false;
  if (best_of < n) {
    *err = bad_request(
        "'best_of' (" + std::to_string(best_of) + ") must be >= 'n' (" + std::to_string(n) + ")",
        "best_of");
    return false;
  }
  if (best_of > n) {
    *err = bad_request("'best_of' > 'n' is not supported (completions are not ranked); " +
                           std::string("ask for n completions instead"),
                       "best_of");
    return false;
  }
  return true;
}

}  // namespace

bool parse_request_options(const json& b, Endpoint ep, int64_t default_max_tokens,
                           RequestOptions* out, ApiError* err, int64_t vocab) {
  GenerationParams& g = out->gen;
  if (!get_number(b, "temperature", 0, 2, &g.temperature, err)) return false;
  if (!get_number(b, "top_p", 0, 1, &g.top_p, err)) return false;
  if (g.top_p <= 0) {
    *err = bad_request("'top_p' must be > 0", "top_p");
    return false;
  }
  if (!get_int(b, "top_k", -1, 1 << 30, &g.top_k, nullptr, err)) return false;
  if (g.top_k < 0) g.top_k = 0;  // -1 = disabled (vLLM convention)
  if (!get_number(b, "min_p", 0, 1, &g.min_p, err)) return false;
  if (!get_number(b, "presence_penalty", -2, 2, &g.presence_penalty, err)) return false;
  if (!get_number(b, "frequency_penalty", -2, 2, &g.frequency_penalty, err)) return false;
  int64_t seed = -1;
  bool seed_given = false;
  if (!get_int(b, "seed", INT64_MIN, INT64_MAX, &seed, &seed_given, err)) return false;
  if (seed_given) g.seed = static_cast<uint64_t>(seed);
  if (!get_logprobs(b, ep, &g, err)) return false;
  if (!get_logit_bias(b, vocab, &g, err)) return false;
  const char* max_keys[] = {"max_tokens", "max_completion_tokens", "max_output_tokens"};
  g.max_tokens = default_max_tokens;
  if (ep == Endpoint::kCompletions && !get_bool(b, "echo", &out->echo, err)) return false;
  const int64_t min_tokens = out->echo ? 0 : 1;  // 0: score the echoed prompt only
  for (const char* k : max_keys) {
    if (ep == Endpoint::kResponses && std::string(k) != "max_output_tokens") continue;
    if (ep != Endpoint::kResponses && std::string(k) == "max_output_tokens") continue;
    if (!get_int(b, k, min_tokens, INT64_MAX, &g.max_tokens, &out->max_tokens_given, err)) {
      if (ep == Endpoint::kCompletions && b[k].is_number_integer() && b[k] == 0) {
        err->message += " (0 needs echo: true)";
      }
      return false;
    }
  }
  if (ep != Endpoint::kResponses && !get_stop(b, &out->stop, err)) return false;
  if (!get_int(b, "n", 1, 16, &out->n, nullptr, err)) return false;
  if (ep == Endpoint::kCompletions && !completions_extras(b, out->n, err)) return false;
  if (!get_bool(b, "stream", &out->stream, err)) return false;
  if (!get_bool(b, "ignore_eos", &out->ignore_eos, err)) return false;
  auto so = b.find("stream_options");
  if (so != b.end() && !so->is_null()) {
    if (!so->is_object()) {
      *err = bad_request("'stream_options' must be an object", "stream_options");
      return false;
    }
    if (!get_bool(*so, "include_usage", &out->include_usage, err)) {
      *err = bad_request("'stream_options.include_usage' must be a boolean",
                         "stream_options.include_usage");
      return false;
    }
    if (ep != Endpoint::kResponses && !out->stream) {  // as OpenAI (and vLLM) answer
      *err = bad_request("The 'stream_options' parameter is only allowed when 'stream' is enabled.",
                         "stream_options");
      return false;
    }
  }
  return true;
}

const char* prompt_param(Endpoint ep) {
  switch (ep) {
    case Endpoint::kChat:
      return "messages";
    case Endpoint::kCompletions:
      return "prompt";
    case Endpoint::kResponses:
      return "input";
  }
  return "";
}

const char* max_tokens_param(Endpoint ep) {
  return ep == Endpoint::kResponses ? "max_output_tokens" : "max_tokens";
}

ApiError submit_error(const Status& st, Endpoint ep, int64_t prompt_tokens, int64_t max_model_len) {
  ApiError e = from_status(st);
  if (e.http_status == 400 && e.param.empty()) {
    const std::string& m = e.message;
    if (m.rfind("logit_bias", 0) == 0) {
      e.param = "logit_bias";
    } else if (m.rfind("prompt token", 0) == 0 || m.rfind("the prompt", 0) == 0) {
      e.param = prompt_param(ep);  // ids outside the vocabulary, an empty prompt
    } else {
      e.param = prompt_tokens >= max_model_len ? prompt_param(ep) : max_tokens_param(ep);
    }
  }
  if (st.code() == StatusCode::kOutOfRange) {  // the scheduler: prompt + budget do not fit
    e.code = "context_length_exceeded";
    if (ep == Endpoint::kResponses) {
      e.message =
          std::regex_replace(e.message, std::regex(R"(\bmax_tokens\b)"), "max_output_tokens");
    }
  }
  return e;
}

}  // namespace gossamer::server

#include "server/completions_request.h"

#include <algorithm>

namespace gossamer::server {

namespace {

// One prompt: a string, or a non-empty array of token ids (checked against the vocabulary).
bool one_prompt(const Ctx& ctx, const json& p, const std::string& param, Prompt* out,
                ApiError* err) {
  std::vector<int32_t>* ids = &out->ids;
  if (p.is_string()) {
    out->text = p.get<std::string>();
    out->is_text = true;
    *ids = ctx.tok->encode(out->text, /*allow_special=*/true);
    if (ids->empty()) return *err = bad_request("'" + param + "' is empty", param), false;
    return true;
  }
  if (!p.is_array() || p.empty()) {
    return *err = bad_request("'" + param + "' must be a string or a non-empty array of token ids",
                              param),
           false;
  }
  // Ids the tokenizer does not know (the model's padded rows past it) have no text to echo.
  const int64_t vocab = std::min<int64_t>(ctx.engine->config().vocab_size, ctx.tok->vocab_size());
  for (size_t i = 0; i < p.size(); ++i) {
    const json& t = p[i];
    const bool in_range = t.is_number_integer() && !(t.is_number_unsigned() && t > vocab) &&
                          t.get<int64_t>() >= 0 && t.get<int64_t>() < vocab;
    if (!in_range) {
      return *err = bad_request("'" + param + "' token ids must be integers in [0, " +
                                    std::to_string(vocab) + "); element " + std::to_string(i) +
                                    " is " + t.dump(),
                                param),
             false;
    }
    ids->push_back(t.get<int32_t>());
  }
  return true;
}

}  // namespace

bool prompt_batch(const Ctx& ctx, const json& body, std::vector<Prompt>* out, ApiError* err) {
  auto it = body.find("prompt");
  if (it == body.end()) return *err = bad_request("'prompt' is required", "prompt"), false;
  const json& p = *it;
  const bool batch = p.is_array() && !p.empty() && (p[0].is_string() || p[0].is_array());
  if (!batch) {
    out->emplace_back();
    return one_prompt(ctx, p, "prompt", &out->back(), err);
  }
  for (size_t i = 0; i < p.size(); ++i) {
    const std::string param = "prompt[" + std::to_string(i) + "]";
    if (!p[i].is_string() && !p[i].is_array()) {
      return *err = bad_request("'" + param +
                                    "': a batch must hold only strings or only arrays "
                                    "of token ids",
                                "prompt"),
             false;
    }
    out->emplace_back();
    if (!one_prompt(ctx, p[i], param, &out->back(), err)) return false;
  }
  return true;
}

}  // namespace gossamer::server

// The request side of POST /v1/completions: the `prompt` field (a string, token ids or a batch
// of either) as token ids.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "server/handlers.h"

namespace gossamer::server {

constexpr size_t kMaxChoices = 256;  // prompts x n per request

struct Prompt {
  std::vector<int32_t> ids;
  std::string text;  // as given (string prompts); the decoded ids when echoed
  bool is_text = false;
};

// `prompt`: a string, an array of ids, or a batch (array of strings / of id arrays). Ids are
// checked against the vocabulary; 400s name the field ("prompt", "prompt[i]").
bool prompt_batch(const Ctx& ctx, const json& body, std::vector<Prompt>* out, ApiError* err);

}  // namespace gossamer::server

// The request side of POST /v1/responses: its input and fields mapped onto a chat request (the
// same harmony rendering and parser serve both endpoints).
#pragma once

#include "server/http_util.h"

namespace gossamer::server {

// `input` (a string or an array of items) as an array of items; 400s name the field.
bool responses_input_items(const json& body, json* items, ApiError* err);

// The chat request for `items` (earlier turns, then this request's input from index `offset`,
// which item errors are numbered from) and the body's tools, tool_choice, text.format,
// reasoning and sampling fields.
bool responses_to_chat(const json& body, const json& items, size_t offset, json* chat,
                       ApiError* err);

}  // namespace gossamer::server

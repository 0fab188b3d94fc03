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

// An error of the chat request built by responses_to_chat, in the Responses API's field names:
// its tools are flat (chat's "tools[i].function.name" is "tools[i].name") and its output format
// is text.format (chat's "response_format.json_schema.schema" is "text.format.schema").
void to_responses_fields(ApiError* err);

}  // namespace gossamer::server

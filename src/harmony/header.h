// Parsing of a harmony message header as the model writes it, e.g.
// "<|channel|>commentary to=functions.f <|constrain|>json" or "assistant to=functions.f<|channel|>
// commentary json" (the text between <|start|> and <|message|>, special tokens spelled out).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace gossamer::harmony {

struct HeaderFields {
  std::string channel;       // word after <|channel|> ("" if none)
  std::string recipient;     // after "to=" ("" if none)
  std::string content_type;  // "<|constrain|>json", or a bare word such as "json"
  std::string leftover;      // words that are not header fields, joined by single spaces
  // A <|channel|> or <|constrain|> marker or a word "to=..." was seen (text without any is what
  // a model writes when it skips the header).
  bool syntax = false;
  std::vector<std::string> warnings;
};

HeaderFields parse_header_text(const std::string& text);

bool is_ascii_space(char c);
// Invalid bytes -> U+FFFD, so the result is valid UTF-8.
std::string sanitize_utf8(std::string_view s);

}  // namespace gossamer::harmony

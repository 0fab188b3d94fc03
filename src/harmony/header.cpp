#include "harmony/header.h"

namespace gossamer::harmony {
namespace {

constexpr std::string_view kChannelMarker = "<|channel|>";
constexpr std::string_view kConstrainMarker = "<|constrain|>";

// Length of the valid UTF-8 sequence at s[i], or 0 if invalid/incomplete.
size_t utf8_seq_len(std::string_view s, size_t i) {
  const auto b = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  unsigned char c = b(i);
  if (c < 0x80) return 1;
  size_t n = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC2 ? 2 : 0;
  if (n == 0 || c > 0xF4 || i + n > s.size()) return 0;
  for (size_t k = 1; k < n; ++k) {
    if ((b(i + k) & 0xC0) != 0x80) return 0;
  }
  if (n == 3 && ((c == 0xE0 && b(i + 1) < 0xA0) || (c == 0xED && b(i + 1) > 0x9F))) return 0;
  if (n == 4 && ((c == 0xF0 && b(i + 1) < 0x90) || (c == 0xF4 && b(i + 1) > 0x8F))) return 0;
  return n;
}

std::string quoted(const std::string& s) {
  return "'" + s + "'";
}

}  // namespace

bool is_ascii_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

std::string sanitize_utf8(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size();) {
    size_t n = utf8_seq_len(s, i);
    if (n == 0) {
      out += "\xEF\xBF\xBD";
      ++i;
    } else {
      out.append(s.substr(i, n));
      i += n;
    }
  }
  return out;
}

HeaderFields parse_header_text(const std::string& text) {
  HeaderFields h;
  std::string s = text;
  if (size_t pos = s.find(kChannelMarker); pos != std::string::npos) {
    size_t begin = pos + kChannelMarker.size(), end = begin;
    while (end < s.size() && !is_ascii_space(s[end]) && s[end] != '<') ++end;
    h.channel = s.substr(begin, end - begin);
    if (h.channel.empty()) h.warnings.push_back("header has <|channel|> but no channel name");
    s = s.substr(0, pos) + " " + s.substr(end);
    h.syntax = true;
  }
  std::string spaced;  // "to=x<|constrain|>json" -> "to=x <|constrain|>json"
  for (size_t i = 0; i < s.size(); ++i) {
    if (s.compare(i, kConstrainMarker.size(), kConstrainMarker) == 0) spaced.push_back(' ');
    spaced.push_back(s[i]);
  }
  std::vector<std::string> parts, left;
  for (size_t i = 0; i < spaced.size();) {
    while (i < spaced.size() && is_ascii_space(spaced[i])) ++i;
    size_t j = i;
    while (j < spaced.size() && !is_ascii_space(spaced[j])) ++j;
    if (j > i) parts.push_back(spaced.substr(i, j - i));
    i = j;
  }
  for (size_t i = 0; i < parts.size(); ++i) {
    const std::string& p = parts[i];
    if (i == 0 && p == "assistant") continue;
    if (i == 0 && (p == "user" || p == "system" || p == "developer")) {
      h.warnings.push_back("model wrote a message with role " + quoted(p) +
                           "; parsed as assistant");
      continue;
    }
    const bool to = p.rfind("to=", 0) == 0, constrain = p.rfind(kConstrainMarker, 0) == 0;
    h.syntax = h.syntax || to || constrain;
    if (to && h.recipient.empty()) {
      h.recipient = p.substr(3);
    } else if (constrain && h.content_type.empty()) {
      h.content_type = p;
    } else {
      left.push_back(p);
    }
  }
  // A bare content type: "to=functions.f json" without <|constrain|>, and a lone "json" after any
  // channel ("<|channel|>final json", which gpt-oss may write for structured output) is never
  // message text (openai-harmony keeps it in the header too).
  if (h.content_type.empty() && left.size() == 1 && (!h.recipient.empty() || left[0] == "json")) {
    h.content_type = left[0];
    left.clear();
  }
  for (size_t i = 0; i < left.size(); ++i) h.leftover += (i ? " " : "") + left[i];
  return h;
}

}  // namespace gossamer::harmony

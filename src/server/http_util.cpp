#include "server/http_util.h"

#include <cctype>

namespace gossamer::server {

namespace {

// The JSON path a request-parsing message starts with ("messages[0].content: ..." ->
// "messages[0].content"), or "" when the message does not start with one.
std::string leading_field_path(const std::string& m) {
  size_t i = 0;
  auto ident = [&] {
    const size_t start = i;
    while (i < m.size() && (std::isalnum(static_cast<unsigned char>(m[i])) || m[i] == '_')) ++i;
    return i > start && !std::isdigit(static_cast<unsigned char>(m[start]));
  };
  if (!ident()) return "";
  while (i < m.size() && m[i] != ':') {
    if (m[i] == '.') {
      ++i;
      if (!ident()) return "";
    } else if (m[i] == '[') {
      const size_t start = ++i;
      while (i < m.size() && std::isdigit(static_cast<unsigned char>(m[i]))) ++i;
      if (i == start || i >= m.size() || m[i] != ']') return "";
      ++i;
    } else {
      return "";
    }
  }
  return i < m.size() ? m.substr(0, i) : "";
}

}  // namespace

ApiError bad_request(std::string message, std::string param) {
  ApiError e;
  e.http_status = 400;
  e.message = std::move(message);
  e.param = std::move(param);
  return e;
}

ApiError from_status(const Status& st) {
  ApiError e;
  e.message = st.message();
  switch (st.code()) {
    case StatusCode::kInvalidArgument:
    case StatusCode::kOutOfRange:
    case StatusCode::kUnsupported:  // a request feature this server does not offer (image parts)
      e.http_status = 400;
      e.param = leading_field_path(e.message);  // "tools[0].type: ..." names its field
      break;
    case StatusCode::kNotFound:
      e.http_status = 404;
      e.type = "not_found_error";
      break;
    case StatusCode::kResourceExhausted:
      e.http_status = 429;
      e.type = "rate_limit_error";
      e.code = "queue_full";
      break;
    case StatusCode::kCancelled:
      e.http_status = 503;
      e.type = "server_error";
      break;
    default:
      e.http_status = 500;
      e.type = "server_error";
      break;
  }
  return e;
}

json error_body(const ApiError& e) {
  json err;
  err["message"] = e.message;
  err["type"] = e.type;
  err["param"] = e.param.empty() ? json(nullptr) : json(e.param);
  err["code"] = e.code.empty() ? json(nullptr) : json(e.code);
  return json{{"error", err}};
}

std::string dump(const json& j) {
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string sse_data(const json& j) {
  return "data: " + dump(j) + "\n\n";
}

std::string sse_event(const std::string& name, const json& j) {
  return "event: " + name + "\ndata: " + dump(j) + "\n\n";
}

bool bearer_matches(std::string_view header, std::string_view key) {
  constexpr std::string_view kPrefix = "bearer ";  // the scheme is case-insensitive (RFC 7235)
  bool scheme = header.size() >= kPrefix.size();
  for (size_t i = 0; scheme && i < kPrefix.size(); ++i) {
    scheme = std::tolower(static_cast<unsigned char>(header[i])) == kPrefix[i];
  }
  std::string_view given = scheme ? header.substr(kPrefix.size()) : std::string_view();
  // Compare every byte of the expected key regardless of where a mismatch is.
  unsigned diff = given.size() == key.size() ? 0u : 1u;
  for (size_t i = 0; i < key.size(); ++i) {
    const unsigned char g = i < given.size() ? static_cast<unsigned char>(given[i]) : 0;
    diff |= g ^ static_cast<unsigned char>(key[i]);
  }
  return diff == 0 && !key.empty();
}

bool valid_utf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    size_t n;
    uint32_t cp;
    if (c < 0x80) {
      ++i;
      continue;
    } else if ((c & 0xE0) == 0xC0) {
      n = 1;
      cp = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
      n = 2;
      cp = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
      n = 3;
      cp = c & 0x07;
    } else {
      return false;
    }
    if (i + n >= s.size()) return false;
    for (size_t k = 1; k <= n; ++k) {
      const unsigned char cc = static_cast<unsigned char>(s[i + k]);
      if ((cc & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (cc & 0x3F);
    }
    if ((n == 1 && cp < 0x80) || (n == 2 && cp < 0x800) || (n == 3 && cp < 0x10000) ||
        cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
      return false;
    }
    i += n + 1;
  }
  return true;
}

bool valid_content_length(const std::vector<std::string>& values) {
  for (const std::string& v : values) {
    if (v.empty() || v.size() > 18 || v != values[0]) return false;  // 18 digits < 2^63
    for (char c : v) {
      if (c < '0' || c > '9') return false;
    }
  }
  return true;
}

}  // namespace gossamer::server

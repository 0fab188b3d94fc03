// A guard for untrusted JSON text: nlohmann::json parses iteratively, but copying, dumping or
// walking a parsed value recurses (and ordered_json copies values while it parses), so a value
// nested 100,000 deep overflows the stack. Callers check the text before parsing it.
#pragma once

#include <string_view>

namespace gossamer {

// True when JSON text nests arrays / objects deeper than max_depth (brackets inside strings do
// not count).
inline constexpr int kMaxJsonDepth = 512;
bool json_nesting_exceeds(std::string_view text, int max_depth = kMaxJsonDepth);

// nlohmann::json ends its input at a NUL byte, so "{...}\0garbage" parsed as "{...}": the
// offset of the first NUL byte (never valid in JSON text: inside a string it is written \u0000)
// for the caller's error, npos if none.
inline size_t json_nul_byte(std::string_view text) {
  return text.find('\0');
}

}  // namespace gossamer

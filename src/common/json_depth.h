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

}  // namespace gossamer

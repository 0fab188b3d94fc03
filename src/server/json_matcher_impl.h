// Internal to JsonMatcher's sources: json_matcher.cpp (stepping through bytes),
// json_matcher_objects.cpp (keys, enum values, frames) and json_token_trie.cpp (the trie and
// its walk). Not part of the server's API.
#pragma once

#include <cstdint>

namespace gossamer::server::json_matcher_impl {

inline constexpr uint32_t kNone = UINT32_MAX;
// FNV-1a over a key's bytes (JsonMatcher::Thread::hash; extra keys are compared by it).
inline constexpr uint64_t kFnvOffset = 1469598103934665603ull;
inline constexpr uint64_t kFnvPrime = 1099511628211ull;

}  // namespace gossamer::server::json_matcher_impl

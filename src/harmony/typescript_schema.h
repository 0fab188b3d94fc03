// JSON Schema -> the TypeScript-like type text that harmony puts in the developer message's
// "# Tools" section (`type NAME = (_: <type>) => any;`). Follows openai-harmony's renderer
// byte for byte: object properties in document order (hence ordered_json), "?" for optional
// properties, comments for title/description/examples/default, string enums as unions,
// oneOf as " | " lists, type arrays joined with " | ", integer -> number, anything unknown
// (including anyOf / allOf) -> any.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace gossamer::harmony {

// `schema` may be any JSON value (non-objects render as "any"). `indent` prefixes nested lines.
std::string json_schema_to_typescript(const nlohmann::ordered_json& schema,
                                      const std::string& indent);

// Compact JSON text of a value the way openai-harmony prints `default: ...` comments
// (serde_json Display: no spaces, floats like 1.0 / 1e-7 / 1e21).
std::string compact_json(const nlohmann::ordered_json& value);

}  // namespace gossamer::harmony

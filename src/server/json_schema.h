// The JSON Schema subset that response_format "json_schema" is held to, compiled into a table of
// value alternatives that JsonConstraint (server/json_constraint.h) follows byte by byte.
//
// Enforced (structurally, while the model writes):
//   type (a name or a list of names), properties, required, additionalProperties (false, true,
//   absent or a schema), minProperties / maxProperties, items (a schema, false, or the draft-7
//   list form), prefixItems, additionalItems (draft 7), minItems / maxItems, enum and const (the
//   value must be the compact serialisation of one of them), anyOf / oneOf (oneOf is treated as
//   anyOf: exclusivity is not checked), allOf with exactly one member, $ref to "#",
//   "#/$defs/NAME" or "#/definitions/NAME" (recursion allowed), nullable: true (OpenAPI).
// Accepted and ignored (the output may break them): title, description, default, examples,
//   $schema, $id, $anchor, $comment, format, pattern, minLength, maxLength, minimum, maximum,
//   exclusiveMinimum, exclusiveMaximum, multipleOf, contentEncoding, contentMediaType, readOnly,
//   writeOnly, deprecated, strict, discriminator and every keyword not named here.
// Rejected with InvalidArgument naming the keyword and its JSON pointer (the output could break
//   them structurally): allOf (2+ members), not, if / then / else, patternProperties,
//   propertyNames, dependentRequired, dependentSchemas, dependencies, uniqueItems: true,
//   contains / minContains / maxContains, unevaluatedProperties, unevaluatedItems, $dynamicRef,
//   $recursiveRef, another $ref, and $ref / anyOf / oneOf / allOf beside structural keywords
//   (that would be an intersection of schemas).
// Numbers follow JSON's grammar with at most 64 integer digits and 2 exponent digits, so that
// every number written is a finite double (1E999 is valid JSON but overflows most readers).
// Object keys are written in canonical form (escapes only where JSON needs them, no \u or \/
// in keys), so that equal keys are equal bytes: duplicate keys are then caught by comparing
// bytes, and a declared name cannot be smuggled in as an "extra" key.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "server/http_util.h"

namespace gossamer::server {

// Type bits. kTypeNumber admits every number, kTypeInteger only those without fraction/exponent.
enum : uint8_t {
  kTypeObject = 1,
  kTypeArray = 2,
  kTypeString = 4,
  kTypeNumber = 8,
  kTypeInteger = 16,
  kTypeBoolean = 32,
  kTypeNull = 64,
  kTypeAll = 127,
};

inline constexpr uint32_t kNoNode = UINT32_MAX;

// One schema. Value positions (root, property values, elements) name a node; a value there
// follows one of the node's `alts` (leaves: a node without anyOf / $ref; itself for a leaf).
// Everything that can never be completed (false schemas, unsatisfiable required properties,
// ...) is pruned after compilation, so that a writer following the table never dead-ends.
// Bitsets over an object node's names (JsonSchemaNode::required / blocked, and the matcher's
// used-names sets): 64 names per word.
inline bool test_bit(const uint64_t* words, size_t i) {
  return (words[i / 64] >> (i % 64)) & 1;
}
inline void set_bit(uint64_t* words, size_t i) {
  words[i / 64] |= uint64_t{1} << (i % 64);
}

struct JsonSchemaNode {
  std::vector<uint32_t> alts;  // satisfiable leaves (non-empty for every reachable node)
  uint8_t types = 0;           // kType* a value may take (leaves)
  int32_t enum_index = -1;     // >= 0: the value is one of enums[enum_index]; types unused
  // Objects. Names are the JSON-escaped property names (without quotes), sorted bytewise.
  std::vector<std::string> names;
  std::vector<uint32_t> values;    // node of each name's value
  std::vector<uint64_t> required;  // bitset over names
  std::vector<uint64_t> blocked;   // bitset: names whose value can never be written
  uint32_t additional = kNoNode;   // node of extra keys' values; kNoNode: no extra keys
  uint32_t min_props = 0, max_props = UINT32_MAX;
  // Arrays. max_items is lowered to where no further element can be written.
  std::vector<uint32_t> prefix;  // node of each leading element
  uint32_t items = kNoNode;      // node of the later elements; kNoNode: none
  uint32_t min_items = 0, max_items = UINT32_MAX;

  size_t words() const { return (names.size() + 63) / 64; }
  uint32_t element(uint32_t i) const { return i < prefix.size() ? prefix[i] : items; }
};

struct CompiledJsonSchema {
  std::vector<JsonSchemaNode> nodes;
  std::vector<std::vector<std::string>> enums;  // sorted, distinct compact serialisations
  uint32_t root = 0;                            // node of the top-level value
};

// schema == nullptr: json_object mode (any JSON object). Otherwise the schema above; errors are
// InvalidArgument "... at /json/pointer" (the caller says whose schema it is).
Result<std::shared_ptr<const CompiledJsonSchema>> compile_json_schema(const json* schema);

// The same checks without keeping the result (for validating a request before it is queued).
Status check_json_schema(const json& schema);

}  // namespace gossamer::server

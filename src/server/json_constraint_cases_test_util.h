// Test-only: the schemas json_constraint_test.cpp runs JsonConstraint on, each with
// hand-checkable facts about a document, documents it accepts and documents it refuses
// (json_constraint_cases_test.cpp).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "server/http_util.h"

namespace gossamer::server::testing {

using Check = std::function<bool(const json&)>;

struct SchemaCase {
  const char* name;
  const char* schema;  // nullptr: json_object mode
  Check check;         // hand-checkable facts about a document the walk wrote
  std::vector<std::string> valid;
  std::vector<std::string> invalid;
};

// Schemas with hand-checkable facts, documents they accept and documents they refuse.
const std::vector<SchemaCase>& json_schema_cases();

}  // namespace gossamer::server::testing

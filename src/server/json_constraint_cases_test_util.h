// Test-only: the schemas json_constraint_test.cpp runs JsonConstraint on, each with
// hand-checkable facts about a document, documents it accepts and documents it refuses
// (json_constraint_cases_test.cpp).
#pragma once

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "server/http_util.h"

namespace gossamer::server::testing {

using Check = std::function<bool(const json&)>;

// An integer literal beyond 64 bits parses as a double (integral and that large).
inline bool is_int(const json& v) {
  return v.is_number_integer() || (v.is_number_float() && std::abs(v.get<double>()) >= 9.2e18 &&
                                   std::floor(v.get<double>()) == v.get<double>());
}

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

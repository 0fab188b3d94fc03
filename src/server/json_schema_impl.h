// Internal to compile_json_schema's sources: json_schema.cpp (entry points, applicators and
// $ref), json_schema_keywords.cpp (a leaf's keywords) and json_schema_prune.cpp (what can be
// completed). Not part of the server's API.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "server/json_schema.h"

namespace gossamer::server::json_schema_impl {

std::string pointer_token(std::string_view s);  // RFC 6901 escaping
// InvalidArgument "response_format schema: <what> at <path>" (the root for an empty path).
Status bad(const std::string& what, const std::string& path);

class Compiler {
 public:
  explicit Compiler(const json& root) : root_(root) {}
  Result<uint32_t> compile(const json& s, const std::string& path, int depth);
  Status finish(uint32_t root);
  uint32_t any_node();

  CompiledJsonSchema out;

 private:
  uint32_t new_node(bool leaf);
  Result<uint32_t> compile_ref(const json& s, const std::string& path, int depth);
  Status compile_leaf(const json& s, const std::string& path, int depth, uint32_t id);
  Status compile_object(const json& s, const std::string& path, int depth, JsonSchemaNode& n);
  Status compile_array(const json& s, const std::string& path, int depth, JsonSchemaNode& n);
  uint8_t sat_types(const JsonSchemaNode& n, const std::vector<char>& sat) const;

  const json& root_;
  std::vector<char> leaf_;                      // per node: a leaf (else a union)
  std::vector<std::vector<uint32_t>> members_;  // union members: anyOf entries / $ref target
  std::map<std::string, uint32_t> refs_;        // $ref text -> its union node (recursion)
  uint32_t any_ = kNoNode;
};

}  // namespace gossamer::server::json_schema_impl

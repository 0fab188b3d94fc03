// compile_json_schema: the entry points, the keyword checks of every subschema, and the
// applicators (anyOf / oneOf / allOf of one, $ref, nullable) that make union nodes. A leaf's own
// keywords are compiled in json_schema_keywords.cpp; pruning what can never be completed in
// json_schema_prune.cpp.
#include "server/json_schema.h"

#include <algorithm>
#include <string_view>

#include "server/json_schema_impl.h"

namespace gossamer::server {

namespace json_schema_impl {

namespace {

constexpr int kMaxDepth = 64;       // nested subschemas (a guard against stack exhaustion)
constexpr size_t kMaxNodes = 4096;  // compiled nodes (keeps finish() cheap per request)

// Keywords whose meaning the constraint cannot enforce: output following the table could break
// them structurally, so the request is refused rather than silently weakened.
constexpr std::string_view kUnsupported[] = {"not",
                                             "if",
                                             "then",
                                             "else",
                                             "patternProperties",
                                             "propertyNames",
                                             "dependentRequired",
                                             "dependentSchemas",
                                             "dependencies",
                                             "contains",
                                             "minContains",
                                             "maxContains",
                                             "unevaluatedProperties",
                                             "unevaluatedItems",
                                             "$dynamicRef",
                                             "$recursiveRef"};
// Keywords that shape one leaf; beside an applicator they would mean an intersection.
constexpr std::string_view kStructural[] = {
    "type",     "properties",    "required",        "additionalProperties",
    "items",    "prefixItems",   "additionalItems", "minItems",
    "maxItems", "minProperties", "maxProperties",   "enum",
    "const"};
constexpr std::string_view kApplicators[] = {"$ref", "anyOf", "oneOf", "allOf"};

template <size_t N>
bool listed(const std::string_view (&list)[N], std::string_view k) {
  return std::find(std::begin(list), std::end(list), k) != std::end(list);
}

}  // namespace

std::string pointer_token(std::string_view s) {  // RFC 6901 escaping
  std::string out;
  for (char c : s) {
    if (c == '~') {
      out += "~0";
    } else if (c == '/') {
      out += "~1";
    } else {
      out += c;
    }
  }
  return out;
}

Status bad(const std::string& what, const std::string& path) {
  return InvalidArgument(what + " at " + (path.empty() ? std::string("the root") : path));
}

uint32_t Compiler::new_node(bool leaf) {
  out.nodes.emplace_back();
  leaf_.push_back(leaf ? 1 : 0);
  members_.emplace_back();
  return static_cast<uint32_t>(out.nodes.size() - 1);
}

uint32_t Compiler::any_node() {
  if (any_ != kNoNode) return any_;
  any_ = new_node(true);
  JsonSchemaNode& n = out.nodes[any_];
  n.types = kTypeAll;
  n.additional = any_;
  n.items = any_;
  return any_;
}

Result<uint32_t> Compiler::compile(const json& s, const std::string& path, int depth) {
  if (depth > kMaxDepth) return bad("schema nested too deeply", path);
  if (out.nodes.size() > kMaxNodes) return bad("schema too large", path);
  if (s.is_boolean()) return s.get<bool>() ? any_node() : new_node(true);  // false: no type
  if (!s.is_object()) return bad("a schema must be an object or a boolean", path);
  std::string applicator;
  for (auto it = s.begin(); it != s.end(); ++it) {
    const std::string& k = it.key();
    if (listed(kUnsupported, k) || (k == "allOf" && !(it->is_array() && it->size() == 1)) ||
        (k == "uniqueItems" && *it != json(false))) {
      return bad("unsupported keyword \"" + k + "\"", path);
    }
    if (!listed(kApplicators, k)) continue;
    if (!applicator.empty()) {
      return bad("unsupported keyword \"" + k + "\" beside \"" + applicator + "\"", path);
    }
    applicator = k;
  }
  for (std::string_view k : kStructural) {
    if (!applicator.empty() && s.contains(k)) {
      return bad("unsupported keyword \"" + std::string(k) + "\" beside \"" + applicator + "\"",
                 path);
    }
  }
  auto nullable = s.find("nullable");
  if (nullable != s.end() && !nullable->is_boolean()) {
    return bad("\"nullable\" must be a boolean", path);
  }
  uint32_t id = kNoNode;
  if (applicator == "$ref") {
    GS_ASSIGN_OR_RETURN(id, compile_ref(s, path, depth));
  } else if (!applicator.empty()) {
    const json& list = s[applicator];
    if (!list.is_array() || list.empty()) {
      return bad("\"" + applicator + "\" must be a non-empty array", path);
    }
    id = new_node(false);
    for (size_t i = 0; i < list.size(); ++i) {
      const std::string sub = path + "/" + applicator + "/" + std::to_string(i);
      GS_ASSIGN_OR_RETURN(uint32_t m, compile(list[i], sub, depth + 1));
      members_[id].push_back(m);
    }
  } else {
    id = new_node(true);
    GS_RETURN_IF_ERROR(compile_leaf(s, path, depth, id));
  }
  if (nullable != s.end() && nullable->get<bool>()) {  // anyOf [schema, {"type": "null"}]
    const uint32_t null_leaf = new_node(true);
    out.nodes[null_leaf].types = kTypeNull;
    const uint32_t u = new_node(false);
    members_[u] = {id, null_leaf};
    id = u;
  }
  return id;
}

Result<uint32_t> Compiler::compile_ref(const json& s, const std::string& path, int depth) {
  const json& r = s["$ref"];
  if (!r.is_string()) return bad("\"$ref\" must be a string", path);
  const std::string ref = r.get<std::string>();
  if (auto it = refs_.find(ref); it != refs_.end()) return it->second;
  const json* target = nullptr;
  std::string target_path;
  if (ref == "#") target = &root_;
  for (std::string_view dir : {"$defs", "definitions"}) {
    const std::string prefix = "#/" + std::string(dir) + "/";
    if (ref.compare(0, prefix.size(), prefix) != 0) continue;
    std::string name;  // the pointer token, unescaped (~1 -> /, ~0 -> ~)
    for (size_t i = prefix.size(); i < ref.size(); ++i) {
      if (ref[i] == '/') return bad("unsupported keyword \"$ref\" to \"" + ref + "\"", path);
      if (ref[i] == '~' && i + 1 < ref.size() && (ref[i + 1] == '0' || ref[i + 1] == '1')) {
        name += ref[++i] == '0' ? '~' : '/';
      } else {
        name += ref[i];
      }
    }
    auto defs = root_.is_object() ? root_.find(dir) : root_.end();
    if (defs == root_.end() || !defs->is_object() || !defs->contains(name)) {
      return bad("\"$ref\" target \"" + ref + "\" not found", path);
    }
    target = &(*defs)[name];
    target_path = "/" + std::string(dir) + "/" + pointer_token(name);
  }
  if (target == nullptr) {
    return bad("unsupported keyword \"$ref\" to \"" + ref +
                   "\" (only \"#\", \"#/$defs/NAME\" and \"#/definitions/NAME\")",
               path);
  }
  const uint32_t id = new_node(false);
  refs_[ref] = id;  // before descending: a recursive $ref ends here
  GS_ASSIGN_OR_RETURN(uint32_t t, compile(*target, target_path, depth + 1));
  members_[id].push_back(t);
  return id;
}

}  // namespace json_schema_impl

Result<std::shared_ptr<const CompiledJsonSchema>> compile_json_schema(const json* schema) {
  static const json kObject = {{"type", "object"}};
  const json& s = schema != nullptr ? *schema : kObject;
  json_schema_impl::Compiler c(s);
  GS_ASSIGN_OR_RETURN(uint32_t root, c.compile(s, "", 0));
  GS_RETURN_IF_ERROR(c.finish(root));
  return std::make_shared<const CompiledJsonSchema>(std::move(c.out));
}

Status check_json_schema(const json& schema) {
  return compile_json_schema(&schema).status();
}

}  // namespace gossamer::server

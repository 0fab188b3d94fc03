#include "server/json_schema.h"

#include <algorithm>
#include <map>
#include <string_view>

namespace gossamer::server {

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
  return InvalidArgument("response_format schema: " + what + " at " +
                         (path.empty() ? std::string("the root") : path));
}

std::string compact(const json& v) {
  return v.dump(-1, ' ', false, json::error_handler_t::replace);
}

uint8_t type_of(const json& v) {
  switch (v.type()) {
    case json::value_t::object:
      return kTypeObject;
    case json::value_t::array:
      return kTypeArray;
    case json::value_t::string:
      return kTypeString;
    case json::value_t::boolean:
      return kTypeBoolean;
    case json::value_t::null:
      return kTypeNull;
    case json::value_t::number_integer:
    case json::value_t::number_unsigned:
      return kTypeNumber | kTypeInteger;
    case json::value_t::number_float: {
      const double d = v.get<double>();
      return d == static_cast<double>(static_cast<int64_t>(d)) ? kTypeNumber | kTypeInteger
                                                               : kTypeNumber;
    }
    default:
      return 0;
  }
}

Result<uint8_t> parse_types(const json& t, const std::string& path) {
  static const std::pair<std::string_view, uint8_t> kNames[] = {
      {"object", kTypeObject}, {"array", kTypeArray},     {"string", kTypeString},
      {"number", kTypeNumber}, {"integer", kTypeInteger}, {"boolean", kTypeBoolean},
      {"null", kTypeNull}};
  auto one = [&](const json& n) -> Result<uint8_t> {
    if (n.is_string()) {
      for (const auto& [name, bit] : kNames) {
        if (n.get<std::string>() == name) return bit;
      }
    }
    return bad("unknown type " + compact(n) + " in \"type\"", path);
  };
  if (!t.is_array()) return one(t);
  uint8_t mask = 0;
  for (const json& n : t) {
    GS_ASSIGN_OR_RETURN(uint8_t bit, one(n));
    mask |= bit;
  }
  return mask;
}

Status parse_count(const json& s, const char* key, const std::string& path, uint32_t* out) {
  auto it = s.find(key);
  if (it == s.end()) return Status::Ok();
  if (!it->is_number_integer() || it->get<int64_t>() < 0) {
    return bad(std::string("\"") + key + "\" must be a non-negative integer", path);
  }
  *out = static_cast<uint32_t>(std::min<int64_t>(it->get<int64_t>(), UINT32_MAX - 1));
  return Status::Ok();
}

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

Status Compiler::compile_leaf(const json& s, const std::string& path, int depth, uint32_t id) {
  JsonSchemaNode n;  // filled here, stored last: compiling children grows out.nodes
  n.types = kTypeAll;
  const bool typed = s.contains("type");
  if (typed) {
    GS_ASSIGN_OR_RETURN(n.types, parse_types(s["type"], path));
  }
  if (s.contains("enum") || s.contains("const")) {
    // Only the listed values can be written, so the other keywords do not matter. Values the
    // type excludes are dropped; const with enum keeps their intersection.
    auto e = s.find("enum");
    if (e != s.end() && !e->is_array()) return bad("\"enum\" must be an array", path);
    std::vector<std::string> vals;
    const json none = json::array();
    for (const json& v : e != s.end() ? *e : none) {
      if (!typed || (type_of(v) & n.types)) vals.push_back(compact(v));
    }
    if (auto c = s.find("const"); c != s.end()) {
      const std::string cv = compact(*c);
      const bool keep = (!typed || (type_of(*c) & n.types)) &&
                        (e == s.end() || std::find(vals.begin(), vals.end(), cv) != vals.end());
      vals.clear();
      if (keep) vals.push_back(cv);
    }
    std::sort(vals.begin(), vals.end());
    vals.erase(std::unique(vals.begin(), vals.end()), vals.end());
    n.enum_index = static_cast<int32_t>(out.enums.size());
    out.enums.push_back(std::move(vals));
  } else {
    GS_RETURN_IF_ERROR(compile_object(s, path, depth, n));
    GS_RETURN_IF_ERROR(compile_array(s, path, depth, n));
  }
  out.nodes[id] = std::move(n);
  return Status::Ok();
}

Status Compiler::compile_object(const json& s, const std::string& path, int depth,
                                JsonSchemaNode& n) {
  n.additional = any_node();
  if (auto a = s.find("additionalProperties"); a != s.end()) {
    if (a->is_boolean() && !a->get<bool>()) {
      n.additional = kNoNode;
    } else {
      GS_ASSIGN_OR_RETURN(n.additional, compile(*a, path + "/additionalProperties", depth + 1));
    }
  }
  std::vector<std::pair<std::string, uint32_t>> props;  // escaped name, value node
  auto escaped = [](const std::string& k) {
    const std::string q = compact(json(k));
    return q.substr(1, q.size() - 2);
  };
  if (auto p = s.find("properties"); p != s.end()) {
    if (!p->is_object()) return bad("\"properties\" must be an object", path);
    for (auto it = p->begin(); it != p->end(); ++it) {
      const std::string sub = path + "/properties/" + pointer_token(it.key());
      const std::string name = escaped(it.key());
      if (name.find("\\u") != std::string::npos) {  // keys are written without \u escapes
        return bad("a property name with a control character is not supported", sub);
      }
      GS_ASSIGN_OR_RETURN(uint32_t v, compile(*it, sub, depth + 1));
      props.emplace_back(name, v);
    }
  }
  std::vector<std::string> required;
  if (auto r = s.find("required"); r != s.end()) {
    if (!r->is_array()) return bad("\"required\" must be an array of strings", path);
    for (const json& k : *r) {
      if (!k.is_string()) return bad("\"required\" must be an array of strings", path);
      const std::string name = escaped(k.get<std::string>());
      required.push_back(name);
      auto has = [&](const auto& p) { return p.first == name; };
      if (std::find_if(props.begin(), props.end(), has) != props.end()) continue;
      if (n.additional == kNoNode || name.find("\\u") != std::string::npos) {
        return bad("\"required\" names \"" + k.get<std::string>() +
                       "\", which \"additionalProperties\": false forbids (unsatisfiable)",
                   path);
      }
      props.emplace_back(name, n.additional);  // a required extra key: a declared name now
    }
  }
  std::sort(props.begin(), props.end());
  n.required.assign((props.size() + 63) / 64, 0);
  for (const auto& [name, v] : props) {
    n.names.push_back(name);
    n.values.push_back(v);
    if (std::find(required.begin(), required.end(), name) != required.end()) {
      set_bit(n.required.data(), n.names.size() - 1);
    }
  }
  GS_RETURN_IF_ERROR(parse_count(s, "minProperties", path, &n.min_props));
  return parse_count(s, "maxProperties", path, &n.max_props);
}

Status Compiler::compile_array(const json& s, const std::string& path, int depth,
                               JsonSchemaNode& n) {
  n.items = any_node();
  const json* prefix = nullptr;
  std::string prefix_key = "prefixItems";
  if (auto p = s.find("prefixItems"); p != s.end()) {
    if (!p->is_array()) return bad("\"prefixItems\" must be an array", path);
    prefix = &*p;
  }
  if (auto it = s.find("items"); it != s.end()) {
    if (it->is_array()) {  // draft 7 tuple form; additionalItems governs the rest
      if (prefix != nullptr) return bad("\"items\" must be a schema beside \"prefixItems\"", path);
      prefix = &*it;
      prefix_key = "items";
      if (auto a = s.find("additionalItems"); a != s.end()) {
        GS_ASSIGN_OR_RETURN(n.items, compile(*a, path + "/additionalItems", depth + 1));
      }
    } else {
      GS_ASSIGN_OR_RETURN(n.items, compile(*it, path + "/items", depth + 1));
    }
  }
  for (size_t i = 0; prefix != nullptr && i < prefix->size(); ++i) {
    const std::string sub = path + "/" + prefix_key + "/" + std::to_string(i);
    GS_ASSIGN_OR_RETURN(uint32_t v, compile((*prefix)[i], sub, depth + 1));
    n.prefix.push_back(v);
  }
  GS_RETURN_IF_ERROR(parse_count(s, "minItems", path, &n.min_items));
  return parse_count(s, "maxItems", path, &n.max_items);
}

// The types of leaf `n` that can be completed, given which nodes can (sat).
uint8_t Compiler::sat_types(const JsonSchemaNode& n, const std::vector<char>& sat) const {
  uint8_t t = n.types & (kTypeString | kTypeNumber | kTypeInteger | kTypeBoolean | kTypeNull);
  if (n.types & kTypeObject) {
    bool ok = n.min_props <= n.max_props;
    size_t nreq = 0, nsat = 0;
    for (size_t k = 0; k < n.names.size(); ++k) {
      const bool s = sat[n.values[k]] != 0;
      nsat += s;
      if (test_bit(n.required.data(), k)) {
        ok = ok && s;
        ++nreq;
      }
    }
    const bool extra = n.additional != kNoNode && sat[n.additional];
    if (ok && nreq <= n.max_props && (extra || n.min_props <= nsat)) t |= kTypeObject;
  }
  if (n.types & kTypeArray) {
    bool ok = n.min_items <= n.max_items;
    for (size_t k = 0; k < n.prefix.size() && k < n.min_items; ++k) ok = ok && sat[n.prefix[k]];
    if (n.min_items > n.prefix.size()) ok = ok && n.items != kNoNode && sat[n.items];
    if (ok) t |= kTypeArray;
  }
  return t;
}

// Expands unions into leaves, finds what can be completed (a least fixpoint: recursion without
// a base case never can) and prunes the rest, so that following the table never dead-ends.
Status Compiler::finish(uint32_t root) {
  const size_t count = out.nodes.size();
  for (size_t i = 0; i < count; ++i) {
    std::vector<uint32_t>& alts = out.nodes[i].alts;
    std::vector<char> seen(count, 0);
    std::vector<uint32_t> todo = {static_cast<uint32_t>(i)};
    while (!todo.empty()) {
      const uint32_t x = todo.back();
      todo.pop_back();
      if (seen[x]) continue;
      seen[x] = 1;
      if (leaf_[x]) alts.push_back(x);
      for (uint32_t m : members_[x]) todo.push_back(m);
    }
    std::sort(alts.begin(), alts.end());
  }
  std::vector<char> sat(count, 0);
  std::vector<uint8_t> types(count, 0);
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t i = 0; i < count; ++i) {
      const JsonSchemaNode& n = out.nodes[i];
      bool s = false;
      if (!leaf_[i]) {
        for (uint32_t a : n.alts) s = s || sat[a];
      } else if (n.enum_index >= 0) {
        s = !out.enums[static_cast<size_t>(n.enum_index)].empty();
      } else {
        types[i] = sat_types(n, sat);
        s = types[i] != 0;
      }
      if (s && !sat[i]) changed = true;
      sat[i] = sat[i] || s;
    }
  }
  if (!sat[root]) return bad("no JSON value satisfies the schema", "");
  for (size_t i = 0; i < count; ++i) {
    JsonSchemaNode& n = out.nodes[i];
    std::erase_if(n.alts, [&](uint32_t a) { return !sat[a]; });
    if (!leaf_[i] || n.enum_index >= 0) continue;
    n.types = types[i];
    n.blocked.assign(n.words(), 0);
    for (size_t k = 0; k < n.names.size(); ++k) {
      if (!sat[n.values[k]]) set_bit(n.blocked.data(), k);
    }
    if (n.additional != kNoNode && !sat[n.additional]) n.additional = kNoNode;
    if (n.items != kNoNode && !sat[n.items]) n.items = kNoNode;
    for (size_t k = 0; k < n.prefix.size(); ++k) {
      if (!sat[n.prefix[k]]) {
        n.max_items = std::min<uint32_t>(n.max_items, static_cast<uint32_t>(k));
        break;
      }
    }
    if (n.items == kNoNode) {
      n.max_items = std::min<uint32_t>(n.max_items, static_cast<uint32_t>(n.prefix.size()));
    }
  }
  out.root = root;
  return Status::Ok();
}

}  // namespace

Result<std::shared_ptr<const CompiledJsonSchema>> compile_json_schema(const json* schema) {
  static const json kObject = {{"type", "object"}};
  const json& s = schema != nullptr ? *schema : kObject;
  Compiler c(s);
  GS_ASSIGN_OR_RETURN(uint32_t root, c.compile(s, "", 0));
  GS_RETURN_IF_ERROR(c.finish(root));
  return std::make_shared<const CompiledJsonSchema>(std::move(c.out));
}

Status check_json_schema(const json& schema) {
  return compile_json_schema(&schema).status();
}

}  // namespace gossamer::server

// Compiler::compile_leaf: the keywords of one leaf schema (type, enum / const, the object and
// array keywords). Subschemas they name are compiled through Compiler::compile (json_schema.cpp).
#include <algorithm>

#include "server/json_schema_impl.h"

namespace gossamer::server::json_schema_impl {

namespace {

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

}  // namespace

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

}  // namespace gossamer::server::json_schema_impl

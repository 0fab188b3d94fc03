#include "harmony/typescript_schema.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <string_view>
#include <vector>

namespace gossamer::harmony {
namespace {

using Json = nlohmann::ordered_json;

// Member `key` of `j` when `j` is an object holding it, else nullptr (serde's Value::get).
const Json* get(const Json& j, const char* key) {
  if (!j.is_object()) return nullptr;
  auto it = j.find(key);
  return it == j.end() ? nullptr : &*it;
}

const std::string* get_str(const Json& j, const char* key) {
  const Json* v = get(j, key);
  return (v != nullptr && v->is_string()) ? v->get_ptr<const std::string*>() : nullptr;
}

bool is_enum(const Json& schema) {
  const Json* e = get(schema, "enum");
  return e != nullptr && e->is_array() && !e->empty();
}

bool is_nullable(const Json& schema) {
  const Json* n = get(schema, "nullable");
  return n != nullptr && n->is_boolean() && n->get<bool>();
}

void append_escaped(std::string& out, const std::string& s) {
  out.push_back('"');
  for (unsigned char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x", c);
          out += buf;
        } else {
          out.push_back(static_cast<char>(c));
        }
    }
  }
  out.push_back('"');
}

// Shortest round-trip digits laid out the way Rust's ryu crate does (serde_json floats).
std::string format_float(double v) {
  if (!std::isfinite(v)) return "null";  // serde_json prints non-finite floats as null
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof(buf), v, std::chars_format::scientific);
  std::string_view sci(buf, static_cast<size_t>(res.ptr - buf));
  std::string out;
  if (!sci.empty() && sci[0] == '-') {
    out.push_back('-');
    sci.remove_prefix(1);
  }
  size_t epos = sci.find('e');
  std::string digits;
  for (char c : sci.substr(0, epos)) {
    if (c != '.') digits.push_back(c);
  }
  int exp10 = std::stoi(std::string(sci.substr(epos + 1)));
  const int length = static_cast<int>(digits.size());
  const int kk = exp10 + 1;  // 10^(kk-1) <= |v| < 10^kk
  const int k = kk - length;
  if (k >= 0 && kk <= 16) {
    out += digits + std::string(static_cast<size_t>(k), '0') + ".0";
  } else if (kk > 0 && kk <= 16) {
    out += digits.substr(0, static_cast<size_t>(kk)) + "." + digits.substr(static_cast<size_t>(kk));
  } else if (kk > -5 && kk <= 0) {
    out += "0." + std::string(static_cast<size_t>(-kk), '0') + digits;
  } else if (length == 1) {
    out += digits + "e" + std::to_string(kk - 1);
  } else {
    out += digits.substr(0, 1) + "." + digits.substr(1) + "e" + std::to_string(kk - 1);
  }
  return out;
}

void append_compact(std::string& out, const Json& v) {
  switch (v.type()) {
    case Json::value_t::null:
      out += "null";
      break;
    case Json::value_t::boolean:
      out += v.get<bool>() ? "true" : "false";
      break;
    case Json::value_t::number_integer:
      out += std::to_string(v.get<int64_t>());
      break;
    case Json::value_t::number_unsigned:
      out += std::to_string(v.get<uint64_t>());
      break;
    case Json::value_t::number_float:
      out += format_float(v.get<double>());
      break;
    case Json::value_t::string:
      append_escaped(out, v.get_ref<const std::string&>());
      break;
    case Json::value_t::array: {
      out.push_back('[');
      bool first = true;
      for (const auto& e : v) {
        if (!first) out.push_back(',');
        first = false;
        append_compact(out, e);
      }
      out.push_back(']');
      break;
    }
    case Json::value_t::object: {
      out.push_back('{');
      bool first = true;
      for (auto it = v.begin(); it != v.end(); ++it) {
        if (!first) out.push_back(',');
        first = false;
        append_escaped(out, it.key());
        out.push_back(':');
        append_compact(out, it.value());
      }
      out.push_back('}');
      break;
    }
    default:
      out += "null";
      break;  // binary / discarded: never produced by the JSON parser
  }
}

// How a `default` is printed. `enum_raw`: a string default of an enum schema prints unquoted.
std::string default_text(const Json& def, const Json& owner, bool enum_raw) {
  if (def.is_string()) {
    const auto& s = def.get_ref<const std::string&>();
    if (!is_enum(owner)) return "\"" + s + "\"";
    if (enum_raw) return s;
  }
  return compact_json(def);
}

// `type_str` of a oneOf variant with the nullable suffix.
std::string variant_type(const Json& variant, const std::string& indent) {
  std::string t = json_schema_to_typescript(variant, indent + "   ");
  if (is_nullable(variant) && t.find("null") == std::string::npos) t += " | null";
  return t;
}

std::string join(const std::vector<std::string>& parts, const std::string& sep) {
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (i > 0) out += sep;
    out += parts[i];
  }
  return out;
}

// Top-level `oneOf: [...]`: each variant on its own " | " line with trailing comments.
std::string render_one_of(const Json& arr, const std::string& indent) {
  std::string out;
  for (const auto& variant : arr) {
    out += "\n" + indent + " | ";
    out += variant_type(variant, indent);
    std::vector<std::string> trailing;
    if (const std::string* d = get_str(variant, "description")) trailing.push_back(*d);
    if (const Json* def = get(variant, "default")) {
      trailing.push_back("default: " + default_text(*def, variant, /*enum_raw=*/false));
    }
    if (!trailing.empty()) out += " // " + join(trailing, " ");
  }
  return out;
}

// A property whose schema has `oneOf: [...]`.
void render_one_of_property(std::string& out, const std::string& key, const Json& val,
                            const Json& arr, bool required, const std::string& indent) {
  const std::string* property_desc = get_str(val, "description");
  bool skip_desc = false;
  if (property_desc != nullptr && !arr.empty()) {
    const std::string* first_desc = get_str(arr.front(), "description");
    skip_desc = first_desc != nullptr && *first_desc == *property_desc;
  }
  bool desc_above = false;
  if (!skip_desc && property_desc != nullptr) {
    out += indent + "// " + *property_desc + "\n";
    desc_above = true;
  }
  if (const Json* def = get(val, "default")) {
    out += indent + "// default: " + default_text(*def, val, /*enum_raw=*/true) + "\n";
  }
  out += indent + key + (required ? "" : "?") + ":\n";
  size_t i = 0;
  for (const auto& variant : arr) {
    out += indent + " | ";
    out += variant_type(variant, indent);
    std::vector<std::string> trailing;
    if (!(i == 0 && desc_above)) {
      const std::string* d = get_str(variant, "description");
      if (d != nullptr && (property_desc == nullptr || *d != *property_desc))
        trailing.push_back(*d);
    }
    if (const Json* def = get(variant, "default")) {
      trailing.push_back("default: " + default_text(*def, variant, /*enum_raw=*/true));
    }
    if (!trailing.empty()) out += " // " + join(trailing, " ");
    out += "\n";
    ++i;
  }
  out += indent + ",\n";
}

// One `key?: type, // default: ...` line of an object, with its leading comments.
void render_property(std::string& out, const std::string& key, const Json& val, bool required,
                     const std::string& indent) {
  if (const std::string* title = get_str(val, "title")) {
    out += indent + "// " + *title + "\n" + indent + "//\n";
  }
  const Json* one_of = get(val, "oneOf");
  if (one_of == nullptr) {
    if (const std::string* d = get_str(val, "description")) out += indent + "// " + *d + "\n";
  }
  if (const Json* ex = get(val, "examples"); ex != nullptr && ex->is_array() && !ex->empty()) {
    out += indent + "// Examples:\n";
    for (const auto& e : *ex) {
      if (e.is_string()) out += indent + "// - \"" + e.get_ref<const std::string&>() + "\"\n";
    }
  }
  if (one_of != nullptr && one_of->is_array()) {
    render_one_of_property(out, key, val, *one_of, required, indent);
    return;
  }
  out += indent + key + (required ? "" : "?") + ": ";
  std::string t = json_schema_to_typescript(val, indent + "    ");
  if (is_nullable(val) && t.find("null") == std::string::npos) t += " | null";
  out += t + ",";
  if (one_of == nullptr) {
    if (const Json* def = get(val, "default")) {
      out += " // default: " + default_text(*def, val, /*enum_raw=*/true);
    }
  }
  out += "\n";
}

std::string render_object(const Json& schema, const std::string& indent) {
  std::string out;
  if (const std::string* d = get_str(schema, "description")) out += indent + "// " + *d + "\n";
  out += "{\n";
  const Json* props = get(schema, "properties");
  if (props != nullptr && props->is_object()) {
    std::vector<std::string> required;
    if (const Json* req = get(schema, "required"); req != nullptr && req->is_array()) {
      for (const auto& r : *req) {
        if (r.is_string()) required.push_back(r.get<std::string>());
      }
    }
    for (auto it = props->begin(); it != props->end(); ++it) {
      bool is_req = false;
      for (const auto& r : required) is_req = is_req || r == it.key();
      render_property(out, it.key(), it.value(), is_req, indent);
    }
  }
  out += indent + "}";
  return out;
}

std::string render_named_type(const Json& schema, const std::string& ty,
                              const std::string& indent) {
  if (ty == "object") return render_object(schema, indent);
  if (ty == "string") {
    const Json* e = get(schema, "enum");
    if (e != nullptr && e->is_array()) {
      std::vector<std::string> vals;
      for (const auto& v : *e) {
        if (v.is_string()) vals.push_back("\"" + v.get<std::string>() + "\"");
      }
      if (!vals.empty()) return join(vals, " | ");
    }
    return "string";
  }
  if (ty == "number" || ty == "integer") return "number";
  if (ty == "boolean") return "boolean";
  if (ty == "array") {
    const Json* items = get(schema, "items");
    return items != nullptr ? json_schema_to_typescript(*items, indent) + "[]" : "Array<any>";
  }
  return "any";
}

}  // namespace

std::string compact_json(const nlohmann::ordered_json& value) {
  std::string out;
  append_compact(out, value);
  return out;
}

std::string json_schema_to_typescript(const Json& schema, const std::string& indent) {
  if (const Json* one_of = get(schema, "oneOf"); one_of != nullptr && one_of->is_array()) {
    return render_one_of(*one_of, indent);
  }
  const Json* type = get(schema, "type");
  if (type != nullptr && type->is_array()) {
    std::vector<std::string> names;
    for (const auto& t : *type) {
      if (t.is_string())
        names.push_back(t.get<std::string>() == "integer" ? "number" : t.get<std::string>());
    }
    if (!names.empty()) return join(names, " | ");
  }
  if (type != nullptr && type->is_string()) {
    return render_named_type(schema, type->get<std::string>(), indent);
  }
  // openai-harmony's fallback for a non-array oneOf without a type is also "any".
  return "any";
}

}  // namespace gossamer::harmony

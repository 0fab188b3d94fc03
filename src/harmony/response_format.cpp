// `response_format` of a Chat Completions request and its harmony rendering (chat_request.h).
#include <string>

#include "harmony/chat_request.h"

namespace gossamer::harmony {
namespace {

using Json = nlohmann::ordered_json;

bool valid_name(const std::string& n) {
  if (n.empty() || n.size() > 64) return false;
  for (char c : n) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '_' || c == '-';
    if (!ok) return false;
  }
  return true;
}

Status parse_json_schema(const Json& rf, ResponseFormat* out) {
  auto js = rf.find("json_schema");
  if (js == rf.end() || !js->is_object()) {
    return InvalidArgument("response_format.json_schema: missing or not an object");
  }
  auto name = js->find("name");
  if (name == js->end() || !name->is_string() || !valid_name(name->get<std::string>())) {
    return InvalidArgument(
        "response_format.json_schema.name: required, 1-64 characters of a-z, A-Z, 0-9, _ and -");
  }
  out->name = name->get<std::string>();
  if (auto d = js->find("description"); d != js->end() && !d->is_null()) {
    if (!d->is_string()) {
      return InvalidArgument("response_format.json_schema.description: not a string");
    }
    out->description = d->get<std::string>();
  }
  if (auto sc = js->find("schema"); sc != js->end() && !sc->is_null()) {
    if (!sc->is_object() && !sc->is_boolean()) {
      return InvalidArgument("response_format.json_schema.schema: not an object");
    }
    out->schema = *sc;
  }
  if (auto st = js->find("strict"); st != js->end() && !st->is_null()) {
    if (!st->is_boolean()) {
      return InvalidArgument("response_format.json_schema.strict: not a boolean");
    }
    out->strict = st->get<bool>();
  }
  return Status::Ok();
}

}  // namespace

Result<ResponseFormat> parse_response_format(const Json& request) {
  ResponseFormat f;
  auto rf = request.find("response_format");
  if (rf == request.end() || rf->is_null()) return f;
  if (!rf->is_object()) return InvalidArgument("response_format: not an object");
  auto type = rf->find("type");
  if (type == rf->end() || !type->is_string()) {
    return InvalidArgument("response_format.type: missing or not a string");
  }
  const std::string t = type->get<std::string>();
  if (t == "text") return f;
  if (t == "json_object") {
    f.kind = ResponseFormat::Kind::kJsonObject;
    return f;
  }
  if (t != "json_schema") {
    return InvalidArgument("response_format.type: '" + t +
                           "' is not one of text, json_object, json_schema");
  }
  f.kind = ResponseFormat::Kind::kJsonSchema;
  GS_RETURN_IF_ERROR(parse_json_schema(*rf, &f));
  return f;
}

std::string response_format_section(const ResponseFormat& f) {
  if (f.kind != ResponseFormat::Kind::kJsonSchema) return "";
  std::string s = "# Response Formats\n\n## " + f.name + "\n\n";
  if (!f.description.empty()) s += "// " + f.description + "\n";
  s += f.schema ? f.schema->dump() : std::string("{}");
  return s;
}

}  // namespace gossamer::harmony

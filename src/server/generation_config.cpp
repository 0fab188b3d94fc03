#include "server/generation_config.h"

#include <nlohmann/json.hpp>

#include "common/file_util.h"
#include "common/json_depth.h"

namespace gossamer::server {
namespace {

// Not server::json (ordered_json): its objects are vectors, and a key parsed after a deeply
// nested value makes the vector grow by copying that value, recursively (a stack overflow).
// std::map-based objects never move their values, so parsing stays iterative.
using json = nlohmann::json;

// A JSON value for an error message: scalars as written (cut at 40 characters), arrays and
// objects by type only (dump() recurses: a deeply nested value would overflow the stack).
std::string brief(const json& v) {
  if (v.is_structured()) return v.is_array() ? "an array" : "an object";
  std::string s = v.dump();
  return s.size() > 40 ? s.substr(0, 40) + "..." : s;
}

}  // namespace

Result<std::vector<int32_t>> read_generation_eos(const std::string& model_dir, int64_t vocab_size) {
  const std::string path = model_dir_file(model_dir, "generation_config.json");
  // Not a FIFO (opening one would wait for a writer), a directory or a device.
  auto text = read_regular_file(path);
  if (!text.ok()) {
    if (text.status().code() == StatusCode::kNotFound) return std::vector<int32_t>{};
    return text.status();
  }
  if (size_t nul = json_nul_byte(*text); nul != std::string::npos) {
    return InvalidArgument(path + ": not valid JSON (a NUL byte at byte offset " +
                           std::to_string(nul) + ")");
  }
  const json j = json::parse(text.value(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    return InvalidArgument(path + ": not a JSON object");
  }
  auto it = j.find("eos_token_id");
  if (it == j.end() || it->is_null()) return std::vector<int32_t>{};
  // The ids are read in place: copying a JSON value recurses as deep as it nests.
  const bool is_list = it->is_array();
  const size_t n = is_list ? it->size() : 1;
  std::vector<int32_t> out;
  for (size_t i = 0; i < n; ++i) {
    const json& id = is_list ? (*it)[i] : *it;
    const std::string field =
        is_list ? "eos_token_id[" + std::to_string(i) + "]" : std::string("eos_token_id");
    if (!id.is_number_integer()) {
      return InvalidArgument(path + ": " + field + " must be an integer, got " + brief(id));
    }
    const bool in_range = vocab_size > 0 && id.is_number_unsigned()
                              ? id.get<uint64_t>() < static_cast<uint64_t>(vocab_size)
                              : id.get<int64_t>() >= 0 && id.get<int64_t>() < vocab_size;
    if (!in_range) {
      return InvalidArgument(path + ": " + field + " = " + id.dump() +
                             " is outside the vocabulary [0, " + std::to_string(vocab_size) + ")");
    }
    out.push_back(static_cast<int32_t>(id.get<int64_t>()));
  }
  return out;
}

}  // namespace gossamer::server

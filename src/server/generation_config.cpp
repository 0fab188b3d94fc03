#include "server/generation_config.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "server/http_util.h"

namespace gossamer::server {

Result<std::vector<int32_t>> read_generation_eos(const std::string& model_dir, int64_t vocab_size) {
  namespace fs = std::filesystem;
  const std::string path = (fs::path(model_dir) / "generation_config.json").string();
  std::error_code ec;
  if (!fs::exists(path, ec)) return std::vector<int32_t>{};
  std::ifstream f(path, std::ios::binary);
  if (!f) return IoError(path + ": cannot open");
  std::stringstream ss;
  ss << f.rdbuf();
  const json j = json::parse(ss.str(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    return InvalidArgument(path + ": not a JSON object");
  }
  auto it = j.find("eos_token_id");
  if (it == j.end() || it->is_null()) return std::vector<int32_t>{};
  json ids = it->is_array() ? *it : json::array({*it});
  std::vector<int32_t> out;
  for (size_t i = 0; i < ids.size(); ++i) {
    const std::string field =
        it->is_array() ? "eos_token_id[" + std::to_string(i) + "]" : std::string("eos_token_id");
    if (!ids[i].is_number_integer()) {
      return InvalidArgument(path + ": " + field + " must be an integer, got " + ids[i].dump());
    }
    const int64_t v = ids[i].get<int64_t>();
    if (v < 0 || v >= vocab_size) {
      return InvalidArgument(path + ": " + field + " = " + std::to_string(v) +
                             " is outside the vocabulary [0, " + std::to_string(vocab_size) + ")");
    }
    out.push_back(static_cast<int32_t>(v));
  }
  return out;
}

}  // namespace gossamer::server

// safetensors header parsing and validation: dtype names, the file header (entries, metadata,
// data-region layout) and the shard index (model.safetensors.index.json). The mmap-backed
// TensorStore that uses them is in safetensors_store.cpp.
#include "model/safetensors.h"

#include <algorithm>
#include <cstring>
#include <nlohmann/json.hpp>
#include <unordered_set>

#include "common/json_depth.h"

namespace gossamer {

using json = nlohmann::json;

namespace {

std::string shape_str(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

// A short description of a JSON value for error messages: scalars as written (cut at 40
// characters), arrays and objects by type only (dump() recurses: a deeply nested value would
// overflow the stack).
std::string brief(const json& v) {
  if (v.is_structured()) return v.is_array() ? "an array" : "an object";
  std::string s = v.dump();
  return s.size() > 40 ? s.substr(0, 40) + "..." : s;
}

// A non-negative JSON integer that fits in int64.
bool get_u63(const json& v, uint64_t* out) {
  if (!v.is_number_integer()) return false;
  if (v.is_number_unsigned()) {
    *out = v.get<uint64_t>();
  } else {
    const int64_t i = v.get<int64_t>();
    if (i < 0) return false;
    *out = static_cast<uint64_t>(i);
  }
  return *out <= static_cast<uint64_t>(INT64_MAX);
}

// Parses one tensor entry (everything but the data-region range checks).
Status parse_entry(const std::string& name, const json& v, TensorEntry* e) {
  const std::string where = "tensor '" + name + "'";
  if (!v.is_object()) return Corrupt(where + ": header entry is not an object");
  if (!v.contains("dtype") || !v["dtype"].is_string()) {
    return Corrupt(where + ": 'dtype' is missing or not a string");
  }
  auto dt = parse_dtype(v["dtype"].get<std::string>());
  if (!dt.ok()) return dt.status().With(where);
  e->name = name;
  e->dtype = *dt;
  if (!v.contains("shape") || !v["shape"].is_array()) {
    return Corrupt(where + ": 'shape' is missing or not an array");
  }
  uint64_t numel = 1;
  for (const json& d : v["shape"]) {
    uint64_t n = 0;
    if (!get_u63(d, &n)) return Corrupt(where + ": shape entry " + brief(d) + " is not a size");
    if (__builtin_mul_overflow(numel, n, &numel) || numel > static_cast<uint64_t>(INT64_MAX)) {
      return Corrupt(where + ": shape " + shape_str(e->shape) + " times " + std::to_string(n) +
                     " overflows int64");
    }
    e->shape.push_back(static_cast<int64_t>(n));
  }
  const json* off = v.contains("data_offsets") ? &v["data_offsets"] : nullptr;
  if (off == nullptr || !off->is_array() || off->size() != 2 || !get_u63((*off)[0], &e->begin) ||
      !get_u63((*off)[1], &e->end)) {
    return Corrupt(where + ": 'data_offsets' must be [begin, end] non-negative integers");
  }
  if (e->end < e->begin) {
    return Corrupt(where + ": data_offsets [" + std::to_string(e->begin) + ", " +
                   std::to_string(e->end) + "] end before begin");
  }
  uint64_t nbytes = 0;
  if (__builtin_mul_overflow(numel, static_cast<uint64_t>(dtype_size(e->dtype)), &nbytes) ||
      e->end - e->begin != nbytes) {
    return Corrupt(where + ": data_offsets [" + std::to_string(e->begin) + ", " +
                   std::to_string(e->end) + "] hold " + std::to_string(e->end - e->begin) +
                   " bytes but dtype " + dtype_name(e->dtype) + " shape " + shape_str(e->shape) +
                   " needs " + std::to_string(nbytes));
  }
  return Status::Ok();
}

Status parse_metadata(const json& v, std::map<std::string, std::string>* out) {
  if (!v.is_object()) return Corrupt("'__metadata__' is not an object");
  for (auto it = v.begin(); it != v.end(); ++it) {
    if (!it.value().is_string()) {
      return Corrupt("'__metadata__' value for key '" + it.key() + "' is not a string");
    }
    (*out)[it.key()] = it.value().get<std::string>();
  }
  return Status::Ok();
}

// Range and overlap checks of all entries against a data region of `data_size` bytes.
Status check_layout(std::vector<TensorEntry> entries, uint64_t data_start, uint64_t data_size) {
  for (const TensorEntry& e : entries) {
    if (e.end > data_size) {
      return Corrupt("tensor '" + e.name + "': data_offsets [" + std::to_string(e.begin) + ", " +
                     std::to_string(e.end) + "] run past the end of the data region (" +
                     std::to_string(data_size) + " bytes; file offset " +
                     std::to_string(data_start + e.end) + " > file size " +
                     std::to_string(data_start + data_size) + ")");
    }
  }
  std::sort(entries.begin(), entries.end(), [](const TensorEntry& a, const TensorEntry& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  const TensorEntry* prev = nullptr;
  for (const TensorEntry& e : entries) {
    if (e.begin == e.end) continue;  // empty tensors occupy no bytes
    if (prev != nullptr && e.begin < prev->end) {
      return Corrupt("tensors '" + prev->name + "' [" + std::to_string(prev->begin) + ", " +
                     std::to_string(prev->end) + ") and '" + e.name + "' [" +
                     std::to_string(e.begin) + ", " + std::to_string(e.end) +
                     ") overlap (data-region byte offset " + std::to_string(e.begin) + ")");
    }
    prev = &e;
  }
  return Status::Ok();
}

// The first key repeated in the top-level object, in one linear pass without building anything
// (nlohmann's callback parser rescans the parent object at the end of every member object:
// quadratic in the tensor count, minutes for 200k entries).
class DuplicateTopLevelKey : public nlohmann::json_sax<json> {
 public:
  std::string duplicate;
  bool null() override { return true; }
  bool boolean(bool) override { return true; }
  bool number_integer(number_integer_t) override { return true; }
  bool number_unsigned(number_unsigned_t) override { return true; }
  bool number_float(number_float_t, const string_t&) override { return true; }
  bool string(string_t&) override { return true; }
  bool binary(binary_t&) override { return true; }
  bool start_object(std::size_t) override { return ++depth_, true; }
  bool key(string_t& k) override {
    if (depth_ == 1 && !seen_.insert(k).second && duplicate.empty()) duplicate = k;
    return true;
  }
  bool end_object() override { return --depth_, true; }
  bool start_array(std::size_t) override { return ++depth_, true; }
  bool end_array() override { return --depth_, true; }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override {
    return false;  // the DOM parse below reports it
  }

 private:
  int depth_ = 0;
  std::unordered_set<std::string> seen_;
};

Result<json> parse_header_json(const char* p, size_t n, std::string* duplicate) {
  // Top-level keys repeated in the header would silently shadow each other: detect them.
  DuplicateTopLevelKey keys;
  json::sax_parse(p, p + n, &keys);
  *duplicate = keys.duplicate;
  try {
    return json::parse(p, p + n);
  } catch (const json::parse_error& e) {
    return Corrupt("header is not valid JSON (near file byte offset " + std::to_string(8 + e.byte) +
                   "): " + e.what());
  } catch (const json::exception& e) {
    return Corrupt(std::string("header is not valid JSON: ") + e.what());
  }
}

}  // namespace

Result<DType> parse_dtype(const std::string& s) {
  static constexpr struct {
    const char* name;
    DType dtype;
  } kNames[] = {{"BF16", DType::kBF16}, {"F16", DType::kF16},        {"F32", DType::kF32},
                {"F64", DType::kF64},   {"U8", DType::kU8},          {"I8", DType::kI8},
                {"I16", DType::kI16},   {"I32", DType::kI32},        {"I64", DType::kI64},
                {"BOOL", DType::kBool}, {"F8_E4M3", DType::kF8E4M3}, {"F8_E5M2", DType::kF8E5M2}};
  for (const auto& n : kNames) {
    if (s == n.name) return n.dtype;
  }
  return Unsupported("unknown or unsupported dtype '" + s + "'");
}

Result<SafetensorsHeader> parse_safetensors_header(const uint8_t* bytes, size_t size,
                                                   const std::string& source) {
  if (size < 8) {
    return Corrupt(source + ": file is " + std::to_string(size) +
                   " bytes, too short for the 8-byte header length");
  }
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | bytes[i];
  if (n > kMaxSafetensorsHeader) {
    return Corrupt(source + ": header length " + std::to_string(n) + " (byte offset 0) exceeds " +
                   std::to_string(kMaxSafetensorsHeader));
  }
  if (n > size - 8) {
    return Corrupt(source + ": header length " + std::to_string(n) + " (byte offset 0) runs past " +
                   "the end of the file (" + std::to_string(size) + " bytes)");
  }
  if (n < 2 || bytes[8] != '{') {
    return Corrupt(source + ": header (byte offset 8) is not a JSON object");
  }
  // The JSON parser stops at a NUL byte as if the text ended there: reject it (as the reference
  // implementation does) rather than ignore what follows.
  if (const void* nul = std::memchr(bytes + 8, 0, n); nul != nullptr) {
    return Corrupt(source + ": header has a NUL byte at file byte offset " +
                   std::to_string(static_cast<const uint8_t*>(nul) - bytes));
  }
  std::string dup;
  auto root = parse_header_json(reinterpret_cast<const char*>(bytes + 8), n, &dup);
  if (!root.ok()) return root.status().With(source);
  if (!root->is_object()) return Corrupt(source + ": header (byte offset 8) is not a JSON object");
  if (!dup.empty()) return Corrupt(source + ": tensor '" + dup + "' appears twice in the header");
  SafetensorsHeader h;
  h.data_start = 8 + n;
  for (auto it = root->begin(); it != root->end(); ++it) {
    if (it.key() == "__metadata__") {
      GS_RETURN_IF_ERROR(parse_metadata(it.value(), &h.metadata).With(source));
      continue;
    }
    TensorEntry e;
    GS_RETURN_IF_ERROR(parse_entry(it.key(), it.value(), &e).With(source));
    h.tensors.push_back(std::move(e));
  }
  GS_RETURN_IF_ERROR(check_layout(h.tensors, h.data_start, size - h.data_start).With(source));
  return h;
}

Result<std::map<std::string, std::string>> parse_safetensors_index(const std::string& text,
                                                                   const std::string& source) {
  if (size_t nul = json_nul_byte(text); nul != std::string::npos) {
    return Corrupt(source + ": not valid JSON (a NUL byte at byte offset " + std::to_string(nul) +
                   ")");
  }
  json root = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (root.is_discarded()) return Corrupt(source + ": not valid JSON");
  if (!root.is_object()) return Corrupt(source + ": not a JSON object");
  if (!root.contains("weight_map") || !root["weight_map"].is_object()) {
    return Corrupt(source + ": 'weight_map' is missing or not an object");
  }
  if (root["weight_map"].empty()) return Corrupt(source + ": 'weight_map' is empty");
  std::map<std::string, std::string> map;
  for (auto it = root["weight_map"].begin(); it != root["weight_map"].end(); ++it) {
    const std::string where = source + ": weight_map['" + it.key() + "']";
    if (!it.value().is_string()) return Corrupt(where + " is not a string");
    const std::string f = it.value().get<std::string>();
    if (f.empty() || f == "." || f == ".." || f.find('/') != std::string::npos ||
        f.find('\\') != std::string::npos) {
      return Corrupt(where + " = '" + f + "' is not a plain file name");
    }
    map[it.key()] = f;
  }
  return map;
}

}  // namespace gossamer

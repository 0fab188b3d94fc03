#include "model/safetensors_writer.h"

#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>
#include <utility>

namespace gossamer {
namespace {

using json = nlohmann::json;

std::string errno_text() {
  return std::strerror(errno);
}

std::string shard_name(size_t k, size_t n) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "model-%05zu-of-%05zu.safetensors", k + 1, n);
  return buf;
}

}  // namespace

int64_t TensorSpec::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

int64_t TensorSpec::nbytes() const {
  return numel() * dtype_size(dtype);
}

Status TensorSpec::validate() const {
  if (name.empty()) return InvalidArgument("tensor with an empty name");
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0) return InvalidArgument("tensor '" + name + "' has a negative dimension");
    if (d > 0 && n > (int64_t{1} << 56) / d) {
      return InvalidArgument("tensor '" + name + "' is too large (element count overflows)");
    }
    n *= d;
  }
  return Status::Ok();
}

Result<std::string> safetensors_header(const std::vector<TensorSpec>& tensors,
                                       const std::map<std::string, std::string>& metadata) {
  json h = json::object();
  if (!metadata.empty()) h["__metadata__"] = metadata;
  int64_t offset = 0;
  for (const TensorSpec& t : tensors) {
    GS_RETURN_IF_ERROR(t.validate());
    if (t.name == "__metadata__" || h.contains(t.name)) {
      return InvalidArgument("duplicate or reserved tensor name '" + t.name + "'");
    }
    const int64_t end = offset + t.nbytes();
    h[t.name] = {
        {"dtype", dtype_name(t.dtype)}, {"shape", t.shape}, {"data_offsets", {offset, end}}};
    offset = end;
  }
  std::string text = h.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  return text;
}

Result<ShardPlan> plan_shards(const std::vector<TensorSpec>& tensors, int64_t max_shard_bytes) {
  if (max_shard_bytes <= 0) {
    return InvalidArgument("shard size must be > 0, got " + std::to_string(max_shard_bytes));
  }
  if (tensors.empty()) return InvalidArgument("no tensors to write");
  ShardPlan plan;
  int64_t current = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    GS_RETURN_IF_ERROR(tensors[i].validate());
    const int64_t b = tensors[i].nbytes();
    if (plan.items.empty() || (current > 0 && current + b > max_shard_bytes)) {
      plan.items.emplace_back();
      current = 0;
    }
    plan.items.back().push_back(i);
    current += b;
    plan.total_bytes += b;
  }
  const size_t n = plan.items.size();
  for (size_t k = 0; k < n; ++k) {
    plan.file_names.push_back(n == 1 ? std::string("model.safetensors") : shard_name(k, n));
  }
  return plan;
}

std::string shard_index_json(const std::vector<TensorSpec>& tensors, const ShardPlan& plan) {
  json map = json::object();
  for (size_t k = 0; k < plan.items.size(); ++k) {
    for (size_t i : plan.items[k]) map[tensors[i].name] = plan.file_names[k];
  }
  json j = {{"metadata", {{"total_size", plan.total_bytes}}}, {"weight_map", map}};
  return j.dump(2) + "\n";
}

Result<SafetensorsFileWriter> SafetensorsFileWriter::open(
    const std::string& path, std::vector<TensorSpec> tensors,
    const std::map<std::string, std::string>& metadata) {
  GS_ASSIGN_OR_RETURN(std::string header, safetensors_header(tensors, metadata));
  SafetensorsFileWriter w;
  w.path_ = path;
  w.tmp_path_ = path + ".partial";
  for (const TensorSpec& t : tensors) w.data_total_ += t.nbytes();
  w.f_ = std::fopen(w.tmp_path_.c_str(), "wb");
  if (w.f_ == nullptr) return IoError(w.tmp_path_ + ": cannot create: " + errno_text());
  std::setvbuf(w.f_, nullptr, _IOFBF, size_t{1} << 20);
  uint8_t len[8];
  const uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) len[i] = static_cast<uint8_t>(n >> (8 * i));  // little-endian
  if (std::fwrite(len, 1, 8, w.f_) != 8 ||
      std::fwrite(header.data(), 1, header.size(), w.f_) != header.size()) {
    return IoError(w.tmp_path_ + ": write error in header: " + errno_text());
  }
  return w;
}

SafetensorsFileWriter::SafetensorsFileWriter(SafetensorsFileWriter&& o) noexcept
    : path_(std::move(o.path_)),
      tmp_path_(std::move(o.tmp_path_)),
      f_(std::exchange(o.f_, nullptr)),
      data_total_(o.data_total_),
      written_(o.written_) {}

SafetensorsFileWriter::~SafetensorsFileWriter() {
  if (f_ != nullptr) {
    std::fclose(f_);
    std::remove(tmp_path_.c_str());
  }
}

Status SafetensorsFileWriter::append(const void* data, size_t n) {
  if (f_ == nullptr) return Internal(path_ + ": append after finish");
  if (written_ + static_cast<int64_t>(n) > data_total_) {
    return Internal(path_ + ": appending " + std::to_string(n) + " bytes at data offset " +
                    std::to_string(written_) + " exceeds the declared " +
                    std::to_string(data_total_) + " bytes");
  }
  if (n > 0 && std::fwrite(data, 1, n, f_) != n) {
    return IoError(tmp_path_ + ": write error at data offset " + std::to_string(written_) + ": " +
                   errno_text());
  }
  written_ += static_cast<int64_t>(n);
  return Status::Ok();
}

Status SafetensorsFileWriter::finish() {
  if (f_ == nullptr) return Internal(path_ + ": finish called twice");
  if (written_ != data_total_) {
    return Internal(path_ + ": only " + std::to_string(written_) + " of " +
                    std::to_string(data_total_) + " data bytes were written");
  }
  const bool flush_ok = std::fflush(f_) == 0;
  const bool close_ok = std::fclose(f_) == 0;
  f_ = nullptr;
  if (!flush_ok || !close_ok) {
    std::remove(tmp_path_.c_str());
    return IoError(tmp_path_ + ": error flushing/closing: " + errno_text());
  }
  if (std::rename(tmp_path_.c_str(), path_.c_str()) != 0) {
    return IoError("cannot rename " + tmp_path_ + " to " + path_ + ": " + errno_text());
  }
  return Status::Ok();
}

}  // namespace gossamer

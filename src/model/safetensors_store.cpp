// The mmap-backed TensorStore: MappedFile (RAII read-only mmap), opening one file, a set of
// files or a checkpoint directory (index, single file or *.safetensors), and the lookups. Header
// parsing and validation are in safetensors.cpp.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "common/file_util.h"
#include "model/safetensors.h"

namespace gossamer {

namespace fs = std::filesystem;

// RAII read-only mapping of a whole file (no mapping for an empty file).
class MappedFile {
 public:
  static Result<std::unique_ptr<MappedFile>> open(const std::string& path) {
    // O_NONBLOCK: opening a FIFO must not wait for a writer (fstat then rejects it).
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) {
      const int err = errno;
      std::string m = path + ": cannot open: " + std::strerror(err);
      return err == ENOENT ? NotFound(m) : IoError(m);
    }
    struct stat st {};
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
      ::close(fd);
      return IoError(path + ": not a regular file");
    }
    auto f = std::unique_ptr<MappedFile>(new MappedFile);
    f->path_ = path;
    f->size_ = static_cast<size_t>(st.st_size);
    if (f->size_ > 0) {
      void* p = ::mmap(nullptr, f->size_, PROT_READ, MAP_PRIVATE, fd, 0);
      if (p == MAP_FAILED) {
        const int err = errno;
        ::close(fd);
        return IoError(path + ": mmap failed: " + std::strerror(err));
      }
      f->data_ = static_cast<const uint8_t*>(p);
    }
    ::close(fd);
    return f;
  }
  ~MappedFile() {
    if (data_ != nullptr) ::munmap(const_cast<uint8_t*>(data_), size_);
  }
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  MappedFile() = default;
  std::string path_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

// ---- TensorStore -------------------------------------------------------------------------

TensorStore::~TensorStore() = default;

Status TensorStore::add_file(const std::string& path) {
  GS_ASSIGN_OR_RETURN(auto mf, MappedFile::open(path));
  GS_ASSIGN_OR_RETURN(SafetensorsHeader h, parse_safetensors_header(mf->data(), mf->size(), path));
  const size_t index = maps_.size();
  for (const TensorEntry& e : h.tensors) {
    auto it = tensors_.find(e.name);
    if (it != tensors_.end()) {
      return Corrupt("tensor '" + e.name + "' appears in both " + maps_[it->second.file]->path() +
                     " and " + path);
    }
  }
  for (TensorEntry& e : h.tensors) {
    Located loc;
    loc.file = index;
    loc.ref.dtype = e.dtype;
    loc.ref.shape = std::move(e.shape);
    loc.ref.data = mf->data() + h.data_start + e.begin;
    loc.offset = h.data_start + e.begin;
    tensors_.emplace(e.name, std::move(loc));
  }
  maps_.push_back(std::move(mf));
  metadata_.push_back(std::move(h.metadata));
  return Status::Ok();
}

Result<std::unique_ptr<TensorStore>> TensorStore::open_file(const std::string& path) {
  return open_files({path});
}

Result<std::unique_ptr<TensorStore>> TensorStore::open_files(
    const std::vector<std::string>& paths) {
  auto store = std::unique_ptr<TensorStore>(new TensorStore);
  for (const std::string& p : paths) GS_RETURN_IF_ERROR(store->add_file(p));
  return store;
}

Result<std::unique_ptr<TensorStore>> TensorStore::open_dir(const std::string& dir) {
  const fs::path d(dir);
  std::error_code ec;
  if (!fs::is_directory(d, ec)) return NotFound(dir + ": not a directory");
  const fs::path index = d / "model.safetensors.index.json";
  if (fs::exists(index, ec)) {
    GS_ASSIGN_OR_RETURN(std::string text, read_regular_file(index.string()));
    GS_ASSIGN_OR_RETURN(auto map, parse_safetensors_index(text, index.string()));
    std::map<std::string, std::string> first_user;  // shard -> a tensor naming it
    for (const auto& [name, shard] : map) first_user.emplace(shard, name);
    std::vector<std::string> paths;
    for (const auto& [shard, tensor] : first_user) {
      const fs::path p = d / shard;
      if (!fs::exists(p, ec)) {  // a FIFO or directory: MappedFile says "not a regular file"
        return NotFound(index.string() + ": weight_map references shard '" + shard +
                        "' (e.g. for tensor '" + tensor + "') but " + p.string() +
                        " does not exist");
      }
      paths.push_back(p.string());
    }
    GS_ASSIGN_OR_RETURN(auto store, open_files(paths));
    for (const auto& [name, shard] : map) {
      const std::string want = (d / shard).string();
      if (store->file_of(name) != want) {
        return NotFound(index.string() + ": weight_map puts tensor '" + name + "' in " + want +
                        " but that file does not contain it");
      }
    }
    return store;
  }
  if (fs::exists(d / "model.safetensors", ec)) return open_file((d / "model.safetensors").string());
  std::vector<std::string> paths;
  for (const auto& ent : fs::directory_iterator(d, ec)) {
    if (ent.path().extension() == ".safetensors") paths.push_back(ent.path().string());
  }
  if (ec) return IoError(dir + ": cannot list directory: " + ec.message());
  if (paths.empty()) return NotFound(dir + ": no *.safetensors files");
  std::sort(paths.begin(), paths.end());
  return open_files(paths);
}

bool TensorStore::contains(const std::string& name) const {
  return tensors_.count(name) != 0;
}

Result<TensorRef> TensorStore::get(const std::string& name) const {
  auto it = tensors_.find(name);
  if (it == tensors_.end()) return NotFound("tensor '" + name + "' not found in " + describe());
  return it->second.ref;
}

std::string TensorStore::file_of(const std::string& name) const {
  auto it = tensors_.find(name);
  return it == tensors_.end() ? std::string() : maps_[it->second.file]->path();
}

int64_t TensorStore::offset_of(const std::string& name) const {
  auto it = tensors_.find(name);
  return it == tensors_.end() ? -1 : static_cast<int64_t>(it->second.offset);
}

std::vector<std::string> TensorStore::names() const {
  std::vector<std::string> out;
  out.reserve(tensors_.size());
  for (const auto& kv : tensors_) out.push_back(kv.first);
  return out;
}

std::vector<std::string> TensorStore::files() const {
  std::vector<std::string> out;
  for (const auto& m : maps_) out.push_back(m->path());
  return out;
}

const std::map<std::string, std::string>& TensorStore::metadata(size_t file_index) const {
  static const std::map<std::string, std::string> kEmpty;
  return file_index < metadata_.size() ? metadata_[file_index] : kEmpty;
}

std::string TensorStore::describe() const {
  if (maps_.empty()) return "(no files)";
  std::string s = maps_[0]->path();
  const size_t shown = std::min<size_t>(maps_.size(), 3);
  for (size_t i = 1; i < shown; ++i) s += ", " + maps_[i]->path();
  if (maps_.size() > shown) s += " and " + std::to_string(maps_.size() - shown) + " more";
  return s;
}

}  // namespace gossamer

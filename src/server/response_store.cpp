#include "server/response_store.h"

namespace gossamer::server {

bool ResponseStore::put(const std::string& id, StoredResponse r) {
  const int64_t size = static_cast<int64_t>(dump(r.response).size() + dump(r.input).size());
  std::lock_guard<std::mutex> lock(mu_);
  if (auto it = by_id_.find(id); it != by_id_.end()) {
    bytes_ -= it->second->bytes;
    lru_.erase(it->second);
    by_id_.erase(it);
  }
  if (max_entries_ <= 0 || size > max_bytes_) return false;
  lru_.push_front(Entry{id, std::move(r), size});
  by_id_[id] = lru_.begin();
  bytes_ += size;
  evict_locked();
  return true;
}

void ResponseStore::evict_locked() {
  while (!lru_.empty() &&
         (static_cast<int64_t>(lru_.size()) > max_entries_ || bytes_ > max_bytes_)) {
    bytes_ -= lru_.back().bytes;
    by_id_.erase(lru_.back().id);
    lru_.pop_back();
  }
}

std::optional<StoredResponse> ResponseStore::get(const std::string& id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = by_id_.find(id);
  if (it == by_id_.end()) return std::nullopt;
  lru_.splice(lru_.begin(), lru_, it->second);
  return it->second->value;
}

bool ResponseStore::erase(const std::string& id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = by_id_.find(id);
  if (it == by_id_.end()) return false;
  bytes_ -= it->second->bytes;
  lru_.erase(it->second);
  by_id_.erase(it);
  return true;
}

int64_t ResponseStore::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int64_t>(lru_.size());
}

int64_t ResponseStore::bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return bytes_;
}

}  // namespace gossamer::server

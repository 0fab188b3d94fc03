// In-memory store of /v1/responses results (`store: true`, the default) for
// `GET /v1/responses/{id}` and `previous_response_id`. Bounded LRU: at most `max_entries`
// responses and `max_bytes` of serialised JSON; the least recently used are evicted first.
// Thread-safe. Lost when the server stops.
#pragma once

#include <cstdint>
#include <list>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>

#include "server/http_util.h"

namespace gossamer::server {

struct StoredResponse {
  json response;  // the Response object as returned to the client
  json input;     // every input item of the conversation so far (previous turns included)
};

class ResponseStore {
 public:
  ResponseStore(int64_t max_entries, int64_t max_bytes)
      : max_entries_(max_entries), max_bytes_(max_bytes) {}

  // Inserts (or replaces) `id`; evicts LRU entries to fit. An entry larger than max_bytes
  // alone is not stored (returns false).
  bool put(const std::string& id, StoredResponse r);
  // A copy of the entry (marks it most recently used), or nullopt.
  std::optional<StoredResponse> get(const std::string& id);
  bool erase(const std::string& id);
  int64_t size() const;
  int64_t bytes() const;

 private:
  struct Entry {
    std::string id;
    StoredResponse value;
    int64_t bytes = 0;
  };
  void evict_locked();

  int64_t max_entries_, max_bytes_;
  mutable std::mutex mu_;
  std::list<Entry> lru_;  // front: most recently used
  std::unordered_map<std::string, std::list<Entry>::iterator> by_id_;
  int64_t bytes_ = 0;
};

}  // namespace gossamer::server

#include "server/stop_filter.h"

#include <algorithm>

namespace gossamer::server {

StopFilter::StopFilter(std::vector<std::string> stops) : stops_(std::move(stops)) {
  for (const auto& s : stops_) max_len_ = std::max(max_len_, s.size());
}

std::string StopFilter::push(const std::string& text, bool* hit) {
  *hit = hit_;
  if (hit_) return {};
  if (stops_.empty()) return text;
  held_ += text;
  size_t first = std::string::npos;
  for (const auto& s : stops_) first = std::min(first, held_.find(s));
  if (first != std::string::npos) {
    hit_ = *hit = true;
    std::string out = held_.substr(0, first);
    held_.clear();
    return out;
  }
  // Keep the last max_len-1 bytes (a stop string may still complete), never splitting a UTF-8
  // character.
  size_t keep_from = held_.size() > max_len_ - 1 ? held_.size() - (max_len_ - 1) : 0;
  while (keep_from > 0 && keep_from < held_.size() &&
         (static_cast<unsigned char>(held_[keep_from]) & 0xC0) == 0x80) {
    --keep_from;
  }
  std::string out = held_.substr(0, keep_from);
  held_.erase(0, keep_from);
  return out;
}

std::string StopFilter::flush() {
  std::string out;
  if (!hit_) out.swap(held_);
  return out;
}

}  // namespace gossamer::server

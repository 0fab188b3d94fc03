// Stop strings over streamed text: holds back the tail that could still become a stop string,
// so a stop string is never sent, even when it arrives split across tokens.
#pragma once

#include <string>
#include <vector>

namespace gossamer::server {

class StopFilter {
 public:
  explicit StopFilter(std::vector<std::string> stops);
  // Appends text; returns what can be released now. *hit becomes true when a stop string was
  // found: the returned text ends right before it and later pushes return nothing.
  std::string push(const std::string& text, bool* hit);
  // End of output: the held-back rest (empty after a hit).
  std::string flush();
  bool hit() const { return hit_; }

 private:
  std::vector<std::string> stops_;
  size_t max_len_ = 0;
  std::string held_;
  bool hit_ = false;
};

}  // namespace gossamer::server

#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

namespace gossamer {

// Emits everything except a trailing truncated-but-so-far-correct multi-byte sequence;
// definitely ill-formed bytes become U+FFFD (maximal-subpart rule), so the concatenation of
// all push() results and flush() equals the lossy UTF-8 decoding of all token bytes.
Result<std::string> IncrementalDecoder::push(int32_t id) {
  GS_ASSIGN_OR_RETURN(std::string bytes, tok_->token_bytes(id));
  pending_ += bytes;
  size_t keep_from = pending_.size();
  // A held-back tail is at most 3 bytes: find where the last (possibly partial) char starts.
  for (size_t back = 1; back <= 3 && back <= pending_.size(); ++back) {
    const size_t i = pending_.size() - back;
    const auto c = static_cast<uint8_t>(pending_[i]);
    if ((c & 0xC0) == 0x80) continue;  // continuation byte: keep looking for the lead
    if (utf8::is_incomplete_prefix(pending_, i)) keep_from = i;
    break;
  }
  std::string out = utf8::sanitize(std::string_view(pending_).substr(0, keep_from));
  pending_.erase(0, keep_from);
  return out;
}

std::string IncrementalDecoder::flush() {
  std::string out = utf8::sanitize(pending_);
  pending_.clear();
  return out;
}

}  // namespace gossamer

// BpeTokenizer::encode_parallel: cuts a long text at provably safe points (added tokens found
// first, then Splitter::next_safe_cut inside the ordinary text) and encodes the parts on a pool.
#include <algorithm>

#include "common/thread_pool.h"
#include "tokenizer/tokenizer_impl.h"

namespace gossamer::tok {
namespace {

// Texts shorter than this are encoded on the calling thread.
constexpr size_t kParallelMinBytes = 64 * 1024;
// No part is cut shorter than this (per-part overhead: a piece cache, a vector).
constexpr size_t kMinPartBytes = 16 * 1024;

}  // namespace

std::vector<BpeTokenizer::Part> BpeTokenizer::cut_parts(std::string_view text, bool allow_special,
                                                        size_t target) const {
  const AddedTokenMatcher& matcher = allow_special ? all_added_ : plain_added_;
  std::vector<Part> parts;
  size_t pos = 0;
  while (pos < text.size()) {
    const AddedTokenMatcher::Match m = matcher.find(text, pos);
    const size_t end = m.token ? m.pos : text.size();
    // Ordinary text [pos, end): cut at safe points roughly `target` bytes apart.
    const std::string_view seg = text.substr(pos, end - pos);
    size_t from = 0;
    while (splitters_.size() == 1 && seg.size() - from > target + kMinPartBytes) {
      const size_t cut = splitters_[0]->next_safe_cut(seg, from + target);
      if (cut == std::string_view::npos || seg.size() - cut < kMinPartBytes) break;
      parts.push_back({seg.substr(from, cut - from), -1});
      from = cut;
    }
    parts.push_back({seg.substr(from), m.token ? m.token->id : -1});
    if (!m.token) break;
    pos = m.pos + m.token->text.size();
  }
  return parts;
}

std::vector<int32_t> BpeTokenizer::encode_parallel(std::string_view text, bool allow_special,
                                                   ThreadPool* pool) const {
  if (pool == nullptr || pool->size() < 2 || text.size() < kParallelMinBytes) {
    return encode(text, allow_special);
  }
  const size_t target =
      std::max(kMinPartBytes, text.size() / (static_cast<size_t>(pool->size()) * 4));
  const std::vector<Part> parts = cut_parts(text, allow_special, target);
  std::vector<std::vector<int32_t>> outs(parts.size());
  pool->parallel_for(static_cast<int64_t>(parts.size()), [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const Part& part = parts[static_cast<size_t>(i)];
      std::vector<int32_t>& out = outs[static_cast<size_t>(i)];
      out.reserve(part.text.size() / 3 + 4);
      Scratch scratch;
      if (part.text.size() >= kCacheMinBytes)
        scratch.cache = std::make_unique<PieceCache>(part.text.size());
      if (!part.text.empty()) encode_ordinary(part.text, &out, &scratch);
      if (part.added_id >= 0) out.push_back(part.added_id);
    }
  });
  size_t total = 0;
  for (const auto& o : outs) total += o.size();
  std::vector<int32_t> ids;
  ids.reserve(total);
  for (const auto& o : outs) ids.insert(ids.end(), o.begin(), o.end());
  return ids;
}

}  // namespace gossamer::tok

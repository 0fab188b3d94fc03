// The token trie (TokenTrie::build, once per server) and JsonMatcher::collect, which walks it
// depth-first with one matcher State per trie depth (json_matcher.h).
#include <algorithm>

#include "server/json_matcher.h"
#include "server/json_matcher_impl.h"
#include "tokenizer/utf8.h"

namespace gossamer::server {

using json_matcher_impl::kNone;

namespace {

using TokenList = std::vector<std::pair<std::string_view, int32_t>>;

TokenTrie::Layer build_layer(TokenList toks) {
  std::sort(toks.begin(), toks.end());
  TokenTrie::Layer t;
  std::vector<uint32_t> path;  // open nodes, one per depth
  std::string_view prev;
  auto close_to = [&](size_t depth) {
    for (; path.size() > depth; path.pop_back()) {
      t.nodes[path.back()].skip = static_cast<uint32_t>(t.nodes.size());
    }
  };
  for (const auto& [s, id] : toks) {
    size_t lcp = 0;
    while (lcp < s.size() && lcp < prev.size() && s[lcp] == prev[lcp]) ++lcp;
    close_to(lcp);
    for (size_t k = lcp; k < s.size(); ++k) {  // ids of equal byte strings attach to the newest
      path.push_back(static_cast<uint32_t>(t.nodes.size()));
      t.nodes.push_back({0, static_cast<uint32_t>(t.ids.size()), static_cast<uint16_t>(k + 1),
                         static_cast<uint8_t>(s[k])});
    }
    t.ids.push_back(id);
    t.max_depth = std::max<int>(t.max_depth, static_cast<int>(s.size()));
    prev = s;
  }
  close_to(0);
  t.nodes.push_back({0, static_cast<uint32_t>(t.ids.size()), 0, 0});  // sentinel
  return t;
}

// Bytes a string can hold whatever came before: whole UTF-8 characters, no quote, backslash or
// control byte (so no escape or UTF-8 sequence is left open).
bool plain_content(std::string_view s) {
  for (char ch : s) {
    const auto c = static_cast<uint8_t>(ch);
    if (c == '"' || c == '\\' || c < 0x20) return false;
  }
  return utf8::valid_prefix_len(s) == s.size();
}

}  // namespace

Result<std::shared_ptr<const TokenTrie>> TokenTrie::build(const TokenPieceIndex& pieces,
                                                          int64_t vocab) {
  TokenList all, not_plain;
  auto trie = std::shared_ptr<TokenTrie>(new TokenTrie());
  for (int64_t id = 0; id < vocab; ++id) {
    const std::string* b = pieces.bytes(static_cast<int32_t>(id));
    if (b == nullptr || b->size() >= UINT16_MAX) continue;
    all.emplace_back(*b, static_cast<int32_t>(id));
    if (plain_content(*b)) {
      trie->plain_.push_back(static_cast<int32_t>(id));
    } else {
      not_plain.emplace_back(*b, static_cast<int32_t>(id));
    }
  }
  if (all.empty()) return Internal("token trie: the vocabulary has no ordinary tokens");
  trie->all_ = build_layer(std::move(all));
  trie->not_plain_ = build_layer(std::move(not_plain));
  return std::shared_ptr<const TokenTrie>(std::move(trie));
}

void JsonMatcher::collect(const TokenTrie& trie, std::vector<int32_t>* out) {
  if (broken_ || closed()) return;
  bool plain = false;  // some thread takes every plain token and stays as it was
  for (uint32_t i = 0; i < cur_.n && !plain; ++i) plain = plain_string(cur_.t[i]);
  if (plain) out->insert(out->end(), trie.plain().begin(), trie.plain().end());
  walk(plain ? trie.not_plain() : trie.all(), out);
}

// A thread inside a string (or an unrestricted key) with no escape or UTF-8 sequence open.
bool JsonMatcher::plain_string(const Thread& t) const {
  if (t.sub != 0 || t.utf8_need != 0 || t.want_low) return false;
  if (t.mode == Mode::kString) return true;
  if (t.mode != Mode::kKey) return false;
  const Frame& f = frames_[t.frame];
  return node(f.node).additional != kNone && !only_required(f, node(f.node));
}

void JsonMatcher::walk(const TokenTrie::Layer& layer, std::vector<int32_t>* out) {
  stack_.resize(static_cast<size_t>(layer.max_depth) + 1);
  stack_[0] = cur_;
  const TokenTrie::Node* nodes = layer.nodes.data();
  const int32_t* ids = layer.ids.data();
  const size_t n = layer.size();
  for (size_t i = 0; i < n;) {
    const TokenTrie::Node& nd = nodes[i];
    const State& parent = stack_[nd.depth - 1];
    rollback(parent);
    if (!advance(parent, nd.byte, stack_[nd.depth])) {
      i = nd.skip;
      continue;
    }
    out->insert(out->end(), ids + nd.ids, ids + nodes[i + 1].ids);
    ++i;
  }
  rollback(cur_);
}

void JsonMatcher::rollback(const State& s) {
  if (frames_.size() != s.frames) frames_.resize(s.frames);
  if (words_.size() != s.words) words_.resize(s.words);
  if (keys_.size() != s.keys) keys_.resize(s.keys);
}

}  // namespace gossamer::server

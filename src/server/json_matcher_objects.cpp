// JsonMatcher's objects and enum values: narrowing the sorted declared names (and enum
// serialisations) byte by byte, the used / required / extra key bookkeeping of an object, and the
// frame arenas (opening a container, compacting what the threads can still reach).
#include <algorithm>
#include <bit>

#include "server/json_matcher.h"
#include "server/json_matcher_impl.h"

namespace gossamer::server {

using json_matcher_impl::kFnvPrime;
using json_matcher_impl::kNone;

namespace {

// First index k in [lo, hi) with key(k) >= c (key nondecreasing over the range).
template <class Key>
uint32_t lower(uint32_t lo, uint32_t hi, int c, Key key) {
  while (lo < hi) {
    const uint32_t mid = lo + (hi - lo) / 2;
    if (key(mid) < c) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return lo;
}

// Narrows [lo, hi) of sorted strings sharing a prefix of `pos` bytes to those whose byte at pos
// is c (a contiguous run: the strings that end at pos sort first, then by that byte).
void narrow(const std::vector<std::string>& v, uint32_t& lo, uint32_t& hi, uint32_t pos,
            uint8_t c) {
  auto key = [&](uint32_t k) { return v[k].size() > pos ? static_cast<uint8_t>(v[k][pos]) : -1; };
  const uint32_t a = lower(lo, hi, c, key);
  hi = lower(a, hi, c + 1, key);
  lo = a;
}
}  // namespace

JsonMatcher::Step JsonMatcher::enum_step(Thread& t, uint8_t c) const {
  const auto& vals = schema_->enums[static_cast<size_t>(node(t.node).enum_index)];
  uint32_t lo = t.lo, hi = t.hi;
  narrow(vals, lo, hi, t.pos, c);
  if (lo == hi) return vals[t.lo].size() == t.pos ? Step::kEndedBefore : Step::kReject;
  t.lo = lo;
  t.hi = hi;
  ++t.pos;
  // Only a number can be followed by more bytes of a longer candidate ("1" / "10"); a lone
  // exact match is finished at once.
  return hi - lo == 1 && vals[lo].size() == t.pos ? Step::kComplete : Step::kContinue;
}

// With maxProperties nearly reached, only the missing required names may still be written.
bool JsonMatcher::only_required(const Frame& f, const JsonSchemaNode& n) const {
  uint32_t missing = 0;
  for (size_t w = 0; w < n.required.size(); ++w) {
    missing += static_cast<uint32_t>(std::popcount(n.required[w] & ~words_[f.used + w]));
  }
  return static_cast<uint64_t>(f.count) + 1 + missing > n.max_props;
}

// Some declared name in [lo, hi) is unused (and required, when `required`).
bool JsonMatcher::free_name(const Frame& f, const JsonSchemaNode& n, uint32_t lo, uint32_t hi,
                            bool required) const {
  const uint64_t* used = words_.data() + f.used;
  for (uint32_t k = lo; k < hi; ++k) {
    if (!test_bit(used, k) && (!required || test_bit(n.required.data(), k))) return true;
  }
  return false;
}

bool JsonMatcher::key_possible(const Frame& f, const JsonSchemaNode& n) const {
  if (f.count >= n.max_props) return false;
  const bool req = only_required(f, n);
  if (n.additional != kNone && !req) return true;
  return free_name(f, n, 0, static_cast<uint32_t>(n.names.size()), req);
}

bool JsonMatcher::close_ok(const Frame& f, const JsonSchemaNode& n) const {
  if (f.count < n.min_props) return false;
  for (size_t w = 0; w < n.required.size(); ++w) {
    if (n.required[w] & ~words_[f.used + w]) return false;
  }
  return true;
}

// A key byte (not the closing quote): some name must still be writable.
bool JsonMatcher::key_byte(Thread& t, uint8_t c) const {
  t.hash = (t.hash ^ c) * kFnvPrime;
  const Frame& f = frames_[t.frame];
  const JsonSchemaNode& n = node(f.node);
  if (t.lo < t.hi) narrow(n.names, t.lo, t.hi, t.pos, c);
  ++t.pos;
  const bool req = only_required(f, n);
  if (n.additional != kNone && !req) return true;
  return free_name(f, n, t.lo, t.hi, req);
}

// The closing quote of a key: a new frame records it; the value's node comes next.
bool JsonMatcher::close_key(Thread& t) {
  const Frame f = frames_[t.frame];
  const JsonSchemaNode& n = node(f.node);
  const bool req = only_required(f, n);
  Frame g = f;
  ++g.count;
  uint32_t value = kNone;
  if (t.lo < t.hi && n.names[t.lo].size() == t.pos) {          // a declared name
    if (test_bit(words_.data() + f.used, t.lo)) return false;  // used (or never writable)
    if (req && !test_bit(n.required.data(), t.lo)) return false;
    g.used = static_cast<uint32_t>(words_.size());
    for (size_t w = 0; w < n.words(); ++w) {
      const uint64_t v = words_[f.used + w];  // (not a reference: push_back may reallocate)
      words_.push_back(v);
    }
    set_bit(words_.data() + g.used, t.lo);
    value = n.values[t.lo];
  } else {
    if (n.additional == kNone || req) return false;
    for (uint32_t k = f.extra; k != kNone; k = keys_[k].next) {
      if (keys_[k].hash == t.hash) return false;  // a duplicate key
    }
    keys_.push_back({t.hash, f.extra});
    g.extra = static_cast<uint32_t>(keys_.size() - 1);
    value = n.additional;
  }
  frames_.push_back(g);
  t = Thread();
  t.frame = static_cast<uint32_t>(frames_.size() - 1);
  t.node = value;
  t.mode = Mode::kColon;
  return true;
}

uint32_t JsonMatcher::open(uint32_t parent, uint32_t node_id, bool array) {
  const JsonSchemaNode& n = node(node_id);
  const auto used = static_cast<uint32_t>(words_.size());
  if (!array) words_.insert(words_.end(), n.blocked.begin(), n.blocked.end());
  frames_.push_back({parent, node_id, 0, used, kNone, array});
  return static_cast<uint32_t>(frames_.size() - 1);
}

// Copies what the current threads can still reach into fresh arenas: committed bytes leave
// superseded frames behind (one per key or element).
void JsonMatcher::compact() {
  std::vector<Frame> frames;
  std::vector<uint64_t> words;
  std::vector<ExtraKey> keys;
  std::vector<std::pair<uint32_t, uint32_t>> moved;  // old frame -> new
  auto copy = [&](uint32_t old) {
    std::vector<uint32_t> chain;  // old frames not yet copied, innermost first
    for (uint32_t x = old; x != kNone; x = frames_[x].parent) {
      auto it = std::find_if(moved.begin(), moved.end(), [&](auto& p) { return p.first == x; });
      if (it != moved.end()) break;
      chain.push_back(x);
    }
    for (auto x = chain.rbegin(); x != chain.rend(); ++x) {
      Frame g = frames_[*x];
      if (g.parent != kNone) {
        g.parent = std::find_if(moved.begin(), moved.end(), [&](auto& p) {
                     return p.first == g.parent;
                   })->second;
      }
      const size_t nw = g.array ? 0 : node(g.node).words();
      words.insert(words.end(), words_.begin() + g.used, words_.begin() + g.used + nw);
      g.used = static_cast<uint32_t>(words.size() - nw);
      std::vector<uint64_t> hashes;
      for (uint32_t k = g.extra; k != kNone; k = keys_[k].next) hashes.push_back(keys_[k].hash);
      g.extra = kNone;
      for (auto h = hashes.rbegin(); h != hashes.rend(); ++h) {
        keys.push_back({*h, g.extra});
        g.extra = static_cast<uint32_t>(keys.size() - 1);
      }
      frames.push_back(g);
      moved.emplace_back(*x, static_cast<uint32_t>(frames.size() - 1));
    }
    if (old == kNone) return kNone;
    return std::find_if(moved.begin(), moved.end(), [&](auto& p) { return p.first == old; })
        ->second;
  };
  for (uint32_t i = 0; i < cur_.n; ++i) cur_.t[i].frame = copy(cur_.t[i].frame);
  frames_ = std::move(frames);
  words_ = std::move(words);
  keys_ = std::move(keys);
  cur_.frames = static_cast<uint32_t>(frames_.size());
  cur_.words = static_cast<uint32_t>(words_.size());
  cur_.keys = static_cast<uint32_t>(keys_.size());
  live_ = frames_.size() + words_.size() + keys_.size();
}

}  // namespace gossamer::server

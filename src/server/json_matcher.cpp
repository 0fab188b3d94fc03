#include "server/json_matcher.h"

#include <algorithm>
#include <bit>

#include "tokenizer/utf8.h"

namespace gossamer::server {

namespace {

constexpr uint32_t kNone = UINT32_MAX;
constexpr uint8_t kMaxWhitespace = 8;   // a model cannot loop on newlines between tokens
constexpr uint32_t kMaxIntDigits = 64;  // number sizes: see lex_number
constexpr uint32_t kMaxExpDigits = 2;
constexpr uint64_t kFnvOffset = 1469598103934665603ull;
constexpr uint64_t kFnvPrime = 1099511628211ull;
constexpr std::string_view kLiterals[] = {"true", "false", "null"};

// The number grammar -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)? as states after a byte.
enum Num : uint8_t { kMinus, kZero, kInt, kDot, kFrac, kExpMark, kExpSign, kExp };
enum class NumStep : uint8_t { kReject, kContinue, kEnded };
enum class Lex : uint8_t { kReject, kContent, kClose };

bool is_ws(uint8_t c) {
  return c == ' ' || c == '\n' || c == '\t' || c == '\r';
}
bool is_digit(uint8_t c) {
  return c >= '0' && c <= '9';
}
bool num_complete(uint8_t s) {
  return s == kZero || s == kInt || s == kFrac || s == kExp;
}

int hex_value(uint8_t c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// digits: of the integer part, then of the exponent. Both are capped (kMaxIntDigits,
// kMaxExpDigits) so that every number the model can write is finite as a double (|x| < 1e164):
// a grammar-valid 1E999 would overflow most readers (nlohmann, JavaScript, Python's float).
NumStep lex_number(uint8_t& s, uint32_t& digits, bool int_only, uint8_t c) {
  const bool digit = is_digit(c);
  const bool exp = (c == 'e' || c == 'E') && !int_only;
  switch (s) {
    case kMinus:
      if (!digit) return NumStep::kReject;
      s = c == '0' ? kZero : kInt;
      digits = 1;
      return NumStep::kContinue;
    case kZero:
    case kInt:
    case kFrac:
      if (digit && s == kInt && ++digits > kMaxIntDigits) return NumStep::kReject;
      if (digit && s != kZero) return NumStep::kContinue;
      if (c == '.' && s != kFrac && !int_only) {
        s = kDot;
      } else if (exp) {
        s = kExpMark;
      } else {
        return NumStep::kEnded;  // "01": the '1' is handed to what follows (and refused)
      }
      return NumStep::kContinue;
    case kDot:
    case kExpSign:
      if (!digit) return NumStep::kReject;
      s = s == kDot ? kFrac : kExp;
      digits = 1;
      return NumStep::kContinue;
    case kExpMark:
      if (c == '+' || c == '-') {
        s = kExpSign;
      } else if (digit) {
        s = kExp;
        digits = 1;
      } else {
        return NumStep::kReject;
      }
      return NumStep::kContinue;
    default:  // kExp
      if (!digit) return NumStep::kEnded;
      return ++digits > kMaxExpDigits ? NumStep::kReject : NumStep::kContinue;
  }
}

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

// One byte of a string's content, after the opening quote. Keys are canonical (no \u, no \/),
// see json_schema.h. A \u escape may not leave a lone surrogate; UTF-8 must be valid across
// token boundaries (the pending continuation count and the lead byte live in t).
template <class T>
Lex lex_string(T& t, uint8_t c, bool key) {
  using L = Lex;
  if (t.utf8_need > 0) {  // the lead byte constrains the first continuation (utf8::second_ok)
    if (t.utf8_lead ? !utf8::second_ok(t.utf8_lead, c) : (c & 0xC0) != 0x80) return L::kReject;
    --t.utf8_need;
    t.utf8_lead = 0;
    return L::kContent;
  }
  if (t.sub == 1) {  // after a backslash
    if (c == 'u' && !key) {
      t.sub = 2;
      t.ucode = 0;
      return L::kContent;
    }
    const bool simple = c == '"' || c == '\\' || c == 'b' || c == 'f' || c == 'n' || c == 'r' ||
                        c == 't' || (c == '/' && !key);
    if (!simple || t.want_low) return L::kReject;
    t.sub = 0;
    return L::kContent;
  }
  if (t.sub >= 2) {  // \u hex digits; the surrogate class is known after two of them
    const int h = hex_value(c);
    if (h < 0 || (t.sub == 2 && t.want_low && h != 0xD)) return L::kReject;
    t.ucode = static_cast<uint16_t>((t.ucode << 4) | h);
    if (t.sub == 3 && (t.ucode >= 0xDC && t.ucode <= 0xDF) != t.want_low) return L::kReject;
    if (++t.sub == 6) {
      t.sub = 0;
      t.want_low = !t.want_low && t.ucode >= 0xD800 && t.ucode <= 0xDBFF;
    }
    return L::kContent;
  }
  if (t.want_low && c != '\\') return L::kReject;
  if (c == '"') return L::kClose;
  if (c == '\\') {
    t.sub = 1;
    return L::kContent;
  }
  if (c < 0x20) return L::kReject;
  if (c < 0x80) return L::kContent;
  const size_t len = utf8::lead_len(c);  // 0: never a lead byte
  if (len < 2) return L::kReject;
  t.utf8_need = static_cast<uint8_t>(len - 1);
  t.utf8_lead = c;
  return L::kContent;
}

}  // namespace

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

JsonMatcher::JsonMatcher(std::shared_ptr<const CompiledJsonSchema> schema)
    : schema_(std::move(schema)) {
  reset();
}

void JsonMatcher::reset() {
  frames_.clear();
  words_.clear();
  keys_.clear();
  live_ = 0;
  broken_ = false;
  cur_ = State();
  cur_.n = 1;
  cur_.t[0].node = schema_->root;
}

bool JsonMatcher::feed(std::string_view bytes) {
  if (broken_) return false;
  for (char ch : bytes) {
    State next;
    if (!advance(cur_, static_cast<uint8_t>(ch), next)) {
      broken_ = true;
      return false;
    }
    cur_ = next;
  }
  if (frames_.size() + words_.size() + keys_.size() > 2 * live_ + 1024) compact();
  return true;
}

bool JsonMatcher::can_end() const {
  for (uint32_t i = 0; i < cur_.n && !broken_; ++i) {
    const Thread& t = cur_.t[i];
    if (t.mode == Mode::kDone) return true;
    if (t.frame != kNone) continue;
    if (t.mode == Mode::kNumber && num_complete(t.sub)) return true;
    if (t.mode == Mode::kEnum &&
        schema_->enums[static_cast<size_t>(node(t.node).enum_index)][t.lo].size() == t.pos) {
      return true;
    }
  }
  return false;
}

bool JsonMatcher::closed() const {
  for (uint32_t i = 0; i < cur_.n; ++i) {
    if (cur_.t[i].mode != Mode::kDone) return false;
  }
  return true;
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

void JsonMatcher::push(State& out, const Thread& u) {
  for (uint32_t i = 0; i < out.n; ++i) {
    if (out.t[i] == u) return;  // alternatives that reached the same state merge
  }
  // Beyond kMaxThreads alternatives are dropped: fewer choices, never an invalid one.
  if (out.n < kMaxThreads) out.t[out.n++] = u;
}

bool JsonMatcher::advance(const State& in, uint8_t c, State& out) {
  out.n = 0;
  for (uint32_t i = 0; i < in.n; ++i) step(in.t[i], c, out);
  out.frames = static_cast<uint32_t>(frames_.size());
  out.words = static_cast<uint32_t>(words_.size());
  out.keys = static_cast<uint32_t>(keys_.size());
  return out.n > 0;
}

// Appends the successors of t on byte c to out (none, one, or one per anyOf alternative).
void JsonMatcher::step(Thread t, uint8_t c, State& out) {
  switch (t.mode) {
    case Mode::kString: {
      const Lex r = lex_string(t, c, false);
      if (r == Lex::kReject) return;
      if (r == Lex::kClose) finish_value(t);
      return push(out, t);
    }
    case Mode::kKey: {
      const Lex r = lex_string(t, c, true);
      if (r == Lex::kReject || !(r == Lex::kClose ? close_key(t) : key_byte(t, c))) return;
      return push(out, t);
    }
    case Mode::kNumber: {
      const NumStep r = lex_number(t.sub, t.pos, t.int_only, c);
      if (r == NumStep::kReject) return;
      if (r == NumStep::kContinue) return push(out, t);
      finish_value(t);
      return step(t, c, out);  // the delimiter belongs to the container
    }
    case Mode::kLiteral:
      if (c != static_cast<uint8_t>(kLiterals[t.sub][t.pos])) return;
      if (++t.pos == kLiterals[t.sub].size()) finish_value(t);
      return push(out, t);
    case Mode::kEnum: {
      const Step r = enum_step(t, c);
      if (r == Step::kReject) return;
      if (r == Step::kContinue) return push(out, t);
      finish_value(t);
      return r == Step::kComplete ? push(out, t) : step(t, c, out);
    }
    case Mode::kDone:
      return;
    default:
      break;
  }
  if (is_ws(c)) {  // structural whitespace, capped
    if (t.ws >= kMaxWhitespace) return;
    ++t.ws;
    return push(out, t);
  }
  t.ws = 0;
  switch (t.mode) {
    case Mode::kValue:
      return start_value(t, t.node, c, out);
    case Mode::kColon:
      if (c != ':') return;
      t.mode = Mode::kValue;
      return push(out, t);
    case Mode::kArrayFirst: {
      const JsonSchemaNode& n = node(frames_[t.frame].node);
      if (c == ']') {
        if (n.min_items > 0) return;
        pop(t);
        return push(out, t);
      }
      if (n.max_items == 0) return;
      return start_value(t, n.element(0), c, out);
    }
    case Mode::kObjectFirst:
      if (c == '}') return after_value(t, c, out);  // same checks as after a value
      [[fallthrough]];
    case Mode::kKeyStart: {
      const Frame& f = frames_[t.frame];
      if (c != '"' || !key_possible(f, node(f.node))) return;
      t.mode = Mode::kKey;
      t.lo = 0;
      t.hi = static_cast<uint32_t>(node(f.node).names.size());
      t.pos = 0;
      t.hash = kFnvOffset;
      return push(out, t);
    }
    default:  // kAfter
      return after_value(t, c, out);
  }
}

// The first byte of a value: one successor per alternative (leaf) of the node that accepts it.
void JsonMatcher::start_value(Thread t, uint32_t node_id, uint8_t c, State& out) {
  for (uint32_t leaf : node(node_id).alts) {
    const JsonSchemaNode& n = node(leaf);
    Thread u = t;
    if (n.enum_index >= 0) {
      u.mode = Mode::kEnum;
      u.node = leaf;
      u.lo = 0;
      u.hi = static_cast<uint32_t>(schema_->enums[static_cast<size_t>(n.enum_index)].size());
      u.pos = 0;
      step(u, c, out);
      continue;
    }
    u.node = kNone;  // scalars do not need it (and alike threads then merge)
    if (c == '{' || c == '[') {
      if (!(n.types & (c == '{' ? kTypeObject : kTypeArray))) continue;
      u.frame = open(t.frame, leaf, c == '[');
      u.mode = c == '{' ? Mode::kObjectFirst : Mode::kArrayFirst;
    } else if (c == '"') {
      if (!(n.types & kTypeString)) continue;
      u.mode = Mode::kString;
    } else if (c == 't' || c == 'f' || c == 'n') {
      if (!(n.types & (c == 'n' ? kTypeNull : kTypeBoolean))) continue;
      u.mode = Mode::kLiteral;
      u.sub = c == 't' ? 0 : c == 'f' ? 1 : 2;
      u.pos = 1;
    } else if (c == '-' || is_digit(c)) {
      if (!(n.types & (kTypeNumber | kTypeInteger))) continue;
      u.mode = Mode::kNumber;
      u.int_only = !(n.types & kTypeNumber);
      u.sub = c == '-' ? kMinus : c == '0' ? kZero : kInt;
      u.pos = c == '-' ? 0 : 1;  // integer digits so far
    } else {
      continue;
    }
    push(out, u);
  }
}

// ',' or the closing bracket after a value (or '}' right after '{').
void JsonMatcher::after_value(Thread t, uint8_t c, State& out) {
  const Frame f = frames_[t.frame];  // a copy: open() below may grow frames_
  const JsonSchemaNode& n = node(f.node);
  if (f.array) {
    if (c == ',' && f.count + 1 < n.max_items) {
      Frame g = f;
      ++g.count;
      frames_.push_back(g);
      t.frame = static_cast<uint32_t>(frames_.size() - 1);
      t.mode = Mode::kValue;
      t.node = n.element(g.count);
      return push(out, t);
    }
    if (c != ']' || f.count + 1 < n.min_items) return;
  } else {
    if (c == ',' && t.mode == Mode::kAfter && key_possible(f, n)) {
      t.mode = Mode::kKeyStart;
      return push(out, t);
    }
    if (c != '}' || !close_ok(f, n)) return;
  }
  pop(t);
  push(out, t);
}

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

void JsonMatcher::finish_value(Thread& t) const {
  const uint32_t frame = t.frame;
  t = Thread();
  t.frame = frame;
  t.mode = t.frame == kNone ? Mode::kDone : Mode::kAfter;
}

void JsonMatcher::pop(Thread& t) const {
  t.frame = frames_[t.frame].parent;
  finish_value(t);
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

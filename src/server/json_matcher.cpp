// JsonMatcher stepping: the string and number lexers, and one byte at a time through the
// threads (values, containers, whitespace). Keys, enum values and the frame arenas are in
// json_matcher_objects.cpp; the token trie and its walk (collect) in json_token_trie.cpp.
#include "server/json_matcher.h"

#include "server/json_matcher_impl.h"
#include "tokenizer/utf8.h"

namespace gossamer::server {

using json_matcher_impl::kFnvOffset;
using json_matcher_impl::kNone;

namespace {

constexpr uint8_t kMaxWhitespace = 8;   // a model cannot loop on newlines between tokens
constexpr uint32_t kMaxIntDigits = 64;  // number sizes: see lex_number
constexpr uint32_t kMaxExpDigits = 2;
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
      return step_structure(t, c, out);
  }
}

// Between tokens: structural whitespace, or a byte that starts a value or a key, or separates or
// closes one.
void JsonMatcher::step_structure(Thread t, uint8_t c, State& out) {
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

}  // namespace gossamer::server

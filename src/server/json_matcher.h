// Byte-level JSON matcher for structured output: follows a CompiledJsonSchema through the
// bytes the model writes, and finds every vocabulary token whose bytes it can accept next by
// walking a token trie depth-first (a subtree is skipped at its first rejected byte).
//
// The matcher is a pushdown automaton. Containers (objects / arrays) are immutable frames in
// small arenas (a byte that changes a container writes a new frame); everything else is a
// fixed-size Thread. The depth-first walk keeps one State per trie depth and rolls the arenas
// back to the parent's marks, so exploring a trie node costs a copy of a few small structs.
// Several Threads run side by side when anyOf alternatives (or $ref unions) both accept the
// bytes so far; they share the enclosing frames. Whitespace between tokens is JSON's (space,
// \n, \t, \r), at most 8 bytes in a row, and none after the top-level value.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "server/json_schema.h"
#include "server/tool_constraint.h"

namespace gossamer::server {

// Every ordinary token's bytes as a byte trie stored in depth-first (preorder) order: node i's
// subtree is [i, skip), so a rejected byte skips the whole subtree in one jump. Built once per
// server and immutable afterwards (shared across threads).
//
// Inside a string nearly every token is allowed, and walking all ~420k nodes costs several ms.
// So the tokens that are plain string content (printable ASCII other than '"' and '\', and
// whole UTF-8 characters) are also listed apart, with a second trie of the other tokens: in a
// plain string state the allowed set is that list plus a walk of the (much smaller) second trie.
class TokenTrie {
 public:
  struct Node {
    uint32_t skip;   // index just past this node's subtree
    uint32_t ids;    // first entry in ids of the tokens ending here (next node's ids = end)
    uint16_t depth;  // bytes from the root (1 for the first byte of a token)
    uint8_t byte;
  };
  struct Layer {
    std::vector<Node> nodes;  // preorder, then a sentinel
    std::vector<int32_t> ids;
    int max_depth = 0;
    size_t size() const { return nodes.size() - 1; }
  };
  static Result<std::shared_ptr<const TokenTrie>> build(const TokenPieceIndex& pieces,
                                                        int64_t vocab);
  const Layer& all() const { return all_; }
  const Layer& not_plain() const { return not_plain_; }  // tokens not in plain()
  const std::vector<int32_t>& plain() const { return plain_; }

 private:
  TokenTrie() = default;
  Layer all_, not_plain_;
  std::vector<int32_t> plain_;
};

class JsonMatcher {
 public:
  explicit JsonMatcher(std::shared_ptr<const CompiledJsonSchema> schema);

  void reset();  // before a new top-level value
  // Consumes bytes; false when one is rejected (the matcher then accepts nothing until reset).
  bool feed(std::string_view bytes);
  // The bytes so far are a whole value (a top-level number may still grow).
  bool can_end() const;
  // The value is complete and no byte may follow.
  bool closed() const;
  // Appends the ids of every trie token whose bytes the matcher accepts next (unsorted).
  void collect(const TokenTrie& trie, std::vector<int32_t>* out);

 private:
  enum class Mode : uint8_t {
    kValue,        // a value of `node` starts here (whitespace first)
    kString,       // inside a string value
    kNumber,       // inside a number (sub: the number grammar's state)
    kLiteral,      // inside true / false / null (sub: which, pos: bytes matched)
    kEnum,         // inside one of enums[node.enum_index][lo, hi) (pos: bytes matched)
    kObjectFirst,  // after '{'
    kKeyStart,     // after ',' in an object
    kKey,          // inside a key (lo, hi: declared names with this prefix; hash: the key)
    kColon,        // after a key; `node` is the value's
    kArrayFirst,   // after '['
    kAfter,        // after a value inside a container
    kDone,         // after the top-level value
  };
  struct Thread {
    uint32_t frame = UINT32_MAX;  // innermost open container; UINT32_MAX: top level
    uint32_t node = UINT32_MAX;
    uint32_t lo = 0, hi = 0, pos = 0;
    uint64_t hash = 0;
    uint16_t ucode = 0;  // \u escape digits so far
    Mode mode = Mode::kValue;
    uint8_t sub = 0;        // string: escape phase (1: after '\', 2-5: \u digits); number / literal
    uint8_t utf8_need = 0;  // pending UTF-8 continuation bytes
    uint8_t utf8_lead = 0;  // the lead byte until its first continuation arrives, then 0
    uint8_t ws = 0;         // whitespace bytes in a row
    bool want_low = false;  // a \u low surrogate must follow
    bool int_only = false;
    bool operator==(const Thread&) const = default;
  };
  static constexpr int kMaxThreads = 8;
  struct State {
    uint32_t frames = 0, words = 0, keys = 0;  // arena sizes (what a rollback restores)
    uint32_t n = 0;
    Thread t[kMaxThreads];
  };
  struct Frame {
    uint32_t parent, node, count;  // count: properties / elements completed
    uint32_t used;                 // objects: words_ offset of the used-names bitset
    uint32_t extra;                // objects: keys_ index of the newest extra key
    bool array;
  };
  struct ExtraKey {
    uint64_t hash;  // of the key's bytes (a collision only refuses a legal key)
    uint32_t next;
  };
  enum class Step : uint8_t { kReject, kContinue, kComplete, kEndedBefore };

  const JsonSchemaNode& node(uint32_t id) const { return schema_->nodes[id]; }
  static void push(State& out, const Thread& u);
  bool advance(const State& in, uint8_t c, State& out);
  bool plain_string(const Thread& t) const;
  void walk(const TokenTrie::Layer& layer, std::vector<int32_t>* out);
  void step(Thread t, uint8_t c, State& out);
  void step_structure(Thread t, uint8_t c, State& out);
  void start_value(Thread t, uint32_t node_id, uint8_t c, State& out);
  void after_value(Thread t, uint8_t c, State& out);
  Step enum_step(Thread& t, uint8_t c) const;
  bool key_byte(Thread& t, uint8_t c) const;
  bool close_key(Thread& t);
  bool only_required(const Frame& f, const JsonSchemaNode& n) const;
  bool free_name(const Frame& f, const JsonSchemaNode& n, uint32_t lo, uint32_t hi,
                 bool required) const;
  bool key_possible(const Frame& f, const JsonSchemaNode& n) const;
  bool close_ok(const Frame& f, const JsonSchemaNode& n) const;
  void finish_value(Thread& t) const;
  void pop(Thread& t) const;
  uint32_t open(uint32_t parent, uint32_t node_id, bool array);
  void rollback(const State& s);
  void compact();

  std::shared_ptr<const CompiledJsonSchema> schema_;
  State cur_;
  bool broken_ = false;
  std::vector<Frame> frames_;
  std::vector<uint64_t> words_;
  std::vector<ExtraKey> keys_;
  size_t live_ = 0;           // arena entries after the last compaction
  std::vector<State> stack_;  // collect(): one State per trie depth
};

}  // namespace gossamer::server

// Byte-level BPE model: byte strings <-> ids and the merge loop. Operates on raw bytes; the
// GPT-2 byte<->unicode mapping of tokenizer.json is undone at load time (see byte_level.h).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/status.h"
#include "tokenizer/flat_tables.h"

namespace gossamer::tok {

// Per-call memo of piece -> ids (direct-mapped, bounded). Pieces are views into the text
// being encoded, so a cache must not outlive that text; one per encode() call.
class PieceCache {
 public:
  static constexpr size_t kSlots = 4096;
  static constexpr size_t kMaxIds = 1 << 18;  // cleared when the id arena grows past this
  struct Slot {
    const char* ptr = nullptr;
    uint32_t len = 0, off = 0, n = 0;
  };
  PieceCache() : slots_(kSlots) {}

 private:
  friend class BpeModel;
  std::vector<Slot> slots_;
  std::vector<int32_t> ids_;
};

class BpeModel {
 public:
  // vocab: (raw bytes, id) pairs; merges: (left bytes, right bytes) in rank order.
  // Errors name the offending entry (duplicate id/bytes, merge of unknown tokens, missing
  // single-byte tokens).
  static Result<BpeModel> build(const std::vector<std::pair<std::string, int32_t>>& vocab,
                                const std::vector<std::pair<std::string, std::string>>& merges,
                                bool ignore_merges);

  // Appends the ids of one pre-tokenized piece (non-empty) to *out.
  void encode_piece(std::string_view piece, std::vector<int32_t>* out) const;
  // Same, memoised in *cache (worth it for long texts).
  void encode_piece(std::string_view piece, std::vector<int32_t>* out, PieceCache* cache) const;

  // The two merge strategies, exposed for tests (must agree): simple O(n^2) scan for short
  // pieces and a heap + linked list, O(n log n), for long ones. Input: initial symbol ids.
  // (merge_quadratic falls back to merge_heap above kQuadraticMax symbols.)
  void merge_quadratic(std::vector<int32_t>* syms) const;
  void merge_heap(std::vector<int32_t>* syms) const;

  // -1 when the byte string is not a token.
  int32_t find(std::string_view bytes) const { return by_bytes_.find(bytes); }
  int32_t byte_token(uint8_t b) const { return byte_ids_[b]; }
  // Raw bytes of a model token; empty when id is not a model token.
  std::string_view bytes_of(int32_t id) const {
    if (id < 0 || static_cast<size_t>(id) + 1 >= offsets_.size()) return {};
    return std::string_view(arena_).substr(offsets_[id], offsets_[id + 1] - offsets_[id]);
  }
  bool has_id(int32_t id) const {
    return id >= 0 && static_cast<size_t>(id) < present_.size() && present_[id];
  }
  int32_t max_id() const { return static_cast<int32_t>(present_.size()) - 1; }
  size_t num_merges() const { return merges_.size(); }

  static constexpr size_t kQuadraticMax = 48;  // pieces up to this many bytes use the scan

 private:
  // In-place O(n^2) merge of n <= kQuadraticMax symbols; returns the new count.
  size_t merge_small(int32_t* syms, size_t n) const;

  StringIdMap by_bytes_;
  PairMap merges_;
  std::string arena_;              // all token bytes, by id
  std::vector<uint32_t> offsets_;  // [max_id + 2]
  std::vector<bool> present_;
  int32_t byte_ids_[256] = {};
  bool ignore_merges_ = false;
};

}  // namespace gossamer::tok

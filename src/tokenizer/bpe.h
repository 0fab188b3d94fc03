// Byte-level BPE model: byte strings <-> ids and the merge loop. Operates on raw bytes; the
// GPT-2 byte<->unicode mapping of tokenizer.json is undone at load time (see byte_level.h).
#pragma once

#include <bit>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/status.h"
#include "tokenizer/flat_tables.h"

namespace gossamer::tok {

// Per-call memo of piece -> ids (direct-mapped, bounded). Pieces of up to 16 bytes are keyed by
// their bytes (held in the slot); longer ones by a pointer into the text being encoded, so a
// cache must not outlive that text: one per encode() call (or per part in encode_parallel).
class PieceCache {
 public:
  static constexpr size_t kShortMax = 16;     // bytes of a piece keyed inline
  static constexpr uint32_t kInlineIds = 3;   // ids held in the slot itself
  static constexpr size_t kMaxIds = 1 << 18;  // cleared when the id arena grows past this
  // Sized for a text of text_bytes: about one short slot per 16 bytes, 2^10..2^15 slots
  // (32 KB..1 MB), a quarter as many long slots.
  explicit PieceCache(size_t text_bytes) {
    size_t n = size_t{1} << 10;
    while (n < (size_t{1} << 15) && n * 16 < text_bytes) n *= 2;
    short_.resize(n);
    long_.resize(n / 4);
    short_bits_ = std::countr_zero(n);
  }

 private:
  friend class BpeModel;
  struct ShortSlot {  // 32 bytes
    uint64_t k0 = 0, k1 = 0;
    uint32_t len = 0;  // 0: empty
    uint32_t n = 0;    // ids; n <= kInlineIds: in ids[], else ids[0] = offset in ids_
    int32_t ids[kInlineIds] = {};
  };
  struct LongSlot {
    const char* ptr = nullptr;
    uint32_t len = 0, off = 0, n = 0;
  };
  std::vector<ShortSlot> short_;  // [2^short_bits_]
  int short_bits_ = 0;
  std::vector<LongSlot> long_;
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
  // Same, memoised in *cache (worth it for long texts). Bytes up to `limit` (the end of the
  // text the piece is in) may be read past the piece.
  void encode_piece(std::string_view piece, const char* limit, std::vector<int32_t>* out,
                    PieceCache* cache) const;

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
  // Encodes a piece that is neither one byte nor (with ignore_merges) a whole token.
  void merge_piece(std::string_view piece, std::vector<int32_t>* out) const;
  // In-place O(n^2) merge of n <= kQuadraticMax symbols s[] with pair ranks r[0..n-2]
  // (r[i]: rank of (s[i], s[i+1]), PairMap::kNoRank when none); returns the new count.
  size_t merge_small(int32_t* s, int32_t* r, size_t n) const;
  // Same with a heap + linked list, any n; s and r are resized to the result.
  void merge_large(std::vector<int32_t>* s, std::vector<int32_t>* r) const;
  int32_t pair_rank(int32_t left, int32_t right) const { return merges_.find(left, right); }
  int32_t byte_pair_rank(uint8_t a, uint8_t b) const { return byte_pair_rank_[(a << 8) | b]; }

  StringIdMap by_bytes_;
  PairMap merges_;                       // (left, right) -> rank
  std::vector<int32_t> merged_;          // [num ranks] rank -> merged id
  std::vector<int32_t> byte_pair_rank_;  // [65536] rank of (byte_token(a), byte_token(b))
  std::string arena_;                    // all token bytes, by id
  std::vector<uint32_t> offsets_;        // [max_id + 2]
  std::vector<bool> present_;
  int32_t byte_ids_[256] = {};
  bool ignore_merges_ = false;
};

}  // namespace gossamer::tok

// Test-only: the real gpt-oss tokenizer (GOSSAMER_TEST_TOKENIZER) with the server's token
// indexes, loaded once per test binary. Members stay null when the tokenizer is missing (tests
// assert on them with the path in the message).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "server/json_matcher.h"
#include "server/tool_constraint.h"
#include "tokenizer/tokenizer.h"

namespace gossamer::server::testing {

struct TokenFixture {
  std::shared_ptr<const Tokenizer> tok;
  std::shared_ptr<const TokenPieceIndex> pieces;
  std::shared_ptr<const TokenTrie> trie;
};

inline const TokenFixture& token_fixture() {
  static const TokenFixture f = [] {
    TokenFixture x;
    auto t = Tokenizer::load(GOSSAMER_TEST_TOKENIZER);
    if (!t.ok()) return x;
    x.tok = *t;
    auto p = TokenPieceIndex::build(*x.tok);
    if (!p.ok()) return x;
    x.pieces = *p;
    auto tr = TokenTrie::build(*x.pieces, x.tok->vocab_size());
    if (tr.ok()) x.trie = *tr;
    return x;
  }();
  return f;
}

// `s` tokenized with special tokens ("<|channel|>" -> its id), by the fixture's tokenizer.
inline std::vector<int32_t> encode_specials(const std::string& s) {
  return token_fixture().tok->encode(s, true);
}

}  // namespace gossamer::server::testing

// Test-only: the real gpt-oss tokenizer (GOSSAMER_TEST_TOKENIZER) with the server's token
// indexes, loaded once per test binary. Members stay null when the tokenizer is missing (tests
// assert on them with the path in the message).
#pragma once

#include <memory>

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

}  // namespace gossamer::server::testing

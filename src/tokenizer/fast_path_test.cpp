// Differential tests of the encode fast paths against slower independent paths: safe cuts vs
// PCRE2 on both sides of the cut, encode (o200k scanner, piece cache, O(n^2) merge with the
// byte-pair table) vs PCRE2 + heap merge without cache on the real gpt-oss tokenizer,
// encode_parallel vs encode, and the hash tables vs std containers. Random inputs are seeded
// from random_device (seed printed).
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <unordered_map>

#include "common/thread_pool.h"
#include "tokenizer/o200k_splitter.h"
#include "tokenizer/test_text.h"
#include "tokenizer/tokenizer_impl.h"

namespace gossamer::tok {
namespace {

std::vector<std::string_view> pcre_split(const Splitter& sp, std::string_view s) {
  std::vector<std::string_view> v;
  if (!s.empty()) sp.split(s, &v);
  return v;
}

TEST(SafeCuts, PiecesOnBothSidesMatchPcre2) {
  auto pcre = RegexSplitter::create(kO200kPattern);
  ASSERT_TRUE(pcre.ok()) << pcre.status().ToString();
  O200kSplitter fast;
  std::mt19937 rng(seed_from_device("safe cuts"));
  size_t cuts = 0;
  for (int it = 0; it < 2000; ++it) {
    const std::string s = random_text(rng, 2 + rng() % 80);
    const auto whole = pcre_split(**pcre, s);
    for (size_t p = fast.next_safe_cut(s, 0); p != std::string_view::npos;
         p = fast.next_safe_cut(s, p + 1)) {
      ASSERT_GT(p, 0u);
      ASSERT_LT(p, s.size());
      auto parts = pcre_split(**pcre, std::string_view(s).substr(0, p));
      const auto right = pcre_split(**pcre, std::string_view(s).substr(p));
      parts.insert(parts.end(), right.begin(), right.end());
      std::vector<std::string> a(parts.begin(), parts.end()), b(whole.begin(), whole.end());
      ASSERT_EQ(a, b) << "cut at byte " << p << " of: " << s;
      ++cuts;
    }
  }
  EXPECT_GT(cuts, 1000u);  // the rule must actually find cuts in this text
}

TEST(SafeCuts, HandChecked) {
  O200kSplitter sp;
  const auto first = [&](std::string_view s) { return sp.next_safe_cut(s, 0); };
  EXPECT_EQ(first("ab\ncd"), 3u);                       // after '\n' before a letter
  EXPECT_EQ(first("ab\n/cd"), std::string_view::npos);  // never before '/' (A4's [\r\n/]*)
  EXPECT_EQ(first("x\n  y"), std::string_view::npos);   // never before whitespace
  EXPECT_EQ(first("foo bar"), 3u);                      // before ' ' between ASCII letters
  EXPECT_EQ(first("foo  bar"), std::string_view::npos);
}

TEST(SafeCuts, SplitSomeBatchesEqualSplit) {
  O200kSplitter sp;
  std::mt19937 rng(seed_from_device("split_some"));
  for (int it = 0; it < 500; ++it) {
    const std::string s = random_text(rng, 1 + rng() % 80);
    std::vector<std::string_view> whole, batched;
    sp.split(s, &whole);
    for (size_t pos = 0; pos < s.size();) {
      const size_t before = batched.size(), want = 1 + rng() % 4;
      pos = sp.split_some(s, pos, want, &batched);
      ASSERT_TRUE(batched.size() - before == want || pos == s.size());
    }
    ASSERT_EQ(batched, whole) << s;
  }
}

// The real tokenizer, loaded once for the suite (skipped when the file is absent).
class RealTokenizer : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const std::string path = GOSSAMER_TEST_TOKENIZER;
    if (!std::filesystem::exists(path)) return;
    auto t = Tokenizer::load(path);
    ASSERT_TRUE(t.ok()) << t.status().ToString();
    tok_ = *t;
  }
  static void TearDownTestSuite() { tok_.reset(); }
  void SetUp() override {
    if (!tok_) GTEST_SKIP() << "no tokenizer at " << GOSSAMER_TEST_TOKENIZER;
  }
  const BpeTokenizer& bpe() const { return static_cast<const BpeTokenizer&>(*tok_); }
  static std::shared_ptr<const Tokenizer> tok_;
};
std::shared_ptr<const Tokenizer> RealTokenizer::tok_;

// Long random text with repeated words (so the piece cache hits) and fresh ones.
std::string long_text(std::mt19937& rng, size_t bytes) {
  std::vector<std::string> words;
  for (int i = 0; i < 200; ++i) words.push_back(random_text(rng, 1 + rng() % 8));
  std::string s;
  while (s.size() < bytes) s += rng() % 3 ? words[rng() % words.size()] : random_text(rng, 20);
  return s;
}

TEST_F(RealTokenizer, EncodeMatchesPcre2AndHeapMergeWithoutCache) {
  auto pcre = RegexSplitter::create(kO200kPattern);
  ASSERT_TRUE(pcre.ok());
  const BpeModel& m = bpe().model();
  const auto reference = [&](std::string_view s) {
    std::vector<int32_t> ids;
    for (std::string_view piece : pcre_split(**pcre, s)) {
      if (const int32_t id = m.find(piece); id >= 0) {  // ignore_merges
        ids.push_back(id);
        continue;
      }
      std::vector<int32_t> syms;
      for (char c : piece) syms.push_back(m.byte_token(static_cast<uint8_t>(c)));
      m.merge_heap(&syms);
      ids.insert(ids.end(), syms.begin(), syms.end());
    }
    return ids;
  };
  std::mt19937 rng(seed_from_device("fast path"));
  for (int it = 0; it < 300; ++it) {  // short texts: no piece cache
    const std::string s = random_text(rng, 1 + rng() % 100);
    ASSERT_EQ(tok_->encode(s), reference(s)) << s;
  }
  for (int it = 0; it < 6; ++it) {  // long texts: piece cache, 16-byte key loads near the end
    const std::string s = long_text(rng, 5000 + rng() % 30000);
    ASSERT_EQ(tok_->encode(s), reference(s));
  }
}

TEST_F(RealTokenizer, QuadraticAndHeapMergesAgreeOnRandomBytes) {
  const BpeModel& m = bpe().model();
  std::mt19937 rng(seed_from_device("merges"));
  for (int it = 0; it < 3000; ++it) {
    const std::string s = random_text(rng, 1 + rng() % 20);
    std::vector<int32_t> a;
    for (char c : s) a.push_back(m.byte_token(static_cast<uint8_t>(c)));
    std::vector<int32_t> b = a;
    m.merge_quadratic(&a);
    m.merge_heap(&b);
    ASSERT_EQ(a, b) << s;
  }
}

TEST_F(RealTokenizer, ParallelEncodeEqualsEncode) {
  ThreadPool pool(3);
  std::mt19937 rng(seed_from_device("parallel"));
  for (int it = 0; it < 4; ++it) {
    std::string s = long_text(rng, 70000 + rng() % 100000);
    for (int k = 0; k < 20; ++k) {  // added-token texts and invalid bytes at random places
      const size_t at = rng() % s.size();
      s.insert(at,
               rng() % 2 ? "<|start|>" : std::string(1, static_cast<char>(0x80 + rng() % 0x80)));
    }
    for (const bool special : {false, true}) {
      EXPECT_GT(bpe().cut_parts(s, special, 16 * 1024).size(), 3u);
      ASSERT_EQ(tok_->encode_parallel(s, special, &pool), tok_->encode(s, special));
    }
  }
  EXPECT_EQ(tok_->encode_parallel("short", false, nullptr), tok_->encode("short"));
}

TEST(FlatTables, StringIdMapMatchesUnorderedMap) {
  std::mt19937 rng(seed_from_device("string map"));
  StringIdMap map;
  std::unordered_map<std::string, int32_t> ref;
  const auto key = [&] {
    std::string k(1 + rng() % 20, '\0');
    for (char& c : k) c = static_cast<char>(rng() % 4 == 0 ? 0 : rng() % 6);  // shared heads
    return k;
  };
  for (int32_t i = 0; i < 5000; ++i) {
    const std::string k = key();
    EXPECT_EQ(map.insert(k, i), ref.emplace(k, i).second);
  }
  for (int i = 0; i < 20000; ++i) {
    const std::string k = key();
    const auto it = ref.find(k);
    ASSERT_EQ(map.find(k), it == ref.end() ? -1 : it->second) << i;
  }
}

TEST(FlatTables, PairMapMatchesStdMap) {
  std::mt19937 rng(seed_from_device("pair map"));
  PairMap map;
  std::map<std::pair<int32_t, int32_t>, int32_t> ref;
  for (int32_t r = 0; r < 20000; ++r) {
    const int32_t a = static_cast<int32_t>(rng() % 300), b = static_cast<int32_t>(rng() % 300);
    map.insert_or_assign(a, b, r);
    ref[{a, b}] = r;
  }
  for (int i = 0; i < 50000; ++i) {
    const int32_t a = static_cast<int32_t>(rng() % 320), b = static_cast<int32_t>(rng() % 320);
    const auto it = ref.find({a, b});
    ASSERT_EQ(map.find(a, b), it == ref.end() ? PairMap::kNoRank : it->second);
  }
}

}  // namespace
}  // namespace gossamer::tok

// Unit tests of the tokenizer pieces. Exactness against HF tokenizers / tiktoken is checked
// by tests/python/test_tokenizer.py; here: the o200k splitter against PCRE2 running the same
// regex, the two BPE merge strategies against each other, UTF-8 rules, loader errors, and
// the streaming decoder. Random inputs are seeded from random_device (seed printed).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <random>

#include "common/fifo_test_util.h"
#include "tokenizer/o200k_splitter.h"
#include "tokenizer/test_text.h"
#include "tokenizer/tokenizer_impl.h"
#include "tokenizer/utf8.h"

namespace gossamer::tok {
namespace {

TEST(O200kSplitter, MatchesPcre2OnTheSameRegex) {
  auto pcre = RegexSplitter::create(kO200kPattern);
  ASSERT_TRUE(pcre.ok()) << pcre.status().ToString();
  O200kSplitter fast;
  std::mt19937 rng(seed_from_device("splitter"));
  int mismatches = 0;
  for (int it = 0; it < 3000; ++it) {
    const std::string s = random_text(rng, 1 + rng() % 60);
    std::vector<std::string_view> a, b;
    fast.split(s, &a);
    (*pcre)->split(s, &b);
    if (a != b && ++mismatches <= 3) ADD_FAILURE() << "split differs on: " << s;
  }
  EXPECT_EQ(mismatches, 0);
}

TEST(O200kSplitter, HandCheckedPieces) {
  O200kSplitter sp;
  const auto split = [&](std::string_view s) {
    std::vector<std::string_view> v;
    sp.split(s, &v);
    return std::vector<std::string>(v.begin(), v.end());
  };
  using V = std::vector<std::string>;
  EXPECT_EQ(split("Hello world"), (V{"Hello", " world"}));
  EXPECT_EQ(split("don't STOP'S"), (V{"don't", " STOP'S"}));
  EXPECT_EQ(split("12345"), (V{"123", "45"}));
  EXPECT_EQ(split("a  b"), (V{"a", " ", " b"}));
  EXPECT_EQ(split("x \n\n y"), (V{"x", " \n\n", " y"}));
  EXPECT_EQ(split("end   "), (V{"end", "   "}));
  EXPECT_EQ(split("a//\nb"), (V{"a", "//\n", "b"}));
  EXPECT_EQ(split("HTTPServer"), (V{"HTTPServer"}));
  EXPECT_EQ(split(" !?"), (V{" !?"}));
}

TEST(Utf8, ValidityAndMaximalSubparts) {
  EXPECT_EQ(utf8::valid_prefix_len("ab\xC3\xA9z"), 5u);
  EXPECT_EQ(utf8::valid_prefix_len("a\xC0\xAF"), 1u);          // overlong
  EXPECT_EQ(utf8::valid_prefix_len("a\xED\xA0\x80"), 1u);      // surrogate
  EXPECT_EQ(utf8::valid_prefix_len("a\xF4\x90\x80\x80"), 1u);  // > U+10FFFF
  EXPECT_EQ(utf8::sanitize("a\xE2\x82z"), "a\xEF\xBF\xBDz");   // one U+FFFD for E2 82
  EXPECT_EQ(utf8::sanitize("\xC0\xAF"), "\xEF\xBF\xBD\xEF\xBF\xBD");
  EXPECT_TRUE(utf8::is_incomplete_prefix("\xF0\x9F\x98", 0));
  EXPECT_FALSE(utf8::is_incomplete_prefix("\xF0\x8F", 0));
}

// A tiny byte-level tokenizer.json: all 256 bytes plus "ab", "abc", merges a+b, ab+c.
std::string tiny_json(const std::string& extra_merge = "") {
  std::string vocab;
  for (int b = 0; b < 256; ++b) {
    const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
    std::string key;
    uint32_t cp = static_cast<uint32_t>(b);
    if (!printable) {
      int k = 0;
      for (int c = 0; c < b; ++c) {
        if (!((c >= 0x21 && c <= 0x7E) || (c >= 0xA1 && c <= 0xAC) || c >= 0xAE)) ++k;
      }
      cp = 256 + k;
    }
    utf8::append_code_point(&key, cp);
    if (key == "\"" || key == "\\") key = "\\" + key;
    vocab += "\"" + key + "\": " + std::to_string(b) + ", ";
  }
  vocab += "\"ab\": 256, \"abc\": 257";
  return R"({"normalizer": null, "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false,
    "use_regex": true}, "added_tokens": [{"id": 300, "content": "<|x|>", "special": true}],
    "model": {"type": "BPE", "vocab": {)" +
         vocab + R"(}, "merges": [["a", "b"], ["ab", "c"])" + extra_merge + "]}}";
}

TEST(Loader, TinyTokenizerEncodesAndDecodes) {
  auto tok = Tokenizer::load_from_json(tiny_json(), "tiny");
  ASSERT_TRUE(tok.ok()) << tok.status().ToString();
  // Pieces "abc" and " ab" (GPT-2 regex); " ab" has no token, so a+b merges inside it.
  EXPECT_EQ((*tok)->encode("abc ab"), (std::vector<int32_t>{257, ' ', 256}));
  EXPECT_EQ((*tok)->encode("abc<|x|>", true), (std::vector<int32_t>{257, 300}));
  EXPECT_EQ((*tok)->vocab_size(), 301);
  EXPECT_EQ(*(*tok)->decode({257, 300, 'z'}), "abc<|x|>z");
  EXPECT_FALSE((*tok)->decode({299}).ok());
  EXPECT_TRUE((*tok)->is_special(300));
  EXPECT_EQ((*tok)->special_id("<|x|>"), 300);
}

TEST(Loader, ErrorsNameTheProblem) {
  const auto err = [](const std::string& json) {
    auto r = Tokenizer::load_from_json(json, "t.json");
    return r.ok() ? std::string("OK") : r.status().message();
  };
  EXPECT_NE(err("{").find("not valid JSON"), std::string::npos);
  EXPECT_NE(err(tiny_json(R"(, ["q", "zz"])")).find("model.merges[2]"), std::string::npos);
  EXPECT_NE(err(R"({"model": {"type": "WordPiece"}, "pre_tokenizer": {"type": "ByteLevel"}})")
                .find("WordPiece"),
            std::string::npos);
  EXPECT_NE(err(R"({"model": {}, "normalizer": {"type": "NFC"}})").find("NFC"), std::string::npos);
  auto missing = Tokenizer::load("/nonexistent/tokenizer.json");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("/nonexistent/tokenizer.json"), std::string::npos);
}

// The message of load_from_json's error, or "OK".
std::string load_error(const std::string& json) {
  auto r = Tokenizer::load_from_json(json, "t.json");
  return r.ok() ? std::string("OK") : r.status().message();
}

std::string deep_array(size_t n) {
  return std::string(n, '[') + std::string(n, ']');
}

// tiny_json() with its pre_tokenizer replaced by `pt`.
std::string with_pretokenizer(const std::string& pt) {
  std::string j = tiny_json();
  const std::string old = R"({"type": "ByteLevel", "add_prefix_space": false,
    "use_regex": true})";
  return j.replace(j.find(old), old.size(), pt);
}

TEST(Loader, FifoDirectoryAndDeviceAreErrorsNamingThePath) {
  const auto dir =
      std::filesystem::temp_directory_path() / ("gossamer_tok_load_" + std::to_string(getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir / "tokenizer.json");
  {
    testing::ScopedFifo fifo(dir / "fifo.json");  // must not wait for a writer
    ASSERT_TRUE(fifo.ok());
    for (const std::string& p :
         {fifo.path(), (dir / "tokenizer.json").string(), std::string("/dev/null")}) {
      auto r = Tokenizer::load(p);
      ASSERT_FALSE(r.ok()) << p;
      EXPECT_EQ(r.status().code(), StatusCode::kIo);
      EXPECT_NE(r.status().message().find(p + ": not a regular file"), std::string::npos)
          << r.status().message();
    }
  }
  std::ofstream(dir / "good.json") << tiny_json();
  auto ok = Tokenizer::load((dir / "good.json").string());
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ((*ok)->encode("abc"), std::vector<int32_t>{257});
  std::filesystem::remove_all(dir);
}

TEST(Loader, DeeplyNestedValuesAreErrorsNotStackOverflows) {
  const std::string deep = deep_array(100000);
  EXPECT_NE(load_error(R"({"pre_tokenizer": {"type": "ByteLevel"}, "model": )" + deep + "}")
                .find("model.type"),
            std::string::npos);
  std::string seq;  // Sequence inside Sequence, 100000 deep
  for (int i = 0; i < 100000; ++i) seq += R"({"type": "Sequence", "pretokenizers": [)";
  seq += R"({"type": "ByteLevel"})";
  for (int i = 0; i < 100000; ++i) seq += "]}";
  EXPECT_NE(load_error(with_pretokenizer(seq)).find("Sequence nested more than 32 deep"),
            std::string::npos);
  const std::string split = R"({"type": "Split", "behavior": "Isolated", "pattern": )";
  EXPECT_NE(load_error(with_pretokenizer(split + deep + "}")).find("pre_tokenizer.pattern"),
            std::string::npos);
  EXPECT_NE(load_error(with_pretokenizer(R"({"type": "Split", "behavior": )" + deep + "}"))
                .find("only Split with behavior Isolated"),
            std::string::npos);
  std::string j = tiny_json();  // deep values where strings, ids or booleans belong
  EXPECT_NE(load_error(j.replace(j.find("\"ab\": 256"), 9, "\"ab\": " + deep))
                .find(R"(model.vocab["ab"])"),
            std::string::npos);
  j = tiny_json();
  EXPECT_NE(load_error(j.replace(j.find("\"special\": true"), 15, "\"special\": " + deep))
                .find("added_tokens[0].special: not a boolean"),
            std::string::npos);
  j = tiny_json();
  EXPECT_NE(load_error(j.replace(j.find(R"(["a", "b"])"), 10, deep)).find("model.merges[0]"),
            std::string::npos);
}

TEST(Loader, WrongTypesAndHugeIdsAreErrors) {
  EXPECT_NE(load_error(with_pretokenizer(R"({"type": "ByteLevel", "add_prefix_space": "no"})"))
                .find("pre_tokenizer.add_prefix_space: not a boolean"),
            std::string::npos);
  EXPECT_NE(load_error(with_pretokenizer(R"({"type": "ByteLevel", "use_regex": 1})"))
                .find("pre_tokenizer.use_regex: not a boolean"),
            std::string::npos);
  std::string j = tiny_json();
  EXPECT_NE(load_error(j.replace(j.find("\"id\": 300"), 9, "\"id\": 4294967596"))
                .find("added_tokens[0]: needs an integer id"),
            std::string::npos);
  for (const char* huge : {"2147483647", "2000000000", "2097151"}) {  // sized by the ids
    j = tiny_json();
    EXPECT_NE(load_error(j.replace(j.find("\"id\": 300"), 9, std::string("\"id\": ") + huge))
                  .find("above the largest supported token id"),
              std::string::npos)
        << huge;
  }
  j = tiny_json();
  EXPECT_NE(load_error(j.replace(j.find("\"ab\": 256"), 9, "\"ab\": -3"))
                .find(R"(model.vocab["ab"]: id is not an integer)"),
            std::string::npos);
  j = tiny_json();  // in range for int32 but far beyond any vocab: no giant allocation
  EXPECT_NE(load_error(j.replace(j.find("\"ab\": 256"), 9, "\"ab\": 2147483647"))
                .find("tokens or merges"),
            std::string::npos);
  j = tiny_json();
  const std::string bpe = R"("type": "BPE",)";
  EXPECT_NE(load_error(j.replace(j.find(bpe), bpe.size(), bpe + R"( "ignore_merges": "yes",)"))
                .find("model.ignore_merges: not a boolean"),
            std::string::npos);
  // A Split (then ByteLevel) with invert 0, false or absent.
  const auto split = [](const std::string& invert) {
    return with_pretokenizer(R"({"type": "Sequence", "pretokenizers": [{"type": "Split", )" +
                             invert + R"("behavior": "Isolated", "pattern": {"String": " "}},
        {"type": "ByteLevel"}]})");
  };
  EXPECT_NE(load_error(split(R"("invert": 0, )")).find("pretokenizers[0].invert: not a boolean"),
            std::string::npos);
  EXPECT_EQ(load_error(split(R"("invert": false, )")), "OK");
  EXPECT_EQ(load_error(split("")), "OK");
}

TEST(Bpe, QuadraticAndHeapMergesAgree) {
  auto tok = Tokenizer::load_from_json(tiny_json(), "tiny");
  ASSERT_TRUE(tok.ok());
  const auto& model = static_cast<const BpeTokenizer&>(**tok).model();
  std::mt19937 rng(seed_from_device("bpe"));
  for (int it = 0; it < 2000; ++it) {
    std::vector<int32_t> a(1 + rng() % BpeModel::kQuadraticMax);
    for (auto& x : a) x = "abcx"[rng() % 4];
    std::vector<int32_t> b = a;
    model.merge_quadratic(&a);
    model.merge_heap(&b);
    ASSERT_EQ(a, b);
  }
}

TEST(IncrementalDecoder, NeverSplitsCharactersNorDropsBytes) {
  auto tok = Tokenizer::load_from_json(tiny_json(), "tiny");
  ASSERT_TRUE(tok.ok());
  std::mt19937 rng(seed_from_device("stream"));
  for (int it = 0; it < 500; ++it) {
    std::string bytes = random_text(rng, 1 + rng() % 20);
    if (rng() % 3 == 0) bytes.insert(rng() % (bytes.size() + 1), 1, static_cast<char>(rng()));
    IncrementalDecoder dec(*tok);
    std::string out;
    for (char c : bytes) {  // single-byte tokens: id == byte value in the tiny vocab
      auto piece = dec.push(static_cast<uint8_t>(c));
      ASSERT_TRUE(piece.ok());
      ASSERT_EQ(utf8::valid_prefix_len(*piece), piece->size());
      out += *piece;
    }
    out += dec.flush();
    EXPECT_EQ(out, utf8::sanitize(bytes));
  }
  IncrementalDecoder dec(*tok);
  EXPECT_FALSE(dec.push(1000).ok());
}

}  // namespace
}  // namespace gossamer::tok

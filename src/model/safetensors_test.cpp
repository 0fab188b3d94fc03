// safetensors reader: happy paths (single, set, sharded) read back independently generated
// bytes; every corruption case must give an error naming the file and tensor/offset.
#include "model/safetensors.h"

#include <gtest/gtest.h>

#include <cstring>
#include <initializer_list>

#include "model/st_test_util.h"

namespace gossamer {
namespace {

using nlohmann::json;
using testing::expect_error;
using testing::random_bytes;
using testing::st_file;
using testing::st_raw;
using testing::StTensor;
using testing::TempDir;

// Opens a single file holding `bytes` and expects an error naming the file and `needles`.
void expect_file_error(const std::string& bytes, std::initializer_list<std::string> needles) {
  TempDir dir;
  const std::string path = dir.write("bad.safetensors", bytes);
  auto r = TensorStore::open_file(path);
  expect_error(r, {path});
  expect_error(r, needles);
}

std::string entry_header(const std::string& name, const std::string& dtype, json shape,
                         json offsets) {
  json h;
  h[name] = {{"dtype", dtype}, {"shape", shape}, {"data_offsets", offsets}};
  return h.dump();
}

TEST(Safetensors, SingleFileValues) {
  auto rng = testing::seeded_rng("SingleFileValues");
  std::vector<StTensor> ts = {{"a.bf16", "BF16", {3, 5}, random_bytes(30, rng)},
                              {"b.f32", "F32", {4}, random_bytes(16, rng)},
                              {"c.u8", "U8", {2, 3, 16}, random_bytes(96, rng)},
                              {"d.i64", "I64", {2}, random_bytes(16, rng)},
                              {"e.empty", "F16", {0, 7}, ""},
                              {"f.scalar", "F32", {}, random_bytes(4, rng)}};
  TempDir dir;
  const std::string path =
      dir.write("model.safetensors", st_file(ts, {{"format", "pt"}, {"note", "x"}}));
  auto r = TensorStore::open_file(path);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const TensorStore& s = **r;
  EXPECT_EQ(s.size(), ts.size());
  EXPECT_EQ(s.metadata(0).at("format"), "pt");
  EXPECT_EQ(s.metadata(0).at("note"), "x");
  const char* const kDt[] = {"BF16", "F32", "U8", "I64", "F16", "F32"};
  for (size_t i = 0; i < ts.size(); ++i) {
    auto t = s.get(ts[i].name);
    ASSERT_TRUE(t.ok()) << t.status().ToString();
    EXPECT_EQ(t->shape, ts[i].shape);
    EXPECT_STREQ(dtype_name(t->dtype), kDt[i]);
    ASSERT_EQ(static_cast<size_t>(t->numel() * dtype_size(t->dtype)), ts[i].bytes.size());
    EXPECT_EQ(0, std::memcmp(t->data, ts[i].bytes.data(), ts[i].bytes.size()));
    EXPECT_EQ(s.file_of(ts[i].name), path);
  }
  // get(): bf16 is the top half of an f32; f32 is read as-is.
  auto a = *s.get("a.bf16");
  for (int i = 0; i < 15; ++i) {
    uint32_t u = (static_cast<uint8_t>(ts[0].bytes[2 * i + 1]) << 24) |
                 (static_cast<uint8_t>(ts[0].bytes[2 * i]) << 16);
    float f;
    std::memcpy(&f, &u, 4);
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(a.get(i)));
    } else {
      EXPECT_EQ(a.get(i), f);
    }
  }
  expect_error(s.get("nope"), {"'nope'", path});
}

TEST(Safetensors, HolesAndTrailingBytesTolerated) {
  std::string data(64, '\x01');
  json h;
  h["x"] = {{"dtype", "F32"}, {"shape", {2}}, {"data_offsets", {8, 16}}};
  h["y"] = {{"dtype", "U8"}, {"shape", {4}}, {"data_offsets", {32, 36}}};
  TempDir dir;
  auto r = TensorStore::open_file(dir.write("h.safetensors", st_raw(h.dump(), data)));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ((*r)->size(), 2u);
}

TEST(Safetensors, TruncatedFile) {
  for (size_t n = 0; n < 8; ++n) expect_file_error(std::string(n, '\0'), {"too short"});
}

TEST(Safetensors, HeaderLengthPastEof) {
  std::string f = st_raw("{}", "");
  f[0] = 100;  // claims 100 header bytes, file has 2
  expect_file_error(f, {"header length 100", "past the end", "byte offset 0"});
  std::string g(16, '\0');
  g[5] = 0x7f;  // absurd length
  expect_file_error(g, {"header length", "exceeds"});
}

TEST(Safetensors, HeaderNotJson) {
  expect_file_error(st_raw("{\"a\": ", ""), {"not valid JSON"});
  expect_file_error(st_raw("[1, 2]", ""), {"not a JSON object"});
  expect_file_error(st_raw("", ""), {"not a JSON object"});
  expect_file_error(st_raw("{\"a\": 1}", ""), {"'a'", "not an object"});
}

TEST(Safetensors, UnknownDtype) {
  expect_file_error(st_raw(entry_header("w", "F4", {4}, {0, 2}), "xx"), {"'w'", "F4"});
}

TEST(Safetensors, ShapeByteSizeMismatch) {
  expect_file_error(st_raw(entry_header("w", "F32", {2, 3}, {0, 20}), std::string(24, 0)),
                    {"'w'", "[2, 3]", "needs 24"});
  expect_file_error(st_raw(entry_header("w", "F32", {-1}, {0, 4}), std::string(4, 0)),
                    {"'w'", "shape"});
  expect_file_error(st_raw(entry_header("w", "U8", {int64_t{1} << 40, int64_t{1} << 40}, {0, 4}),
                           std::string(4, 0)),
                    {"'w'", "overflows"});
}

TEST(Safetensors, OffsetsOutOfRange) {
  expect_file_error(st_raw(entry_header("w", "U8", {8}, {4, 12}), std::string(10, 0)),
                    {"'w'", "[4, 12]", "past the end", "file size"});
  expect_file_error(st_raw(entry_header("w", "U8", {0}, {5, 4}), std::string(10, 0)),
                    {"'w'", "end before begin"});
  expect_file_error(st_raw(entry_header("w", "U8", {1}, json::array({0})), std::string(10, 0)),
                    {"'w'", "data_offsets"});
}

TEST(Safetensors, OverlappingOffsets) {
  json h;
  h["first"] = {{"dtype", "U8"}, {"shape", {8}}, {"data_offsets", {0, 8}}};
  h["second"] = {{"dtype", "U8"}, {"shape", {8}}, {"data_offsets", {4, 12}}};
  expect_file_error(st_raw(h.dump(), std::string(16, 0)),
                    {"'first'", "'second'", "overlap", "offset 4"});
}

TEST(Safetensors, DuplicateKeyAndBadMetadata) {
  const std::string e = R"({"dtype":"U8","shape":[1],"data_offsets":[0,1]})";
  expect_file_error(st_raw("{\"w\":" + e + ",\"w\":" + e + "}", "x"), {"'w'", "twice"});
  expect_file_error(st_raw(R"({"__metadata__":{"a":1}})", ""), {"__metadata__", "'a'"});
  expect_file_error(st_raw(R"({"__metadata__":[]})", ""), {"__metadata__"});
}

TEST(Safetensors, ShardedIndex) {
  auto rng = testing::seeded_rng("ShardedIndex");
  std::vector<StTensor> s1 = {{"a", "BF16", {4, 4}, random_bytes(32, rng)},
                              {"b", "U8", {3}, random_bytes(3, rng)}};
  std::vector<StTensor> s2 = {{"c", "F32", {2, 2}, random_bytes(16, rng)}};
  TempDir dir;
  dir.write("model-00001-of-00002.safetensors", st_file(s1));
  dir.write("model-00002-of-00002.safetensors", st_file(s2));
  json index = {{"metadata", {{"total_size", 51}}},
                {"weight_map",
                 {{"a", "model-00001-of-00002.safetensors"},
                  {"b", "model-00001-of-00002.safetensors"},
                  {"c", "model-00002-of-00002.safetensors"}}}};
  dir.write("model.safetensors.index.json", index.dump());
  auto r = TensorStore::open_dir(dir.str());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ((*r)->names(), (std::vector<std::string>{"a", "b", "c"}));
  for (const auto* set : {&s1, &s2}) {
    for (const StTensor& t : *set) {
      auto ref = (*r)->get(t.name);
      ASSERT_TRUE(ref.ok());
      EXPECT_EQ(0, std::memcmp(ref->data, t.bytes.data(), t.bytes.size())) << t.name;
    }
  }
  EXPECT_EQ((*r)->file_of("c"), dir.path("model-00002-of-00002.safetensors"));

  // Index pointing to a missing shard.
  index["weight_map"]["d"] = "model-00003-of-00002.safetensors";
  dir.write("model.safetensors.index.json", index.dump());
  expect_error(TensorStore::open_dir(dir.str()),
               {"model.safetensors.index.json", "model-00003-of-00002.safetensors", "'d'"});
  // Index naming a tensor its shard does not hold.
  index["weight_map"]["d"] = "model-00002-of-00002.safetensors";
  dir.write("model.safetensors.index.json", index.dump());
  expect_error(TensorStore::open_dir(dir.str()), {"'d'", "model-00002-of-00002.safetensors"});
  // Shard names must stay inside the directory.
  index["weight_map"]["d"] = "../evil.safetensors";
  dir.write("model.safetensors.index.json", index.dump());
  expect_error(TensorStore::open_dir(dir.str()), {"../evil.safetensors", "plain file name"});
  dir.write("model.safetensors.index.json", "{\"weight_map\": 3}");
  expect_error(TensorStore::open_dir(dir.str()), {"weight_map"});
}

TEST(Safetensors, FileSetAndDuplicates) {
  auto rng = testing::seeded_rng("FileSetAndDuplicates");
  TempDir dir;
  const std::string a =
      dir.write("x1.safetensors", st_file({{"t1", "U8", {5}, random_bytes(5, rng)}}));
  const std::string b =
      dir.write("x2.safetensors", st_file({{"t2", "U8", {6}, random_bytes(6, rng)}}));
  auto r = TensorStore::open_dir(dir.str());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ((*r)->files(), (std::vector<std::string>{a, b}));
  dir.write("x3.safetensors", st_file({{"t1", "U8", {1}, "z"}}));
  expect_error(TensorStore::open_dir(dir.str()), {"'t1'", a, dir.path("x3.safetensors")});
  TempDir empty;
  expect_error(TensorStore::open_dir(empty.str()), {empty.str(), "no *.safetensors"});
  expect_error(TensorStore::open_file(empty.path("missing.safetensors")), {"missing.safetensors"});
}

// Mutations of a valid file (truncation, byte flips in the length and header) must give either a
// valid store or an error, never a crash or an out-of-bounds read (run under ASan in CI).
TEST(Safetensors, MutationsNeverCrash) {
  auto rng = testing::seeded_rng("MutationsNeverCrash");
  const std::string good = st_file(
      {{"a", "BF16", {4, 4}, random_bytes(32, rng)}, {"b", "F32", {3}, random_bytes(12, rng)}},
      {{"format", "pt"}});
  int errors = 0;
  for (int iter = 0; iter < 3000; ++iter) {
    std::string f = good;
    const int kind = iter % 3;
    if (kind == 0) f.resize(rng() % good.size());
    if (kind >= 1) {
      for (int k = 0; k < 1 + static_cast<int>(rng() % 3); ++k) {
        const size_t pos = kind == 1 ? rng() % 8 : rng() % f.size();
        f[pos] = static_cast<char>(rng() & 0xff);
      }
    }
    std::vector<uint8_t> buf(f.begin(), f.end());  // exact-size heap buffer: ASan sees overreads
    auto r = parse_safetensors_header(buf.data(), buf.size(), "mut");
    if (!r.ok()) {
      ++errors;
      EXPECT_NE(r.status().message().find("mut"), std::string::npos);
      continue;
    }
    for (const TensorEntry& e : r->tensors) {
      ASSERT_LE(r->data_start + e.end, buf.size());
    }
  }
  EXPECT_GT(errors, 1000);
}

}  // namespace
}  // namespace gossamer

// Loader robustness regressions found by the black-box sweep (tests/python/
// test_checkpoint_errors_*.py): inputs that crashed (deeply nested JSON overflowing the stack),
// hung (FIFOs), or were silently accepted (a NUL byte ending the header early). Each must give
// an error naming the file, promptly.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <initializer_list>
#include <string>

#include "model/config.h"
#include "model/safetensors.h"
#include "model/st_test_util.h"

namespace gossamer {
namespace {

using testing::expect_error;
using testing::st_file;
using testing::st_raw;
using testing::StTensor;
using testing::TempDir;

std::string nested(size_t depth) {
  return std::string(depth, '[') + std::string(depth, ']');
}

void expect_header_error(const std::string& header, std::initializer_list<std::string> needles) {
  TempDir dir;
  const std::string path = dir.write("bad.safetensors", st_raw(header, std::string(8, '\0')));
  auto r = TensorStore::open_file(path);
  expect_error(r, {path});
  expect_error(r, needles);
}

// The error message used to dump() the offending shape entry, which recurses once per level.
TEST(LoaderRobustness, DeeplyNestedShapeEntryIsAnErrorNotAStackOverflow) {
  expect_header_error(
      R"({"w":{"dtype":"U8","shape":[)" + nested(200000) + R"(],"data_offsets":[0,8]}})",
      {"'w'", "shape entry an array is not a size"});
  // An overflowing shape used to dump the whole shape, including unchecked entries after it.
  expect_header_error(R"({"w":{"dtype":"U8","shape":[4294967296,4294967296,)" + nested(200000) +
                          R"(],"data_offsets":[0,8]}})",
                      {"'w'", "overflows"});
  expect_header_error(R"({"w":{"dtype":"U8","shape":[")" + std::string(100000, 'x') +
                          R"("],"data_offsets":[0,8]}})",
                      {"'w'", "shape entry \"xxx"});
}

// nlohmann::json stops at a NUL byte as if the input ended: the rest of the header was ignored.
TEST(LoaderRobustness, NulByteInHeaderIsAnError) {
  const std::string ok = st_file({StTensor{"w", "U8", {8}, std::string(8, 'a')}});
  TempDir dir;
  ASSERT_TRUE(TensorStore::open_file(dir.write("ok.safetensors", ok)).ok());
  // Replace the space padding after the JSON object by NULs (the length stays the same).
  std::string bad = ok;
  const size_t close = bad.rfind('}', 8 + static_cast<uint8_t>(bad[0]));
  ASSERT_LT(close + 1, 8u + static_cast<uint8_t>(bad[0]));
  bad[close + 1] = '\0';
  auto r = TensorStore::open_file(dir.write("nul.safetensors", bad));
  expect_error(r, {"nul.safetensors", "NUL byte", "file byte offset " + std::to_string(close + 1)});
}

TEST(LoaderRobustness, DeeplyNestedRopeDictIsNotCopied) {
  const std::string base = config_to_json(*preset_config("tiny"));
  for (const char* key : {"\"rope_scaling\": {", "\"rope_parameters\": {"}) {
    std::string text = base;
    if (std::string(key).find("rope_parameters") != std::string::npos) {
      text.replace(text.find("\"rope_scaling\": {"), 17,
                   "\"rope_scaling\": null, \"rope_parameters\": {");
    }
    const size_t at = text.find(key) + std::string(key).size();
    text.insert(at, "\"x\": " + nested(200000) + ", ");
    auto r = parse_config_json(text, "deep/config.json");
    ASSERT_TRUE(r.ok()) << r.status().ToString();  // unknown keys of the dict are ignored
    EXPECT_EQ(r->rope_scaling.rope_type, "yarn");
  }
}

// The CPU engine refused rope_theta <= 1 (yarn divides by ln theta) while the config accepted
// any positive value: `inspect` passed and `run` failed without naming config.json.
TEST(LoaderRobustness, RopeThetaMustExceedOne) {
  const std::string base = config_to_json(*preset_config("tiny"));
  for (const char* theta : {"0.5", "1", "1.0"}) {
    std::string text = base;
    const size_t at = text.find("\"rope_theta\": ");
    text.replace(at, text.find(',', at) - at, std::string("\"rope_theta\": ") + theta);
    expect_error(parse_config_json(text, "m/config.json"), {"m/config.json", "rope_theta", "> 1"});
  }
}

TEST(LoaderRobustness, ConfigParseErrorGivesByteOffset) {
  auto r = parse_config_json("{\"a\": 1,\n \"b\" 2}", "bad/config.json");
  expect_error(r, {"bad/config.json", "not valid JSON", "byte offset 14"});
}

TEST(LoaderRobustness, IndexErrorsNameTheIndex) {
  expect_error(parse_safetensors_index("{\"weight_map\": {}}", "m/index.json"),
               {"m/index.json", "'weight_map' is empty"});
  expect_error(parse_safetensors_index("{\"weight_map\": ", "m/index.json"),
               {"m/index.json", "not valid JSON"});
  expect_error(parse_safetensors_index("[]", "m/index.json"),
               {"m/index.json", "not a JSON object"});
}

// Opening a FIFO for reading blocks until a writer appears: these calls used to hang forever.
TEST(LoaderRobustness, FifosAndDirectoriesAreErrorsNotHangs) {
  TempDir dir;
  ASSERT_EQ(::mkfifo(dir.path("model.safetensors").c_str(), 0600), 0);
  expect_error(TensorStore::open_file(dir.path("model.safetensors")),
               {"model.safetensors", "not a regular file"});
  expect_error(TensorStore::open_dir(dir.str()), {"model.safetensors", "not a regular file"});
  ASSERT_EQ(::mkfifo(dir.path("config.json").c_str(), 0600), 0);
  expect_error(load_config(dir.str()), {"config.json", "not a regular file"});
  ASSERT_EQ(::mkfifo(dir.path("model.safetensors.index.json").c_str(), 0600), 0);
  expect_error(TensorStore::open_dir(dir.str()), {"index.json", "not a regular file"});

  TempDir sharded;  // a shard that is a FIFO: was "does not exist", then would have hung
  sharded.write("model.safetensors.index.json", R"({"weight_map": {"a": "s.safetensors"}})");
  ASSERT_EQ(::mkfifo(sharded.path("s.safetensors").c_str(), 0600), 0);
  expect_error(TensorStore::open_dir(sharded.str()), {"s.safetensors", "not a regular file"});

  TempDir d2;
  std::filesystem::create_directory(d2.path("config.json"));
  expect_error(load_config(d2.str()), {"config.json", "not a regular file"});
  expect_error(load_config(d2.path("nope")), {"nope", "cannot open"});
}

}  // namespace
}  // namespace gossamer

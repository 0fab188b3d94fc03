// generation_config.json eos ids: int or list, absent file/field, and errors naming file + field
// (deeply nested values, FIFOs and directories included).
#include "server/generation_config.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "common/fifo_test_util.h"

namespace gossamer::server {
namespace {

namespace fs = std::filesystem;

struct TempDir {
  fs::path path;
  TempDir() {
    path = fs::temp_directory_path() / ("gossamer_gencfg_" + std::to_string(getpid()));
    fs::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  void write(const std::string& text) const {
    std::ofstream(path / "generation_config.json") << text;
  }
  std::string file() const { return (path / "generation_config.json").string(); }
};

TEST(GenerationConfig, IntListAndAbsent) {
  TempDir d;
  auto none = read_generation_eos(d.path.string(), 1000);
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
  d.write(R"({"bos_token_id": 1, "eos_token_id": 7})");
  EXPECT_EQ(read_generation_eos(d.path.string(), 1000).value(), std::vector<int32_t>{7});
  d.write(R"({"eos_token_id": [200002, 199999, 200012], "do_sample": true})");
  EXPECT_EQ(read_generation_eos(d.path.string(), 201088).value(),
            (std::vector<int32_t>{200002, 199999, 200012}));
  d.write(R"({"do_sample": true})");
  EXPECT_TRUE(read_generation_eos(d.path.string(), 1000).value().empty());
}

TEST(GenerationConfig, ErrorsNameFileAndField) {
  TempDir d;
  d.write("{not json");
  auto r = read_generation_eos(d.path.string(), 1000);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("generation_config.json"), std::string::npos);
  d.write(R"({"eos_token_id": [1, 5000]})");
  r = read_generation_eos(d.path.string(), 1000);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("eos_token_id[1]"), std::string::npos)
      << r.status().message();
  d.write(R"({"eos_token_id": "2"})");
  r = read_generation_eos(d.path.string(), 1000);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("eos_token_id"), std::string::npos);
  d.write(R"({"eos_token_id": -1})");
  EXPECT_FALSE(read_generation_eos(d.path.string(), 1000).ok());
}

// The error message of read_generation_eos on directory `d`, or "OK".
std::string error_of(const TempDir& d, int64_t vocab_size = 1000) {
  auto r = read_generation_eos(d.path.string(), vocab_size);
  return r.ok() ? std::string("OK") : r.status().message();
}

TEST(GenerationConfig, DeeplyNestedEosIsAnError) {
  TempDir d;
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  d.write(R"({"eos_token_id": )" + deep + "}");
  EXPECT_EQ(error_of(d), d.file() + ": eos_token_id[0] must be an integer, got an array");
  d.write(R"({"eos_token_id": [5, )" + deep + "]}");
  EXPECT_EQ(error_of(d), d.file() + ": eos_token_id[1] must be an integer, got an array");
  d.write(R"({"eos_token_id": {"a": )" + deep + "}}");
  EXPECT_EQ(error_of(d), d.file() + ": eos_token_id must be an integer, got an object");
  // Deep values elsewhere in the file are not looked at.
  d.write(R"({"unrelated": )" + deep + R"(, "eos_token_id": [3, 4]})");
  EXPECT_EQ(read_generation_eos(d.path.string(), 1000).value(), (std::vector<int32_t>{3, 4}));
}

TEST(GenerationConfig, IdsOutsideTheVocabularyNameTheValue) {
  TempDir d;
  d.write(R"({"eos_token_id": 18446744073709551615})");  // 2^64 - 1: not read as -1
  EXPECT_EQ(error_of(d), d.file() +
                             ": eos_token_id = 18446744073709551615 is outside the vocabulary "
                             "[0, 1000)");
  d.write(R"({"eos_token_id": [999, 1000]})");
  EXPECT_EQ(error_of(d), d.file() + ": eos_token_id[1] = 1000 is outside the vocabulary [0, 1000)");
  d.write(R"({"eos_token_id": [1.5]})");
  EXPECT_EQ(error_of(d), d.file() + ": eos_token_id[0] must be an integer, got 1.5");
  d.write(R"({"eos_token_id": ")" + std::string(100, 'x') + R"("})");
  EXPECT_EQ(error_of(d),
            d.file() + ": eos_token_id must be an integer, got \"" + std::string(39, 'x') + "...");
}

TEST(GenerationConfig, FifoOrDirectoryIsAnErrorNotAHang) {
  TempDir d;
  {
    testing::ScopedFifo fifo(d.file());  // must not wait for a writer
    ASSERT_TRUE(fifo.ok());
    auto r = read_generation_eos(d.path.string(), 1000);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), StatusCode::kIo);
    EXPECT_EQ(r.status().message(), d.file() + ": not a regular file");
  }
  std::filesystem::create_directory(d.file());
  EXPECT_EQ(error_of(d), d.file() + ": not a regular file");
  std::filesystem::remove(d.file());
  std::filesystem::create_symlink(d.path / "nowhere.json", d.file());  // dangling: absent
  auto r = read_generation_eos(d.path.string(), 1000);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->empty());
}

}  // namespace
}  // namespace gossamer::server

// generation_config.json eos ids: int or list, absent file/field, and errors naming file + field.
#include "server/generation_config.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

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

}  // namespace
}  // namespace gossamer::server

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>

#include "common/fifo_test_util.h"
#include "common/file_util.h"
#include "common/npy.h"
#include "common/numerics.h"
#include "common/status.h"
#include "common/thread_pool.h"

namespace gossamer {
namespace {

TEST(Numerics, Bf16HandChecked) {
  EXPECT_EQ(float_to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(float_to_bf16(-2.0f), 0xc000);
  // 1 + 2^-8 is exactly halfway between bf16 1.0 and 1.0078125: ties to even -> 1.0.
  EXPECT_EQ(float_to_bf16(1.00390625f), 0x3f80);
  // 1 + 3*2^-9 rounds up to 1.0078125 (0x3f81).
  EXPECT_EQ(float_to_bf16(1.005859375f), 0x3f81);
  EXPECT_TRUE(std::isnan(bf16_to_float(float_to_bf16(NAN))));
  EXPECT_FLOAT_EQ(bf16_to_float(0x4049), 3.140625f);
}

TEST(Numerics, Mxfp4HandChecked) {
  EXPECT_EQ(e2m1_to_float(0x7), 6.0f);
  EXPECT_EQ(e2m1_to_float(0x9), -0.5f);
  EXPECT_EQ(e8m0_to_float(127), 1.0f);
  EXPECT_EQ(e8m0_to_float(125), 0.25f);
  uint8_t packed[16] = {0x21};  // low nibble 1 (0.5), high nibble 2 (1.0)
  float out[32];
  dequant_mxfp4_block(packed, 128, out);  // scale 2
  EXPECT_EQ(out[0], 1.0f);
  EXPECT_EQ(out[1], 2.0f);
  EXPECT_EQ(out[2], 0.0f);
}

TEST(Status, ResultAndMacros) {
  auto f = [](int x) -> Result<int> {
    if (x < 0) return InvalidArgument("negative x=" + std::to_string(x));
    return x * 2;
  };
  auto g = [&](int x) -> Result<int> {
    GS_ASSIGN_OR_RETURN(int y, f(x));
    return y + 1;
  };
  EXPECT_EQ(g(3).value(), 7);
  auto r = g(-1);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("x=-1"), std::string::npos);
}

TEST(Npy, RoundTrip) {
  std::mt19937 rng(std::random_device{}());
  std::normal_distribution<float> nd;
  std::vector<float> v(3 * 7);
  for (auto& x : v) x = nd(rng);
  auto path = (std::filesystem::temp_directory_path() / "gossamer_npy_test.npy").string();
  ASSERT_TRUE(write_npy_f32(path, v.data(), {3, 7}).ok());
  auto r = read_npy_f32(path);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->shape, (std::vector<int64_t>{3, 7}));
  EXPECT_EQ(r->data, v);
  std::remove(path.c_str());
}

// A fresh directory under the system temp dir, removed with its contents.
struct TempDir {
  std::filesystem::path path;
  explicit TempDir(const std::string& tag) {
    path = std::filesystem::temp_directory_path() /
           ("gossamer_common_" + tag + "_" + std::to_string(getpid()));
    std::filesystem::remove_all(path);
    std::filesystem::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  std::string write(const std::string& name, const std::string& bytes) const {
    std::ofstream(path / name, std::ios::binary) << bytes;
    return (path / name).string();
  }
};

TEST(ReadRegularFile, ReadsEveryByte) {
  TempDir d("read");
  std::string big(300000, '\0');  // several read() calls, NUL bytes included
  std::mt19937 rng(7);
  for (char& c : big) c = static_cast<char>(rng());
  const std::string p = d.write("big.bin", big);
  auto r = read_regular_file(p);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(*r, big);
  EXPECT_EQ(read_regular_file(d.write("empty", "")).value(), "");
  std::filesystem::create_symlink(p, d.path / "link");  // symlinks are followed
  EXPECT_EQ(read_regular_file((d.path / "link").string()).value(), big);
}

TEST(ReadRegularFile, RejectsWhatIsNotARegularFile) {
  TempDir d("reject");
  const auto expect_error = [](const std::string& path, StatusCode code, const std::string& what) {
    auto r = read_regular_file(path);
    ASSERT_FALSE(r.ok()) << path;
    EXPECT_EQ(r.status().code(), code) << r.status().ToString();
    EXPECT_EQ(r.status().message().rfind(path + ": ", 0), 0u) << r.status().message();
    EXPECT_NE(r.status().message().find(what), std::string::npos) << r.status().message();
  };
  expect_error((d.path / "missing").string(), StatusCode::kNotFound, "does not exist");
  std::filesystem::create_symlink(d.path / "missing", d.path / "dangling");
  expect_error((d.path / "dangling").string(), StatusCode::kNotFound, "does not exist");
  const std::string file = d.write("file", "x");
  expect_error(file + "/below", StatusCode::kNotFound, "does not exist");
  std::filesystem::create_directory(d.path / "dir");
  expect_error((d.path / "dir").string(), StatusCode::kIo, "not a regular file");
  testing::ScopedFifo fifo(d.path / "fifo");  // returns at once instead of waiting for a writer
  ASSERT_TRUE(fifo.ok());
  expect_error(fifo.path(), StatusCode::kIo, "not a regular file");
  expect_error("/dev/null", StatusCode::kIo, "not a regular file");
}

TEST(ThreadPool, CoversRangeExactlyOnce) {
  ThreadPool pool(3);
  for (int64_t n : {1, 2, 5, 1000}) {
    std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
    pool.parallel_for(n, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) hits[static_cast<size_t>(i)]++;
    });
    for (auto& h : hits) EXPECT_EQ(h.load(), 1);
  }
}

// A model directory's files: its own, else (for a snapshot's original/ directory) the
// snapshot's; the served name skips the original/ level and trailing separators.
TEST(ModelDirFile, OriginalDirectoryFallsBackToTheSnapshot) {
  TempDir t("model_dir_file");
  const std::filesystem::path snap = t.path / "gpt-oss-20b", orig = snap / "original";
  std::filesystem::create_directories(orig);
  std::ofstream(snap / "tokenizer.json") << "{}";
  EXPECT_EQ(model_dir_file(orig.string(), "tokenizer.json"), (snap / "tokenizer.json").string());
  EXPECT_EQ(model_dir_file(orig.string() + "/", "tokenizer.json"),
            (snap / "tokenizer.json").string());
  EXPECT_EQ(model_dir_file(snap.string(), "tokenizer.json"), (snap / "tokenizer.json").string());
  // Neither has it: the directory's own path, which a read then names.
  EXPECT_EQ(model_dir_file(orig.string(), "generation_config.json"),
            (orig / "generation_config.json").string());
  std::ofstream(orig / "tokenizer.json") << "{}";  // its own file wins
  EXPECT_EQ(model_dir_file(orig.string(), "tokenizer.json"), (orig / "tokenizer.json").string());
  // Only a directory named original/ looks one level up.
  const std::filesystem::path other = snap / "other";
  std::filesystem::create_directories(other);
  EXPECT_EQ(model_dir_file(other.string(), "tokenizer.json"), (other / "tokenizer.json").string());
  EXPECT_EQ(model_dir_name(orig.string()), "gpt-oss-20b");
  EXPECT_EQ(model_dir_name(snap.string() + "//"), "gpt-oss-20b");
  EXPECT_EQ(model_dir_name(other.string()), "other");
}

}  // namespace
}  // namespace gossamer

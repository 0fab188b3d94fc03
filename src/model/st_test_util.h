// Test-only helpers: build safetensors files byte by byte (independent of any production writer)
// in a per-test temporary directory.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "common/status.h"

namespace gossamer::testing {

// `r` failed, with a message that contains every one of `needles`.
template <class T>
void expect_error(const Result<T>& r, std::initializer_list<std::string> needles) {
  ASSERT_FALSE(r.ok()) << "expected an error mentioning " << *needles.begin();
  const std::string& m = r.status().message();
  for (const std::string& n : needles) EXPECT_NE(m.find(n), std::string::npos) << m;
}

// A tensor to write: raw little-endian bytes as they must appear in the file.
struct StTensor {
  std::string name;
  std::string dtype;  // safetensors dtype string
  std::vector<int64_t> shape;
  std::string bytes;
};

// u64 little-endian length + header text + data.
inline std::string st_raw(const std::string& header, const std::string& data) {
  std::string out(8, '\0');
  const uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  return out + header + data;
}

// A well-formed file: tensors laid out contiguously in the given order; header padded with
// spaces to a multiple of 8 bytes (as the reference writer does).
inline std::string st_file(const std::vector<StTensor>& ts,
                           const nlohmann::json& metadata = nullptr) {
  nlohmann::json h = nlohmann::json::object();
  if (!metadata.is_null()) h["__metadata__"] = metadata;
  std::string data;
  for (const StTensor& t : ts) {
    h[t.name] = {{"dtype", t.dtype},
                 {"shape", t.shape},
                 {"data_offsets", {data.size(), data.size() + t.bytes.size()}}};
    data += t.bytes;
  }
  std::string text = h.dump();
  while ((8 + text.size()) % 8 != 0) text += ' ';
  return st_raw(text, data);
}

inline std::string random_bytes(size_t n, std::mt19937& rng) {
  std::string s(n, '\0');
  for (char& c : s) c = static_cast<char>(rng() & 0xff);
  return s;
}

// A fresh temporary directory removed at scope exit.
class TempDir {
 public:
  TempDir() {
    std::random_device rd;
    path_ = std::filesystem::temp_directory_path() /
            ("gossamer_model_test_" + std::to_string(rd()) + std::to_string(rd()));
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  std::string write(const std::string& name, const std::string& bytes) const {
    const auto p = path_ / name;
    std::ofstream(p, std::ios::binary)
        .write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    return p.string();
  }
  std::string str() const { return path_.string(); }
  std::string path(const std::string& name) const { return (path_ / name).string(); }
  std::filesystem::path operator/(const std::string& name) const { return path_ / name; }

 private:
  std::filesystem::path path_;
};

// Seeds a generator from random_device and prints the seed (reproduce with the printed value).
inline std::mt19937 seeded_rng(const char* test) {
  const unsigned seed = std::random_device{}();
  std::printf("[%s] seed %u\n", test, seed);
  return std::mt19937(seed);
}

}  // namespace gossamer::testing

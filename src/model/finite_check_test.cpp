// Non-finite checkpoint values: the scan itself (every float dtype, NaN payloads, the threaded
// path of large tensors) and the loader's error for a synth checkpoint with one element patched
// to NaN / inf / the E8M0 NaN scale, located through the file's own header.
#include "model/finite_check.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "common/test_seed.h"
#include "common/thread_pool.h"
#include "model/config.h"
#include "model/st_test_util.h"
#include "model/synth.h"
#include "model/synth_test_util.h"

namespace gossamer {
namespace {

namespace fs = std::filesystem;

// Random finite bit patterns of a float type whose exponent field is `exp_mask` (as a U word).
template <typename U>
std::vector<U> finite_words(std::mt19937_64& rng, size_t n, U exp_mask) {
  std::vector<U> v(n);
  for (U& x : v) {
    x = static_cast<U>(rng());
    if ((x & exp_mask) == exp_mask) x = static_cast<U>(x ^ (exp_mask & (~exp_mask + 1)));
  }
  return v;
}

template <typename U>
TensorRef view(const std::vector<U>& v, DType dt) {
  return TensorRef{v.data(), dt, {static_cast<int64_t>(v.size())}};
}

struct FloatCase {
  DType dtype;
  uint64_t exp_mask, sign, mant_top;  // exponent field, sign bit, top mantissa bit
};

template <typename U>
void check_dtype(std::mt19937_64& rng, const FloatCase& fc) {
  const U exp = static_cast<U>(fc.exp_mask);
  auto v = finite_words<U>(rng, 5000 + rng() % 5000, exp);
  EXPECT_EQ(first_nonfinite(view(v, fc.dtype)).first, -1);
  // Three bad elements at random places: NaN (with a random payload), +inf, -inf.
  const U nan = static_cast<U>(exp | fc.mant_top | (rng() & (fc.mant_top - 1)));
  const U pinf = exp, ninf = static_cast<U>(exp | fc.sign);
  std::set<size_t> at;
  while (at.size() < 3) at.insert(rng() % v.size());
  const U bad[] = {nan, pinf, ninf};
  const char* kinds[] = {"NaN", "+inf", "-inf"};
  const int first = static_cast<int>(rng() % 3);
  size_t k = 0;
  for (size_t i : at) v[i] = bad[(first + k++) % 3];
  const auto i0 = static_cast<int64_t>(*at.begin());
  EXPECT_EQ(first_nonfinite(view(v, fc.dtype)).first, i0) << dtype_name(fc.dtype);
  EXPECT_EQ(nonfinite_kind(view(v, fc.dtype), i0), kinds[first]) << dtype_name(fc.dtype);
}

TEST(FiniteCheck, FindsTheFirstNanOrInfOfEachFloatDtype) {
  std::mt19937_64 rng(testing::fresh_seed("finite check dtypes"));
  for (int round = 0; round < 20; ++round) {
    check_dtype<uint16_t>(rng, {DType::kBF16, 0x7f80, 0x8000, 0x40});
    check_dtype<uint16_t>(rng, {DType::kF16, 0x7c00, 0x8000, 0x200});
    check_dtype<uint32_t>(rng, {DType::kF32, 0x7f800000, 0x80000000, 0x400000});
  }
  // The largest finite values and the subnormals pass; integer tensors are not scanned.
  const std::vector<uint16_t> edge = {0x7f7f, 0xff7f, 0x0001, 0x8001, 0x0000, 0x8000};
  EXPECT_EQ(first_nonfinite(view(edge, DType::kBF16)).first, -1);
  const std::vector<uint16_t> i16 = {0x7f80, 0xffff};
  EXPECT_EQ(first_nonfinite(view(i16, DType::kI16)).first, -1);
}

// 40M bf16 elements: scanned by a pool's 4 threads (and by one); the first hit wins whichever
// part finds it.
TEST(FiniteCheck, LargeTensorsReportTheFirstHitAcrossThreads) {
  std::mt19937_64 rng(testing::fresh_seed("finite check large"));
  ThreadPool pool(4);
  const size_t n = 40u << 20;
  std::vector<uint16_t> v(n, 0x3f80);  // 1.0
  EXPECT_EQ(first_nonfinite(view(v, DType::kBF16), &pool).first, -1);
  const size_t late = n - 1 - rng() % (n / 4), early = rng() % (n / 2);
  v[late] = 0x7fc0;
  EXPECT_EQ(first_nonfinite(view(v, DType::kBF16), &pool).first, static_cast<int64_t>(late));
  v[early] = 0xff80;
  EXPECT_EQ(first_nonfinite(view(v, DType::kBF16), &pool).first, static_cast<int64_t>(early));
  EXPECT_EQ(first_nonfinite(view(v, DType::kBF16)).first, static_cast<int64_t>(early));
}

TEST(FiniteCheck, FindsTheFirstNanScaleByte) {
  std::mt19937_64 rng(testing::fresh_seed("finite check scales"));
  std::vector<uint8_t> s(7000);
  for (auto& b : s) b = static_cast<uint8_t>(rng() % 255);  // 0 .. 254
  EXPECT_EQ(first_nan_scale(view(s, DType::kU8)).first, -1);
  const size_t a = rng() % s.size(), b = rng() % s.size();
  s[a] = s[b] = 0xff;
  EXPECT_EQ(first_nan_scale(view(s, DType::kU8)).first, static_cast<int64_t>(std::min(a, b)));
}

// Sets element `index` of `tensor` in DIR/model.safetensors to `bytes`; returns the file and the
// absolute byte offset written, found through the file's own header.
struct Patch {
  std::string file;
  int64_t offset = 0;
};

Patch patch_element(const std::string& dir, const std::string& tensor, int64_t index,
                    const std::string& bytes) {
  const std::string path = dir + "/model.safetensors";
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  uint64_t n = 0;
  f.read(reinterpret_cast<char*>(&n), 8);
  std::string header(n, '\0');
  f.read(header.data(), static_cast<std::streamsize>(n));
  const auto h = nlohmann::json::parse(header);
  const int64_t off = 8 + static_cast<int64_t>(n) + h[tensor]["data_offsets"][0].get<int64_t>() +
                      index * static_cast<int64_t>(bytes.size());
  f.seekp(off);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  return {path, off};
}

TEST(FiniteCheck, LoaderNamesTensorElementAndByteOffset) {
  std::mt19937_64 rng(testing::fresh_seed("finite check loader"));
  struct Case {
    std::string tensor;
    std::vector<int64_t> dims;  // the tensor's shape (tiny preset, hidden 64)
    std::string bytes, kind;
  };
  const std::string L1 = "model.layers.1.";
  const Case cases[] = {
      {L1 + "self_attn.q_proj.weight", {64, 64}, std::string("\xc0\x7f", 2), "NaN"},
      {L1 + "mlp.router.bias", {4}, std::string("\x80\xff", 2), "-inf"},
      {"model.norm.weight", {64}, std::string("\x80\x7f", 2), "+inf"},
      {L1 + "mlp.experts.down_proj_scales",
       {4, 64, 2},
       std::string("\xff", 1),
       "E8M0 scale 0xFF (NaN)"},
  };
  for (const Case& c : cases) {
    testing::TempDir dir;
    SynthOptions o;
    o.config = synthtest::small_config(ExpertFormat::kMxfp4);
    o.seed = rng();
    o.out_dir = dir.str();
    ASSERT_TRUE(write_synth_checkpoint(o).ok());
    ASSERT_TRUE(load_model(dir.str()).ok()) << "the unpatched checkpoint must load";
    int64_t numel = 1;
    for (int64_t d : c.dims) numel *= d;
    const int64_t idx = static_cast<int64_t>(rng() % static_cast<uint64_t>(numel));
    const Patch p = patch_element(dir.str(), c.tensor, idx, c.bytes);
    std::string where;  // the multi-index, outermost first
    for (int64_t r = idx, d = static_cast<int64_t>(c.dims.size()) - 1; d >= 0; --d) {
      where = std::to_string(r % c.dims[d]) + (where.empty() ? "" : ", ") + where;
      r /= c.dims[d];
    }
    testing::expect_error(load_model(dir.str()),
                          {"'" + c.tensor + "'", p.file, "element [" + where + "]",
                           "byte offset " + std::to_string(p.offset), c.kind});
  }
}

// A checkpoint file that shrinks after it was mapped (truncated or rewritten while loading): the
// value scan's read past the new end faults with SIGBUS, which becomes an I/O error naming the
// tensor, the file and the byte offset instead of ending the process.
TEST(FiniteCheck, FileTruncatedAfterMappingIsAnErrorNotACrash) {
  testing::TempDir dir;
  SynthOptions o;
  o.config = synthtest::small_config(ExpertFormat::kMxfp4);
  o.seed = testing::fresh_seed("finite check truncated");
  o.out_dir = dir.str();
  ASSERT_TRUE(write_synth_checkpoint(o).ok());
  const auto cfg = load_config(dir.str());
  ASSERT_TRUE(cfg.ok()) << cfg.status().ToString();
  auto store = TensorStore::open_dir(dir.str());
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  const std::string path = dir.str() + "/model.safetensors";
  const int64_t page = sysconf(_SC_PAGESIZE), size = static_cast<int64_t>(fs::file_size(path));
  ASSERT_GT(size, 4 * page);
  const int64_t keep = (size / 2) / page * page;  // the tensors past this byte are gone
  fs::resize_file(path, static_cast<uintmax_t>(keep));
  const auto w = bind_weights(*cfg, **store);
  ASSERT_FALSE(w.ok());
  const std::string m = w.status().ToString();
  std::printf("%s\n", m.c_str());
  EXPECT_NE(m.find(path), std::string::npos) << m;
  EXPECT_NE(m.find("faulted (SIGBUS)"), std::string::npos) << m;
  // The fault is at or past the new end of the file, within the page that starts there.
  const size_t at = m.find("byte offset ");
  ASSERT_NE(at, std::string::npos) << m;
  const int64_t off = std::stoll(m.substr(at + 12));
  EXPECT_GE(off, keep) << m;
  EXPECT_LT(off, size) << m;
}

}  // namespace
}  // namespace gossamer

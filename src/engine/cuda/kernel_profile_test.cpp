// CPU tests of the kernel-profile aggregation and formatting (fake CUPTI records; no GPU).
#include "engine/cuda/kernel_profile.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <random>
#include <set>

namespace gossamer {
namespace {

TEST(KernelProfile, DemangleAndShorten) {
  // Mangled names checked by hand against `c++filt`.
  EXPECT_EQ(demangle_kernel_name("_Z4gemvILi1EEvPKf"), "void gemv<1>(float const*)");
  EXPECT_EQ(
      demangle_kernel_name("_ZN8gossamer4kern12_GLOBAL__N_14gemvILi1ELi2ELb0EEEvNS0_10GemvParamsE"),
      "void gossamer::kern::(anonymous namespace)::gemv<1, 2, false>(gossamer::kern::GemvParams)");
  EXPECT_EQ(demangle_kernel_name("plain_c_kernel"), "plain_c_kernel");
  EXPECT_EQ(demangle_kernel_name("_Znot_valid"), "_Znot_valid");

  EXPECT_EQ(shorten_kernel_name("void gemv<1>(float const*)"), "gemv<1>");
  EXPECT_EQ(shorten_kernel_name("void gossamer::kern::(anonymous namespace)::gemv<1, 2, false>("
                                "gossamer::kern::GemvParams)"),
            "gemv<1, 2, false>");
  EXPECT_EQ(shorten_kernel_name("void gossamer::kern::moe<(gossamer::kern::Decode)1, "
                                "std::integral_constant<int, 4> >(gossamer::kern::P const*)"),
            "moe<(Decode)1, integral_constant<int, 4> >");
  EXPECT_EQ(shorten_kernel_name("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_kernel"),
            "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_kernel");
  EXPECT_EQ(shorten_kernel_name("void ns::kernel(int)"), "kernel");
  EXPECT_EQ(shorten_kernel_name("void kern<1, 2>(int)", 8), "kern<...");
  EXPECT_EQ(shorten_kernel_name("abcdefghij", 8), "abcde...");
}

// Random graph launches of a fixed kernel sequence with random durations and overlaps; the
// expected per-kernel sums, busy time (a 1-ns bitmap of the timeline) and spans are computed
// here independently of the aggregation code.
TEST(KernelProfile, AggregatesRandomGraphLaunches) {
  const uint64_t seed = std::random_device{}();
  std::printf("[seed] %llu\n", static_cast<unsigned long long>(seed));
  std::mt19937_64 rng(seed);
  const std::vector<std::string> seq = {"_Z5embedv", "_Z4gemvILi1EEvPKf", "_Z4gemvILi1EEvPKf",
                                        "_Z3moev", "argmax_kernel"};
  const int launches = 5 + static_cast<int>(rng() % 5);
  std::vector<KernelRecord> recs;
  std::map<std::string, std::pair<int64_t, uint64_t>> want;  // short name -> calls, ns
  uint64_t t = 1000, busy_ns = 0, span_ns = 0;
  for (int l = 0; l < launches; ++l) {
    std::vector<char> on;  // ns timeline of this launch
    const uint64_t t0 = t;
    uint64_t first = UINT64_MAX;
    for (const auto& n : seq) {
      const uint64_t dur = 1 + rng() % 400;
      // Start up to 50 ns before the previous kernel's end (PDL overlap) or after a gap.
      const uint64_t start = t - std::min<uint64_t>(t - t0, rng() % 50) + rng() % 30;
      recs.push_back({n, start, start + dur, static_cast<uint32_t>(100 + l), 7});
      if (on.size() < start + dur - t0) on.resize(start + dur - t0, 0);
      std::fill(on.begin() + static_cast<int64_t>(start - t0),
                on.begin() + static_cast<int64_t>(start + dur - t0), 1);
      t = std::max(t, start + dur);
      first = std::min(first, start);
      auto& w = want[shorten_kernel_name(demangle_kernel_name(n))];
      ++w.first;
      w.second += dur;
    }
    busy_ns += static_cast<uint64_t>(std::count(on.begin(), on.end(), 1));
    span_ns += t - first;
    t += 5000;  // host gap between launches
  }
  std::shuffle(recs.begin(), recs.end(), rng);
  KernelProfileInput in;
  in.units = launches;
  in.graph = true;
  in.wall_us_per_unit = 2.0;
  in.traced_wall_us_per_unit = 2.5;
  auto p = aggregate_kernel_profile(recs, in, 3);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->launch_groups, launches);
  EXPECT_EQ(p->records, static_cast<int64_t>(seq.size()) * launches);
  EXPECT_EQ(p->dropped, 3);
  ASSERT_EQ(p->rows.size(), want.size());
  double sum = 0;
  for (size_t i = 0; i < p->rows.size(); ++i) {
    const auto& r = p->rows[i];
    ASSERT_TRUE(want.count(r.name)) << r.name;
    const auto& [calls, ns] = want[r.name];
    EXPECT_EQ(r.calls, calls);
    EXPECT_DOUBLE_EQ(r.calls_per_unit, static_cast<double>(calls) / launches);
    EXPECT_NEAR(r.us_per_unit, ns * 1e-3 / launches, 1e-9);
    EXPECT_NEAR(r.mean_us, ns * 1e-3 / calls, 1e-9);
    EXPECT_NEAR(r.pct_of_wall, 100.0 * r.us_per_unit / 2.0, 1e-9);
    if (i > 0) {
      EXPECT_GE(p->rows[i - 1].us_per_unit, r.us_per_unit);
    }
    sum += r.us_per_unit;
  }
  EXPECT_EQ(want["gemv<1>"].first, 2 * launches);
  EXPECT_NEAR(p->sum_us_per_unit, sum, 1e-9);
  EXPECT_NEAR(p->busy_us_per_unit, busy_ns * 1e-3 / launches, 1e-9);
  EXPECT_NEAR(p->span_us_per_unit, span_ns * 1e-3 / launches, 1e-9);
  EXPECT_LE(p->busy_us_per_unit, p->sum_us_per_unit + 1e-12);
  EXPECT_LE(p->busy_us_per_unit, p->span_us_per_unit + 1e-12);
}

TEST(KernelProfile, NonGraphSpanCoversWholeTrace) {
  // Two prefills: kernels [0,10) [5,20) then [100,110): busy 20 + 10 ns, span 110 ns.
  std::vector<KernelRecord> recs = {{"a", 0, 10, 1, 0}, {"b", 5, 20, 2, 0}, {"a", 100, 110, 3, 0}};
  KernelProfileInput in;
  in.unit = "prefill";
  in.units = 2;
  auto p = aggregate_kernel_profile(recs, in, 0);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->launch_groups, 0);
  EXPECT_NEAR(p->busy_us_per_unit, 30e-3 / 2, 1e-12);
  EXPECT_NEAR(p->span_us_per_unit, 110e-3 / 2, 1e-12);
  EXPECT_NEAR(p->sum_us_per_unit, 35e-3 / 2, 1e-12);
  ASSERT_EQ(p->rows.size(), 2u);
  EXPECT_EQ(p->rows[0].name, "a");
  EXPECT_EQ(p->rows[0].calls, 2);
  EXPECT_EQ(p->rows[0].pct_of_wall, 0);  // no wall time given
}

TEST(KernelProfile, RejectsBadInput) {
  KernelProfileInput in;
  in.units = 0;
  EXPECT_FALSE(aggregate_kernel_profile({{"a", 0, 1, 1, 0}}, in, 0).ok());
  in.units = 1;
  auto empty = aggregate_kernel_profile({}, in, 0);
  ASSERT_FALSE(empty.ok());
  EXPECT_NE(empty.status().ToString().find("no kernel records"), std::string::npos);
  auto backwards = aggregate_kernel_profile({{"a", 0, 1, 1, 0}, {"bad_k", 9, 3, 2, 0}}, in, 0);
  ASSERT_FALSE(backwards.ok());
  EXPECT_NE(backwards.status().ToString().find("record 1 (bad_k)"), std::string::npos);
  in.wall_us_per_unit = -1;
  EXPECT_FALSE(aggregate_kernel_profile({{"a", 0, 1, 1, 0}}, in, 0).ok());
}

TEST(KernelProfile, TableAndJson) {
  std::vector<KernelRecord> recs = {{"_Z4gemvILi1EEvPKf", 0, 3000, 5, 1},
                                    {"_Z3moev", 2000, 10000, 5, 1}};
  KernelProfileInput in;
  in.units = 1;
  in.graph = true;
  in.wall_us_per_unit = 20;
  auto p = aggregate_kernel_profile(recs, in, 0);
  ASSERT_TRUE(p.ok());
  const std::string s = format_kernel_profile(*p, "title line");
  EXPECT_EQ(s.rfind("title line\n| kernel | calls/step | us/step | % of step | us/call |", 0), 0u)
      << s;
  EXPECT_NE(s.find("| moe | 1.00 | 8.00 | 40.0% | 8.00 |"), std::string::npos) << s;
  EXPECT_NE(s.find("| gemv<1> | 1.00 | 3.00 | 15.0% | 3.00 |"), std::string::npos) << s;
  EXPECT_NE(s.find("sum of kernel times 11.0 us, busy (union of kernel intervals) 10.0 us, "
                   "span (first start .. last end) 10.0 us"),
            std::string::npos)
      << s;
  const auto j = kernel_profile_json(*p);
  EXPECT_EQ(j["kernels"].size(), 2u);
  EXPECT_EQ(j["kernels"][0]["kernel"], "moe");
  EXPECT_DOUBLE_EQ(j["busy_us_per_unit"].get<double>(), 10.0);
  EXPECT_EQ(j["graph_launches"], 1);
}

}  // namespace
}  // namespace gossamer

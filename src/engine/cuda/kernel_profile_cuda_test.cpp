// GPU test of the CUPTI kernel profile (label gpu): profiles the graph-replayed decode step of a
// tiny synthetic model and checks the kernels seen against the runner's kernel_path(), the
// launch grouping and that the times are positive and sum sensibly.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <regex>
#include <set>

#include "engine/cuda/cuda_runner.h"
#include "engine/cuda/kernel_profile.h"
#include "model/synth.h"

namespace gossamer {
namespace {

std::unique_ptr<CudaModelRunner> tiny_runner(bool pdl) {
  ModelConfig c = preset_config("tiny").value();
  c.head_dim = 64;
  c.hidden_size = 256;
  c.intermediate_size = 256;
  c.num_local_experts = 8;  // the fused router (use_norm_router) runs
  c.experts_per_token = 2;
  CudaRunnerOptions o;
  o.max_seq_len = 1024;
  o.max_seqs = 2;
  o.pdl = pdl;
  auto r = CudaModelRunner::create_synthetic(c, o, 7);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  if (!r.ok()) return nullptr;
  EXPECT_TRUE((*r)->fill_kv_random(3).ok());
  return std::move(*r);
}

// "norm_router_topk_wide<1, 1>" -> "norm_router_topk_wide".
std::string base_name(const std::string& n) {
  return n.substr(0, n.find('<'));
}

TEST(KernelProfileGpu, DecodeStepMatchesKernelPath) {
  for (bool pdl : {true, false}) {
    auto r = tiny_runner(pdl);
    ASSERT_NE(r, nullptr);
    const int steps = 8;
    auto plain = r->bench_decode(1, 100, steps);
    ASSERT_TRUE(plain.ok()) << plain.status().ToString();
    const double wall = plain->ms * 1e3 / steps;
    auto t = KernelTracer::create();
    ASSERT_TRUE(t.ok()) << t.status().ToString();
    auto p = profile_decode(*r, **t, 1, 100, steps, true, wall);
    ASSERT_TRUE(p.ok()) << p.status().ToString();
    std::printf("%s\n", format_kernel_profile(*p, pdl ? "tiny decode, PDL on" : "PDL off").c_str());
    EXPECT_EQ(p->dropped, 0);
    EXPECT_EQ(p->launch_groups, steps + 2);  // bench_decode: 2 warm-up replays + steps
    const double per_step = p->kernels_per_unit;
    EXPECT_EQ(per_step, std::round(per_step));  // every replay runs the same kernels
    double sum = 0;
    std::set<std::string> seen;
    for (const auto& row : p->rows) {
      EXPECT_GT(row.us_per_unit, 0) << row.name;
      EXPECT_GT(row.mean_us, 0) << row.name;
      EXPECT_EQ(row.calls % (steps + 2), 0) << row.name;
      sum += row.us_per_unit;
      seen.insert(base_name(row.name));
    }
    EXPECT_NEAR(sum, p->sum_us_per_unit, 1e-6 * sum);
    EXPECT_GT(p->busy_us_per_unit, 0);
    EXPECT_LE(p->busy_us_per_unit, p->sum_us_per_unit * (1 + 1e-9));
    EXPECT_LE(p->busy_us_per_unit, p->span_us_per_unit * (1 + 1e-9));
    // One replay's kernels fit in the time per replay (back-to-back replays; 20% + 5 us slack
    // for the replay-to-replay jitter of a tiny step).
    EXPECT_LE(p->span_us_per_unit, 1.2 * p->in.traced_wall_us_per_unit + 5);
    // Every kernel the runner names in kernel_path() ran (o_proj / lm_head name GEMV roles).
    const std::string path = r->kernel_path(1);
    const std::regex ident("[a-z][a-z0-9]*(_[a-z0-9]+)+");
    int named = 0;
    for (auto it = std::sregex_iterator(path.begin(), path.end(), ident);
         it != std::sregex_iterator(); ++it) {
      const std::string k = it->str();
      if (k == "o_proj" || k == "lm_head") continue;
      ++named;
      EXPECT_TRUE(seen.count(k)) << "kernel_path names " << k << " but the profile has no such "
                                 << "kernel; path: " << path;
    }
    EXPECT_GE(named, 6) << path;
  }
}

TEST(KernelProfileGpu, PrefillAndOneTracerAtATime) {
  auto r = tiny_runner(true);
  ASSERT_NE(r, nullptr);
  auto t = KernelTracer::create();
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_FALSE(KernelTracer::create().ok());  // a second live tracer is refused
  auto p = profile_prefill(*r, **t, 48, 0, 2, 0);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->in.units, 2);
  EXPECT_GT(p->records, 0);
  EXPECT_EQ(p->records % 2, 0);  // both prefills run the same kernels
  EXPECT_GT(p->sum_us_per_unit, 0);
  // Stop without start is an error, and the tracer can be restarted.
  EXPECT_FALSE((*t)->stop(nullptr).ok());
  t->reset();
  EXPECT_TRUE(KernelTracer::create().ok());
}

}  // namespace
}  // namespace gossamer

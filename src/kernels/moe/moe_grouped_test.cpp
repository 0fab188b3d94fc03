// Expert-grouped MoE kernels (pipe 9, grouped.cu) against the per-row streaming kernels (pipe 6)
// and the fp64 references: act and the residual must be bit-identical to pipe 6 (same arithmetic
// per (row, expert) pair), and within pipe 6's bound of fp64. Routings with rows sharing experts
// (an expert chosen by more rows than an item holds: several items), every row on the same
// experts, scale bytes outside the tensor-core range (the exact fallback), PDL on and off.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/common/testing.h"
#include "kernels/moe/moe_test_util.h"
#include "kernels/moe/params.h"
#include "kernels/moe/pipe.h"

namespace gossamer::kern {
namespace {

struct GroupedCase {
  const char* name;
  int batch, k, hidden, inter, n_experts;
  int pool;        // rows draw from this many experts (0: all)
  bool supported;  // pipe 9 runs its own kernels (else it falls back to pipe 6)
};

constexpr GroupedCase kGroupedCases[] = {
    {"b2 k4 2880x2880 E8", 2, 4, 2880, 2880, 8, 0, true},
    {"b8 k4 2880x2880 E32 pool 6", 8, 4, 2880, 2880, 32, 6, true},
    {"b5 k4 2880x2880 E16 pool 4 (all rows alike)", 5, 4, 2880, 2880, 16, 4, true},
    {"b64 k4 256x128 E16", 64, 4, 256, 128, 16, 0, true},
    {"b64 k4 128x64 E128", 64, 4, 128, 64, 128, 0, true},
    {"b7 k2 1088x320 E6", 7, 2, 1088, 320, 6, 0, true},
    {"b1 k4 512x256 E8", 1, 4, 512, 256, 8, 0, true},
    {"b4 k8 64x256 E27 pool 9", 4, 8, 64, 256, 27, 9, true},
    {"b3 k3 96x160 E5 (odd MX blocks: falls back)", 3, 3, 96, 160, 5, 0, false},
    {"b65 k4 64x64 E8 (260 pairs: falls back)", 65, 4, 64, 64, 8, 0, false},
};

bool bits_equal(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// One fresh random problem: pipe 6 and pipe 9 (PDL off / on) on the same inputs.
void check_grouped(std::mt19937_64& rng, const GroupedCase& c, double extreme) {
  moetest::Problem P(rng, c.batch, c.k, c.hidden, c.inter, c.n_experts, {extreme, 161, 190},
                     {extreme, 0, 33}, c.pool);
  MoeGateUpParams& gp = P.gp;
  MoeDownParams& dp = P.dp;
  dp.act = P.dact.get();  // down reads what gate_up wrote
  gp.pipe = dp.pipe = 9;
  EXPECT_EQ(moe_gate_up_grouped_supported(gp), c.supported) << c.name;
  EXPECT_EQ(moe_down_grouped_supported(dp), c.supported) << c.name;
  // Pipe 6 first (its act feeds both downs: the comparison is of down alone).
  auto run = [&](int pipe, bool pdl, std::vector<float>* act, std::vector<float>* out) {
    gp.pipe = dp.pipe = pipe;
    gp.pdl = dp.pdl = pdl;
    P.dact.poison();
    P.dpart.poison();
    ASSERT_TRUE(launch_moe_gate_up(gp, 0).ok()) << c.name;
    testing::sync_or_die(std::string(c.name) + " gate_up");
    *act = P.dact.download();
    P.dres.upload(P.resid);
    ASSERT_TRUE(launch_moe_down(dp, 0).ok()) << c.name;
    testing::sync_or_die(std::string(c.name) + " down");
    *out = P.dres.download();
  };
  std::vector<float> act6, out6;
  run(6, false, &act6, &out6);
  std::vector<double> kappa;
  const auto act_ref = moe_gate_up_ref(P.gu_blk, P.gu_sc, P.gu_b, P.x, P.ids, gp, &kappa);
  const double tol = moetest::gate_up_tolerance(kappa, act_ref);
  const auto out_ref = moe_down_ref(P.dn_blk, P.dn_sc, P.dn_b, act6, P.ids, P.rw, P.resid, dp);
  for (bool pdl : {false, true}) {
    std::vector<float> act9, out9;
    run(9, pdl, &act9, &out9);
    const double e1 = testing::rel_err(act9, act_ref), e2 = testing::rel_err(out9, out_ref);
    std::printf("moe grouped%s %-46s rel_err gate_up %.3g down %.3g (extreme %.2f)\n",
                pdl ? " pdl" : "", c.name, e1, e2, extreme);
    EXPECT_TRUE(bits_equal(act9, act6)) << c.name << " act differs from pipe 6";
    EXPECT_TRUE(bits_equal(out9, out6)) << c.name << " residual differs from pipe 6";
    EXPECT_LT(e1, tol) << c.name << " (bound " << tol << ")";
    EXPECT_LT(e2, 1e-5) << c.name;
  }
}

// GOSSAMER_TEST_SMALL=1 (sanitizer runs): the cases up to 1088 x 320 only.
bool skip_large(const GroupedCase& c) {
  return std::getenv("GOSSAMER_TEST_SMALL") != nullptr && c.hidden > 1088;
}

TEST(MoeGrouped, BitIdenticalToPerRowKernelsAndNearFp64) {
  std::mt19937_64 rng(testing::fresh_seed("moe grouped"));
  for (const auto& c : kGroupedCases)
    if (!skip_large(c)) check_grouped(rng, c, 0.0);
}

TEST(MoeGrouped, ExtremeScaleBytesTakeTheExactPath) {
  std::mt19937_64 rng(testing::fresh_seed("moe grouped extreme"));
  for (const auto& c : kGroupedCases)
    if (c.supported && c.hidden <= 1088) check_grouped(rng, c, 0.03);
}

// Many rows on one expert: ceil(rows / 4) items stream it several times; still exact.
TEST(MoeGrouped, OneExpertForEveryRow) {
  std::mt19937_64 rng(testing::fresh_seed("moe grouped one expert"));
  const GroupedCase c{"b37 k1 256x192 E64 pool 1", 37, 1, 256, 192, 64, 1, true};
  check_grouped(rng, c, 0.0);
}

TEST(MoeGrouped, DownWithoutWorkspaceFallsBack) {
  MoeDownParams dp;
  dp.blocks = dp.scales = reinterpret_cast<const uint8_t*>(256);
  dp.bias = dp.act = dp.weights = reinterpret_cast<const float*>(256);
  dp.ids = reinterpret_cast<const int32_t*>(256);
  dp.resid = reinterpret_cast<float*>(256);
  dp.batch = 2, dp.k = 4, dp.hidden = 2880, dp.inter = 2880, dp.n_experts = 32, dp.pipe = 9;
  ASSERT_TRUE(dp.validate().ok());
  EXPECT_FALSE(moe_down_grouped_supported(dp));
}

}  // namespace
}  // namespace gossamer::kern

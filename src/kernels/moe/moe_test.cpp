#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <iterator>
#include <numeric>
#include <string>
#include <vector>

#include "common/numerics.h"
#include "kernels/common/mxfp4_ref.h"
#include "kernels/common/testing.h"
#include "kernels/moe/cases.h"
#include "kernels/moe/moe_test_util.h"
#include "kernels/moe/params.h"
#include "kernels/moe/pipe.h"
#include "kernels/moe/tc_decode.h"

namespace gossamer::kern {
namespace {

// Kernel variants under test: {gate_up pipe, down pipe, pdl} (params.h): every pipe that exists
// (gate_up 0 / 6, down 0 / 2 / 6), pipe 6 with PDL off and on.
struct Variant {
  int gu_pipe, dn_pipe;
  bool pdl;
};
constexpr Variant kVariants[] = {{0, 0, false}, {0, 2, false}, {6, 6, false}, {6, 6, true}};
constexpr Variant kBulkVariants[] = {{6, 6, false}, {6, 6, true}};

struct Errors {
  double gate_up = 0, down = 0;
};

// Runs every variant on one fresh random problem against the fp64 references; returns the worst
// relative errors. The down kernels all get the reference act (rounded to f32) as input.
template <size_t N = std::size(kVariants)>
Errors check_case(std::mt19937_64& rng, const MoeCase& c, double extreme, int ext_lo, int ext_hi,
                  const Variant (&variants)[N] = kVariants) {
  const int H = c.hidden, I = c.inter;
  const moetest::ScaleSpread spread{extreme, ext_lo, ext_hi};
  moetest::Problem P(rng, c.batch, c.k, H, I, c.n_experts, spread, spread);
  MoeGateUpParams& gp = P.gp;
  MoeDownParams& dp = P.dp;
  std::vector<double> kappa;
  const auto act_ref = moe_gate_up_ref(P.gu_blk, P.gu_sc, P.gu_b, P.x, P.ids, gp, &kappa);
  const double tol = moetest::gate_up_tolerance(kappa, act_ref);
  const std::vector<float> act_in(act_ref.begin(), act_ref.end());
  P.dact_in.upload(act_in);
  const auto out_ref = moe_down_ref(P.dn_blk, P.dn_sc, P.dn_b, act_in, P.ids, P.rw, P.resid, dp);
  Errors worst;
  // Pipe 6 must really run (not fall back) on the gpt-oss shapes at decode batches.
  if (H % 64 == 0 && I % 64 == 0 && c.k <= 12 && c.batch <= 64) {
    EXPECT_TRUE(moe_gate_up_bulk_supported(gp)) << c.name;
    EXPECT_TRUE(moe_down_bulk_supported(dp)) << c.name;
  }
  for (const Variant& v : variants) {
    gp.pipe = v.gu_pipe;
    dp.pipe = v.dn_pipe;
    gp.pdl = dp.pdl = v.pdl;
    P.dact.poison();
    EXPECT_TRUE(launch_moe_gate_up(gp, 0).ok()) << c.name;
    testing::sync_or_die(std::string(c.name) + " gate_up");
    const double e1 = testing::rel_err(P.dact.download(), act_ref);
    P.dres.upload(P.resid);
    EXPECT_TRUE(launch_moe_down(dp, 0).ok()) << c.name;
    testing::sync_or_die(std::string(c.name) + " down");
    const double e2 = testing::rel_err(P.dres.download(), out_ref);
    std::printf(
        "moe gate_up pipe %d down pipe %d%s %-36s rel_err gate_up+swiglu %.3g "
        "(bound %.3g) down+residual %.3g\n",
        v.gu_pipe, v.dn_pipe, v.pdl ? " pdl" : "", c.name, e1, tol, e2);
    EXPECT_LT(e1, tol) << c.name << " gate_up pipe " << v.gu_pipe;
    EXPECT_LT(e2, 1e-5) << c.name << " down pipe " << v.dn_pipe;
    worst.gate_up = std::max(worst.gate_up, e1);  // NaN-safe: rel_err maps NaN to +inf
    worst.down = std::max(worst.down, e2);
  }
  return worst;
}

// Every variant on the in_test cases of the table with hidden below (small) / at least
// (gpt-oss) 1024; the small ones are quick enough for compute-sanitizer racecheck.
void check_table(bool small) {
  std::mt19937_64 rng(testing::fresh_seed(small ? "moe small" : "moe gpt-oss"));
  Errors worst;
  for (const auto& c : kMoeCases) {
    if (!c.in_test || (c.hidden < 1024) != small) continue;
    const Errors e = check_case(rng, c, 0.0, 0, 0);
    worst.gate_up = std::max(worst.gate_up, e.gate_up);
    worst.down = std::max(worst.down, e.down);
  }
  std::printf("moe worst rel_err over all variants and %s cases: gate_up %.3g down %.3g\n",
              small ? "small" : "gpt-oss", worst.gate_up, worst.down);
}

TEST(Moe, SmallShapesMatchFp64Reference) {
  check_table(true);
}
TEST(Moe, GptOssShapesMatchFp64Reference) {
  check_table(false);
}

// 2% of the scale bytes far outside the realistic range, below (0..33: tiny weights, bf16
// subnormal territory) and above (161..190: the tensor-core scale multiplier would overflow):
// the tensor-core kernels must fall back to the exact path and still match.
TEST(Moe, ExtremeScaleBytesMatchFp64Reference) {
  std::mt19937_64 rng(testing::fresh_seed("moe extreme scales"));
  const MoeCase c{"b2 k4 2880x2880 E8 extreme scales", 2, 4, 2880, 2880, 8, true};
  const Errors lo = check_case(rng, c, 0.02, 0, 33);
  const Errors hi = check_case(rng, c, 0.02, 161, 190);
  std::printf("moe extreme scales worst rel_err: low %.3g / %.3g, high %.3g / %.3g\n", lo.gate_up,
              lo.down, hi.gate_up, hi.down);
}

// Pipe 6 (PDL off / on) at the given decode batches on a small shape with an odd number of MX
// blocks per gate_up row step (nb = 34), 80 row groups per routed expert and k = 4 (down teams
// of 8 warps: each slot's 10 MX blocks split 4 / 6); every 8th batch with 2% extreme scale bytes
// (exact fallback path).
template <size_t N>
void check_bulk_batches(const std::vector<int>& batches, const char* what,
                        const Variant (&variants)[N]) {
  std::mt19937_64 rng(testing::fresh_seed(what));
  Errors worst;
  for (int batch : batches) {
    const MoeCase c{"bulk k4 1088x320 E16", batch, 4, 1088, 320, 16, true};
    const Errors e = check_case(rng, c, batch % 8 == 0 ? 0.02 : 0.0, 0, 33, variants);
    worst.gate_up = std::max(worst.gate_up, e.gate_up);
    worst.down = std::max(worst.down, e.down);
  }
  std::printf("moe bulk pipe worst rel_err (%s): gate_up %.3g down %.3g\n", what, worst.gate_up,
              worst.down);
}

TEST(Moe, BulkPipeEveryBatchMatchesFp64Reference) {
  std::vector<int> batches(64);
  std::iota(batches.begin(), batches.end(), 1);
  check_bulk_batches(batches, "moe bulk batches 1..64", kBulkVariants);
}

// Short version for compute-sanitizer (memcheck / racecheck with a gtest filter).
TEST(Moe, BulkPipeSanitizerShapesMatchFp64Reference) {
  check_bulk_batches({1, 3, 8}, "moe bulk batches 1, 3, 8", kBulkVariants);
}

// The default (pipe 6) beyond its batch limit of 64: gate_up falls back to pipe 0, down to
// pipe 2 (launch_moe_* must still succeed and match the reference).
TEST(Moe, FallbackBeyondBatch64MatchesFp64Reference) {
  std::mt19937_64 rng(testing::fresh_seed("moe fallback batch 80"));
  const MoeCase c{"fallback b80 k4 256x128 E16", 80, 4, 256, 128, 16, true};
  constexpr Variant kDefault[] = {{6, 6, false}};
  const Errors e = check_case(rng, c, 0.0, 0, 0, kDefault);
  std::printf("moe fallback (batch 80) rel_err: gate_up %.3g down %.3g\n", e.gate_up, e.down);
  // The same shape runs pipe 6 itself at batch 64 (so batch 80 really took the fallbacks).
  alignas(16) uint8_t u[16] = {};
  alignas(16) float f[4] = {};
  alignas(16) int32_t i[4] = {};
  MoeGateUpParams gp{u, u, f, f, i, f, 64, 4, 256, 128, 16};
  MoeDownParams dp{u, u, f, f, i, f, f, 64, 4, 256, 128, 16};
  EXPECT_TRUE(moe_gate_up_bulk_supported(gp));
  EXPECT_TRUE(moe_down_bulk_supported(dp));
  gp.batch = dp.batch = 80;
  EXPECT_FALSE(moe_gate_up_bulk_supported(gp));
  EXPECT_FALSE(moe_down_bulk_supported(dp));
}

// Pipe 6 on the gpt-oss shapes at decode batches 1, 5, 13 and k = 4 (down: 3 teams of 8
// warps, each routed slot's 90 MX blocks split 44 / 46 between two warps), batch 5 with 2%
// extreme scale bytes (both halves of nearly every row group take the exact path), batch 13 with
// 0.1% (~30% of the halves: often only one half of a slot's rows is bad).
TEST(Moe, BulkPipeGptOssShapesMatchFp64Reference) {
  std::mt19937_64 rng(testing::fresh_seed("moe bulk gpt-oss"));
  Errors worst;
  for (int batch : {1, 5, 13}) {
    const MoeCase c{"bulk k4 2880x2880 E6", batch, 4, 2880, 2880, 6, true};
    const double extreme = batch == 5 ? 0.02 : batch == 13 ? 0.001 : 0.0;
    const Errors e = check_case(rng, c, extreme, 161, 190, kBulkVariants);
    worst.gate_up = std::max(worst.gate_up, e.gate_up);
    worst.down = std::max(worst.down, e.down);
  }
  std::printf("moe bulk pipe worst rel_err, gpt-oss shapes: gate_up %.3g down %.3g\n",
              worst.gate_up, worst.down);
}

float bf16_bits_to_float(uint32_t b16) {
  const uint32_t u = b16 << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

// Host check (no GPU needed) of the tensor-core decode bit tricks against numerics.h: every
// E2M1 code at every nibble position (other nibbles random) lands in its bf16 half as
// value * 2^-126, and for every scale byte of the fast range the bf16 multiply by the scale
// factor is exact and normal (the product is a bf16 with all 16 low float bits zero).
TEST(Moe, TensorCoreDecodeIsExactOnHost) {
  using namespace moe_tc;
  std::mt19937_64 rng(testing::fresh_seed("moe tc decode"));
  for (int pos = 0; pos < 8; ++pos) {
    for (uint32_t code = 0; code < 16; ++code) {
      for (int rep = 0; rep < 64; ++rep) {
        const uint32_t w =
            (static_cast<uint32_t>(rng()) & ~(0xFu << (4 * pos))) | (code << (4 * pos));
        uint32_t P[4];
        e2m1_bf16x2(w, P);
        const uint32_t half = pos < 4 ? P[pos % 4] & 0xffffu : P[pos % 4] >> 16;
        const float v = bf16_bits_to_float(half);
        ASSERT_EQ(std::ldexp(static_cast<double>(v), 126),
                  e2m1_to_float(static_cast<uint8_t>(code)))
            << "word " << w << " nibble " << pos;
        ASSERT_EQ(std::signbit(v), code >= 8) << "word " << w << " nibble " << pos;
      }
    }
  }
  int fast = 0;
  for (uint32_t sc = 0; sc < 256; ++sc) {
    if (!scale_in_fast_range(sc)) continue;
    ++fast;
    const uint32_t m = scale_mult_bf16x2(sc);
    ASSERT_EQ(m >> 16, m & 0xffffu);
    for (uint32_t code = 0; code < 16; ++code) {
      uint32_t P[4];
      e2m1_bf16x2(code, P);
      const float prod = bf16_bits_to_float(P[0] & 0xffffu) * bf16_bits_to_float(m & 0xffffu);
      ASSERT_EQ(static_cast<double>(prod),
                std::ldexp(static_cast<double>(e2m1_to_float(static_cast<uint8_t>(code))),
                           static_cast<int>(sc) - 127 - kX))
          << "scale " << sc << " code " << code;
      uint32_t u;
      std::memcpy(&u, &prod, sizeof u);
      ASSERT_EQ(u & 0xffffu, 0u) << "scale " << sc << " code " << code;
      if ((code & 7) != 0) {
        ASSERT_NE((u >> 23) & 0xffu, 0u) << "subnormal: scale " << sc;
      }
    }
  }
  EXPECT_EQ(fast, kScaleHi - kScaleLo + 1);
  // Just outside the range the decode would not be exact: the range is not too wide.
  EXPECT_FALSE(scale_in_fast_range(kScaleLo - 1));
  EXPECT_FALSE(scale_in_fast_range(kScaleHi + 1));
}

// Host check (no GPU) of the shared fp64 reference dot (kernels/common/mxfp4_ref.h) against a
// hand-computed value: row 1 of a 2 x 64 matrix, block 0 bytes 0x91 (low nibble 0.5, high
// nibble -0.5) at scale 2^1 -> +1, -1, ...; block 1 bytes 0x07 (6, 0) at scale 2^-1 -> 3, 0, ...;
// x[i] = i: (0 - 1 + 2 - ... - 31) + 3 (32 + 34 + ... + 62) = -16 + 2256 = 2240. Row 0 is all
// 0xFF (-6) so a wrong row offset shows.
TEST(Moe, Mxfp4RowDotMatchesHandComputedValue) {
  std::vector<uint8_t> blocks(2 * 2 * 16, 0xFF), scales{127, 127, 128, 126};
  std::fill_n(blocks.begin() + 32, 16, uint8_t{0x91});
  std::fill_n(blocks.begin() + 48, 16, uint8_t{0x07});
  std::vector<float> xf(64);
  std::vector<double> xd(64);
  for (int i = 0; i < 64; ++i) xf[i] = static_cast<float>(i), xd[i] = i;
  EXPECT_EQ(mxfp4_row_dot(blocks, scales, 1, 64, xf.data()), 2240.0);
  EXPECT_EQ(mxfp4_row_dot(blocks, scales, 1, 64, xd.data()), 2240.0);
  EXPECT_EQ(mxfp4_row_dot(blocks, scales, 0, 64, xd.data()), -6.0 * (63 * 64 / 2));
}

TEST(Moe, RejectsBadParams) {
  MoeGateUpParams g;
  EXPECT_FALSE(g.validate().ok());
  uint8_t u = 0;
  float f = 0;
  int32_t i = 0;
  g = MoeGateUpParams{&u, &u, &f, &f, &i, &f, 1, 4, 2880, 2890, 8, 1.702f, 7.f};
  EXPECT_NE(g.validate().message().find("multiples of 32"), std::string::npos);
  g = MoeGateUpParams{&u, &u, &f, &f, &i, &f, 1, 4, 2880, 2880, 8, 1.702f, 7.f};
  g.pipe = 8;
  EXPECT_NE(g.validate().message().find("pipe 8 does not exist"), std::string::npos);
  MoeDownParams d{&u, &u, &f, &f, &i, &f, &f, 1, 4, 2880, 2880, 8};
  // The pipes that exist; the removed experiments (gate_up also 2) are rejected by name.
  for (int pipe = -1; pipe <= 10; ++pipe) {
    g.pipe = d.pipe = pipe;
    const bool gu_ok = pipe == 0 || pipe == 6 || pipe == 9, dn_ok = gu_ok || pipe == 2;
    EXPECT_EQ(g.validate().ok(), gu_ok) << "gate_up pipe " << pipe;
    EXPECT_EQ(d.validate().ok(), dn_ok) << "down pipe " << pipe;
    if (!gu_ok) {
      EXPECT_NE(g.validate().message().find("removed"), std::string::npos) << pipe;
    }
    if (!dn_ok) {
      EXPECT_NE(d.validate().message().find("removed"), std::string::npos) << pipe;
    }
  }
  d = MoeDownParams{};
  EXPECT_FALSE(d.validate().ok());
}

}  // namespace
}  // namespace gossamer::kern

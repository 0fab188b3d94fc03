// The L2::evict_first hint on the streaming MoE copies (bulk_hint.h, defined in bulk.cu)
// changes no result: hinted gate_up / down match the fp64 references and are bit-identical to
// the unhinted launches (pipe 6), with and without PDL.
#include "kernels/moe/bulk_hint.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <numeric>
#include <vector>

#include "kernels/common/testing.h"
#include "kernels/moe/moe_test_util.h"
#include "kernels/moe/params.h"

namespace gossamer::kern {
namespace {

using testing::DevBuf;

struct Shape {
  int batch, k, hidden, inter, experts;
};

void check_shape(const Shape& s, std::mt19937_64& rng) {
  const size_t H = s.hidden, I = s.inter, E = s.experts, pairs = size_t(s.batch) * s.k;
  std::vector<int32_t> ids;
  std::vector<float> rw;
  std::vector<int32_t> all(E);
  std::iota(all.begin(), all.end(), 0);
  for (int b = 0; b < s.batch; ++b) {
    std::shuffle(all.begin(), all.end(), rng);
    const auto ws = testing::rand_f32(rng, s.k, 0.05f, 1.f);
    for (int j = 0; j < s.k; ++j) ids.push_back(all[j]), rw.push_back(ws[j] / s.k);
  }
  const auto gblk = testing::rand_bytes(rng, E * 2 * I * H / 2, 0, 255);
  const auto gsc = testing::rand_bytes(rng, E * 2 * I * H / 32, 110, 135);
  const auto gbias = testing::rand_f32(rng, E * 2 * I, -1.f, 1.f);
  const auto dblk = testing::rand_bytes(rng, E * H * I / 2, 0, 255);
  const auto dsc = testing::rand_bytes(rng, E * H * I / 32, 110, 135);
  const auto dbias = testing::rand_f32(rng, E * H, -1.f, 1.f);
  const auto x = testing::rand_f32(rng, s.batch * H, -1.f, 1.f);
  const auto resid = testing::rand_f32(rng, s.batch * H, -1.f, 1.f);
  DevBuf<uint8_t> dgb(gblk.size()), dgs(gsc.size()), ddb(dblk.size()), dds(dsc.size());
  DevBuf<float> dgbias(gbias.size()), ddbias(dbias.size()), dx(x.size()), dres(resid.size()),
      dw(rw.size()), dact(pairs * I), dact_in(pairs * I);
  DevBuf<int32_t> dids(ids.size());
  dgb.upload(gblk), dgs.upload(gsc), ddb.upload(dblk), dds.upload(dsc);
  dgbias.upload(gbias), ddbias.upload(dbias), dx.upload(x), dw.upload(rw), dids.upload(ids);
  MoeGateUpParams gp{dgb.get(), dgs.get(), dgbias.get(), dx.get(), dids.get(), dact.get(),
                     s.batch,   s.k,       s.hidden,     s.inter,  s.experts};
  MoeDownParams dp{ddb.get(),  dds.get(), ddbias.get(), dact_in.get(), dids.get(), dw.get(),
                   dres.get(), s.batch,   s.k,          s.hidden,      s.inter,    s.experts};
  std::vector<double> kappa;
  const auto act_ref = moe_gate_up_ref(gblk, gsc, gbias, x, ids, gp, &kappa);
  const double tol = moetest::gate_up_tolerance(kappa, act_ref);
  const std::vector<float> act_in(act_ref.begin(), act_ref.end());
  dact_in.upload(act_in);
  const auto out_ref = moe_down_ref(dblk, dsc, dbias, act_in, ids, rw, resid, dp);
  for (int pipe : {6}) {
    for (bool pdl : {false, true}) {
      gp.pipe = dp.pipe = pipe;
      gp.pdl = dp.pdl = pdl;
      std::vector<float> act[2], out[2];
      for (MoeL2Hint h : {MoeL2Hint::kNone, MoeL2Hint::kEvictFirst}) {
        const int i = h == MoeL2Hint::kEvictFirst;
        dact.poison();
        ASSERT_TRUE(launch_moe_gate_up_bulk_hint(gp, h, 0).ok());
        dres.upload(resid);
        ASSERT_TRUE(launch_moe_down_bulk_hint(dp, h, 0).ok());
        ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
        act[i] = dact.download();
        out[i] = dres.download();
      }
      const double e1 = testing::rel_err(act[1], act_ref), e2 = testing::rel_err(out[1], out_ref);
      std::printf("evict_first pipe %d%s b%d k%d %dx%d E%d: rel_err gate_up %.3g down %.3g\n", pipe,
                  pdl ? " pdl" : "", s.batch, s.k, s.hidden, s.inter, s.experts, e1, e2);
      EXPECT_LT(e1, tol) << "bound " << tol;
      EXPECT_LT(e2, 1e-5);
      EXPECT_EQ(act[0], act[1]) << "pipe " << pipe;  // the hint changes no bit
      EXPECT_EQ(out[0], out[1]) << "pipe " << pipe;
    }
  }
}

TEST(MoeL2Hint, EvictFirstCopiesMatchReferenceAndUnhinted) {
  std::mt19937_64 rng(testing::fresh_seed("MoeL2Hint.EvictFirst"));
  check_shape({1, 4, 2880, 2880, 8}, rng);
  check_shape({3, 3, 256, 128, 5}, rng);
}

}  // namespace
}  // namespace gossamer::kern

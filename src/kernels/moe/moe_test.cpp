#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>

#include "kernels/common/testing.h"
#include "kernels/moe/cases.h"
#include "kernels/moe/params.h"

namespace gossamer::kern {
namespace {

using testing::DevBuf;

// Distinct random experts per row and softmax-like positive weights.
void route(std::mt19937_64& rng, int batch, int k, int n_experts, std::vector<int32_t>* ids,
           std::vector<float>* w) {
  std::vector<int32_t> all(n_experts);
  std::iota(all.begin(), all.end(), 0);
  for (int b = 0; b < batch; ++b) {
    std::shuffle(all.begin(), all.end(), rng);
    auto ws = testing::rand_f32(rng, k, 0.05f, 1.f);
    const float sum = std::accumulate(ws.begin(), ws.end(), 0.f);
    for (int j = 0; j < k; ++j) ids->push_back(all[j]), w->push_back(ws[j] / sum);
  }
}

TEST(Moe, GateUpSwigluAndDownMatchFp64Reference) {
  std::mt19937_64 rng(testing::fresh_seed("moe"));
  for (int variant = 0; variant < 8; ++variant)
    for (const auto& c : kMoeCases) {
      const int decode = variant % 2, pipe = variant / 2;
      if (!c.in_test) continue;
      const int H = c.hidden, I = c.inter, E = c.n_experts;
      std::vector<int32_t> ids;
      std::vector<float> rw;
      route(rng, c.batch, c.k, E, &ids, &rw);
      auto gu_blk = testing::rand_bytes(rng, static_cast<size_t>(E) * 2 * I * H / 2, 0, 255);
      auto gu_sc = testing::rand_bytes(rng, static_cast<size_t>(E) * 2 * I * H / 32, 116, 123);
      auto gu_b = testing::rand_f32(rng, static_cast<size_t>(E) * 2 * I, -1.f, 1.f);
      auto dn_blk = testing::rand_bytes(rng, static_cast<size_t>(E) * H * I / 2, 0, 255);
      auto dn_sc = testing::rand_bytes(rng, static_cast<size_t>(E) * H * I / 32, 116, 123);
      auto dn_b = testing::rand_f32(rng, static_cast<size_t>(E) * H, -1.f, 1.f);
      auto x = testing::rand_f32(rng, static_cast<size_t>(c.batch) * H, -1.f, 1.f);
      auto resid = testing::rand_f32(rng, static_cast<size_t>(c.batch) * H, -1.f, 1.f);
      DevBuf<uint8_t> dgb(gu_blk.size()), dgs(gu_sc.size()), ddb(dn_blk.size()), dds(dn_sc.size());
      DevBuf<float> dgbias(gu_b.size()), ddbias(dn_b.size()), dx(x.size()), dres(resid.size()),
          dw(rw.size()), dact(static_cast<size_t>(c.batch) * c.k * I);
      DevBuf<int32_t> dids(ids.size());
      dgb.upload(gu_blk);
      dgs.upload(gu_sc);
      ddb.upload(dn_blk);
      dds.upload(dn_sc);
      dgbias.upload(gu_b);
      ddbias.upload(dn_b);
      dx.upload(x);
      dres.upload(resid);
      dw.upload(rw);
      dids.upload(ids);
      dact.poison();
      MoeGateUpParams gp{dgb.get(),  dgs.get(), dgbias.get(), dx.get(), dids.get(),
                         dact.get(), c.batch,   c.k,          H,        I,
                         E,          1.702f,    7.0f,         decode,   pipe};
      ASSERT_TRUE(launch_moe_gate_up(gp, 0).ok()) << c.name;
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess) << c.name;
      const auto act = dact.download();
      const auto act_ref = moe_gate_up_ref(gu_blk, gu_sc, gu_b, x, ids, gp);
      const double e1 = testing::rel_err(act, act_ref);
      // Down projection fed with the GPU's act (isolates its own error).
      MoeDownParams dp{ddb.get(), dds.get(),  ddbias.get(), dact.get(), dids.get(),
                       dw.get(),  dres.get(), c.batch,      c.k,        H,
                       I,         E,          decode,       pipe};
      ASSERT_TRUE(launch_moe_down(dp, 0).ok()) << c.name;
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess) << c.name;
      const auto out_ref = moe_down_ref(dn_blk, dn_sc, dn_b, act, ids, rw, resid, dp);
      const double e2 = testing::rel_err(dres.download(), out_ref);
      std::printf("moe decode %d pipe %d %-36s rel_err gate_up+swiglu %.3g down+residual %.3g\n",
                  decode, pipe, c.name, e1, e2);
      EXPECT_LT(e1, 1e-5) << c.name;
      EXPECT_LT(e2, 1e-5) << c.name;
    }
}

TEST(Moe, RejectsBadParams) {
  MoeGateUpParams g;
  EXPECT_FALSE(g.validate().ok());
  uint8_t u = 0;
  float f = 0;
  int32_t i = 0;
  g = MoeGateUpParams{&u, &u, &f, &f, &i, &f, 1, 4, 2880, 2890, 8, 1.702f, 7.f};
  EXPECT_NE(g.validate().message().find("multiples of 32"), std::string::npos);
  MoeDownParams d;
  EXPECT_FALSE(d.validate().ok());
}

}  // namespace
}  // namespace gossamer::kern

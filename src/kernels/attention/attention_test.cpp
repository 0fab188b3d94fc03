#include <gtest/gtest.h>

#include <algorithm>

#include "kernels/attention/cases.h"
#include "kernels/attention/params.h"
#include "kernels/common/testing.h"

namespace gossamer::kern {
namespace {

using testing::DevBuf;

// kernel 0: scalar f32 kernel; kernel 1: mma kernel with bf16 hi/lo split inputs (~1e-6);
// kernel 2: mma kernel with bf16 q and P (bf16 rounding: ~2e-3).
TEST(Attention, MatchesFp64Reference) {
  std::mt19937_64 rng(testing::fresh_seed("attention"));
  for (int kernel = 0; kernel < 3; ++kernel)
    for (const auto& c : kAttnCases) {
      if (!c.in_test) continue;
      const int bs = 16, D = 64;
      const int max_blocks = (c.ctx + bs - 1) / bs;
      const int num_blocks = c.batch * max_blocks;
      std::vector<int32_t> pos(c.batch), table(static_cast<size_t>(c.batch) * max_blocks);
      std::uniform_int_distribution<int> dpos(c.ctx / 2, c.ctx - 1);
      for (auto& v : pos) v = dpos(rng);
      for (size_t i = 0; i < table.size(); ++i) table[i] = static_cast<int32_t>(i);
      std::shuffle(table.begin(), table.end(), rng);
      const size_t ncache = static_cast<size_t>(num_blocks) * c.n_kv_heads * bs * D;
      auto kc = testing::rand_bf16(rng, ncache, -1.f, 1.f);
      auto vc = testing::rand_bf16(rng, ncache, -1.f, 1.f);
      auto q = testing::rand_f32(rng, static_cast<size_t>(c.batch) * c.n_heads * D, -2.f, 2.f);
      auto sinks = testing::rand_f32(rng, c.n_heads, -2.f, 4.f);
      AttnParams p;
      p.batch = c.batch;
      p.n_heads = c.n_heads;
      p.n_kv_heads = c.n_kv_heads;
      p.block_size = bs;
      p.max_blocks = max_blocks;
      p.num_blocks = num_blocks;
      p.window = c.window;
      p.kernel = kernel;
      p.splits = c.splits > 0 ? c.splits : attention_splits(c.batch, c.n_kv_heads, 132);
      DevBuf<uint16_t> dk(ncache), dv(ncache);
      DevBuf<float> dq(q.size()), ds(sinks.size()), dout(q.size()),
          dpo(static_cast<size_t>(c.batch) * c.n_heads * p.splits * D),
          dml(static_cast<size_t>(c.batch) * c.n_heads * p.splits * 2);
      DevBuf<int32_t> dp(pos.size()), dt(table.size());
      dk.upload(kc);
      dv.upload(vc);
      dq.upload(q);
      ds.upload(sinks);
      dp.upload(pos);
      dt.upload(table);
      dout.poison();
      dpo.poison();
      dml.poison();
      p.q = dq.get();
      p.k_cache = dk.get();
      p.v_cache = dv.get();
      p.block_table = dt.get();
      p.pos = dp.get();
      p.sinks = ds.get();
      p.part_o = dpo.get();
      p.part_ml = dml.get();
      p.out = dout.get();
      ASSERT_TRUE(launch_attention(p, 0).ok()) << c.name;
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess) << c.name;
      const double err =
          testing::rel_err(dout.download(), attention_ref(q, kc, vc, table, pos, sinks, p));
      std::printf("attention kernel %d %-38s splits %2d rel_err %.3g\n", kernel, c.name, p.splits,
                  err);
      EXPECT_LT(err, kernel == 0 ? 1e-5 : (kernel == 1 ? 5e-5 : 1e-2))
          << c.name << " kernel " << kernel;
    }
}

TEST(Attention, RejectsBadParams) {
  AttnParams p;
  EXPECT_FALSE(p.validate().ok());
  p.kernel = 3;
  EXPECT_FALSE(p.validate().ok());
}

}  // namespace
}  // namespace gossamer::kern

#include <gtest/gtest.h>

#include "common/numerics.h"
#include "kernels/common/testing.h"
#include "kernels/embed/params.h"

namespace gossamer::kern {
namespace {

using testing::DevBuf;

TEST(Embed, CopiesRowsAndFlagsBadTokens) {
  std::mt19937_64 rng(testing::fresh_seed("embed"));
  const int vocab = 1000, hidden = 2880;
  auto table = testing::rand_bf16(rng, static_cast<size_t>(vocab) * hidden, -1.f, 1.f);
  std::vector<int32_t> toks = {5, 999, 0, 5, 1234};  // the last one is out of range
  DevBuf<uint16_t> dt(table.size());
  DevBuf<int32_t> dtok(toks.size()), derr(1);
  DevBuf<float> dx(toks.size() * hidden);
  dt.upload(table);
  dtok.upload(toks);
  dx.poison();
  cudaMemset(derr.get(), 0, 4);
  EmbedParams p{dt.get(), dtok.get(), dx.get(), derr.get(), static_cast<int>(toks.size()),
                vocab,    hidden};
  ASSERT_TRUE(launch_embed(p, 0).ok());
  const auto x = dx.download();
  for (size_t b = 0; b < toks.size(); ++b) {
    for (int i = 0; i < hidden; ++i) {
      const float want =
          toks[b] < vocab ? bf16_to_float(table[static_cast<size_t>(toks[b]) * hidden + i]) : 0.f;
      ASSERT_EQ(x[b * hidden + i], want) << "row " << b << " col " << i;
    }
  }
  EXPECT_EQ(derr.download()[0], 5);
}

}  // namespace
}  // namespace gossamer::kern

// Tests that synth's MXFP4 experts and their bf16 layout describe the same values: every expert
// element of the bf16 checkpoint against the dequantised MXFP4 one, and the nibble order of one
// byte by hand. MXFP4 values are decoded with this file's own E2M1 table (not numerics.h).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <tuple>
#include <vector>

#include "common/test_seed.h"
#include "model/config.h"
#include "model/safetensors.h"
#include "model/st_test_util.h"
#include "model/synth.h"
#include "model/synth_test_util.h"
#include "model/weights.h"

namespace gossamer {
namespace {

using synthtest::small_config;
using synthtest::synth_to;
using synthtest::tensor_bytes;
using testing::fresh_seed;
using testing::TempDir;

// E2M1, written out independently of numerics.h: sign bit 3, magnitudes 0,.5,1,1.5,2,3,4,6.
float e2m1_ref(unsigned code) {
  const float mag[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
  return (code & 8) ? -mag[code & 7] : mag[code & 7];
}

float bf16_ref(uint16_t h) {
  const uint32_t u = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// Dequantises the MXFP4 matrix (e, r, c) of the store with the test's own E2M1 table.
float mxfp4_at(const TensorRef& blocks, const TensorRef& scales, int64_t rows, int64_t cols,
               int64_t e, int64_t r, int64_t c) {
  const int64_t i = (e * rows + r) * cols + c;  // flat element index in [E, rows, cols]
  const uint8_t byte = blocks.u8()[i / 2];
  const unsigned code = (i % 2 == 0) ? (byte & 0xf) : (byte >> 4);
  const int exp = static_cast<int>(scales.u8()[i / 32]) - 127;
  return e2m1_ref(code) * std::ldexp(1.0f, exp);
}

TEST(Synth, Bf16LayoutIsExactDequantOfMxfp4) {
  TempDir dir;
  const uint64_t seed = fresh_seed("synth");
  const ModelConfig mx = small_config(ExpertFormat::kMxfp4);
  const ModelConfig bf = small_config(ExpertFormat::kBf16);
  ASSERT_TRUE(synth_to(dir / "mx", mx, seed, int64_t{1} << 30, 1 << 16, 2).ok());
  ASSERT_TRUE(synth_to(dir / "bf", bf, seed, int64_t{1} << 30, 1 << 16, 2).ok());
  const auto a = TensorStore::open_dir((dir / "mx").string()).value();
  const auto b = TensorStore::open_dir((dir / "bf").string()).value();
  for (const std::string& n : b->names()) {  // every non-expert tensor is byte-identical
    if (a->contains(n)) {
      EXPECT_EQ(tensor_bytes(*a, n), tensor_bytes(*b, n)) << n;
    }
  }
  const int64_t E = mx.num_local_experts, H = mx.hidden_size, I = mx.intermediate_size;
  int64_t checked = 0, nonzero = 0;
  for (int64_t l = 0; l < mx.num_hidden_layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".mlp.experts.";
    for (const auto& [proj, rows, cols] : {std::tuple{std::string("gate_up_proj"), 2 * I, H},
                                           std::tuple{std::string("down_proj"), H, I}}) {
      const TensorRef blocks = a->get(p + proj + "_blocks").value();
      const TensorRef scales = a->get(p + proj + "_scales").value();
      const TensorRef dense = b->get(p + proj).value();
      ASSERT_EQ(dense.shape, (std::vector<int64_t>{E, cols, rows})) << proj;
      for (int64_t e = 0; e < E; ++e) {
        for (int64_t c = 0; c < cols; ++c) {
          for (int64_t r = 0; r < rows; ++r) {
            const float want = mxfp4_at(blocks, scales, rows, cols, e, r, c);
            const float got = bf16_ref(dense.bf16()[(e * cols + c) * rows + r]);
            ASSERT_EQ(got, want) << p << proj << " e=" << e << " r=" << r << " c=" << c;
            ++checked;
            nonzero += want != 0.0f;
          }
        }
      }
    }
  }
  EXPECT_EQ(checked, mx.num_hidden_layers * E * 3 * H * I);
  EXPECT_GT(nonzero, checked * 3 / 4);  // 14 of 16 codes are non-zero
}

TEST(Synth, NibbleOrderOfOneByteByHand) {
  // Block (expert 0, row 0, block 0): byte 0 holds W[0][0] (low nibble) and W[0][1] (high).
  TempDir dir;
  const uint64_t seed = fresh_seed("synth");
  ASSERT_TRUE(
      synth_to(dir / "mx", small_config(ExpertFormat::kMxfp4), seed, 1 << 30, 4096, 1).ok());
  ASSERT_TRUE(synth_to(dir / "bf", small_config(ExpertFormat::kBf16), seed, 1 << 30, 4096, 1).ok());
  const auto a = TensorStore::open_dir((dir / "mx").string()).value();
  const auto b = TensorStore::open_dir((dir / "bf").string()).value();
  const std::string p = "model.layers.1.mlp.experts.down_proj";
  const uint8_t byte = a->get(p + "_blocks")->u8()[0];
  const uint8_t scale = a->get(p + "_scales")->u8()[0];
  const TensorRef dense = b->get(p).value();  // [E, I, H]: element (c, r) at c * H + r
  const int64_t H = 64;
  // The reference table by hand: byte 0x2B holds low 0xB (sign 1, magnitude index 3) = -1.5
  // and high 0x2 = +1.0; with scale byte 120 these are -1.5 * 2^-7 and 2^-7.
  EXPECT_EQ(e2m1_ref(0x2B & 0xf) * std::ldexp(1.0f, 120 - 127), -0.01171875f);
  EXPECT_EQ(e2m1_ref(0x2B >> 4) * std::ldexp(1.0f, 120 - 127), 0.0078125f);
  EXPECT_EQ(e2m1_ref(0xF), -6.0f);
  EXPECT_EQ(e2m1_ref(0x7), 6.0f);
  const float s = std::ldexp(1.0f, scale - 127);
  EXPECT_EQ(bf16_ref(dense.bf16()[0 * H + 0]), e2m1_ref(byte & 0xf) * s);
  EXPECT_EQ(bf16_ref(dense.bf16()[1 * H + 0]), e2m1_ref(byte >> 4) * s);
  std::printf("down_proj[0] byte 0x%02x scale %u -> W[0][0]=%g W[0][1]=%g\n", byte, scale,
              bf16_ref(dense.bf16()[0]), bf16_ref(dense.bf16()[H]));
}

}  // namespace
}  // namespace gossamer

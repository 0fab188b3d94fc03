// Fused RMSNorm + router GEMV + top-k (norm_router_topk) against the fp64 reference, with and
// without PDL, and as a PDL chain inside a captured CUDA graph.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <numeric>

#include "common/numerics.h"
#include "kernels/common/testing.h"
#include "kernels/embed/params.h"
#include "kernels/gemv/params.h"
#include "kernels/rmsnorm/params.h"
#include "kernels/router/cases.h"
#include "kernels/router/params.h"

namespace gossamer::kern {
namespace {

using testing::DevBuf;

struct Inputs {
  std::vector<float> x, bias;
  std::vector<uint16_t> g, w;
};

Inputs make_inputs(std::mt19937_64& rng, const NormRouterCase& c) {
  Inputs in;
  in.x = testing::rand_f32(rng, static_cast<size_t>(c.batch) * c.hidden, -3.f, 3.f);
  in.g = testing::rand_bf16(rng, c.hidden, 0.25f, 2.f);
  in.w = testing::rand_bf16(rng, static_cast<size_t>(c.n_experts) * c.hidden, -0.1f, 0.1f);
  in.bias = testing::rand_f32(rng, c.n_experts, -0.5f, 0.5f);
  return in;
}

// Checks xn, logits, ids and weights of one run against the fp64 reference.
void check(const NormRouterCase& c, const Inputs& in, const std::vector<float>& xn,
           const std::vector<float>& logits, const std::vector<int32_t>& ids,
           const std::vector<float>& wts, const char* mode) {
  std::vector<double> rxn, rl;
  norm_router_ref(in.x, in.g, in.w, in.bias, c.batch, c.hidden, c.n_experts, 1e-5f, &rxn, &rl);
  const double exn = testing::rel_err(xn, rxn), el = testing::rel_err(logits, rl);
  // Reference top-k per row; rows whose k-th and (k+1)-th logits are within 1e-4 are near-ties
  // (the order of the float sums may pick either): their ids are not compared. The weights are
  // checked against the softmax of the reference logits at the ids the kernel chose.
  std::vector<double> rw(wts.size());
  int compared = 0;
  for (int b = 0; b < c.batch; ++b) {
    const double* l = rl.data() + static_cast<size_t>(b) * c.n_experts;
    std::vector<int> idx(c.n_experts);
    std::iota(idx.begin(), idx.end(), 0);
    std::stable_sort(idx.begin(), idx.end(), [&](int a, int d) { return l[a] > l[d]; });
    const bool tie = c.k < c.n_experts && l[idx[c.k - 1]] - l[idx[c.k]] < 1e-4;
    double den = 0;
    for (int j = 0; j < c.k; ++j) {
      const int id = ids[static_cast<size_t>(b) * c.k + j];
      ASSERT_TRUE(id >= 0 && id < c.n_experts) << c.name << " row " << b;
      if (!tie) {
        EXPECT_EQ(id, idx[j]) << c.name << " " << mode << " row " << b << " rank " << j;
      }
      den += std::exp(l[id] - l[idx[0]]);
    }
    compared += tie ? 0 : 1;
    for (int j = 0; j < c.k; ++j) {
      const size_t o = static_cast<size_t>(b) * c.k + j;
      rw[o] = std::exp(l[ids[o]] - l[idx[0]]) / den;
    }
  }
  const double ew = testing::rel_err(wts, rw);
  std::printf("norm_router %-20s %-6s xn %.3g logits %.3g weights %.3g ids %d/%d rows\n", c.name,
              mode, exn, el, ew, compared, c.batch);
  EXPECT_LT(exn, 1e-6) << c.name;
  EXPECT_LT(el, 1e-5) << c.name;
  EXPECT_LT(ew, 1e-5) << c.name;
}

struct Dev {
  DevBuf<float> x, bias, xn, logits, wts;
  DevBuf<uint16_t> g, w;
  DevBuf<int32_t> ids;
  Dev(const NormRouterCase& c, const Inputs& in)
      : x(in.x.size()),
        bias(in.bias.size()),
        xn(in.x.size()),
        logits(static_cast<size_t>(c.batch) * c.n_experts),
        wts(static_cast<size_t>(c.batch) * c.k),
        g(in.g.size()),
        w(in.w.size()),
        ids(static_cast<size_t>(c.batch) * c.k) {
    x.upload(in.x);
    bias.upload(in.bias);
    g.upload(in.g);
    w.upload(in.w);
    xn.poison();
    logits.poison();
    wts.poison();
    ids.poison();
  }
  NormRouterParams params(const NormRouterCase& c, bool pdl, int variant = 0) const {
    return {x.get(),      g.get(),   w.get(),   bias.get(), xn.get(),
            logits.get(), ids.get(), wts.get(), c.batch,    c.hidden,
            c.n_experts,  c.k,       1e-5f,     pdl,        variant};
  }
};

TEST(NormRouter, MatchesFp64Reference) {
  std::mt19937_64 rng(testing::fresh_seed("norm_router"));
  for (const auto& c : kNormRouterCases) {
    const Inputs in = make_inputs(rng, c);
    for (int variant : kNormRouterVariants) {
      for (bool pdl : {false, true}) {
        Dev d(c, in);
        ASSERT_TRUE(launch_norm_router_topk(d.params(c, pdl, variant), 0).ok()) << c.name;
        ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess) << c.name;
        const std::string mode =
            std::string(pdl ? "pdl" : "plain") + " v" + std::to_string(variant);
        check(c, in, d.xn.download(), d.logits.download(), d.ids.download(), d.wts.download(),
              mode.c_str());
      }
    }
  }
}

// embed (PDL) writes x from a bf16 table; norm_router_topk (PDL) must wait for it. Captured
// into a graph on a fresh stream, x poisoned (NaN) before each replay.
TEST(NormRouter, PdlChainInGraph) {
  std::mt19937_64 rng(testing::fresh_seed("norm_router graph"));
  const NormRouterCase c = kNormRouterCases[2];
  const int vocab = 64;
  Inputs in = make_inputs(rng, c);
  const auto table = testing::rand_bf16(rng, static_cast<size_t>(vocab) * c.hidden, -3.f, 3.f);
  std::vector<int32_t> tokens(c.batch);
  for (int b = 0; b < c.batch; ++b) tokens[b] = static_cast<int32_t>(rng() % vocab);
  for (int b = 0; b < c.batch; ++b)  // the reference sees the embedded rows
    for (int h = 0; h < c.hidden; ++h)
      in.x[static_cast<size_t>(b) * c.hidden + h] =
          bf16_to_float(table[static_cast<size_t>(tokens[b]) * c.hidden + h]);
  Dev d(c, in);
  DevBuf<uint16_t> dtab(table.size());
  DevBuf<int32_t> dtok(tokens.size());
  dtab.upload(table);
  dtok.upload(tokens);
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  cudaGraph_t graph;
  ASSERT_EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  const EmbedParams ep{dtab.get(), dtok.get(), d.x.get(), nullptr, c.batch, vocab, c.hidden, true};
  ASSERT_TRUE(launch_embed(ep, s).ok());
  // Both implementations, one after the other, each waiting on its predecessor.
  ASSERT_TRUE(launch_norm_router_topk(d.params(c, true, 1), s).ok());
  ASSERT_TRUE(launch_norm_router_topk(d.params(c, true, 2), s).ok());
  ASSERT_EQ(cudaStreamEndCapture(s, &graph), cudaSuccess);
  cudaGraphExec_t exec;
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  for (int rep = 0; rep < 3; ++rep) {
    d.x.poison();
    d.xn.poison();
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);  // the poison (stream 0) lands first
    ASSERT_EQ(cudaGraphLaunch(exec, s), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
    check(c, in, d.xn.download(), d.logits.download(), d.ids.download(), d.wts.download(), "graph");
  }
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(s);
}

// One case of BitIdenticalToUnfusedPath: the fused kernel (variant) against rmsnorm + gemv +
// topk_softmax on the same inputs.
void bit_identical_case(const NormRouterCase& c, const Inputs& in, int variant) {
  Dev d(c, in);
  DevBuf<float> xn(in.x.size()), logits(static_cast<size_t>(c.batch) * c.n_experts),
      wts(static_cast<size_t>(c.batch) * c.k);
  DevBuf<int32_t> ids(wts.size());
  ASSERT_TRUE(launch_norm_router_topk(d.params(c, true, variant), 0).ok());
  ASSERT_TRUE(
      launch_rmsnorm({d.x.get(), d.g.get(), nullptr, xn.get(), c.batch, c.hidden, 1e-5f}, 0).ok());
  // The warp GEMV (variant 1): the fp32 operations the fused kernel follows (the tensor-core GEMV
  // of batches >= 3 sums in another order).
  GemvParams gp{d.w.get(), d.bias.get(), xn.get(),    logits.get(), c.n_experts,
                c.hidden,  c.batch,      c.n_experts, false,        nullptr};
  gp.variant = 1;
  ASSERT_TRUE(launch_gemv(gp, 0).ok());
  ASSERT_TRUE(
      launch_topk_softmax({logits.get(), ids.get(), wts.get(), c.batch, c.n_experts, c.k}, 0).ok());
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  auto count_diff = [](const std::vector<float>& a, const std::vector<float>& b) {
    size_t n = 0;
    for (size_t i = 0; i < a.size(); ++i) n += std::memcmp(&a[i], &b[i], sizeof(float)) != 0;
    return n;
  };
  const auto fl = d.logits.download(), ul = logits.download();
  const size_t dxn = count_diff(d.xn.download(), xn.download());
  const size_t dl = count_diff(fl, ul);
  const size_t dw = count_diff(d.wts.download(), wts.download());
  std::printf("norm_router %-20s v%d differing bits vs unfused: xn %zu logits %zu weights %zu\n",
              c.name, variant, dxn, dl, dw);
  EXPECT_EQ(dxn, 0u) << c.name << " v" << variant;
  if (variant == 1) {  // cluster-8 kernel: the unfused fp32 operations
    EXPECT_EQ(dl, 0u) << c.name << " v" << variant;
    EXPECT_EQ(dw, 0u) << c.name << " v" << variant;
    EXPECT_EQ(d.ids.download(), ids.download()) << c.name << " v" << variant;
    return;
  }
  // The wide kernel multiplies its dot products by 1/rms: logits within 1e-6 (vector norm) of
  // the unfused path, the same experts wherever the unfused k-th and (k+1)-th logits are more than
  // 1e-4 apart, and the weights within 1e-5.
  const double el = testing::rel_err(fl, std::vector<double>(ul.begin(), ul.end()));
  const auto wf = d.wts.download(), wu = wts.download();
  const double ew = testing::rel_err(wf, std::vector<double>(wu.begin(), wu.end()));
  const auto fi = d.ids.download(), ui = ids.download();
  for (int b = 0; b < c.batch; ++b) {
    std::vector<float> row(ul.begin() + static_cast<size_t>(b) * c.n_experts,
                           ul.begin() + static_cast<size_t>(b + 1) * c.n_experts);
    std::sort(row.begin(), row.end(), std::greater<float>());
    if (c.k < c.n_experts && row[c.k - 1] - row[c.k] < 1e-4f) continue;
    for (int j = 0; j < c.k; ++j)
      EXPECT_EQ(fi[b * c.k + j], ui[b * c.k + j]) << c.name << " v" << variant << " row " << b;
  }
  std::printf("norm_router %-20s v%d vs unfused: logits rel %.3g, weights rel %.3g\n", c.name,
              variant, el, ew);
  EXPECT_LT(el, 1e-6) << c.name << " v" << variant;
  EXPECT_LT(ew, 1e-5) << c.name << " v" << variant;
}

// The fused kernels against rmsnorm + gemv (+ topk): xn bit-identical; logits, weights and ids
// bit-identical for the cluster-8 kernel (the same fp32 operations) and close for the wide one.
TEST(NormRouter, MatchesUnfusedPath) {
  std::mt19937_64 rng(testing::fresh_seed("norm_router bitwise"));
  for (const auto& c : kNormRouterCases) {
    for (int variant : kNormRouterVariants) {
      const Inputs in = make_inputs(rng, c);
      bit_identical_case(c, in, variant);
    }
  }
}

TEST(NormRouter, RejectsBadParams) {
  alignas(16) float x[8] = {}, w8[8] = {};
  alignas(16) uint16_t g[8] = {}, w[8] = {};
  int32_t ids[8] = {};
  NormRouterParams p{x, g, w, nullptr, nullptr, nullptr, ids, w8, 1, 8, 8, 4, 1e-5f, false};
  ASSERT_TRUE(p.validate().ok());
  p.n_experts = 256;
  EXPECT_FALSE(p.validate().ok());  // more than 128 experts
  p.n_experts = 12;
  EXPECT_FALSE(p.validate().ok());  // not a multiple of 8
  p.n_experts = 8;
  p.hidden = 12;
  EXPECT_FALSE(p.validate().ok());  // hidden % 8
  p.hidden = 8;
  p.k = 9;
  EXPECT_FALSE(p.validate().ok());
  p.k = 4;
  p.variant = 4;
  EXPECT_FALSE(p.validate().ok());  // unknown variant
  p.variant = 2;
  ASSERT_TRUE(p.validate().ok());
  p.hidden = 3080;
  EXPECT_FALSE(p.validate().ok());  // wide variant with hidden > 3072
  p.variant = 1;
  EXPECT_TRUE(p.validate().ok());
  p.ids = nullptr;
  EXPECT_FALSE(p.validate().ok());
}

}  // namespace
}  // namespace gossamer::kern

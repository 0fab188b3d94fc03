// oproj_router_bulk_bf16w_f32a against the fp64 reference (x, xn, logits, ids, weights), with
// and without PDL, two launches in a row (the ticket resets itself), and a PDL chain of two
// launches inside a CUDA graph replayed three times.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>

#include "kernels/common/testing.h"
#include "kernels/oproj_router/cases.h"
#include "kernels/oproj_router/params.h"

namespace gossamer::kern {
namespace {

using testing::DevBuf;

struct Inputs {
  std::vector<uint16_t> wo, g, wr;
  std::vector<float> bo, attn, x, br;
};

Inputs make_inputs(std::mt19937_64& rng, const OprojRouterCase& c) {
  Inputs in;
  in.wo = testing::rand_bf16(rng, static_cast<size_t>(c.hidden) * c.qdim, -0.05f, 0.05f);
  in.bo = testing::rand_f32(rng, c.hidden, -0.5f, 0.5f);
  in.attn = testing::rand_f32(rng, c.qdim, -1.f, 1.f);
  in.x = testing::rand_f32(rng, c.hidden, -3.f, 3.f);
  in.g = testing::rand_bf16(rng, c.hidden, 0.25f, 2.f);
  in.wr = testing::rand_bf16(rng, static_cast<size_t>(c.n_experts) * c.hidden, -0.1f, 0.1f);
  in.br = testing::rand_f32(rng, c.n_experts, -0.5f, 0.5f);
  return in;
}

struct Dev {
  DevBuf<uint16_t> wo, g, wr;
  DevBuf<float> bo, attn, x, br, xn, logits, wts, part;
  DevBuf<int32_t> ids;
  DevBuf<uint32_t> ticket;
  Dev(const OprojRouterCase& c, const Inputs& in, int grid)
      : wo(in.wo.size()),
        g(in.g.size()),
        wr(in.wr.size()),
        bo(in.bo.size()),
        attn(in.attn.size()),
        x(in.x.size()),
        br(in.br.size()),
        xn(in.x.size()),
        logits(c.n_experts),
        wts(c.k),
        part(oproj_router_scratch_floats(grid, c.n_experts)),
        ids(c.k),
        ticket(1) {
    wo.upload(in.wo);
    g.upload(in.g);
    wr.upload(in.wr);
    bo.upload(in.bo);
    attn.upload(in.attn);
    br.upload(in.br);
    cudaMemset(ticket.get(), 0, ticket.bytes());
    reset(in);
  }
  void reset(const Inputs& in) {  // fresh residual, poisoned outputs (NaN / -1 ids)
    x.upload(in.x);
    for (auto* b : {&xn, &logits, &wts}) b->poison();
    ids.poison();
  }
  OprojRouterParams params(const OprojRouterCase& c, bool pdl) const {
    OprojRouterParams p;
    p.wo = wo.get(), p.bo = bo.get(), p.attn = attn.get(), p.x = x.get();
    p.norm_w = g.get(), p.wr = wr.get(), p.br = br.get();
    p.xn = xn.get(), p.logits = logits.get(), p.ids = ids.get(), p.weights = wts.get();
    p.part = part.get(), p.ticket = ticket.get();
    p.hidden = c.hidden, p.qdim = c.qdim, p.n_experts = c.n_experts, p.k = c.k;
    p.pdl = pdl;
    return p;
  }
};

// Reference after `times` launches on the same inputs (x updated in place each time).
struct Ref {
  std::vector<double> x, xn, logits;
};
Ref reference(const OprojRouterCase& c, const Inputs& in, int times) {
  Ref r;
  std::vector<float> x = in.x;
  for (int t = 0; t < times; ++t) {
    oproj_router_ref(in.wo, in.bo, in.attn, x, in.g, in.wr, in.br, c.hidden, c.qdim, c.n_experts,
                     1e-5f, &r.x, &r.xn, &r.logits);
    for (int h = 0; h < c.hidden; ++h) x[h] = static_cast<float>(r.x[h]);
  }
  return r;
}

void check(const OprojRouterCase& c, const Ref& r, const Dev& d, const std::string& mode) {
  const auto ids = d.ids.download();
  const auto wts = d.wts.download();
  const double ex = testing::rel_err(d.x.download(), r.x);
  const double exn = testing::rel_err(d.xn.download(), r.xn);
  const double el = testing::rel_err(d.logits.download(), r.logits);
  // Reference top-k; a k-th / (k+1)-th gap under 1e-4 is a near-tie: ids not compared there.
  std::vector<int> idx(c.n_experts);
  std::iota(idx.begin(), idx.end(), 0);
  std::stable_sort(idx.begin(), idx.end(), [&](int a, int b) { return r.logits[a] > r.logits[b]; });
  const bool tie = c.k < c.n_experts && r.logits[idx[c.k - 1]] - r.logits[idx[c.k]] < 1e-4;
  std::vector<double> rw(c.k);
  double den = 0;
  for (int j = 0; j < c.k; ++j) {
    ASSERT_TRUE(ids[j] >= 0 && ids[j] < c.n_experts) << c.name << " " << mode << " id " << ids[j];
    if (!tie) {
      EXPECT_EQ(ids[j], idx[j]) << c.name << " " << mode << " rank " << j;
    }
    den += std::exp(r.logits[ids[j]] - r.logits[idx[0]]);
  }
  for (int j = 0; j < c.k; ++j) rw[j] = std::exp(r.logits[ids[j]] - r.logits[idx[0]]) / den;
  const double ew = testing::rel_err(wts, rw);
  std::printf("oproj_router %-22s %-8s rel err x %.3g xn %.3g logits %.3g weights %.3g%s\n", c.name,
              mode.c_str(), ex, exn, el, ew, tie ? " (near-tie: ids not compared)" : "");
  EXPECT_LT(ex, 1e-5) << c.name << " " << mode;
  EXPECT_LT(exn, 1e-5) << c.name << " " << mode;
  EXPECT_LT(el, 1e-5) << c.name << " " << mode;
  EXPECT_LT(ew, 1e-5) << c.name << " " << mode;
}

TEST(OprojRouter, MatchesFp64Reference) {
  std::mt19937_64 rng(testing::fresh_seed("oproj_router"));
  for (const auto& c : kOprojRouterCases) {
    const auto grid = oproj_router_grid(c.hidden);
    ASSERT_TRUE(grid.ok());
    const Inputs in = make_inputs(rng, c);
    const Ref r = reference(c, in, 1);
    Dev d(c, in, *grid);
    for (bool pdl : {false, true, false}) {  // the 2nd and 3rd launches reuse the ticket
      d.reset(in);
      ASSERT_TRUE(launch_oproj_router(d.params(c, pdl), 0).ok()) << c.name;
      testing::sync_or_die(c.name);
      check(c, r, d, pdl ? "pdl" : "plain");
    }
  }
}

// Two PDL launches captured into a graph: the second must see the first's x. Three replays.
TEST(OprojRouter, PdlChainInGraph) {
  std::mt19937_64 rng(testing::fresh_seed("oproj_router graph"));
  for (const auto& c : {kOprojRouterCases[0], kOprojRouterCases[4]}) {
    const auto grid = oproj_router_grid(c.hidden);
    ASSERT_TRUE(grid.ok());
    const Inputs in = make_inputs(rng, c);
    const Ref r = reference(c, in, 2);
    Dev d(c, in, *grid);
    cudaStream_t s;
    ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
    cudaGraph_t graph;
    ASSERT_EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), cudaSuccess);
    ASSERT_TRUE(launch_oproj_router(d.params(c, true), s).ok());
    ASSERT_TRUE(launch_oproj_router(d.params(c, true), s).ok());
    ASSERT_EQ(cudaStreamEndCapture(s, &graph), cudaSuccess);
    cudaGraphExec_t exec;
    ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
    for (int rep = 0; rep < 3; ++rep) {
      d.reset(in);
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      ASSERT_EQ(cudaGraphLaunch(exec, s), cudaSuccess);
      ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
      check(c, r, d, "graph x2");
    }
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(graph);
    cudaStreamDestroy(s);
  }
}

TEST(OprojRouter, RejectsBadParams) {
  alignas(16) static uint16_t wo[64] = {}, g[8] = {}, wr[64] = {};
  alignas(16) static float attn[8] = {}, x[8] = {}, xn[8] = {}, wts[8] = {}, part[64] = {};
  static int32_t ids[8] = {};
  static uint32_t ticket = 0;
  OprojRouterParams p;
  p.wo = wo, p.attn = attn, p.x = x, p.norm_w = g, p.wr = wr, p.xn = xn, p.ids = ids;
  p.weights = wts, p.part = part, p.ticket = &ticket;
  p.hidden = 8, p.qdim = 8, p.n_experts = 8, p.k = 2;
  ASSERT_TRUE(p.validate().ok());
  p.k = 9;
  EXPECT_FALSE(p.validate().ok());  // k > 8
  p.k = 2;
  p.n_experts = 129;
  EXPECT_FALSE(p.validate().ok());  // more than 128 experts
  p.n_experts = 8;
  p.qdim = 12;
  EXPECT_FALSE(p.validate().ok());  // qdim % 8
  p.qdim = 8;
  p.ticket = nullptr;
  EXPECT_FALSE(p.validate().ok());
  p.ticket = &ticket;
  p.x = x + 1;
  EXPECT_FALSE(p.validate().ok());  // misaligned residual
}

}  // namespace
}  // namespace gossamer::kern

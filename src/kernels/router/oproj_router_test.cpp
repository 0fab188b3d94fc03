// Fused O-projection + RMSNorm + router + top-k (oproj_router) against the unfused decode path
// (gemv with residual add, then norm_router_topk): bit-identical x, xn, logits, ids, weights;
// and against the fp64 references (gemv_ref, norm_router_ref). Repeated launches and graph
// replays reuse the barrier counters without a reset.
#include "kernels/router/oproj_router.h"

#include <gtest/gtest.h>

#include <cstring>

#include "kernels/common/testing.h"
#include "kernels/gemv/params.h"
#include "kernels/router/params.h"

namespace gossamer::kern {
namespace {

using testing::DevBuf;

struct OprojCase {
  const char* name;
  int batch, hidden, qd, n_experts, k;
};

constexpr OprojCase kCases[] = {
    {"120b b1", 1, 2880, 4096, 128, 4},
    {"20b b3", 3, 2880, 4096, 32, 4},
    {"120b b4", 4, 2880, 4096, 128, 4},
    {"small b2 256/512/64/8", 2, 256, 512, 64, 8},
    {"odd b2 1000/200/24/3", 2, 1000, 200, 24, 3},
};

struct Host {
  std::vector<float> attn, x0, bo, br;
  std::vector<uint16_t> wo, g, wr;
};

Host make_host(std::mt19937_64& rng, const OprojCase& c) {
  Host h;
  h.attn = testing::rand_f32(rng, static_cast<size_t>(c.batch) * c.qd, -1.f, 1.f);
  h.x0 = testing::rand_f32(rng, static_cast<size_t>(c.batch) * c.hidden, -3.f, 3.f);
  h.bo = testing::rand_f32(rng, c.hidden, -0.5f, 0.5f);
  h.br = testing::rand_f32(rng, c.n_experts, -0.5f, 0.5f);
  h.wo = testing::rand_bf16(rng, static_cast<size_t>(c.hidden) * c.qd, -0.05f, 0.05f);
  h.g = testing::rand_bf16(rng, c.hidden, 0.25f, 2.f);
  h.wr = testing::rand_bf16(rng, static_cast<size_t>(c.n_experts) * c.hidden, -0.1f, 0.1f);
  return h;
}

// Device buffers of one path (inputs shared through `in`, outputs per path).
struct Out {
  DevBuf<float> x, xn, logits, wts;
  DevBuf<int32_t> ids;
  explicit Out(const OprojCase& c)
      : x(static_cast<size_t>(c.batch) * c.hidden),
        xn(x.size()),
        logits(static_cast<size_t>(c.batch) * c.n_experts),
        wts(static_cast<size_t>(c.batch) * c.k),
        ids(wts.size()) {
    xn.poison();
    logits.poison();
    wts.poison();
    ids.poison();
  }
};

struct In {
  DevBuf<float> attn, bo, br;
  DevBuf<uint16_t> wo, g, wr;
  DevBuf<unsigned> sync{kOprojRouterSyncWords};
  explicit In(const Host& h)
      : attn(h.attn.size()),
        bo(h.bo.size()),
        br(h.br.size()),
        wo(h.wo.size()),
        g(h.g.size()),
        wr(h.wr.size()) {
    attn.upload(h.attn);
    bo.upload(h.bo);
    br.upload(h.br);
    wo.upload(h.wo);
    g.upload(h.g);
    wr.upload(h.wr);
    cudaMemset(sync.get(), 0, sync.bytes());
  }
  OprojRouterParams params(const OprojCase& c, Out& o, bool pdl) const {
    OprojRouterParams p;
    p.wo = wo.get();
    p.bo = bo.get();
    p.attn = attn.get();
    p.x = o.x.get();
    p.norm_w = g.get();
    p.router_w = wr.get();
    p.router_b = br.get();
    p.xn = o.xn.get();
    p.logits = o.logits.get();
    p.ids = o.ids.get();
    p.weights = o.wts.get();
    p.sync = sync.get();
    p.batch = c.batch;
    p.hidden = c.hidden;
    p.qd = c.qd;
    p.n_experts = c.n_experts;
    p.k = c.k;
    p.pdl = pdl;
    return p;
  }
};

size_t count_diff(const std::vector<float>& a, const std::vector<float>& b) {
  size_t n = 0;
  for (size_t i = 0; i < a.size(); ++i) n += std::memcmp(&a[i], &b[i], sizeof(float)) != 0;
  return n;
}

// Unfused reference path on the GPU: gemv (accumulate) + norm_router_topk (variant auto).
void run_unfused(const OprojCase& c, const Host& h, const In& in, Out& o) {
  o.x.upload(h.x0);
  ASSERT_TRUE(launch_gemv({in.wo.get(), in.bo.get(), in.attn.get(), o.x.get(), c.hidden, c.qd,
                           c.batch, c.hidden, true, nullptr, false},
                          0)
                  .ok());
  ASSERT_TRUE(launch_norm_router_topk(
                  {o.x.get(), in.g.get(), in.wr.get(), in.br.get(), o.xn.get(), o.logits.get(),
                   o.ids.get(), o.wts.get(), c.batch, c.hidden, c.n_experts, c.k, 1e-5f, false, 0},
                  0)
                  .ok());
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
}

// Fused outputs vs the unfused ones (bitwise) and vs fp64 (x: gemv_ref, xn / logits:
// norm_router_ref of the fused x).
void compare(const OprojCase& c, const Host& h, Out& f, Out& u, const char* mode) {
  const auto fx = f.x.download(), fxn = f.xn.download(), fl = f.logits.download();
  const auto fw = f.wts.download();
  const size_t dx = count_diff(fx, u.x.download()), dxn = count_diff(fxn, u.xn.download());
  const size_t dl = count_diff(fl, u.logits.download()), dw = count_diff(fw, u.wts.download());
  const bool ids_eq = f.ids.download() == u.ids.download();
  const auto rx = gemv_ref(h.wo, h.bo, h.attn, h.x0, c.hidden, c.qd, c.batch);
  std::vector<double> rxn, rl;
  norm_router_ref(fx, h.g, h.wr, h.br, c.batch, c.hidden, c.n_experts, 1e-5f, &rxn, &rl);
  const double ex = testing::rel_err(fx, rx), exn = testing::rel_err(fxn, rxn);
  const double el = testing::rel_err(fl, rl);
  std::printf(
      "oproj_router %-22s %-6s differing vs unfused: x %zu xn %zu logits %zu weights %zu "
      "ids %s | vs fp64: x %.3g xn %.3g logits %.3g\n",
      c.name, mode, dx, dxn, dl, dw, ids_eq ? "equal" : "DIFFER", ex, exn, el);
  EXPECT_EQ(dx + dxn + dl + dw, 0u) << c.name << " " << mode;
  EXPECT_TRUE(ids_eq) << c.name << " " << mode;
  EXPECT_LT(ex, 1e-5) << c.name;
  EXPECT_LT(exn, 1e-6) << c.name;
  EXPECT_LT(el, 1e-5) << c.name;
}

TEST(OprojRouter, BitIdenticalToUnfusedPathAndMatchesFp64) {
  std::mt19937_64 rng(testing::fresh_seed("oproj_router"));
  for (const auto& c : kCases) {
    const Host h = make_host(rng, c);
    const In in(h);
    Out u(c);
    run_unfused(c, h, in, u);
    auto ok = oproj_router_supported(in.params(c, u, false));
    ASSERT_TRUE(ok.ok() && ok.value()) << c.name << ": grid not co-resident";
    for (bool pdl : {false, true}) {
      for (int rep = 0; rep < 2; ++rep) {  // the second launch reuses the counters
        Out f(c);
        f.x.upload(h.x0);
        ASSERT_TRUE(launch_oproj_router(in.params(c, f, pdl), 0).ok()) << c.name;
        ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess) << c.name;
        compare(c, h, f, u, pdl ? "pdl" : "plain");
      }
    }
  }
}

// A PDL gemv (stand-in for the attention output writer: attn = W attn0) followed by the PDL
// fused kernel, captured in a graph and replayed 3 times with x reset and the outputs poisoned
// before each replay: barrier counters must reset themselves inside the graph.
TEST(OprojRouter, PdlChainInGraphReplays) {
  std::mt19937_64 rng(testing::fresh_seed("oproj_router graph"));
  const OprojCase c = kCases[2];
  Host h = make_host(rng, c);
  const auto wa = testing::rand_bf16(rng, static_cast<size_t>(c.qd) * c.qd, -0.05f, 0.05f);
  const auto attn0 = h.attn;
  const auto ra = gemv_ref(wa, {}, attn0, {}, c.qd, c.qd, c.batch);  // the graph's attn (fp64)
  In in(h);
  DevBuf<uint16_t> dwa(wa.size());
  DevBuf<float> dattn0(attn0.size());
  dwa.upload(wa);
  dattn0.upload(attn0);
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  Out f(c);
  cudaGraph_t graph;
  ASSERT_EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  ASSERT_TRUE(launch_gemv({dwa.get(), nullptr, dattn0.get(), in.attn.get(), c.qd, c.qd, c.batch,
                           c.qd, false, nullptr, true},
                          s)
                  .ok());
  ASSERT_TRUE(launch_oproj_router(in.params(c, f, true), s).ok());
  ASSERT_EQ(cudaStreamEndCapture(s, &graph), cudaSuccess);
  cudaGraphExec_t exec;
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  for (int rep = 0; rep < 3; ++rep) {
    in.attn.poison();
    f.x.upload(h.x0);
    f.xn.poison();
    f.ids.poison();
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    ASSERT_EQ(cudaGraphLaunch(exec, s), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
    const auto attn = in.attn.download();
    EXPECT_LT(testing::rel_err(attn, ra), 1e-5);
    h.attn = attn;  // the unfused reference runs on the graph's attn
    Out u(c);
    run_unfused(c, h, in, u);
    compare(c, h, f, u, "graph");
  }
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(s);
}

TEST(OprojRouter, RejectsBadParams) {
  const OprojCase c = kCases[3];
  std::mt19937_64 rng(1);
  const Host h = make_host(rng, c);
  const In in(h);
  Out o(c);
  OprojRouterParams p = in.params(c, o, false);
  ASSERT_TRUE(p.validate().ok());
  p.batch = 5;
  EXPECT_FALSE(p.validate().ok());  // batch > 4
  EXPECT_FALSE(launch_oproj_router(p, 0).ok());
  p.batch = 2;
  p.sync = nullptr;
  EXPECT_FALSE(p.validate().ok());
  p.sync = in.sync.get();
  p.n_experts = 300;
  EXPECT_FALSE(p.validate().ok());  // > 256 experts
  p.n_experts = 200;
  EXPECT_FALSE(p.validate().ok());  // 16 blocks: 13 router rows per block > 8
  p.n_experts = 64;
  p.hidden = 4104;
  EXPECT_FALSE(p.validate().ok());  // hidden > 4096
  p.hidden = 252;
  EXPECT_FALSE(p.validate().ok());  // hidden % 8
  p.hidden = 256;
  p.k = 9;
  EXPECT_FALSE(p.validate().ok());
  p.k = 8;
  p.x = reinterpret_cast<float*>(reinterpret_cast<char*>(o.x.get()) + 4);
  EXPECT_FALSE(p.validate().ok());  // misaligned
}

}  // namespace
}  // namespace gossamer::kern

// The O-projection + MoE routing of a decode layer, batch 1: gemv_bulk_bf16w_f32a (residual) +
// norm_router_topk (two kernels, the unfused decode path) against oproj_router_bulk_bf16w_f32a.
// As the decode step runs them: a CUDA graph of 32 layers with PDL over 8 distinct weight sets
// (1.5 x the L2 at gpt-oss shapes, so the weights come from DRAM). Bytes: wo + wr + vectors.
#include <cstdio>
#include <string>

#include "kernels/common/testing.h"
#include "kernels/gemv/params.h"
#include "kernels/oproj_router/cases.h"
#include "kernels/oproj_router/params.h"
#include "kernels/router/params.h"

namespace gossamer::kern {
namespace {

constexpr int kSets = 8, kLayers = 32;

void run_case(const OprojRouterCase& c, double ceil) {
  const size_t nwo = static_cast<size_t>(c.hidden) * c.qdim;
  const size_t nwr = static_cast<size_t>(c.n_experts) * c.hidden;
  const auto grid = oproj_router_grid(c.hidden);
  if (!grid.ok()) return;
  testing::DevBuf<uint16_t> wo(nwo * kSets), wr(nwr * kSets), g(c.hidden);
  testing::DevBuf<float> attn(c.qdim), x(c.hidden), xn(c.hidden), bo(c.hidden), br(c.n_experts),
      wts(c.k), part(oproj_router_scratch_floats(*grid, c.n_experts));
  testing::DevBuf<int32_t> ids(c.k);
  testing::DevBuf<uint32_t> ticket(1);
  for (void* p : {static_cast<void*>(wo.get()), static_cast<void*>(wr.get())}) {
    cudaMemset(p, 0, (p == wo.get() ? wo.bytes() : wr.bytes()));
  }
  cudaMemset(g.get(), 0, g.bytes());
  cudaMemset(attn.get(), 0, attn.bytes());
  cudaMemset(x.get(), 0, x.bytes());
  cudaMemset(bo.get(), 0, bo.bytes());
  cudaMemset(br.get(), 0, br.bytes());
  cudaMemset(ticket.get(), 0, ticket.bytes());
  const double bytes = 2.0 * (nwo + nwr) + 4.0 * (c.qdim + 3 * c.hidden + c.n_experts);
  const double unfused = testing::graph_ms(
      [&](cudaStream_t s, int i) {
        const int set = i % kSets;
        GemvParams o{wo.get() + nwo * set,
                     bo.get(),
                     attn.get(),
                     x.get(),
                     c.hidden,
                     c.qdim,
                     1,
                     c.hidden,
                     true,
                     nullptr,
                     true};
        NormRouterParams r{x.get(),   g.get(),     wr.get() + nwr * set,
                           br.get(),  xn.get(),    nullptr,
                           ids.get(), wts.get(),   1,
                           c.hidden,  c.n_experts, c.k,
                           1e-5f,     true};
        return launch_gemv(o, s).ok() && launch_norm_router_topk(r, s).ok();
      },
      kLayers, 10);
  const double fused = testing::graph_ms(
      [&](cudaStream_t s, int i) {
        const int set = i % kSets;
        OprojRouterParams p;
        p.wo = wo.get() + nwo * set, p.bo = bo.get(), p.attn = attn.get(), p.x = x.get();
        p.norm_w = g.get(), p.wr = wr.get() + nwr * set, p.br = br.get(), p.xn = xn.get();
        p.ids = ids.get(), p.weights = wts.get(), p.part = part.get(), p.ticket = ticket.get();
        p.hidden = c.hidden, p.qdim = c.qdim, p.n_experts = c.n_experts, p.k = c.k, p.pdl = true;
        return launch_oproj_router(p, s).ok();
      },
      kLayers, 10);
  const bool router_ok = use_norm_router(c.n_experts);
  if (router_ok) {
    testing::print_bench_line(std::string("gemv_bulk + norm_router_topk ") + c.name, bytes, unfused,
                              ceil);
  }
  testing::print_bench_line(std::string("oproj_router_bulk_bf16w_f32a ") + c.name, bytes, fused,
                            ceil);
}

}  // namespace
}  // namespace gossamer::kern

int main() {
  using namespace gossamer::kern;
  const double ceil = testing::copy_ceiling_gbs();
  std::printf(
      "oproj_router: graph of %d PDL layers over %d weight sets, per layer (copy ceiling "
      "%.0f GB/s)\n",
      kLayers, kSets, ceil);
  for (const auto& c : kOprojRouterCases) run_case(c, ceil);
  return 0;
}

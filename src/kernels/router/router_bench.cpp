// Decode routing chain, per layer: rmsnorm + router gemv + topk_softmax (3 kernels) against the
// fused kernels (NormRouterParams::variant 1 = norm_router_topk cluster-8, 2 = wide 1 row/warp,
// 3 = wide 2 rows/warp), each with PDL off/on. 36 layers are captured into one CUDA
// graph (as the decode step is); the time per layer is the mean over graph replays / 36.
#include <cstdio>
#include <functional>

#include "kernels/common/testing.h"
#include "kernels/gemv/params.h"
#include "kernels/rmsnorm/params.h"
#include "kernels/router/cases.h"
#include "kernels/router/params.h"

namespace {

using namespace gossamer::kern;
constexpr int kLayers = 36;

// Mean ms per replay of a graph of kLayers calls of `layer` (captured on a stream of its own).
double graph_ms(const std::function<bool(cudaStream_t)>& layer) {
  return kLayers * testing::graph_ms([&](cudaStream_t st, int) { return layer(st); }, kLayers, 50);
}

}  // namespace

int main() {
  std::printf("routing chain per layer (graph of %d layers, us per layer)\n", kLayers);
  for (const auto& c : kNormRouterCases) {
    const size_t xs = static_cast<size_t>(c.batch) * c.hidden;
    testing::DevBuf<float> x(xs), xn(xs), logits(static_cast<size_t>(c.batch) * c.n_experts),
        bias(c.n_experts), wts(static_cast<size_t>(c.batch) * c.k);
    testing::DevBuf<uint16_t> g(c.hidden), w(static_cast<size_t>(c.n_experts) * c.hidden);
    testing::DevBuf<int32_t> ids(static_cast<size_t>(c.batch) * c.k);
    cudaMemset(x.get(), 0, x.bytes());
    cudaMemset(g.get(), 0, g.bytes());
    cudaMemset(w.get(), 0, w.bytes());
    cudaMemset(bias.get(), 0, bias.bytes());
    for (bool pdl : {false, true}) {
      const double t3 = graph_ms([&](cudaStream_t st) {
        return launch_rmsnorm({x.get(), g.get(), nullptr, xn.get(), c.batch, c.hidden, 1e-5f, pdl},
                              st)
                   .ok() &&
               launch_gemv({w.get(), bias.get(), xn.get(), logits.get(), c.n_experts, c.hidden,
                            c.batch, c.n_experts, false, nullptr, pdl},
                           st)
                   .ok() &&
               launch_topk_softmax(
                   {logits.get(), ids.get(), wts.get(), c.batch, c.n_experts, c.k, pdl}, st)
                   .ok();
      });
      std::printf("%-20s pdl %-3s  rmsnorm+gemv+topk %7.2f us", c.name, pdl ? "on" : "off",
                  1e3 * t3 / kLayers);
      for (int v : kNormRouterVariants) {
        const double t1 = graph_ms([&](cudaStream_t st) {
          return launch_norm_router_topk(
                     {x.get(), g.get(), w.get(), bias.get(), xn.get(), nullptr, ids.get(),
                      wts.get(), c.batch, c.hidden, c.n_experts, c.k, 1e-5f, pdl, v},
                     st)
              .ok();
        });
        std::printf("   fused v%d %7.2f us", v, 1e3 * t1 / kLayers);
      }
      std::printf("\n");
    }
  }
  return 0;
}

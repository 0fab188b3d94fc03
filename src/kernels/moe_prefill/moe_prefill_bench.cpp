// MoE prefill micro-benchmark: whole launch_moe_prefill and its two grouped GEMMs, for the 20b /
// 120b layer shapes. Optional argv[1]: substring of the case name ("" = all); argv[2]: the
// GEMM variants to time, comma-separated (default: all).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "kernels/common/testing.h"
#include "kernels/moe_prefill/cases.h"
#include "kernels/moe_prefill/kernels.h"
#include "kernels/moe_prefill/layout.h"
#include "kernels/moe_prefill/params.h"

namespace {

using namespace gossamer::kern;  // NOLINT: bench

constexpr double kTensorCeilingTflops = 790.0;  // stated figure: bf16 dense, H100/H200 class

void line(const std::string& what, double flop, double bytes, double ms, double copy_gbs) {
  const double tf = flop / (ms * 1e-3) / 1e12, gbs = bytes / (ms * 1e-3) / 1e9;
  std::printf("| %-34s | %9.1f us | %7.1f TFLOP/s (%4.1f%%) | %6.0f GB/s (%4.1f%%) |\n",
              what.c_str(), ms * 1e3, tf, 100 * tf / kTensorCeilingTflops, gbs,
              100 * gbs / copy_gbs);
}

// A case's work: FLOPs and weight bytes of each GEMM, the copy ceiling, iterations per timing.
struct Costs {
  double gu_flop, dn_flop, gu_bytes, dn_bytes, copy_gbs;
  int iters;
};

// GEMM variant v: the whole call (5 kernels), then its two grouped GEMMs alone on the
// workspace the whole call left (transposed variants in both grid orders).
void time_variant(MoePrefillParams p, int v, const Costs& k) {
  const auto l = moe_prefill::make_layout(p.tokens, p.k, p.hidden, p.inter, p.n_experts);
  auto* base = static_cast<uint8_t*>(p.workspace);
  moe_prefill::GemmArgs g;
  g.perm = reinterpret_cast<const int32_t*>(base + l.perm);
  g.offsets = reinterpret_cast<const int32_t*>(base + l.offsets);
  g.ntiles = reinterpret_cast<const int32_t*>(base + l.ntiles);
  g.tiles = reinterpret_cast<const int2*>(base + l.tiles);
  g.k = p.k;
  auto* act = reinterpret_cast<uint16_t*>(base + l.act);
  const std::string tag = " [v" + std::to_string(v) + "]";
  p.gemm_variant = v;  // whole call first: leaves xb / act in this variant's k order
  double ms = testing::time_ms([&] { (void)launch_moe_prefill(p, 0); }, k.iters);
  line("whole (5 kernels)" + tag, k.gu_flop + k.dn_flop, k.gu_bytes + k.dn_bytes, ms, k.copy_gbs);
  g.variant = v;  // the tile list in the workspace is this variant's (variant_bm rows)
  g.max_tiles = moe_prefill::max_tiles_for(static_cast<size_t>(p.tokens) * p.k, p.n_experts,
                                           moe_prefill::variant_bm(v));
  // Transposed variants: both grid orders (the library uses cols_first = true).
  for (const bool cf : {true, false}) {
    if (!cf && v < moe_prefill::kTransVariant) break;
    const std::string o = v < moe_prefill::kTransVariant ? "" : cf ? " cols" : " tiles";
    g.cols_first = cf;
    g.blocks = p.gu_blocks, g.scales = p.gu_scales, g.bias = p.gu_bias;
    g.a = reinterpret_cast<const uint16_t*>(base + l.xb);
    g.act = act, g.y = nullptr, g.weights = nullptr;
    g.N = 2 * p.inter, g.K = p.hidden;
    ms = testing::time_ms([&] { (void)moe_prefill::launch_gemm_gate_up(g, 0); }, k.iters);
    line("gate_up GEMM + SwiGLU" + tag + o, k.gu_flop, k.gu_bytes, ms, k.copy_gbs);
    g.blocks = p.dn_blocks, g.scales = p.dn_scales, g.bias = p.dn_bias;
    g.a = act, g.act = nullptr, g.y = reinterpret_cast<float*>(base + l.y);
    g.weights = p.weights, g.N = p.hidden, g.K = p.inter;
    ms = testing::time_ms([&] { (void)moe_prefill::launch_gemm_down(g, 0); }, k.iters);
    line("down GEMM (+bias, x weight)" + tag + o, k.dn_flop, k.dn_bytes, ms, k.copy_gbs);
  }
}

void bench_case(const MoePrefillCase& c, double copy_gbs, std::mt19937_64& rng,
                const std::vector<int>& variants) {
  const size_t H = c.hidden, I = c.inter, E = c.n_experts, T = c.tokens;
  testing::DevBuf<uint8_t> gb(E * 2 * I * H / 2), gs(E * 2 * I * H / 32), db(E * H * I / 2),
      ds(E * H * I / 32),
      ws(moe_prefill_workspace_bytes(c.tokens, c.k, c.hidden, c.inter, c.n_experts));
  testing::DevBuf<float> gbias(E * 2 * I), dbias(E * H), x(T * H), res(T * H), w(T * c.k);
  testing::DevBuf<int32_t> ids(T * c.k);
  // Random distinct experts per token (uniform load), weights 1/k, small random x.
  std::vector<int32_t> hid;
  std::vector<int32_t> all(E);
  std::iota(all.begin(), all.end(), 0);
  std::set<int32_t> used;
  for (size_t t = 0; t < T; ++t) {
    std::shuffle(all.begin(), all.end(), rng);
    for (int j = 0; j < c.k; ++j) hid.push_back(all[j]), used.insert(all[j]);
  }
  ids.upload(hid);
  w.upload(std::vector<float>(T * c.k, 1.f / c.k));
  x.upload(testing::rand_f32(rng, T * H, -1.f, 1.f));
  cudaMemset(gb.get(), 0x5a, gb.bytes());
  cudaMemset(gs.get(), 118, gs.bytes());
  cudaMemset(db.get(), 0xa5, db.bytes());
  cudaMemset(ds.get(), 118, ds.bytes());
  cudaMemset(gbias.get(), 0, gbias.bytes());
  cudaMemset(dbias.get(), 0, dbias.bytes());
  cudaMemset(res.get(), 0, res.bytes());
  MoePrefillParams p{gb.get(), gs.get(),  gbias.get(), db.get(),  ds.get(),   dbias.get(),
                     x.get(),  ids.get(), w.get(),     res.get(), ws.get(),   ws.bytes(),
                     c.tokens, c.k,       c.hidden,    c.inter,   c.n_experts};
  for (int v : variants) {  // fail early, before any timing
    p.gemm_variant = v;
    const gossamer::Status st = launch_moe_prefill(p, 0);
    if (!st.ok() || cudaDeviceSynchronize() != cudaSuccess) {
      std::printf("%s variant %d: FAILED %s\n", c.name, v, st.message().c_str());
      return;
    }
  }
  const double pairs = static_cast<double>(T) * c.k, ne = static_cast<double>(used.size());
  const double gu_flop = 2 * pairs * H * 2 * I, dn_flop = 2 * pairs * I * H;
  const double gu_bytes = ne * 2 * I * H / 2 * 17 / 16, dn_bytes = ne * H * I / 2 * 17 / 16;
  const int iters = T >= 2048 ? 20 : 50;
  std::printf("%s (%zu of %zu experts used)\n", c.name, used.size(), E);
  p.gemm_variant = -1;
  const int def = moe_prefill::pick_variant(static_cast<long long>(pairs), c.n_experts);
  const Costs k{gu_flop, dn_flop, gu_bytes, dn_bytes, copy_gbs, iters};
  line("whole, default (v" + std::to_string(def) + ")", gu_flop + dn_flop, gu_bytes + dn_bytes,
       testing::time_ms([&] { (void)launch_moe_prefill(p, 0); }, iters), copy_gbs);
  for (int v : variants) time_variant(p, v, k);
}

}  // namespace

int main(int argc, char** argv) {
  const double copy = testing::copy_ceiling_gbs();
  std::printf(
      "moe_prefill: copy ceiling (cudaMemcpy D2D, measured) %.0f GB/s; tensor ceiling "
      "%.0f TFLOP/s bf16 dense (stated figure, not measured)\n",
      copy, kTensorCeilingTflops);
  std::printf(
      "FLOP = 2 T k (H 2I + I H); bytes = MXFP4 weights of the experts used (17/16 "
      "B per 2 values)\n");
  std::vector<int> variants;
  if (argc > 2) {
    for (const char* s = argv[2]; *s != 0;) {
      char* end = nullptr;
      const long v = std::strtol(s, &end, 10);
      if (end == s || v < 0 || v >= moe_prefill::kVariants) {
        std::fprintf(stderr, "moe_prefill_bench: bad variant list '%s'\n", argv[2]);
        return 2;
      }
      variants.push_back(static_cast<int>(v));
      s = *end == ',' ? end + 1 : end;
    }
  } else {
    for (int v = 0; v < moe_prefill::kVariants; ++v) variants.push_back(v);
  }
  std::mt19937_64 rng(1);
  for (const auto& c : kMoePrefillCases) {
    if (!c.in_bench) continue;
    if (argc > 1 && std::string(c.name).find(argv[1]) == std::string::npos) continue;
    bench_case(c, copy, rng, variants);
  }
  return 0;
}

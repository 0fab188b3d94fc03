// Random MoE problems shared by moe_test.cpp and moe_grouped_test.cpp.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <random>
#include <vector>

#include "kernels/common/testing.h"
#include "kernels/moe/params.h"

namespace gossamer::kern::moetest {

// Bound on the gate_up activations' norm-wise error against fp64: 4 x 2^-24 ||kappa|| / ||act||
// (kappa from moe_gate_up_ref: each activation's sensitivity to fp32 rounding). The scale bytes
// of these tests span 25 binades, so a draw can be ill-conditioned (terms of 2^8 cancelling to a
// small dot); a fixed 1e-5 failed about once per 15 runs of the suite (H100, 2026-11-27: pipe 0,
// "top-1 b1 k1 64x96 E32", 1.67e-5 where the naive sequential fp32 dot gave 2.4e-6 and this
// scale is 1.73e-5). Over 20 table runs the kernels' errors were 0.16 .. 0.97 of the scale
// (pipe 6 at gpt-oss shapes ~0.12); rounding x to bf16 errs 350 .. 1500 times the bound.
inline double gate_up_tolerance(const std::vector<double>& kappa, const std::vector<double>& ref) {
  double k2 = 0, r2 = 0;
  for (size_t i = 0; i < ref.size(); ++i) k2 += kappa[i] * kappa[i], r2 += ref[i] * ref[i];
  return r2 > 0 ? 4 * std::ldexp(std::sqrt(k2 / r2), -24) : 0.0;
}

// Distinct random experts per row and softmax-like positive weights. pool > 0: every row draws
// from the same random `pool` experts (k <= pool), so rows share experts.
inline void route(std::mt19937_64& rng, int batch, int k, int n_experts, std::vector<int32_t>* ids,
                  std::vector<float>* w, int pool = 0) {
  std::vector<int32_t> all(n_experts);
  std::iota(all.begin(), all.end(), 0);
  if (pool > 0) {
    std::shuffle(all.begin(), all.end(), rng);
    all.resize(pool);
  }
  for (int b = 0; b < batch; ++b) {
    std::shuffle(all.begin(), all.end(), rng);
    auto ws = testing::rand_f32(rng, k, 0.05f, 1.f);
    const float sum = std::accumulate(ws.begin(), ws.end(), 0.f);
    for (int j = 0; j < k; ++j) ids->push_back(all[j]), w->push_back(ws[j] / sum);
  }
}

// Scale bytes of a realistic spread; a fraction `extreme` of them replaced by bytes drawn from
// [ext_lo, ext_hi] (outside the tensor-core fast range: exercises the exact fallback).
inline std::vector<uint8_t> rand_scales(std::mt19937_64& rng, size_t n, double extreme, int ext_lo,
                                        int ext_hi) {
  auto s = testing::rand_bytes(rng, n, 110, 135);
  std::bernoulli_distribution pick(extreme);
  std::uniform_int_distribution<int> ext(ext_lo, ext_hi);
  for (auto& v : s)
    if (pick(rng)) v = static_cast<uint8_t>(ext(rng));
  return s;
}

// MXFP4 blocks of `rows` rows of `cols` values with ~1% all-zero rows.
inline std::vector<uint8_t> rand_blocks(std::mt19937_64& rng, size_t rows, int cols) {
  auto b = testing::rand_bytes(rng, rows * cols / 2, 0, 255);
  std::bernoulli_distribution zero(0.01);
  for (size_t r = 0; r < rows; ++r)
    if (zero(rng)) std::fill_n(b.begin() + r * cols / 2, cols / 2, uint8_t{0});
  return b;
}

// Where a fraction `extreme` of the scale bytes is redrawn from [lo, hi] (rand_scales).
struct ScaleSpread {
  double extreme = 0;
  int lo = 0, hi = 0;
};

// One random MoE layer problem on the host and the device: routing (route, `pool`), MXFP4 expert
// weights and scales, biases, x and the residual, drawn in that order; gp / dp point at the
// device copies (gate_up writes dact; down reads dact_in, which the caller fills, and writes
// dres; dpart is pipe 9's workspace).
struct Problem {
  std::vector<int32_t> ids;
  std::vector<float> rw;
  std::vector<uint8_t> gu_blk, gu_sc, dn_blk, dn_sc;
  std::vector<float> gu_b, dn_b, x, resid;
  testing::DevBuf<uint8_t> dgb, dgs, ddb, dds;
  testing::DevBuf<float> dgbias, ddbias, dx, dres, dw, dact, dact_in, dpart;
  testing::DevBuf<int32_t> dids;
  MoeGateUpParams gp;
  MoeDownParams dp;

  Problem(std::mt19937_64& rng, int batch, int k, int hidden, int inter, int n_experts,
          ScaleSpread gu, ScaleSpread dn, int pool = 0) {
    const size_t H = hidden, I = inter, E = n_experts, pairs = static_cast<size_t>(batch) * k;
    route(rng, batch, k, n_experts, &ids, &rw, pool);
    gu_blk = rand_blocks(rng, E * 2 * I, hidden);
    gu_sc = rand_scales(rng, E * 2 * I * H / 32, gu.extreme, gu.lo, gu.hi);
    gu_b = testing::rand_f32(rng, E * 2 * I, -1.f, 1.f);
    dn_blk = rand_blocks(rng, E * H, inter);
    dn_sc = rand_scales(rng, E * H * I / 32, dn.extreme, dn.lo, dn.hi);
    dn_b = testing::rand_f32(rng, E * H, -1.f, 1.f);
    x = testing::rand_f32(rng, batch * H, -1.f, 1.f);
    resid = testing::rand_f32(rng, batch * H, -1.f, 1.f);
    dgb = up(gu_blk), dgs = up(gu_sc), ddb = up(dn_blk), dds = up(dn_sc);
    dgbias = up(gu_b), ddbias = up(dn_b), dx = up(x), dw = up(rw), dids = up(ids);
    dres = testing::DevBuf<float>(resid.size());
    dact = testing::DevBuf<float>(pairs * I);
    dact_in = testing::DevBuf<float>(pairs * I);
    dpart = testing::DevBuf<float>(pairs * H);
    gp = MoeGateUpParams{dgb.get(), dgs.get(), dgbias.get(), dx.get(), dids.get(), dact.get(),
                         batch,     k,         hidden,       inter,    n_experts};
    dp = MoeDownParams{ddb.get(),  dds.get(), ddbias.get(), dact_in.get(),
                       dids.get(), dw.get(),  dres.get(),   batch,
                       k,          hidden,    inter,        n_experts};
    dp.part = dpart.get();
  }

 private:
  template <class T>
  static testing::DevBuf<T> up(const std::vector<T>& h) {
    testing::DevBuf<T> d(h.size());
    d.upload(h);
    return d;
  }
};

}  // namespace gossamer::kern::moetest

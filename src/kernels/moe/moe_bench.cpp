#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "kernels/common/testing.h"
#include "kernels/moe/cases.h"
#include "kernels/moe/params.h"

// Optional filters (for profilers): argv[1] = substring of the case name, argv[2] = variant 0..7.
int main(int argc, char** argv) {
  using namespace gossamer::kern;
  const double ceil = testing::copy_ceiling_gbs();
  std::printf("moe_gate_up_swiglu_mxfp4w_f32a / moe_down_mxfp4w_f32a (copy ceiling %.0f GB/s)\n",
              ceil);
  for (const auto& c : kMoeCases) {
    if (argc > 1 && std::string(c.name).find(argv[1]) == std::string::npos) continue;
    const size_t H = c.hidden, I = c.inter, E = c.n_experts;
    testing::DevBuf<uint8_t> gb(E * 2 * I * H / 2), gs(E * 2 * I * H / 32), db(E * H * I / 2),
        ds(E * H * I / 32);
    testing::DevBuf<float> gbias(E * 2 * I), dbias(E * H), x(c.batch * H), res(c.batch * H),
        w(c.batch * c.k), act(c.batch * c.k * I);
    testing::DevBuf<int32_t> ids(c.batch * c.k);
    std::vector<int32_t> hid(c.batch * c.k);
    for (size_t i = 0; i < hid.size(); ++i) hid[i] = static_cast<int32_t>((i * 7) % E);
    ids.upload(hid);
    cudaMemset(gb.get(), 0x11, gb.bytes());
    cudaMemset(gs.get(), 120, gs.bytes());
    cudaMemset(db.get(), 0x11, db.bytes());
    cudaMemset(ds.get(), 120, ds.bytes());
    cudaMemset(gbias.get(), 0, gbias.bytes());
    cudaMemset(dbias.get(), 0, dbias.bytes());
    cudaMemset(x.get(), 0, x.bytes());
    cudaMemset(res.get(), 0, res.bytes());
    cudaMemset(w.get(), 0, w.bytes());
    MoeGateUpParams gp{gb.get(), gs.get(), gbias.get(), x.get(),     ids.get(), act.get(), c.batch,
                       c.k,      c.hidden, c.inter,     c.n_experts, 1.702f,    7.f};
    MoeDownParams dp{db.get(),  ds.get(), dbias.get(), act.get(), ids.get(), w.get(),
                     res.get(), c.batch,  c.k,         c.hidden,  c.inter,   c.n_experts};
    // Bytes actually read: the routed (row, expert) pairs' weights (17/16 bytes per 2 values).
    const double pairs = static_cast<double>(c.batch) * c.k;
    const double gu_bytes = pairs * 2 * I * H / 2 * 17.0 / 16,
                 dn_bytes = pairs * H * I / 2 * 17.0 / 16;
    for (int variant = 0; variant < 8; ++variant) {
      if (argc > 2 && variant != std::atoi(argv[2])) continue;
      gp.decode = dp.decode = variant % 2;
      gp.pipe = dp.pipe = variant / 2;
      const std::string tag = std::string(variant % 2 == 0 ? " [prmt-lut" : " [half2-cvt") +
                              " pipe " + std::to_string(variant / 2) + "]";
      double ms = testing::time_ms([&] { (void)launch_moe_gate_up(gp, 0); }, 50);
      testing::print_bench_line("moe_gate_up " + std::string(c.name) + tag, gu_bytes, ms, ceil);
      ms = testing::time_ms([&] { (void)launch_moe_down(dp, 0); }, 50);
      testing::print_bench_line("moe_down " + std::string(c.name) + tag, dn_bytes, ms, ceil);
    }
  }
  return 0;
}

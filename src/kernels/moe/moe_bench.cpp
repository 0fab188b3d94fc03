#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "kernels/common/testing.h"
#include "kernels/moe/cases.h"
#include "kernels/moe/moe_test_util.h"
#include "kernels/moe/params.h"
#include "kernels/moe/pipe.h"

namespace {

// Kernel variants (params.h): {pipe, pdl}, the same pipe for gate_up and down except that
// gate_up has no pipe 2 (the pipe 2 line times gate_up pipe 0 again).
struct Variant {
  int pipe;
  bool pdl;
};
constexpr Variant kVariants[] = {{0, false}, {2, false}, {6, false}, {6, true}, {9, true}};
// Whole MoE expert step (gate_up then down, alternating, as in the decode step): {gate_up pipe,
// down pipe, pdl}; the first is the fallback pair (the default before session 3).
struct PairVariant {
  int gu_pipe, dn_pipe;
  bool pdl;
};
constexpr PairVariant kPairs[] = {{0, 2, false}, {6, 6, false}, {6, 6, true}, {9, 9, true}};
// Launches cycle through kSets routing sets (each row k distinct experts drawn uniformly, as a
// random router would), so that consecutive launches read different weights (the 20b / 120b
// working sets, 8 x 4 experts x 8.8 MB, exceed the L2). Bytes per line: the distinct experts'
// weights of a set (mean over the sets): what a launch must read at least.
constexpr int kSets = 8;

}  // namespace

// The same bulk stream (11.5 KB copies, 184 KB ring, one block per SM) at 1x / 4x / 16x the
// length: the time is launch + ramp + drain + bytes / steady rate, so the rate between the two
// longest runs separates the steady copy rate from the fixed cost of one short kernel.
static void bulk_probe_lengths(double ceil, int sms) {
  using namespace gossamer::kern;
  constexpr int kRot = 4;  // rotating sets (the longest: 4 x 585 MB)
  const size_t base = 11520 * 24;
  testing::DevBuf<uint8_t> buf(kRot * base * 16 * sms);
  cudaMemset(buf.get(), 0x11, buf.bytes());
  double prev_ms = 0, prev_bytes = 0;
  for (int mult : {1, 4, 16}) {
    const size_t per_block = base * mult, set = per_block * sms;
    int it = 0;
    const double ms = testing::time_ms(
        [&] {
          const uint8_t* src = buf.get() + (it++ % kRot) * set;
          (void)launch_moe_bulk_probe(src, per_block, sms, 11520, 184320, 0);
        },
        16);
    testing::print_bench_line(
        "bulk probe chunk 11520 B, " + std::to_string(per_block / 1024) + " KB per block",
        static_cast<double>(set), ms, ceil);
    if (prev_ms > 0) {
      const double gbs = (set - prev_bytes) / ((ms - prev_ms) * 1e-3) / 1e9;
      std::printf("  steady rate from the previous length: %.0f GB/s (%.1f%% of copy)\n", gbs,
                  100.0 * gbs / ceil);
    }
    prev_ms = ms, prev_bytes = static_cast<double>(set);
  }
}

// Streams 8 rotating sets of one 270 KB region per SM through bulk_probe.cu's ring (copy size
// x source offset), the bulk-copy ceiling of the pipe 6 kernels.
static void bulk_probe(double ceil) {
  using namespace gossamer::kern;
  int sms = 0;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  const size_t per_block = 11520 * 24, set = per_block * sms;
  testing::DevBuf<uint8_t> buf(kSets * set + 256);
  cudaMemset(buf.get(), 0x11, buf.bytes());
  for (int lsu = 0; lsu < 2; ++lsu) {
    for (int chunk : {512, 2048, 11520, 23040, 46080}) {
      for (int offset : {0, 32}) {
        int it = 0;
        const double ms = testing::time_ms(
            [&] {
              const uint8_t* src = buf.get() + (it++ % kSets) * set + offset;
              (void)(lsu ? launch_moe_lsu_probe(src, per_block, sms, chunk, 184320, 0)
                         : launch_moe_bulk_probe(src, per_block, sms, chunk, 184320, 0));
            },
            32);
        testing::print_bench_line(std::string(lsu ? "cp.async" : "bulk") + " probe chunk " +
                                      std::to_string(chunk) + " B offset " + std::to_string(offset),
                                  static_cast<double>(set), ms, ceil);
      }
    }
  }
  bulk_probe_lengths(ceil, sms);
}

// A failed launch leaves a sticky error: report it and stop instead of timing garbage.
static bool device_ok(const std::string& what) {
  const cudaError_t e = cudaDeviceSynchronize();
  if (e == cudaSuccess) return true;
  std::printf("moe_bench: CUDA error after %s: %s\n", what.c_str(), cudaGetErrorString(e));
  std::fflush(stdout);
  return false;
}

namespace {

// One case's launch parameters and byte counts; `ids` holds kSets routing sets of `pairs` ids.
struct CaseRun {
  gossamer::kern::MoeGateUpParams gp;
  gossamer::kern::MoeDownParams dp;
  const int32_t* ids;
  size_t pairs;
  double gu_bytes, dn_bytes, ceil;
  std::string name;
  int pipe_filter;  // -1: every pipe
};

// gate_up and down timed apart, for every variant of kVariants.
bool time_kernels(CaseRun& r) {
  using namespace gossamer::kern;
  for (const Variant& v : kVariants) {
    if (r.pipe_filter >= 0 && v.pipe != r.pipe_filter) continue;
    r.gp.pipe = v.pipe == 2 ? 0 : v.pipe;
    r.dp.pipe = v.pipe;
    r.gp.pdl = r.dp.pdl = v.pdl;
    const std::string tag = " [pipe " + std::to_string(v.pipe) + (v.pdl ? " pdl]" : "]");
    int it = 0;
    double ms = testing::time_ms(
        [&] {
          r.gp.ids = r.ids + (it++ % kSets) * r.pairs;
          (void)launch_moe_gate_up(r.gp, 0);
        },
        64);
    testing::print_bench_line("moe_gate_up " + r.name + tag, r.gu_bytes, ms, r.ceil);
    ms = testing::time_ms(
        [&] {
          r.dp.ids = r.ids + (it++ % kSets) * r.pairs;
          (void)launch_moe_down(r.dp, 0);
        },
        64);
    testing::print_bench_line("moe_down " + r.name + tag, r.dn_bytes, ms, r.ceil);
    if (!device_ok(r.name + tag)) return false;
  }
  return true;
}

// gate_up then down (one MoE step), for every pair of kPairs.
bool time_pairs(CaseRun& r) {
  using namespace gossamer::kern;
  for (const PairVariant& v : kPairs) {
    if (r.pipe_filter >= 0 && v.gu_pipe != r.pipe_filter) continue;
    r.gp.pipe = v.gu_pipe;
    r.dp.pipe = v.dn_pipe;
    r.gp.pdl = r.dp.pdl = v.pdl;
    int it = 0;
    const double ms = testing::time_ms(
        [&] {
          r.gp.ids = r.dp.ids = r.ids + (it++ % kSets) * r.pairs;
          (void)launch_moe_gate_up(r.gp, 0);
          (void)launch_moe_down(r.dp, 0);
        },
        64);
    const std::string tag = " [gate_up pipe " + std::to_string(v.gu_pipe) + " + down pipe " +
                            std::to_string(v.dn_pipe) + (v.pdl ? " pdl]" : "]");
    testing::print_bench_line("moe step " + r.name + tag, r.gu_bytes + r.dn_bytes, ms, r.ceil);
    if (!device_ok(r.name + tag)) return false;
  }
  return true;
}

bool bench_case(const gossamer::kern::MoeCase& c, int pipe_filter, double ceil) {
  using namespace gossamer::kern;
  const size_t H = c.hidden, I = c.inter, E = c.n_experts, pairs = c.batch * c.k;
  testing::DevBuf<uint8_t> gb(E * 2 * I * H / 2), gs(E * 2 * I * H / 32), db(E * H * I / 2),
      ds(E * H * I / 32);
  testing::DevBuf<float> gbias(E * 2 * I), dbias(E * H), x(c.batch * H), res(c.batch * H), w(pairs),
      act(pairs * I);
  testing::DevBuf<int32_t> ids(kSets * pairs);
  testing::DevBuf<float> part(pairs * H);
  std::vector<int32_t> hid;
  std::vector<float> hw;
  std::mt19937_64 rng(1234);
  moetest::route(rng, kSets * c.batch, c.k, c.n_experts, &hid, &hw);
  ids.upload(hid);
  double distinct = 0;  // mean distinct experts per set
  for (int set = 0; set < kSets; ++set) {
    std::vector<bool> seen(E);
    for (size_t i = 0; i < pairs; ++i) seen[hid[set * pairs + i]] = true;  // NOLINT
    distinct += static_cast<double>(std::count(seen.begin(), seen.end(), true)) / kSets;
  }
  cudaMemset(gb.get(), 0x11, gb.bytes());
  cudaMemset(gs.get(), 120, gs.bytes());
  cudaMemset(db.get(), 0x11, db.bytes());
  cudaMemset(ds.get(), 120, ds.bytes());
  for (auto* b : {&gbias, &dbias, &x, &res, &w}) cudaMemset(b->get(), 0, b->bytes());
  MoeGateUpParams gp{gb.get(), gs.get(), gbias.get(), x.get(),     ids.get(), act.get(), c.batch,
                     c.k,      c.hidden, c.inter,     c.n_experts, 1.702f,    7.f};
  MoeDownParams dp{db.get(),  ds.get(), dbias.get(), act.get(), ids.get(), w.get(),
                   res.get(), c.batch,  c.k,         c.hidden,  c.inter,   c.n_experts};
  dp.part = part.get();
  // Bytes: the distinct routed experts' weights (17/16 byte per 2 values).
  CaseRun r{gp,
            dp,
            ids.get(),
            pairs,
            distinct * 2 * I * H / 2 * 17.0 / 16,
            distinct * H * I / 2 * 17.0 / 16,
            ceil,
            c.name,
            pipe_filter};
  std::printf("%s: %.2f distinct experts per launch (%zu routed pairs)\n", c.name, distinct, pairs);
  return time_kernels(r) && time_pairs(r);
}

}  // namespace

// Optional filters (for profilers): argv[1] = substring of the case name, argv[2] = pipe.
int main(int argc, char** argv) {
  using namespace gossamer::kern;
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // lines survive a timeout or a crash
  const double ceil = testing::copy_ceiling_gbs();
  std::printf("moe_gate_up_swiglu_mxfp4w_f32a / moe_down_mxfp4w_f32a (copy ceiling %.0f GB/s)\n",
              ceil);
  if (argc < 2 || std::string("probe").find(argv[1]) != std::string::npos) bulk_probe(ceil);
  for (const auto& c : kMoeCases) {
    if (argc > 1 && std::string(c.name).find(argv[1]) == std::string::npos) continue;
    if (!bench_case(c, argc > 2 ? std::atoi(argv[2]) : -1, ceil)) return 1;
  }
  return 0;
}

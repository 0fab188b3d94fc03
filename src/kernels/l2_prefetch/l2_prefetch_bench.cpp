// Probe for issue #4 (docs/decode-overhead.md, section 3, "The probe"): does an L2 prefetch of the
// next layer's QKV weights (gpt-oss-120b, batch 1: 5120 x 2880 bf16 = 29.5 MB) survive the MoE
// expert streams of one layer (pipe 6 gate_up + down, 4 of 128 experts, ~53 MB) and make the
// real qkv_rope launch faster? Every repetition: flush L2 (l2_touch of 256 MB of other data),
// [prefetch], [MoE gate_up + down], qkv_rope (fused RMSNorm, as in the engine); events around
// each part. Four weight copies and eight routing sets rotate between repetitions, and lines
// prefetched with evict_last are demoted (l2_demote) after each repetition.
// Usage: l2_prefetch_bench [reps]   (default 30)
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "kernels/common/cuda_check.h"
#include "kernels/common/testing.h"
#include "kernels/l2_prefetch/params.h"
#include "kernels/moe/bulk_hint.h"
#include "kernels/moe/params.h"
#include "kernels/qkv_rope/params.h"

namespace gossamer::kern {
namespace {

using testing::DevBuf;

enum class Pre { kNone, kPrefetch, kPersist, kHot };

struct Scenario {
  const char* name;
  Pre pre;
  L2Method method;
  L2Priority prio;
  bool spin;  // a 40 us GPU spin after the prefetch (it has landed before the next kernel)
  bool moe;
  MoeL2Hint hint;
};

constexpr L2Method kB = L2Method::kBulk, kS = L2Method::kSector, kL = L2Method::kLoad;
constexpr L2Priority kLast = L2Priority::kLast, kNorm = L2Priority::kNormal;
constexpr MoeL2Hint kNo = MoeL2Hint::kNone, kEf = MoeL2Hint::kEvictFirst;
const Scenario kScenarios[] = {
    {"a  cold", Pre::kNone, kB, kLast, false, false, kNo},
    {"   hot (qkv read just before)", Pre::kHot, kB, kLast, false, false, kNo},
    {"b  bulk evict_last, spin", Pre::kPrefetch, kB, kLast, true, false, kNo},
    {"b  sector evict_last, spin", Pre::kPrefetch, kS, kLast, true, false, kNo},
    {"b  load evict_last, spin", Pre::kPrefetch, kL, kLast, true, false, kNo},
    {"b  bulk evict_last, no spin", Pre::kPrefetch, kB, kLast, false, false, kNo},
    {"c0 moe, no prefetch", Pre::kNone, kB, kLast, false, true, kNo},
    {"c  bulk evict_last + moe", Pre::kPrefetch, kB, kLast, false, true, kNo},
    {"c  bulk evict_normal + moe", Pre::kPrefetch, kB, kNorm, false, true, kNo},
    {"c  sector evict_last + moe", Pre::kPrefetch, kS, kLast, false, true, kNo},
    {"c  load evict_last + moe", Pre::kPrefetch, kL, kLast, false, true, kNo},
    {"c  bulk evict_last, spin + moe", Pre::kPrefetch, kB, kLast, true, true, kNo},
    {"d0 moe evict_first, no prefetch", Pre::kNone, kB, kLast, false, true, kEf},
    {"d  bulk evict_last + moe evict_first", Pre::kPrefetch, kB, kLast, false, true, kEf},
    {"d  bulk evict_normal + moe evict_first", Pre::kPrefetch, kB, kNorm, false, true, kEf},
    {"d  sector evict_last + moe evict_first", Pre::kPrefetch, kS, kLast, false, true, kEf},
    {"e  persisting window + moe", Pre::kPersist, kB, kLast, false, true, kNo},
    {"e  persisting window + moe evict_first", Pre::kPersist, kB, kLast, false, true, kEf},
    {"a' cold (again, residue check)", Pre::kNone, kB, kLast, false, false, kNo},
};

constexpr int kCopies = 4, kSets = 8;
constexpr int kHidden = 2880, kHeads = 64, kKvHeads = 8, kInter = 2880, kExperts = 128, kK = 4;
constexpr size_t kQkvRows = size_t{kHeads + 2 * kKvHeads} * 64;  // 5120
constexpr size_t kQkvBytes = kQkvRows * kHidden * 2;

struct Rig {
  DevBuf<uint16_t> w{kCopies * kQkvRows * kHidden}, norm{kHidden}, kc{kKvHeads * 16 * 64},
      vc{kKvHeads * 16 * 64};
  DevBuf<float> x{kHidden}, q{kHeads * 64}, gbias{size_t{kExperts} * 2 * kInter},
      dbias{size_t{kExperts} * kHidden}, res{kHidden}, rw{kK}, act{kK * kInter};
  DevBuf<int32_t> pos{1}, table{1}, ids{kSets * kK};
  DevBuf<uint8_t> gb{size_t{kExperts} * 2 * kInter * kHidden / 2},
      gs{size_t{kExperts} * 2 * kInter * kHidden / 32}, db{size_t{kExperts} * kHidden * kInter / 2},
      ds{size_t{kExperts} * kHidden * kInter / 32}, flush{size_t{256} << 20};
  QkvRopeParams qp;
  MoeGateUpParams gp;
  MoeDownParams dp;
  cudaStream_t s = nullptr;
  size_t persist_bytes = 0;
};

bool setup(Rig& r) {
  if (!r.gb.get() || !r.db.get() || !r.flush.get() || !r.w.get()) return false;
  cudaMemset(r.w.get(), 0x3c, r.w.bytes());  // bf16 0x3c3c ~ 0.0115
  cudaMemset(r.norm.get(), 0x3f, r.norm.bytes());
  cudaMemset(r.x.get(), 0, r.x.bytes());
  cudaMemset(r.pos.get(), 0, r.pos.bytes());
  cudaMemset(r.table.get(), 0, r.table.bytes());
  cudaMemset(r.gb.get(), 0x11, r.gb.bytes());
  cudaMemset(r.gs.get(), 120, r.gs.bytes());
  cudaMemset(r.db.get(), 0x11, r.db.bytes());
  cudaMemset(r.ds.get(), 120, r.ds.bytes());
  for (auto* b : {&r.gbias, &r.dbias, &r.res, &r.rw, &r.act}) cudaMemset(b->get(), 0, b->bytes());
  cudaMemset(r.flush.get(), 1, r.flush.bytes());
  std::vector<int32_t> hid(kSets * kK);
  for (size_t i = 0; i < hid.size(); ++i) hid[i] = static_cast<int32_t>((i * 7) % kExperts);
  r.ids.upload(hid);
  QkvRopeParams& p = r.qp;
  p.x = r.x.get();
  p.norm_w = r.norm.get();
  p.pos = r.pos.get();
  p.block_table = r.table.get();
  p.q = r.q.get();
  p.k_cache = r.kc.get();
  p.v_cache = r.vc.get();
  p.batch = 1;
  p.hidden = kHidden;
  p.n_heads = kHeads;
  p.n_kv_heads = kKvHeads;
  p.max_blocks = 1;
  p.num_blocks = 1;
  r.gp =
      MoeGateUpParams{r.gb.get(), r.gs.get(), r.gbias.get(), r.x.get(), r.ids.get(), r.act.get(), 1,
                      kK,         kHidden,    kInter,        kExperts,  1.702f,      7.f};
  r.dp = MoeDownParams{r.db.get(),  r.ds.get(), r.dbias.get(), r.act.get(),
                       r.ids.get(), r.rw.get(), r.res.get(),   1,
                       kK,          kHidden,    kInter,        kExperts};
  int maxp = 0;
  cudaDeviceGetAttribute(&maxp, cudaDevAttrMaxPersistingL2CacheSize, 0);
  r.persist_bytes = static_cast<size_t>(maxp);
  std::printf("max persisting L2 %.1f MB\n", maxp / 1e6);
  cudaStreamCreate(&r.s);
  return cudaDeviceSynchronize() == cudaSuccess;
}

// Access-policy window on r.s: `bytes` at `base` persisting (0 bytes: off).
void set_window(Rig& r, const void* base, size_t bytes) {
  cudaStreamAttrValue v{};
  v.accessPolicyWindow.base_ptr = const_cast<void*>(base);
  v.accessPolicyWindow.num_bytes = bytes;
  v.accessPolicyWindow.hitRatio =
      bytes ? static_cast<float>(std::min(1.0, double(r.persist_bytes) / double(bytes))) : 0.f;
  v.accessPolicyWindow.hitProp = cudaAccessPropertyPersisting;
  v.accessPolicyWindow.missProp = cudaAccessPropertyStreaming;
  cudaStreamSetAttribute(r.s, cudaStreamAttributeAccessPolicyWindow, &v);
}

struct Times {
  std::vector<float> pre, moe, qkv, chain;
};

float median(std::vector<float> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.f : v[v.size() / 2];
}
float mean(const std::vector<float>& v) {
  double s = 0;
  for (float f : v) s += f;
  return v.empty() ? 0.f : static_cast<float>(s / v.size());
}

// One repetition of scenario c with weight copy `copy` and routing set `set`.
Status rep(Rig& r, const Scenario& c, int copy, int set, cudaEvent_t (&e)[4], Times& t) {
  const uint16_t* w = r.w.get() + static_cast<size_t>(copy) * kQkvRows * kHidden;
  r.qp.w = w;
  GS_RETURN_IF_ERROR(launch_l2_touch(r.flush.get(), r.flush.bytes(), r.s));
  cudaEventRecord(e[0], r.s);
  if (c.pre == Pre::kHot) GS_RETURN_IF_ERROR(launch_qkv_rope(r.qp, r.s));
  if (c.pre == Pre::kPrefetch) {
    L2PrefetchParams pp;
    pp.ptr = w;
    pp.bytes = kQkvBytes;
    pp.method = c.method;
    pp.priority = c.prio;
    GS_RETURN_IF_ERROR(launch_l2_prefetch(pp, r.s));
  }
  if (c.pre == Pre::kPersist) {
    set_window(r, w, kQkvBytes);
    GS_RETURN_IF_ERROR(launch_l2_touch(w, kQkvBytes, r.s));
    set_window(r, nullptr, 0);
  }
  if (c.spin) GS_RETURN_IF_ERROR(launch_l2_spin(40000, r.s));
  cudaEventRecord(e[1], r.s);
  if (c.moe) {
    r.gp.ids = r.dp.ids = r.ids.get() + set * kK;
    GS_RETURN_IF_ERROR(launch_moe_gate_up_bulk_hint(r.gp, c.hint, r.s));
    GS_RETURN_IF_ERROR(launch_moe_down_bulk_hint(r.dp, c.hint, r.s));
  }
  cudaEventRecord(e[2], r.s);
  GS_RETURN_IF_ERROR(launch_qkv_rope(r.qp, r.s));
  cudaEventRecord(e[3], r.s);
  if (c.prio == L2Priority::kLast) GS_RETURN_IF_ERROR(launch_l2_demote(w, kQkvBytes, r.s));
  if (c.pre == Pre::kPersist) cudaCtxResetPersistingL2Cache();
  GS_RETURN_IF_ERROR(cuda_status(cudaStreamSynchronize(r.s), "probe repetition"));
  float ms[3];
  for (int i = 0; i < 3; ++i) cudaEventElapsedTime(&ms[i], e[i], e[i + 1]);
  float all = 0;
  cudaEventElapsedTime(&all, e[0], e[3]);
  t.pre.push_back(ms[0] * 1e3f);
  t.moe.push_back(ms[1] * 1e3f);
  t.qkv.push_back(ms[2] * 1e3f);
  t.chain.push_back(all * 1e3f);
  return Status::Ok();
}

int run(int reps) {
  const double ceil = testing::copy_ceiling_gbs();
  Rig r;
  if (!setup(r)) {
    std::printf("l2_prefetch_bench: setup failed (%s)\n", cudaGetErrorString(cudaGetLastError()));
    return 1;
  }
  std::printf(
      "qkv_rope 120b b1 (fused norm): %.1f MB of weights; copy ceiling %.0f GB/s; %d reps\n",
      kQkvBytes / 1e6, ceil, reps);
  std::printf("| %-40s | qkv med | qkv mean | qkv GB/s | moe med | pre med | chain med |\n",
              "scenario (times in us)");
  cudaEvent_t e[4];
  for (auto& ev : e) cudaEventCreate(&ev);
  for (const Scenario& c : kScenarios) {
    // The persisting carve-out only while the access-policy-window rows run.
    cudaDeviceSetLimit(cudaLimitPersistingL2CacheSize,
                       c.pre == Pre::kPersist ? r.persist_bytes : 0);
    Times t;
    for (int i = 0; i < reps + 2; ++i) {
      const Status st = rep(r, c, i % kCopies, i % kSets, e, t);
      if (!st.ok()) {
        std::printf("l2_prefetch_bench: %s: %s\n", c.name, st.message().c_str());
        return 1;
      }
      if (i < 2) t = Times{};  // warm-up repetitions
    }
    const float qm = median(t.qkv);
    std::printf("| %-40s | %7.2f | %8.2f | %8.0f | %7.2f | %7.2f | %9.2f |\n", c.name, qm,
                mean(t.qkv), kQkvBytes / (qm * 1e-6) / 1e9, median(t.moe), median(t.pre),
                median(t.chain));
  }
  for (auto& ev : e) cudaEventDestroy(ev);
  return 0;
}

}  // namespace
}  // namespace gossamer::kern

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  const int reps = argc > 1 ? std::max(1, std::atoi(argv[1])) : 30;
  return gossamer::kern::run(reps);
}

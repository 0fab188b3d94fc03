// KernelTracer: CUPTI concurrent-kernel activity tracing through a dlopen-ed libcupti (loaded on
// the first KernelTracer::create(), i.e. only for `gossamer bench --kernel-profile`), and the
// decode / prefill profiling drivers.
#include <cuda_runtime.h>
#include <cupti.h>
#include <dlfcn.h>

#include <atomic>
#include <cstdlib>
#include <mutex>
#include <type_traits>

#include "engine/cuda/cuda_runner.h"
#include "engine/cuda/kernel_profile.h"
#include "kernels/common/cuda_check.h"

namespace gossamer {
namespace {

struct CuptiApi {
  decltype(&cuptiActivityRegisterCallbacks) RegisterCallbacks = nullptr;
  decltype(&cuptiActivityEnable) Enable = nullptr;
  decltype(&cuptiActivityDisable) Disable = nullptr;
  decltype(&cuptiActivityFlushAll) FlushAll = nullptr;
  decltype(&cuptiActivityGetNextRecord) GetNextRecord = nullptr;
  decltype(&cuptiActivityGetNumDroppedRecords) GetNumDroppedRecords = nullptr;
  decltype(&cuptiGetResultString) GetResultString = nullptr;
  std::string error;  // non-empty: the library or a symbol could not be loaded (why)
};

CuptiApi load_cupti() {
  CuptiApi api;
  std::vector<std::string> names;
  if (const char* e = std::getenv("GOSSAMER_CUPTI_LIB")) names.emplace_back(e);
  for (const char* n : {"libcupti.so.13", "libcupti.so"}) names.emplace_back(n);
  for (const char* dir : {"/usr/local/cuda/extras/CUPTI/lib64", "/usr/local/cuda/lib64",
                          "/usr/local/cuda/targets/x86_64-linux/lib", "/usr/local/cuda/lib"}) {
    names.push_back(std::string(dir) + "/libcupti.so.13");
  }
  void* h = nullptr;
  std::string tried, last_err;
  for (const auto& n : names) {
    h = dlopen(n.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (h) break;
    const char* e = dlerror();
    last_err = e ? e : "not found";
    tried += (tried.empty() ? "" : ", ") + n;
  }
  if (!h) {
    api.error = "cannot load CUPTI (searched " + tried + "; last error: " + last_err +
                "); put the CUDA toolkit's libcupti.so.13 on LD_LIBRARY_PATH or set "
                "GOSSAMER_CUPTI_LIB to its path";
    return api;
  }
  auto sym = [&](auto& fn, const char* name) {
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(h, name));
    if (!fn && api.error.empty()) api.error = std::string("CUPTI: missing symbol ") + name;
  };
  sym(api.RegisterCallbacks, "cuptiActivityRegisterCallbacks");
  sym(api.Enable, "cuptiActivityEnable");
  sym(api.Disable, "cuptiActivityDisable");
  sym(api.FlushAll, "cuptiActivityFlushAll");
  sym(api.GetNextRecord, "cuptiActivityGetNextRecord");
  sym(api.GetNumDroppedRecords, "cuptiActivityGetNumDroppedRecords");
  sym(api.GetResultString, "cuptiGetResultString");
  return api;  // the handle stays open for the life of the process
}

// The process-wide table, loaded on first use (thread-safe). Never destroyed: CUPTI may still
// deliver buffers (buffer_completed) from its own exit handlers after static destructors ran.
const CuptiApi& cupti() {
  static const CuptiApi* const api = new CuptiApi(load_cupti());
  return *api;
}

Status cupti_status(CUptiResult r, const char* what) {
  if (r == CUPTI_SUCCESS) return Status::Ok();
  const char* s = nullptr;
  if (cupti().GetResultString) cupti().GetResultString(r, &s);
  return Internal(std::string("CUPTI ") + what + ": " + (s ? s : "error ") +
                  (s ? "" : std::to_string(static_cast<int>(r))));
}

}  // namespace

struct KernelTracer::State {
  std::mutex mu;
  std::vector<KernelRecord> recs;
  int64_t dropped = 0;
  bool running = false;
};

namespace {

// CUPTI's buffer callbacks take no user pointer: the one live tracer's state sits here.
std::atomic<KernelTracer::State*>& active_state() {
  static std::atomic<KernelTracer::State*> slot{nullptr};
  return slot;
}

constexpr size_t kBufferBytes = size_t{8} << 20;

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, kBufferBytes));
  *size = *buffer ? kBufferBytes : 0;
  *max_records = 0;  // as many as fit
}

void CUPTIAPI buffer_completed(CUcontext ctx, uint32_t stream, uint8_t* buffer, size_t,
                               size_t valid) {
  KernelTracer::State* st = active_state().load();
  const CuptiApi& api = cupti();
  std::vector<KernelRecord> got;
  CUpti_Activity* rec = nullptr;
  while (valid > 0 && api.GetNextRecord(buffer, valid, &rec) == CUPTI_SUCCESS) {
    if (rec->kind != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL &&
        rec->kind != CUPTI_ACTIVITY_KIND_KERNEL) {
      continue;
    }
    const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(rec);
    got.push_back({k->name ? k->name : "?", k->start, k->end, k->correlationId, k->graphId});
  }
  size_t dropped = 0;
  api.GetNumDroppedRecords(ctx, stream, &dropped);
  std::free(buffer);
  if (st == nullptr) return;
  std::lock_guard<std::mutex> lock(st->mu);
  if (!st->running) return;
  st->recs.insert(st->recs.end(), got.begin(), got.end());
  st->dropped += static_cast<int64_t>(dropped);
}

}  // namespace

KernelTracer::KernelTracer() : st_(std::make_unique<State>()) {}

KernelTracer::~KernelTracer() {
  if (st_->running) {
    cupti().Disable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
    cupti().FlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  }
  State* expected = st_.get();
  active_state().compare_exchange_strong(expected, nullptr);
}

Result<std::unique_ptr<KernelTracer>> KernelTracer::create() {
  const CuptiApi& api = cupti();
  if (!api.error.empty()) return NotFound(api.error);
  std::unique_ptr<KernelTracer> t(new KernelTracer());
  State* expected = nullptr;
  if (!active_state().compare_exchange_strong(expected, t->st_.get())) {
    return Unsupported("KernelTracer::create: another tracer is alive (one per process)");
  }
  GS_RETURN_IF_ERROR(cupti_status(api.RegisterCallbacks(buffer_requested, buffer_completed),
                                  "cuptiActivityRegisterCallbacks"));
  return t;
}

Status KernelTracer::start() {
  {
    std::lock_guard<std::mutex> lock(st_->mu);
    if (st_->running) return Unsupported("KernelTracer::start: already running");
    st_->recs.clear();
    st_->dropped = 0;
    st_->running = true;
  }
  GS_CUDA_RETURN(cudaDeviceSynchronize());
  return cupti_status(cupti().Enable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL),
                      "cuptiActivityEnable(CONCURRENT_KERNEL)");
}

Result<std::vector<KernelRecord>> KernelTracer::stop(int64_t* dropped) {
  if (!st_->running) return Unsupported("KernelTracer::stop: not running");
  const Status sync = kern::cuda_status(cudaDeviceSynchronize(), "KernelTracer::stop");
  const Status flush =
      cupti_status(cupti().FlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED), "cuptiActivityFlushAll");
  const Status dis =
      cupti_status(cupti().Disable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL), "cuptiActivityDisable");
  std::vector<KernelRecord> out;
  {
    std::lock_guard<std::mutex> lock(st_->mu);
    st_->running = false;
    out.swap(st_->recs);
    if (dropped) *dropped = st_->dropped;
  }
  GS_RETURN_IF_ERROR(sync);
  GS_RETURN_IF_ERROR(flush);
  GS_RETURN_IF_ERROR(dis);
  return out;
}

Result<KernelProfile> profile_decode(CudaModelRunner& r, KernelTracer& t, int batch, int64_t depth,
                                     int steps, bool graph, double wall_us_per_step) {
  if (steps <= 0) return InvalidArgument("profile_decode: steps must be > 0");
  GS_RETURN_IF_ERROR(t.start());
  Result<DecodeBenchResult> res = r.bench_decode(batch, depth, steps);
  int64_t dropped = 0;
  auto recs = t.stop(&dropped);
  GS_RETURN_IF_ERROR(res.status());
  GS_RETURN_IF_ERROR(recs.status());
  KernelProfileInput in;
  in.unit = "step";
  // bench_decode replays the step steps + 2 times (2 untimed warm-up replays first).
  in.units = steps + 2;
  in.graph = graph;
  in.wall_us_per_unit = wall_us_per_step;
  in.traced_wall_us_per_unit = res->ms * 1e3 / steps;
  return aggregate_kernel_profile(*recs, in, dropped);
}

Result<KernelProfile> profile_prefill(CudaModelRunner& r, KernelTracer& t, int64_t tokens,
                                      int64_t depth, int reps, double wall_us_per_prefill) {
  if (reps <= 0) return InvalidArgument("profile_prefill: reps must be > 0");
  GS_RETURN_IF_ERROR(t.start());
  double ms = 0;
  Status st = Status::Ok();
  for (int i = 0; i < reps && st.ok(); ++i) {
    Result<double> one = r.bench_prefill(tokens, depth);
    st = one.status();
    if (one.ok()) ms += *one;
  }
  int64_t dropped = 0;
  auto recs = t.stop(&dropped);
  GS_RETURN_IF_ERROR(st);
  GS_RETURN_IF_ERROR(recs.status());
  KernelProfileInput in;
  in.unit = "prefill";
  in.units = reps;
  in.graph = false;
  in.wall_us_per_unit = wall_us_per_prefill;
  in.traced_wall_us_per_unit = ms * 1e3 / reps;
  return aggregate_kernel_profile(*recs, in, dropped);
}

}  // namespace gossamer

// Per-kernel time breakdown of the real decode step (CUDA graph replay, PDL) and of a prefill,
// from CUPTI activity records (CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: one record per kernel
// execution, kernels inside a graph reported per node). `gossamer bench --kernel-profile`.
//
// libcupti is dlopen-ed by KernelTracer::create() only (never at start-up; nothing else needs
// it). This header has no CUDA / CUPTI types: the CLI sees plain structs.
// docs/kernel-profile.md describes the table.
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace gossamer {

class CudaModelRunner;

// One kernel execution as CUPTI reports it.
struct KernelRecord {
  std::string name;       // mangled (or plain C) kernel name
  uint64_t start_ns = 0;  // GPU timestamps
  uint64_t end_ns = 0;
  uint32_t correlation =
      0;                  // id of the launching API call (all nodes of one graph launch share it)
  uint32_t graph_id = 0;  // 0: not launched through a graph
};

// One line of the table: all executions of one (shortened) kernel name.
struct KernelProfileRow {
  std::string name;           // demangled, shortened (shorten_kernel_name)
  int64_t calls = 0;          // over the whole trace
  double calls_per_unit = 0;  // calls / units
  double us_per_unit = 0;     // summed duration / units
  double pct_of_wall = 0;     // us_per_unit / wall_us_per_unit * 100
  double mean_us = 0;         // summed duration / calls
};

// How the trace maps to units (decode steps or prefills) and the wall times to compare with.
struct KernelProfileInput {
  std::string unit = "step";    // "step" (decode) or "prefill"
  int64_t units = 0;            // steps / prefills executed while tracing (> 0)
  bool graph = false;           // one graph launch per unit: span / busy per launch (correlation)
  double wall_us_per_unit = 0;  // untraced measurement (the bench's own number)
  double traced_wall_us_per_unit = 0;  // measured while tracing (0: unknown)
  Status validate() const;
};

struct KernelProfile {
  KernelProfileInput in;
  std::vector<KernelProfileRow> rows;  // sorted by us_per_unit, largest first
  int64_t records = 0;                 // kernel records in the trace
  int64_t dropped = 0;                 // records CUPTI reported as dropped
  int64_t launch_groups = 0;           // distinct correlation ids of graph kernels (graph mode)
  double kernels_per_unit = 0;
  double sum_us_per_unit = 0;   // sum of kernel durations (overlapping kernels count twice)
  double busy_us_per_unit = 0;  // union of kernel intervals (GPU running >= 1 kernel)
  double span_us_per_unit = 0;  // first kernel start .. last kernel end (graph: per launch)
};

// "void gossamer::kern::(anonymous namespace)::foo<1, (gossamer::kern::Mode)2>(Params)" ->
// "foo<1, (Mode)2>": no return type, no parameter list, no namespace qualifiers; at most
// max_len characters (longer names end in "...").
std::string shorten_kernel_name(std::string_view demangled, size_t max_len = 72);
// The demangled form of a mangled name ("_Z..."), else the name unchanged.
std::string demangle_kernel_name(const std::string& mangled);

// Aggregates records (any order) per shortened name. Errors: invalid input, no records,
// a record with end < start.
Result<KernelProfile> aggregate_kernel_profile(const std::vector<KernelRecord>& recs,
                                               const KernelProfileInput& in, int64_t dropped);
// A markdown table plus the sum / busy / span / wall summary lines (title on the first line).
std::string format_kernel_profile(const KernelProfile& p, const std::string& title);
nlohmann::json kernel_profile_json(const KernelProfile& p);

// CUPTI kernel tracing. At most one tracer exists at a time (CUPTI's buffer callbacks carry no
// user pointer, so the active tracer sits in one process-wide slot).
class KernelTracer {
 public:
  // dlopen libcupti (libcupti.so.13, libcupti.so, then the CUDA toolkit's lib directories) and
  // register the buffer callbacks. Error names the files searched.
  static Result<std::unique_ptr<KernelTracer>> create();
  ~KernelTracer();
  KernelTracer(const KernelTracer&) = delete;
  KernelTracer& operator=(const KernelTracer&) = delete;

  Status start();  // clears the records, enables concurrent-kernel activity
  // Synchronizes the device, flushes CUPTI buffers, disables the activity; returns the records.
  Result<std::vector<KernelRecord>> stop(int64_t* dropped);

  struct State;  // records + mutex (kernel_profile_cupti.cpp)

 private:
  KernelTracer();
  std::unique_ptr<State> st_;
};

// Traces `steps` graph-replayed decode steps (CudaModelRunner::bench_decode) and aggregates per
// step. wall_us_per_step: the untraced measurement to compare with.
Result<KernelProfile> profile_decode(CudaModelRunner& r, KernelTracer& t, int batch, int64_t depth,
                                     int steps, bool graph, double wall_us_per_step);
// Traces `reps` prefills of `tokens` tokens at `depth` and aggregates per prefill.
Result<KernelProfile> profile_prefill(CudaModelRunner& r, KernelTracer& t, int64_t tokens,
                                      int64_t depth, int reps, double wall_us_per_prefill);

}  // namespace gossamer

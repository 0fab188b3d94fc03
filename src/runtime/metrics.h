// Serving metrics, updated by the engine thread and rendered as Prometheus text by /metrics.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

namespace gossamer {

// A cumulative histogram with fixed upper bounds (seconds).
struct Histogram {
  std::vector<double> bounds;
  std::vector<uint64_t> counts;  // per bound (not cumulative), plus one overflow bucket
  double sum = 0;
  uint64_t count = 0;
  explicit Histogram(std::vector<double> b);
  void observe(double v);
};

struct MetricsSnapshot {
  int64_t running = 0, waiting = 0;
  double kv_usage = 0;  // fraction of full-pool blocks in use (sliding pool when no full one)
  int64_t prefix_queries = 0, prefix_hits = 0;  // tokens
  int64_t prompt_tokens = 0, generation_tokens = 0, cached_prompt_tokens = 0;
  int64_t preemptions = 0, steps = 0;
  int64_t finished_stop = 0, finished_length = 0, finished_cancelled = 0, finished_timeout = 0,
          finished_error = 0, rejected = 0;
};

class Metrics {
 public:
  Metrics();
  void observe_ttft(double s);
  void observe_itl(double s);
  void observe_e2e(double s);
  // Applies `fn` to the snapshot under the lock.
  template <class F>
  void update(F&& fn) {
    std::lock_guard<std::mutex> lock(mu_);
    fn(snap_);
  }
  MetricsSnapshot snapshot() const;
  std::string prometheus(const std::string& model_name) const;

 private:
  mutable std::mutex mu_;
  MetricsSnapshot snap_;
  Histogram ttft_, itl_, e2e_;
};

}  // namespace gossamer

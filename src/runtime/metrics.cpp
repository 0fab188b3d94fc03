#include "runtime/metrics.h"

#include <sstream>

namespace gossamer {

Histogram::Histogram(std::vector<double> b) : bounds(std::move(b)), counts(bounds.size() + 1) {}

void Histogram::observe(double v) {
  size_t i = 0;
  while (i < bounds.size() && v > bounds[i]) ++i;
  ++counts[i];
  sum += v;
  ++count;
}

Metrics::Metrics()
    : ttft_({0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10,
             20, 40, 80}),
      itl_({0.001, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1, 2.5, 5,
            10}),
      e2e_({0.01, 0.05, 0.1, 0.3, 0.5, 0.8, 1, 1.5, 2, 2.5, 5, 10, 15, 20, 30, 40, 50, 60, 120}) {}

void Metrics::observe_ttft(double s) {
  std::lock_guard<std::mutex> lock(mu_);
  ttft_.observe(s);
}
void Metrics::observe_itl(double s) {
  std::lock_guard<std::mutex> lock(mu_);
  itl_.observe(s);
}
void Metrics::observe_e2e(double s) {
  std::lock_guard<std::mutex> lock(mu_);
  e2e_.observe(s);
}

MetricsSnapshot Metrics::snapshot() const {
  std::lock_guard<std::mutex> lock(mu_);
  return snap_;
}

namespace {

void put(std::ostringstream& o, const char* name, const char* type, const char* help,
         const std::string& labels, double v) {
  o << "# HELP " << name << ' ' << help << "\n# TYPE " << name << ' ' << type << '\n'
    << name << '{' << labels << "} " << v << '\n';
}

void put_hist(std::ostringstream& o, const char* name, const char* help, const std::string& labels,
              const Histogram& h) {
  o << "# HELP " << name << ' ' << help << "\n# TYPE " << name << " histogram\n";
  uint64_t cum = 0;
  for (size_t i = 0; i < h.bounds.size(); ++i) {
    cum += h.counts[i];
    o << name << "_bucket{" << labels << ",le=\"" << h.bounds[i] << "\"} " << cum << '\n';
  }
  o << name << "_bucket{" << labels << ",le=\"+Inf\"} " << h.count << '\n';
  o << name << "_sum{" << labels << "} " << h.sum << '\n';
  o << name << "_count{" << labels << "} " << h.count << '\n';
}

}  // namespace

std::string Metrics::prometheus(const std::string& model_name) const {
  std::lock_guard<std::mutex> lock(mu_);
  const std::string l = "model_name=\"" + model_name + "\"";
  const MetricsSnapshot& s = snap_;
  std::ostringstream o;
  put(o, "gossamer_num_requests_running", "gauge", "Requests in the running batch.", l,
      (double)s.running);
  put(o, "gossamer_num_requests_waiting", "gauge", "Requests waiting to be scheduled.", l,
      (double)s.waiting);
  put(o, "gossamer_kv_cache_usage_perc", "gauge", "Fraction of KV-cache blocks in use.", l,
      s.kv_usage);
  put(o, "gossamer_prefix_cache_queries_total", "counter", "Prompt tokens looked up.", l,
      (double)s.prefix_queries);
  put(o, "gossamer_prefix_cache_hits_total", "counter", "Prompt tokens found in the cache.", l,
      (double)s.prefix_hits);
  put(o, "gossamer_prefix_cache_hit_rate", "gauge", "Prefix-cache hits / queries (tokens).", l,
      s.prefix_queries ? (double)s.prefix_hits / (double)s.prefix_queries : 0.0);
  put(o, "gossamer_prompt_tokens_total", "counter", "Prompt tokens received.", l,
      (double)s.prompt_tokens);
  put(o, "gossamer_generation_tokens_total", "counter", "Tokens generated.", l,
      (double)s.generation_tokens);
  put(o, "gossamer_num_preemptions_total", "counter", "Requests preempted (recompute).", l,
      (double)s.preemptions);
  put(o, "gossamer_engine_steps_total", "counter", "Model steps run.", l, (double)s.steps);
  o << "# HELP gossamer_request_success_total Finished requests by finish reason.\n"
    << "# TYPE gossamer_request_success_total counter\n";
  const std::pair<const char*, int64_t> reasons[] = {
      {"stop", s.finished_stop},           {"length", s.finished_length},
      {"cancelled", s.finished_cancelled}, {"timeout", s.finished_timeout},
      {"error", s.finished_error},         {"rejected", s.rejected}};
  for (auto [r, v] : reasons) {
    o << "gossamer_request_success_total{" << l << ",finished_reason=\"" << r << "\"} " << v
      << '\n';
  }
  put_hist(o, "gossamer_time_to_first_token_seconds", "Time to first token.", l, ttft_);
  put_hist(o, "gossamer_inter_token_latency_seconds", "Time between output tokens.", l, itl_);
  put_hist(o, "gossamer_e2e_request_latency_seconds", "End-to-end request latency.", l, e2e_);
  return o.str();
}

}  // namespace gossamer

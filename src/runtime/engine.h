// The engine loop: owns the model runner, the scheduler and the sampler, and runs steps on its
// own thread. HTTP handlers talk to it only through submit() (a mutex-protected inbox) and the
// returned RequestStream (tokens out, cancel in).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "engine/model_runner.h"
#include "runtime/metrics.h"
#include "runtime/scheduler.h"
#include "runtime/token_sampler.h"

namespace gossamer {

struct EngineOptions {
  SchedulerOptions sched;
  int64_t max_queue = 256;  // requests waiting (not yet running) at most; past it submit fails
  Status validate() const;
};

class Engine {
 public:
  // Starts the engine thread.
  static Result<std::unique_ptr<Engine>> start(std::unique_ptr<ModelRunner> runner,
                                               std::unique_ptr<TokenSampler> sampler,
                                               EngineOptions opts);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Thread-safe. InvalidArgument when the request can never run (too long, bad ids, bad
  // params); ResourceExhausted when the waiting queue is full (HTTP 429).
  Result<std::shared_ptr<RequestStream>> submit(std::vector<int32_t> prompt,
                                                GenerationParams params);
  // Thread-safe validation only (same checks as submit, no queueing).
  Status check(const std::vector<int32_t>& prompt, const GenerationParams& params) const;
  // Finishes every request (reason cancelled) and joins the thread. Idempotent, thread-safe.
  void stop();

  const ModelConfig& config() const { return cfg_; }
  int64_t max_model_len() const { return sched_.max_model_len(); }
  std::string describe() const { return describe_; }
  Metrics& metrics() { return metrics_; }
  int64_t queued() const { return queued_.load(); }

 private:
  Engine(std::unique_ptr<ModelRunner> runner, std::unique_ptr<TokenSampler> sampler,
         EngineOptions opts);
  void loop();

  std::unique_ptr<ModelRunner> runner_;
  std::unique_ptr<TokenSampler> sampler_;
  EngineOptions opts_;
  ModelConfig cfg_;
  std::string describe_;
  Metrics metrics_;
  Scheduler sched_;  // engine thread only (check() is const and reads immutable sizes)

  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::unique_ptr<Request>> inbox_;
  bool stop_ = false;
  std::atomic<int64_t> queued_{0};  // inbox + scheduler waiting queue
  uint64_t next_id_ = 1;
  std::random_device rd_;
  std::mutex join_mu_;
  std::thread thread_;
};

}  // namespace gossamer

#include "runtime/engine.h"

#include <cstdio>

namespace gossamer {

Status EngineOptions::validate() const {
  GS_RETURN_IF_ERROR(sched.validate());
  if (max_queue < 1) return InvalidArgument("max_queue must be >= 1");
  return Status::Ok();
}

Engine::Engine(std::unique_ptr<ModelRunner> runner, std::unique_ptr<TokenSampler> sampler,
               EngineOptions opts)
    : runner_(std::move(runner)),
      sampler_(std::move(sampler)),
      opts_(opts),
      cfg_(runner_->config()),
      describe_(runner_->describe()),
      sched_(runner_->config(), runner_->kv_spec(), opts.sched, &metrics_) {}

Result<std::unique_ptr<Engine>> Engine::start(std::unique_ptr<ModelRunner> runner,
                                              std::unique_ptr<TokenSampler> sampler,
                                              EngineOptions opts) {
  GS_RETURN_IF_ERROR(opts.validate());
  if (!runner) return InvalidArgument("engine: no model runner");
  if (!sampler) sampler = make_default_sampler();
  const KvCacheSpec& spec = runner->kv_spec();
  if (spec.block_size < 1) return InvalidArgument("engine: kv block_size must be >= 1");
  std::unique_ptr<Engine> e(new Engine(std::move(runner), std::move(sampler), opts));
  e->thread_ = std::thread([p = e.get()] { p->loop(); });
  return e;
}

Engine::~Engine() {
  stop();
}

Status Engine::check(const std::vector<int32_t>& prompt, const GenerationParams& params) const {
  return sched_.check(prompt, params);
}

Result<std::shared_ptr<RequestStream>> Engine::submit(std::vector<int32_t> prompt,
                                                      GenerationParams params) {
  GS_RETURN_IF_ERROR(check(prompt, params));
  auto req = std::make_unique<Request>();
  auto stream = std::make_shared<RequestStream>();
  req->tokens = std::move(prompt);
  req->params = std::move(params);
  req->stream = stream;
  req->arrival = Clock::now();
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stop_) return Cancelled("the server is shutting down");
    if (queued_.load() >= opts_.max_queue) {
      metrics_.update([](MetricsSnapshot& s) { ++s.rejected; });
      return ResourceExhausted("the request queue is full (" + std::to_string(opts_.max_queue) +
                               " waiting requests); retry later");
    }
    req->id = next_id_++;
    req->rng.seed(rd_() ^ (static_cast<uint64_t>(rd_()) << 32));
    inbox_.push_back(std::move(req));
    ++queued_;
  }
  cv_.notify_one();
  return stream;
}

void Engine::stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_one();
  std::lock_guard<std::mutex> lock(join_mu_);  // stop() may race with itself (signal + exit)
  if (thread_.joinable()) thread_.join();
}

void Engine::loop() {
  for (;;) {
    std::vector<std::unique_ptr<Request>> incoming;
    bool stopping;
    {
      std::unique_lock<std::mutex> lock(mu_);
      if (!sched_.has_work()) cv_.wait(lock, [this] { return stop_ || !inbox_.empty(); });
      incoming.swap(inbox_);
      stopping = stop_;
    }
    for (auto& r : incoming) {
      std::shared_ptr<RequestStream> s = r->stream;
      Status st = sched_.add(std::move(r));
      if (!st.ok()) s->finish(FinishReason::kError, -1, st.message());
    }
    if (stopping) {
      sched_.abort_all(FinishReason::kCancelled, "the server is shutting down");
      queued_.store(0);
      return;
    }
    Result<StepResult> res = sched_.step(*runner_, *sampler_);
    if (!res.ok()) {
      std::fprintf(stderr, "gossamer engine: step failed: %s\n", res.status().ToString().c_str());
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      queued_.store(static_cast<int64_t>(inbox_.size()) + sched_.num_waiting());
    }
    if (res.ok() && res->scheduled_requests == 0 && sched_.has_work()) {
      std::unique_lock<std::mutex> lock(mu_);  // nothing runnable: wait briefly for news
      cv_.wait_for(lock, std::chrono::milliseconds(1), [this] { return stop_ || !inbox_.empty(); });
    }
  }
}

}  // namespace gossamer

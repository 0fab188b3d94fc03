// The streaming, sharded synth checkpoint writer: chunks are generated on a thread pool
// (synth_fill) while the previous chunk is written, then the index, config and tokenizer files.
// The tensor list and the value generators are in synth.cpp.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <future>
#include <nlohmann/json.hpp>

#include "common/thread_pool.h"
#include "model/synth.h"

namespace gossamer {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

// Progress lines on stderr: bytes written / total, rate, ETA. At most one line per second.
class Progress {
 public:
  Progress(bool enabled, int64_t total) : enabled_(enabled), total_(total) {}
  void add(int64_t n) {
    done_ += n;
    if (!enabled_) return;
    const auto now = Clock::now();
    if (done_ < total_ && now - last_ < std::chrono::seconds(1)) return;
    last_ = now;
    const double secs = std::chrono::duration<double>(now - start_).count();
    const double rate = secs > 0 ? done_ / secs : 0.0;
    const double eta = rate > 0 ? (total_ - done_) / rate : 0.0;
    std::fprintf(stderr, "synth: %.2f / %.2f GB (%.1f%%), %.0f MB/s, ETA %.0f s\n", done_ / 1e9,
                 total_ / 1e9, total_ > 0 ? 100.0 * done_ / total_ : 100.0, rate / 1e6, eta);
  }

 private:
  bool enabled_;
  int64_t total_, done_ = 0;
  Clock::time_point start_ = Clock::now(), last_ = start_;
};

// Generation buffers and the writer of the previous chunk (generation of chunk k+1 overlaps the
// write of chunk k). Declared before the future so the future (which may still use a buffer) is
// destroyed first.
struct Pipeline {
  ThreadPool* pool;
  Progress* progress;
  int64_t chunk_bytes;
  std::vector<uint8_t> buf[2];
  int next = 0;
  std::future<Status> pending;
};

Status write_tensor(const SynthTensor& t, SafetensorsFileWriter* w, Pipeline* p) {
  const int64_t es = dtype_size(t.spec.dtype);
  const int64_t n = t.spec.numel();
  const int64_t chunk = std::max<int64_t>(1, p->chunk_bytes / es);
  for (int64_t begin = 0; begin < n; begin += chunk) {
    const int64_t count = std::min(chunk, n - begin);
    std::vector<uint8_t>& buf = p->buf[p->next];
    p->next ^= 1;
    buf.resize(static_cast<size_t>(count * es));
    uint8_t* data = buf.data();
    p->pool->parallel_for(
        count, [&](int64_t a, int64_t b) { synth_fill(t, begin + a, begin + b, data + a * es); });
    if (p->pending.valid()) GS_RETURN_IF_ERROR(p->pending.get());
    const size_t len = buf.size();
    p->pending = std::async(std::launch::async, [w, data, len] { return w->append(data, len); });
    p->progress->add(count * es);
  }
  return Status::Ok();
}

Status write_shard(const std::string& path, const std::vector<SynthTensor>& tensors,
                   const std::vector<size_t>& items, Pipeline* p) {
  std::vector<TensorSpec> specs;
  for (size_t i : items) specs.push_back(tensors[i].spec);
  GS_ASSIGN_OR_RETURN(SafetensorsFileWriter w,
                      SafetensorsFileWriter::open(path, std::move(specs), {{"format", "pt"}}));
  Status s;
  for (size_t i : items) {
    s = write_tensor(tensors[i], &w, p);
    if (!s.ok()) break;
  }
  if (p->pending.valid()) {  // always drain: the async append uses w and a buffer
    Status last = p->pending.get();
    if (s.ok()) s = last;
  }
  GS_RETURN_IF_ERROR(s.With("writing " + path));
  return w.finish();
}

Status write_text(const fs::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  out.close();
  if (!out) return IoError(path.string() + ": cannot write");
  return Status::Ok();
}

constexpr const char* kMarker = "gossamer_synth.json";  // marks a directory synth wrote

// Removes what an earlier run may have left (other shard counts, partial files, the index, and
// config.json, which is rewritten last as the completion marker). Refuses to delete checkpoint
// files from a directory that synth did not write (e.g. a real model snapshot).
Status remove_stale(const fs::path& dir) {
  std::error_code ec;
  std::vector<fs::path> stale;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string n = entry.path().filename().string();
    const bool shard = n.rfind("model", 0) == 0 &&
                       (n.ends_with(".safetensors") || n.ends_with(".safetensors.partial"));
    if (shard || n == "model.safetensors.index.json" || n == "config.json") {
      stale.push_back(entry.path());
    }
  }
  if (ec) return IoError(dir.string() + ": cannot list: " + ec.message());
  if (!stale.empty() && !fs::exists(dir / kMarker, ec)) {
    return InvalidArgument(dir.string() + " holds a checkpoint (" +
                           stale.front().filename().string() +
                           ") not written by gossamer synth; refusing to overwrite it");
  }
  for (const fs::path& p : stale) {
    if (!fs::remove(p, ec))
      return IoError(p.string() + ": cannot remove stale file: " + ec.message());
  }
  return Status::Ok();
}

// Copies src to dst, replacing dst even when it (or src) is read-only.
Status replace_file(const fs::path& src, const fs::path& dst) {
  std::error_code ec;
  fs::remove(dst, ec);
  fs::copy_file(src, dst, ec);
  if (!ec)
    fs::permissions(dst, fs::perms::owner_read | fs::perms::owner_write, fs::perm_options::add, ec);
  if (ec) return IoError("copying " + src.string() + " to " + dst.string() + ": " + ec.message());
  return Status::Ok();
}

Status copy_tokenizer(const std::string& tokenizer, const fs::path& out) {
  std::error_code ec;
  const fs::path src(tokenizer);
  if (!fs::is_regular_file(src, ec)) return NotFound(tokenizer + ": tokenizer file not found");
  GS_RETURN_IF_ERROR(replace_file(src, out / "tokenizer.json"));
  const fs::path cfg = src.parent_path() / "tokenizer_config.json";
  if (fs::is_regular_file(cfg, ec))
    GS_RETURN_IF_ERROR(replace_file(cfg, out / "tokenizer_config.json"));
  return Status::Ok();
}

// generation_config.json as in the real snapshots (only when the real special-token ids exist).
std::string generation_config_json() {
  const nlohmann::json j = {{"bos_token_id", 199998},
                            {"do_sample", true},
                            {"eos_token_id", {200002, 199999, 200012}},
                            {"pad_token_id", 199999}};
  return j.dump(2) + "\n";
}

}  // namespace

Status SynthOptions::validate() const {
  GS_RETURN_IF_ERROR(config.validate().With("synth config"));
  if (config.hidden_size % 32 != 0 || config.intermediate_size % 32 != 0) {
    return InvalidArgument(
        "synth: hidden_size and intermediate_size must be multiples of 32 "
        "(synthetic experts are defined in MXFP4 blocks of 32)");
  }
  if (out_dir.empty()) return InvalidArgument("synth: no output directory given");
  std::error_code ec;
  if (!tokenizer_path.empty() && !fs::is_regular_file(tokenizer_path, ec)) {
    return NotFound("synth: tokenizer file not found: " + tokenizer_path);
  }
  if (shard_bytes <= 0) return InvalidArgument("synth: shard size must be > 0");
  if (chunk_bytes < 64 || chunk_bytes > (int64_t{1} << 30)) {
    return InvalidArgument("synth: chunk size must be in [64 B, 1 GiB]");
  }
  return Status::Ok();
}

Status write_synth_checkpoint(const SynthOptions& opts) {
  GS_RETURN_IF_ERROR(opts.validate());
  const fs::path out(opts.out_dir);
  std::error_code ec;
  fs::create_directories(out, ec);
  if (ec || !fs::is_directory(out, ec)) {
    return IoError(opts.out_dir + ": cannot create output directory: " + ec.message());
  }
  GS_RETURN_IF_ERROR(remove_stale(out));
  const nlohmann::json marker = {{"seed", opts.seed}, {"shard_bytes", opts.shard_bytes}};
  GS_RETURN_IF_ERROR(write_text(out / kMarker, marker.dump(2) + "\n"));
  const std::vector<SynthTensor> tensors = synth_tensors(opts.config, opts.seed);
  std::vector<TensorSpec> specs;
  for (const SynthTensor& t : tensors) specs.push_back(t.spec);
  GS_ASSIGN_OR_RETURN(ShardPlan plan, plan_shards(specs, opts.shard_bytes));
  ThreadPool pool(opts.threads);
  Progress progress(opts.progress, plan.total_bytes);
  Pipeline pipe{&pool, &progress, opts.chunk_bytes, {}, 0, {}};
  for (size_t k = 0; k < plan.items.size(); ++k) {
    GS_RETURN_IF_ERROR(
        write_shard((out / plan.file_names[k]).string(), tensors, plan.items[k], &pipe));
  }
  if (plan.items.size() > 1) {
    GS_RETURN_IF_ERROR(
        write_text(out / "model.safetensors.index.json", shard_index_json(specs, plan)));
  }
  if (opts.config.vocab_size > 200012) {
    GS_RETURN_IF_ERROR(write_text(out / "generation_config.json", generation_config_json()));
  }
  if (!opts.tokenizer_path.empty()) GS_RETURN_IF_ERROR(copy_tokenizer(opts.tokenizer_path, out));
  // config.json last: its presence means the weights are complete.
  return write_text(out / "config.json", config_to_json(opts.config));
}

}  // namespace gossamer

// tokenizer_bench --tokenizer FILE --input TEXTFILE [--iters N] [--special] [--threads T]
//                 [--ids-out FILE]
// Encodes the whole input N times on one thread, then N times with encode_parallel on T
// threads, and prints one JSON line:
// {"bytes":..,"tokens":..,"seconds":..,"mb_per_s":..,"tokens_per_s":..,"load_seconds":..,
//  "threads":..,"parallel_seconds":..,"parallel_mb_per_s":..,"parallel_same_ids":..}
// (MB = 1e6 bytes; seconds = best of the N runs; cpu_mb_per_s: from the thread's CPU time).
// --ids-out writes the single-thread ids as int32 little endian.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <fstream>
#include <sstream>
#include <string>

#include "common/thread_pool.h"
#include "tokenizer/tokenizer.h"

namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// CPU time of the calling thread (not counting time the machine gave to other processes).
double thread_cpu_s() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

struct Args {
  std::string tok_path, input_path, ids_out;
  int iters = 3, threads = 2;
  bool special = false;
};

// False (after a message) on an unknown flag or a missing required one.
bool parse_args(int argc, char** argv, Args* a) {
  for (int i = 1; i < argc; ++i) {
    const std::string s = argv[i];
    const bool has_value = i + 1 < argc;
    if (s == "--tokenizer" && has_value) {
      a->tok_path = argv[++i];
    } else if (s == "--input" && has_value) {
      a->input_path = argv[++i];
    } else if (s == "--iters" && has_value) {
      a->iters = std::max(1, std::atoi(argv[++i]));
    } else if (s == "--special") {
      a->special = true;
    } else if (s == "--threads" && has_value) {
      a->threads = std::max(1, std::atoi(argv[++i]));
    } else if (s == "--ids-out" && has_value) {
      a->ids_out = argv[++i];
    } else {
      std::fprintf(stderr,
                   "usage: tokenizer_bench --tokenizer FILE --input FILE [--iters N] [--special] "
                   "[--threads T] [--ids-out FILE]\n");
      return false;
    }
  }
  if (a->tok_path.empty() || a->input_path.empty()) {
    std::fprintf(stderr, "tokenizer_bench: --tokenizer and --input are required\n");
    return false;
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  Args args;
  if (!parse_args(argc, argv, &args)) return 2;
  const std::string &tok_path = args.tok_path, &input_path = args.input_path,
                    &ids_out = args.ids_out;
  const int iters = args.iters, threads = args.threads;
  const bool special = args.special;
  std::ifstream f(input_path, std::ios::binary);
  if (!f) {
    std::fprintf(stderr, "tokenizer_bench: cannot open '%s'\n", input_path.c_str());
    return 1;
  }
  std::stringstream ss;
  ss << f.rdbuf();
  const std::string text = ss.str();
  const double t0 = now_s();
  auto tok = gossamer::Tokenizer::load(tok_path);
  const double load_s = now_s() - t0;
  if (!tok.ok()) {
    std::fprintf(stderr, "tokenizer_bench: %s\n", tok.status().ToString().c_str());
    return 1;
  }
  double best = 1e30, best_cpu = 1e30;
  std::vector<int32_t> ids;
  for (int it = 0; it < iters; ++it) {
    const double s = now_s(), c = thread_cpu_s();
    ids = (*tok)->encode(text, special);
    best = std::min(best, now_s() - s);
    best_cpu = std::min(best_cpu, thread_cpu_s() - c);
  }
  gossamer::ThreadPool pool(threads);
  double best_par = 1e30;
  bool same = true;
  for (int it = 0; it < iters; ++it) {
    const double s = now_s();
    const std::vector<int32_t> par = (*tok)->encode_parallel(text, special, &pool);
    best_par = std::min(best_par, now_s() - s);
    same = same && par == ids;
  }
  if (!ids_out.empty()) {
    std::ofstream o(ids_out, std::ios::binary);
    o.write(reinterpret_cast<const char*>(ids.data()),
            static_cast<std::streamsize>(ids.size() * sizeof(int32_t)));
    if (!o) {
      std::fprintf(stderr, "tokenizer_bench: cannot write '%s'\n", ids_out.c_str());
      return 1;
    }
  }
  std::printf(
      "{\"bytes\": %zu, \"tokens\": %zu, \"seconds\": %.6f, \"mb_per_s\": %.3f, "
      "\"tokens_per_s\": %.1f, \"cpu_mb_per_s\": %.3f, \"load_seconds\": %.3f, \"threads\": %d, "
      "\"parallel_seconds\": %.6f, \"parallel_mb_per_s\": %.3f, \"parallel_same_ids\": %s}\n",
      text.size(), ids.size(), best, text.size() / best / 1e6, ids.size() / best,
      text.size() / best_cpu / 1e6, load_s, threads, best_par, text.size() / best_par / 1e6,
      same ? "true" : "false");
  return 0;
}

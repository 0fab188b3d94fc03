// tokenizer_bench --tokenizer FILE --input TEXTFILE [--iters N] [--special]
// Encodes the whole input N times on one thread and prints one JSON line:
// {"bytes":..,"tokens":..,"seconds":..,"mb_per_s":..,"tokens_per_s":..,"load_seconds":..}
// (MB = 1e6 bytes; seconds = best of the N runs).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

#include "tokenizer/tokenizer.h"

namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

int main(int argc, char** argv) {
  std::string tok_path, input_path;
  int iters = 3;
  bool special = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--tokenizer" && i + 1 < argc)
      tok_path = argv[++i];
    else if (a == "--input" && i + 1 < argc)
      input_path = argv[++i];
    else if (a == "--iters" && i + 1 < argc)
      iters = std::max(1, std::atoi(argv[++i]));
    else if (a == "--special")
      special = true;
    else {
      std::fprintf(
          stderr, "usage: tokenizer_bench --tokenizer FILE --input FILE [--iters N] [--special]\n");
      return 2;
    }
  }
  if (tok_path.empty() || input_path.empty()) {
    std::fprintf(stderr, "tokenizer_bench: --tokenizer and --input are required\n");
    return 2;
  }
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
  double best = 1e30;
  size_t n_tokens = 0;
  for (int it = 0; it < iters; ++it) {
    const double s = now_s();
    const std::vector<int32_t> ids = (*tok)->encode(text, special);
    best = std::min(best, now_s() - s);
    n_tokens = ids.size();
  }
  std::printf(
      "{\"bytes\": %zu, \"tokens\": %zu, \"seconds\": %.6f, \"mb_per_s\": %.3f, "
      "\"tokens_per_s\": %.1f, \"load_seconds\": %.3f}\n",
      text.size(), n_tokens, best, text.size() / best / 1e6, n_tokens / best, load_s);
  return 0;
}

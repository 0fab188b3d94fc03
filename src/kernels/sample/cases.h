// The sampling case tables (greedy argmax; full device sampling for the bench).
#pragma once

namespace gossamer::kern {

struct ArgmaxCase {
  const char* name;
  int batch, vocab;
};

inline constexpr ArgmaxCase kArgmaxCases[] = {
    {"tiny b1 v10", 1, 10},
    {"gpt-oss b1 v201088", 1, 201088},
    {"b64 v201088", 64, 201088},
    {"odd b3 v4097", 3, 4097},
};

// Device sampling bench: rows x vocab with one parameter set for every row.
struct SampleBenchCase {
  const char* name;
  float temperature, top_p, min_p;
  int top_k, top_logprobs;
};

inline constexpr SampleBenchCase kSampleBenchCases[] = {
    {"greedy", 0.f, 1.f, 0.f, 0, 0},
    {"greedy+top_logprobs 5", 0.f, 1.f, 0.f, 0, 5},
    {"T=1 unfiltered", 1.f, 1.f, 0.f, 0, 0},
    {"T=0.7 top_k 50", 0.7f, 1.f, 0.f, 50, 0},
    {"T=1 top_p 0.9", 1.f, 0.9f, 0.f, 0, 0},
    {"T=0.8 top_k 40 top_p 0.95 min_p 0.05 +lp 5", 0.8f, 0.95f, 0.05f, 40, 5},
};
inline constexpr int kSampleBenchRows[] = {1, 8, 64};
inline constexpr int kSampleBenchVocab = 201088;

}  // namespace gossamer::kern

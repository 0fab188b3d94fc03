// launch_sample timing (4 kernels): rows 1/8/64 x vocab 201088, one parameter set per case
// (cases.h); argmax_f32 (greedy only) for comparison. Reports us per call and the logits bytes read
// once.
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "kernels/common/testing.h"
#include "kernels/sample/cases.h"
#include "kernels/sample/params.h"

int main() {
  using namespace gossamer::kern;
  const int V = kSampleBenchVocab;
  std::mt19937_64 rng(testing::fresh_seed("sample bench"));
  std::normal_distribution<float> n(0.f, 3.f);
  const int max_rows = 64;
  std::vector<float> logits(static_cast<size_t>(max_rows) * V);
  for (auto& x : logits) x = n(rng);
  testing::DevBuf<float> dl(logits.size());
  dl.upload(logits);
  testing::DevBuf<SampleRowParams> drp(max_rows);
  testing::DevBuf<SampleRowOut> dout(max_rows);
  testing::DevBuf<int32_t> dpen(1);
  testing::DevBuf<uint8_t> ws(sample_workspace_bytes(max_rows));
  testing::DevBuf<unsigned long long> keys(max_rows);
  cudaMemset(keys.get(), 0, keys.bytes());
  std::printf("launch_sample (stats, hist, compact: multi-block; finish: 1 block/row), vocab %d\n",
              V);
  for (int rows : kSampleBenchRows) {
    const double ms_argmax = testing::time_ms(
        [&] {
          (void)launch_argmax({dl.get(), keys.get(), rows, V, V}, 0);
        },
        50);
    std::printf("  rows %2d  %-46s %8.1f us\n", rows, "argmax_f32 (greedy keys only)",
                ms_argmax * 1e3);
    for (const auto& c : kSampleBenchCases) {
      std::vector<SampleRowParams> rp(rows);
      for (int r = 0; r < rows; ++r) {
        rp[r].temperature = c.temperature, rp[r].top_p = c.top_p, rp[r].min_p = c.min_p;
        rp[r].top_k = c.top_k, rp[r].top_logprobs = c.top_logprobs;
        rp[r].seed = 42, rp[r].counter = static_cast<uint64_t>(r);
      }
      cudaMemcpy(drp.get(), rp.data(), rows * sizeof(SampleRowParams), cudaMemcpyHostToDevice);
      SampleParams p{dl.get(), drp.get(), dpen.get(), dpen.get(), dout.get(), nullptr,
                     rows,     V,         V,          ws.get(),   ws.bytes()};
      const double ms = testing::time_ms([&] { (void)launch_sample(p, 0); }, 50);
      std::printf("  rows %2d  %-46s %8.1f us\n", rows, c.name, ms * 1e3);
    }
  }
  return cudaDeviceSynchronize() == cudaSuccess ? 0 : 1;
}

#include <cstdio>
#include <string>

#include "kernels/common/testing.h"
#include "kernels/gemv/cases.h"
#include "kernels/gemv/params.h"

int main() {
  using namespace gossamer::kern;
  const double ceil = testing::copy_ceiling_gbs();
  std::printf("gemv_bf16w_f32a (copy ceiling %.0f GB/s)\n", ceil);
  for (const auto& c : kGemvCases) {
    const size_t nw = static_cast<size_t>(c.rows) * c.cols;
    testing::DevBuf<uint16_t> w(nw);
    testing::DevBuf<float> x(static_cast<size_t>(c.batch) * c.cols),
        y(static_cast<size_t>(c.batch) * c.rows);
    testing::DevBuf<unsigned long long> am(c.batch);
    cudaMemset(w.get(), 0, w.bytes());
    cudaMemset(x.get(), 0, x.bytes());
    cudaMemset(y.get(), 0, y.bytes());
    GemvParams p{w.get(), nullptr, x.get(), y.get(),      c.rows,
                 c.cols,  c.batch, c.rows,  c.accumulate, c.argmax ? am.get() : nullptr};
    const double ms = testing::time_ms([&] { (void)launch_gemv(p, 0); }, 50);
    const double bytes = 2.0 * nw + 4.0 * c.batch * (c.cols + c.rows);
    testing::print_bench_line(std::string(gemv_variant(c.batch)) + " " + c.name, bytes, ms, ceil);
  }
  return 0;
}

// cuBLASLt loaded on first use (dlopen), not at process start: linking libcublasLt makes every
// gossamer command (tokenize, synth, --help) map the ~500 MB library and register its kernels at
// start-up, ~200 MB of resident memory for nothing. Only GemmContext uses it.
#pragma once

#include <cublasLt.h>

#include <string>

namespace gossamer::kern {

struct CublasLtApi {
  decltype(&cublasLtCreate) Create = nullptr;
  decltype(&cublasLtDestroy) Destroy = nullptr;
  decltype(&cublasLtGetStatusString) GetStatusString = nullptr;
  decltype(&cublasLtMatmul) Matmul = nullptr;
  decltype(&cublasLtMatmulAlgoGetHeuristic) MatmulAlgoGetHeuristic = nullptr;
  decltype(&cublasLtMatmulDescCreate) MatmulDescCreate = nullptr;
  decltype(&cublasLtMatmulDescDestroy) MatmulDescDestroy = nullptr;
  decltype(&cublasLtMatmulDescSetAttribute) MatmulDescSetAttribute = nullptr;
  decltype(&cublasLtMatmulPreferenceCreate) MatmulPreferenceCreate = nullptr;
  decltype(&cublasLtMatmulPreferenceDestroy) MatmulPreferenceDestroy = nullptr;
  decltype(&cublasLtMatmulPreferenceSetAttribute) MatmulPreferenceSetAttribute = nullptr;
  decltype(&cublasLtMatrixLayoutCreate) MatrixLayoutCreate = nullptr;
  decltype(&cublasLtMatrixLayoutDestroy) MatrixLayoutDestroy = nullptr;
  std::string error;  // non-empty: the library or a symbol could not be loaded (why)
};

// The process-wide table, loaded once (thread-safe); check `error` before calling through it.
const CublasLtApi& cublaslt();

}  // namespace gossamer::kern

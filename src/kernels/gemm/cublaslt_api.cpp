#include "kernels/gemm/cublaslt_api.h"

#include <dlfcn.h>

#include <type_traits>

namespace gossamer::kern {
namespace {

CublasLtApi load() {
  CublasLtApi api;
  void* h = nullptr;
  for (const char* name : {"libcublasLt.so.13", "libcublasLt.so"}) {
    h = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (h) break;
  }
  if (!h) {
    const char* e = dlerror();
    api.error = std::string("cannot load cuBLASLt (libcublasLt.so.13): ") + (e ? e : "not found") +
                "; add the CUDA toolkit's lib directory to LD_LIBRARY_PATH";
    return api;
  }
  auto sym = [&](auto& fn, const char* name) {
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(h, name));
    if (!fn && api.error.empty()) api.error = std::string("cuBLASLt: missing symbol ") + name;
  };
  sym(api.Create, "cublasLtCreate");
  sym(api.Destroy, "cublasLtDestroy");
  sym(api.GetStatusString, "cublasLtGetStatusString");
  sym(api.Matmul, "cublasLtMatmul");
  sym(api.MatmulAlgoGetHeuristic, "cublasLtMatmulAlgoGetHeuristic");
  sym(api.MatmulDescCreate, "cublasLtMatmulDescCreate");
  sym(api.MatmulDescDestroy, "cublasLtMatmulDescDestroy");
  sym(api.MatmulDescSetAttribute, "cublasLtMatmulDescSetAttribute");
  sym(api.MatmulPreferenceCreate, "cublasLtMatmulPreferenceCreate");
  sym(api.MatmulPreferenceDestroy, "cublasLtMatmulPreferenceDestroy");
  sym(api.MatmulPreferenceSetAttribute, "cublasLtMatmulPreferenceSetAttribute");
  sym(api.MatrixLayoutCreate, "cublasLtMatrixLayoutCreate");
  sym(api.MatrixLayoutDestroy, "cublasLtMatrixLayoutDestroy");
  return api;  // the handle stays open for the life of the process
}

}  // namespace

const CublasLtApi& cublaslt() {
  static const CublasLtApi api = load();
  return api;
}

}  // namespace gossamer::kern

// GemmContext: the cuBLASLt wrapper. Row-major d[m, n] = a[m, k] w[n, k]^T maps onto cuBLASLt's
// column-major view as D^T [n, m] = op(W) [n, k] x A^T [k, m] with op(W) = transpose: the "TN"
// layout (both operands K-contiguous), the one Hopper's bf16 tensor-core kernels prefer.
// Compute and scale type fp32; bias via CUBLASLT_EPILOGUE_BIAS (fp32, length n = rows of the
// column-major D); accumulate via beta = 1 with C = D.
#include <cublasLt.h>

#include <map>
#include <string>
#include <tuple>

#include "kernels/common/cuda_check.h"
#include "kernels/gemm/cublaslt_api.h"
#include "kernels/gemm/params.h"

namespace gossamer::kern {
namespace {

Status lt_status(cublasStatus_t s, const std::string& what) {
  if (s == CUBLAS_STATUS_SUCCESS) return Status::Ok();
  return Internal("cuBLASLt " + what + ": " + cublaslt().GetStatusString(s));
}

#define GS_LT_RETURN(expr, what) GS_RETURN_IF_ERROR(lt_status((expr), (what)))

// One shape's descriptors and chosen algorithm.
struct Plan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t lw = nullptr, la = nullptr, ld = nullptr;
  cublasLtMatmulAlgo_t algo{};
  void destroy() {
    if (desc) cublaslt().MatmulDescDestroy(desc);
    if (lw) cublaslt().MatrixLayoutDestroy(lw);
    if (la) cublaslt().MatrixLayoutDestroy(la);
    if (ld) cublaslt().MatrixLayoutDestroy(ld);
  }
};

// m n k lda ldw ldd bias alignment
using PlanKey = std::tuple<int, int, int, int, int, int, bool, uint32_t>;

// Largest power of two (<= 256) dividing every pointer: cuBLASLt's heuristic assumes 256-byte
// aligned operands unless told otherwise.
uint32_t common_alignment(const GemmParams& p) {
  const auto a = reinterpret_cast<uintptr_t>(p.a) | reinterpret_cast<uintptr_t>(p.w) |
                 reinterpret_cast<uintptr_t>(p.d) | reinterpret_cast<uintptr_t>(p.bias) | 256;
  return static_cast<uint32_t>(a & (~a + 1));
}

}  // namespace

struct GemmContext::Impl {
  cublasLtHandle_t handle = nullptr;
  void* workspace = nullptr;
  size_t ws_bytes = 0;
  std::map<PlanKey, Plan> plans;
  ~Impl() {
    for (auto& [k, p] : plans) p.destroy();
    if (workspace) cudaFree(workspace);
    if (handle) cublaslt().Destroy(handle);
  }
  Result<Plan*> plan_for(const GemmParams& p, int lda, int ldw, int ldd);
};

Result<Plan*> GemmContext::Impl::plan_for(const GemmParams& p, int lda, int ldw, int ldd) {
  const uint32_t align = common_alignment(p);
  const PlanKey key{p.m, p.n, p.k, lda, ldw, ldd, p.bias != nullptr, align};
  if (auto it = plans.find(key); it != plans.end()) return &it->second;
  const std::string shape =
      "gemm " + std::to_string(p.m) + "x" + std::to_string(p.n) + "x" + std::to_string(p.k);
  Plan pl;
  auto fail = [&](const Status& s) {
    pl.destroy();
    return s;
  };
  Status st =
      lt_status(cublaslt().MatmulDescCreate(&pl.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F), shape);
  const cublasOperation_t opT = CUBLAS_OP_T, opN = CUBLAS_OP_N;
  const cublasLtEpilogue_t epi = p.bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT;
  if (st.ok()) {
    st = lt_status(
        cublaslt().MatmulDescSetAttribute(pl.desc, CUBLASLT_MATMUL_DESC_TRANSA, &opT, sizeof(opT)),
        shape + " transa");
  }
  if (st.ok()) {
    st = lt_status(
        cublaslt().MatmulDescSetAttribute(pl.desc, CUBLASLT_MATMUL_DESC_TRANSB, &opN, sizeof(opN)),
        shape + " transb");
  }
  if (st.ok()) {
    st = lt_status(cublaslt().MatmulDescSetAttribute(pl.desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi,
                                                     sizeof(epi)),
                   shape + " epilogue");
  }
  if (st.ok()) {
    st = lt_status(cublaslt().MatrixLayoutCreate(&pl.lw, CUDA_R_16BF, p.k, p.n, ldw), shape + " W");
  }
  if (st.ok()) {
    st = lt_status(cublaslt().MatrixLayoutCreate(&pl.la, CUDA_R_16BF, p.k, p.m, lda), shape + " A");
  }
  if (st.ok()) {
    st = lt_status(cublaslt().MatrixLayoutCreate(&pl.ld, CUDA_R_32F, p.n, p.m, ldd), shape + " D");
  }
  if (!st.ok()) return fail(st);
  cublasLtMatmulPreference_t pref = nullptr;
  st = lt_status(cublaslt().MatmulPreferenceCreate(&pref), shape + " preference");
  if (st.ok()) {
    st = lt_status(cublaslt().MatmulPreferenceSetAttribute(
                       pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws_bytes, sizeof(ws_bytes)),
                   shape + " workspace preference");
  }
  for (auto attr :
       {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES}) {
    if (st.ok()) {
      st = lt_status(cublaslt().MatmulPreferenceSetAttribute(pref, attr, &align, sizeof(align)),
                     shape + " alignment preference");
    }
  }
  cublasLtMatmulHeuristicResult_t res{};
  int found = 0;
  if (st.ok()) {
    st = lt_status(cublaslt().MatmulAlgoGetHeuristic(handle, pl.desc, pl.lw, pl.la, pl.ld, pl.ld,
                                                     pref, 1, &res, &found),
                   shape + " heuristic");
  }
  if (pref) cublaslt().MatmulPreferenceDestroy(pref);
  if (!st.ok()) return fail(st);
  if (found == 0) return fail(Unsupported("cuBLASLt has no algorithm for " + shape));
  pl.algo = res.algo;
  return &(plans[key] = pl);
}

GemmContext::GemmContext(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
GemmContext::~GemmContext() = default;

Result<std::unique_ptr<GemmContext>> GemmContext::create(size_t workspace_bytes) {
  if (!cublaslt().error.empty()) return Unsupported(cublaslt().error);
  auto impl = std::make_unique<Impl>();
  GS_LT_RETURN(cublaslt().Create(&impl->handle), "create");
  impl->ws_bytes = workspace_bytes;
  if (workspace_bytes > 0) {
    GS_CUDA_RETURN(cudaMalloc(&impl->workspace, workspace_bytes));
  }
  return std::unique_ptr<GemmContext>(new GemmContext(std::move(impl)));
}

size_t GemmContext::workspace_bytes() const {
  return impl_->ws_bytes;
}

Status GemmContext::run(const GemmParams& p, cudaStream_t stream) {
  GS_RETURN_IF_ERROR(p.validate());
  const int lda = p.lda ? p.lda : p.k, ldw = p.ldw ? p.ldw : p.k, ldd = p.ldd ? p.ldd : p.n;
  GS_ASSIGN_OR_RETURN(Plan * pl, impl_->plan_for(p, lda, ldw, ldd));
  const std::string shape =
      "gemm " + std::to_string(p.m) + "x" + std::to_string(p.n) + "x" + std::to_string(p.k);
  if (p.bias) {
    GS_LT_RETURN(cublaslt().MatmulDescSetAttribute(pl->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                                                   &p.bias, sizeof(p.bias)),
                 shape + " bias pointer");
  }
  const float alpha = 1.f, beta = p.accumulate ? 1.f : 0.f;
  GS_LT_RETURN(
      cublaslt().Matmul(impl_->handle, pl->desc, &alpha, p.w, pl->lw, p.a, pl->la, &beta, p.d,
                        pl->ld, p.d, pl->ld, &pl->algo, impl_->workspace, impl_->ws_bytes, stream),
      shape);
  return launch_status("cublasLtMatmul");
}

}  // namespace gossamer::kern

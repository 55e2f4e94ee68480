// matmul with numpy batch broadcasting. f32 GEMM runs on oneDNN's sgemm
// when built with it (DS_GEMM_ONEDNN; bench/gemm_blas.sh measured it ~10%
// faster than OpenBLAS per thread here), f64 and the fallback on OpenBLAS.
// Shapes are checked here, so the library never sees a leading dimension or
// a pointer the plan did not pay for. i32/i64 products (integer GEMMs) use a
// plain loop: no BLAS has them, and they only serve quantized models here.
#include <cblas.h>
#include <omp.h>
#ifdef DS_GEMM_ONEDNN
#include <dnnl.h>
#include <oneapi/dnnl/dnnl.hpp>
#endif

#include <memory>

#include "runtime/cpu/KernelRegistry.h"
#include "runtime/kernels/ElementMath.h"

namespace ds::rt::cpu {
namespace {

struct MatmulGeometry {
  int64_t m = 0, k = 0, n = 0;
  bool ta = false, tb = false; // operand stored with its last two dims swapped
  std::vector<int64_t> batch;          // broadcast batch shape of the result
  std::vector<int64_t> aBatch, bBatch; // operand batch shapes
};

absl::StatusOr<MatmulGeometry> matmulGeometry(const KernelContext &c) {
  std::vector<int64_t> a = c.in[0].shape, b = c.in[1].shape;
  if (a.empty() || b.empty())
    return c.error("operands must have rank >= 1");
  MatmulGeometry g;
  // transpose_lhs/rhs: the GEMM reads that operand transposed (BLAS types).
  for (auto [name, shape, flag] : {std::tuple<const char *, std::vector<int64_t> &, bool &>{
                                       "transpose_lhs", a, g.ta},
                                   {"transpose_rhs", b, g.tb}}) {
    if (!c.step.attrs().count(name)) continue;
    DS_ASSIGN_OR_RETURN(int64_t on, c.intAttr(name));
    flag = on != 0;
    if (!flag) continue;
    if (shape.size() < 2) return c.error(absl::StrCat(name, " needs an operand of rank >= 2"));
    if (c.in[0].dtype != plan::F32 && c.in[0].dtype != plan::F64 &&
        c.in[0].dtype != plan::BF16 && c.in[0].dtype != plan::F16)
      return c.error(absl::StrCat(name, " needs float operands"));
    std::swap(shape[shape.size() - 1], shape[shape.size() - 2]);
  }
  bool aVec = a.size() == 1, bVec = b.size() == 1;
  g.m = aVec ? 1 : a[a.size() - 2];
  g.k = a.back();
  int64_t kb = bVec ? b[0] : b[b.size() - 2];
  g.n = bVec ? 1 : b.back();
  if (g.k != kb)
    return c.error(absl::StrCat("contraction dimensions differ: [", shapeToString(a),
                                "] x [", shapeToString(b), "]"));
  if (!aVec) g.aBatch.assign(a.begin(), a.end() - 2);
  if (!bVec) g.bBatch.assign(b.begin(), b.end() - 2);
  auto batch = broadcastShapes(g.aBatch, g.bBatch);
  if (!batch)
    return c.error(absl::StrCat("batch dimensions of [", shapeToString(a), "] and [",
                                shapeToString(b), "] do not broadcast"));
  g.batch = *batch;
  std::vector<int64_t> expect = g.batch;
  if (!aVec) expect.push_back(g.m);
  if (!bVec) expect.push_back(g.n);
  DS_RETURN_IF_ERROR(c.expectShape(c.out[0], expect, "result"));
  return g;
}

template <typename T>
void gemmBlock(int64_t m, int64_t n, int64_t k, const T *a, int64_t lda, const T *b,
               int64_t ldb, T *c, int64_t ldc, bool ta = false, bool tb = false) {
  if constexpr (std::is_same_v<T, float>) {
#ifdef DS_GEMM_ONEDNN
    // Inside our parallel regions oneDNN's OpenMP runtime runs one thread.
    dnnl_sgemm(ta ? 'T' : 'N', tb ? 'T' : 'N', m, n, k, 1.0f, a, lda, b, ldb, 0.0f, c, ldc);
#else
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, m,
                n, k, 1.0f, a, lda, b, ldb, 0.0f, c, ldc);
#endif
  } else if constexpr (std::is_same_v<T, double>) {
    cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, m,
                n, k, 1.0, a, lda, b, ldb, 0.0, c, ldc);
  } else {
    // (transposed operands are refused for integers when the step is prepared)
    // Integer GEMM (MatMulInteger's widened operands): i-k-j order keeps the
    // inner loop contiguous and vectorizable; unsigned arithmetic wraps on
    // overflow the way two's complement accumulators do, without UB.
    using U = std::make_unsigned_t<T>;
    for (int64_t i = 0; i < m; ++i) {
      U *ci = reinterpret_cast<U *>(c + i * ldc);
      std::fill(ci, ci + n, U(0));
      for (int64_t p = 0; p < k; ++p) {
        const U av = static_cast<U>(a[i * lda + p]);
        const U *bp = reinterpret_cast<const U *>(b + p * ldb);
#pragma omp simd
        for (int64_t j = 0; j < n; ++j) ci[j] += av * bp[j];
      }
    }
  }
}

/// C = A x B on the backend's OpenMP threads. BLAS itself runs one thread
/// per call (CpuBackend sets it so): one thread pool for every kernel means
/// no spinning BLAS workers stealing cores from the next elementwise step.
/// Rows are split when there are enough, else columns.
template <typename T>
void gemm(int64_t m, int64_t n, int64_t k, const T *a, const T *b, T *c, bool ta = false,
          bool tb = false) {
  const int64_t work = m * n * k;
  const int64_t threads = omp_get_max_threads();
  // A transposed operand is stored [k, m] (A) or [n, k] (B): its leading
  // dimension and where a block of rows/columns starts change with it.
  const int64_t lda = ta ? m : k, ldb = tb ? k : n;
  if (work < (1 << 16) || threads == 1) {
    gemmBlock<T>(m, n, k, a, lda, b, ldb, c, n, ta, tb);
  } else if (m >= 8 * threads) {
    parallelFor(m, 8, [&](int64_t lo, int64_t hi) {
      gemmBlock<T>(hi - lo, n, k, a + (ta ? lo : lo * k), lda, b, ldb, c + lo * n, n, ta, tb);
    });
  } else {
    parallelFor(n, 16, [&](int64_t lo, int64_t hi) {
      gemmBlock<T>(m, hi - lo, k, a, lda, b + (tb ? lo * k : lo), ldb, c + lo, n, ta, tb);
    });
  }
}

template <typename T>
absl::StatusOr<PreparedStep> makeMatmul(const KernelContext &c, MatmulGeometry g) {
  const T *pa = c.in[0].as<T>();
  const T *pb = c.in[1].as<T>();
  T *po = c.out[0].as<T>();
  int64_t batches = 1;
  for (int64_t d : g.batch) batches *= d;
  int64_t bBatches = 1;
  for (int64_t d : g.bBatch) bBatches *= d;
  if (g.k == 0 || batches == 0 || g.m == 0 || g.n == 0) {
    int64_t n = c.out[0].numel;
    return PreparedStep([po, n] {
      std::fill(po, po + n, T(0));
      return absl::OkStatus();
    });
  }
  // A shared right operand and a full left batch fold into one tall GEMM:
  // the common [B, T, K] x [K, N] projection.
  if (bBatches == 1 && g.aBatch == g.batch && !g.ta) {
    int64_t rows = batches * g.m;
    return PreparedStep([=] {
      gemm<T>(rows, g.n, g.k, pa, pb, po, false, g.tb);
      return absl::OkStatus();
    });
  }
  DS_ASSIGN_OR_RETURN(BroadcastIndexer ix,
                      [&]() -> absl::StatusOr<BroadcastIndexer> {
                        auto r = makeBroadcastIndexer(g.batch.empty() ? std::vector<int64_t>{1} : g.batch,
                                                      {g.aBatch, g.bBatch});
                        if (!r.ok()) return c.error(std::string(r.status().message()));
                        return r;
                      }());
  return PreparedStep([=] {
    const int64_t aMat = g.m * g.k, bMat = g.k * g.n, oMat = g.m * g.n;
    const int64_t inner = ix.inner();
    const int64_t sa = ix.strides[0].back(), sb = ix.strides[1].back();
    auto one = [&](int64_t batch) {
      int64_t off[2];
      ix.rowOffsets(batch / inner, off);
      int64_t i = batch % inner;
      gemm<T>(g.m, g.n, g.k, pa + (off[0] + i * sa) * aMat,
              pb + (off[1] + i * sb) * bMat, po + batch * oMat, g.ta, g.tb);
    };
    // Many small products (attention scores) parallelize over batches,
    // each a one-thread BLAS call; few big ones split inside gemm().
    if (batches >= omp_get_max_threads()) {
      parallelFor(batches, 1, [&](int64_t lo, int64_t hi) {
        for (int64_t b = lo; b < hi; ++b) {
          int64_t off[2];
          ix.rowOffsets(b / inner, off);
          int64_t i = b % inner;
          gemmBlock<T>(g.m, g.n, g.k, pa + (off[0] + i * sa) * aMat, g.ta ? g.m : g.k,
                       pb + (off[1] + i * sb) * bMat, g.tb ? g.k : g.n, po + b * oMat, g.n,
                       g.ta, g.tb);
        }
      });
    } else {
      for (int64_t b = 0; b < batches; ++b) one(b);
    }
    return absl::OkStatus();
  });
}

/// Below this many left-operand rows a 16-bit product is memory-bound.
constexpr int64_t kMemoryBoundRows = 32;

#ifdef DS_GEMM_ONEDNN
/// bf16 / f16 products on oneDNN's matmul primitive: AVX512-BF16 (or AMX)
/// instructions where the CPU has them, fp32 sums, the result rounded once.
/// Shapes that flatten to one 2-D or 3-D product (a shared right operand,
/// equal batches, or a left operand broadcast over the batch) are run here;
/// null for the rest, which take the widening path below.
class OneDnnMatmul16 {
public:
  static std::shared_ptr<OneDnnMatmul16> create(const KernelContext &c, const MatmulGeometry &g) {
    using namespace dnnl;
    using dims = memory::dims;
    auto prod = [](const std::vector<int64_t> &v) {
      int64_t p = 1;
      for (int64_t d : v) p *= d;
      return p;
    };
    const int64_t batches = prod(g.batch), aB = prod(g.aBatch), bB = prod(g.bBatch);
    const int64_t m = g.m, k = g.k, n = g.n;
    if (batches == 0 || m == 0 || n == 0 || k == 0) return nullptr;
    // Row-major strides of an operand stored with its last two dims swapped or not.
    auto aStrides = [&](int64_t batchStride) {
      return g.ta ? dims{batchStride, 1, m} : dims{batchStride, k, 1};
    };
    auto bStrides = [&](int64_t batchStride) {
      return g.tb ? dims{batchStride, 1, k} : dims{batchStride, n, 1};
    };
    dims aDims, bDims, cDims, aStr, bStr, cStr;
    if (bB == 1 && g.aBatch == g.batch && !g.ta) { // [B*M, K] x [K, N]
      aDims = {1, batches * m, k}, aStr = {batches * m * k, k, 1};
      bDims = {1, k, n}, bStr = bStrides(k * n);
    } else if (g.aBatch == g.batch && g.bBatch == g.batch) { // batched, no broadcast
      aDims = {batches, m, k}, aStr = aStrides(m * k);
      bDims = {batches, k, n}, bStr = bStrides(k * n);
    } else if (aB == 1 && g.bBatch == g.batch) { // left operand shared by the batch
      aDims = {1, m, k}, aStr = aStrides(m * k);
      bDims = {batches, k, n}, bStr = bStrides(k * n);
    } else {
      return nullptr;
    }
    const int64_t rows = aDims[1];
    const int64_t cb = std::max(aDims[0], bDims[0]);
    cDims = {cb, rows, n}, cStr = {rows * n, n, 1};
    auto t = c.in[0].dtype == plan::BF16 ? memory::data_type::bf16 : memory::data_type::f16;
    // A constant weight shared by the batch is packed once, here, into the
    // layout the kernel reads fastest (what it would otherwise copy every run).
    bool packOnce = bDims[0] == 1 && c.hasAttr("constant_weight");
    try {
      auto self = std::make_shared<OneDnnMatmul16>();
      memory::desc a(aDims, t, aStr), b(bDims, t, bStr), o(cDims, t, cStr);
      memory::desc bWant = packOnce ? memory::desc(bDims, t, memory::format_tag::any) : b;
      matmul::primitive_desc pd(matmul::desc(a, bWant, o), self->engine_);
      // Plain activations: the operands are the plan's buffers as they are.
      if (pd.src_desc() != a || pd.dst_desc() != o || (!packOnce && pd.weights_desc() != b))
        return nullptr;
      self->matmul_ = matmul(pd);
      self->a_ = memory(a, self->engine_, c.in[0].data);
      self->b_ = memory(b, self->engine_, c.in[1].data);
      if (packOnce && pd.weights_desc() != b) {
        memory packed(pd.weights_desc(), self->engine_);
        reorder(self->b_, packed).execute(self->stream_, self->b_, packed);
        self->stream_.wait();
        self->b_ = packed;
      }
      self->o_ = memory(o, self->engine_, c.out[0].data);
      return self;
    } catch (const dnnl::error &) {
      return nullptr; // not implemented for this type or ISA here
    }
  }

  absl::Status run() {
    try {
      matmul_.execute(stream_, {{DNNL_ARG_SRC, a_}, {DNNL_ARG_WEIGHTS, b_}, {DNNL_ARG_DST, o_}});
      stream_.wait();
      return absl::OkStatus();
    } catch (const dnnl::error &e) {
      return absl::InternalError(std::string("oneDNN 16-bit matmul failed: ") + e.what());
    }
  }

private:
  dnnl::engine engine_{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream_{engine_};
  dnnl::matmul matmul_;
  dnnl::memory a_, b_, o_;
};
#endif

absl::StatusOr<PreparedStep> prepareMatmul(const KernelContext &c);

/// bf16 / f16 products, fp32 sums either way and the result rounded once.
/// Few rows (a memory-bound product: decoding, small batches) run on
/// oneDNN's 16-bit GEMM, which reads half the weight bytes. Many rows run
/// the f32 GEMM on widened copies: on CPUs without AMX, 16-bit dot products
/// are no faster than f32 FMAs (this machine's vdpbf16ps peaks at half its
/// FMA rate: docs/mixed-precision.md), and widening costs O(MK + KN) next
/// to the GEMM's O(MNK).
absl::StatusOr<PreparedStep> makeMatmul16(const KernelContext &c, const MatmulGeometry &g) {
#ifdef DS_GEMM_ONEDNN
  int64_t rows = g.m;
  for (int64_t d : g.aBatch) rows *= d;
  if (rows < kMemoryBoundRows)
    if (auto fast = OneDnnMatmul16::create(c, g))
      return PreparedStep([fast] { return fast->run(); });
#endif
  return prepareWidened(c, prepareMatmul);
}

absl::StatusOr<PreparedStep> prepareMatmul(const KernelContext &c) {
  DS_RETURN_IF_ERROR(c.expectArity(2, 2, 1));
  if (c.in[0].dtype != c.in[1].dtype || c.out[0].dtype != c.in[0].dtype)
    return c.error("operands and result must share one element type");
  DS_ASSIGN_OR_RETURN(MatmulGeometry g, matmulGeometry(c));
  switch (c.in[0].dtype) {
  case plan::F32: return makeMatmul<float>(c, std::move(g));
  case plan::F64: return makeMatmul<double>(c, std::move(g));
  case plan::BF16:
  case plan::F16: return makeMatmul16(c, g);
  case plan::I32: return makeMatmul<int32_t>(c, std::move(g));
  case plan::I64: return makeMatmul<int64_t>(c, std::move(g));
  default:
    return c.error(absl::StrCat("does not support element type ", dtypeName(c.in[0].dtype)));
  }
}

} // namespace

void sgemm(bool transA, bool transB, int64_t m, int64_t n, int64_t k, float alpha,
           const float *a, int64_t lda, const float *b, int64_t ldb, float beta, float *c,
           int64_t ldc) {
#ifdef DS_GEMM_ONEDNN
  dnnl_sgemm(transA ? 'T' : 'N', transB ? 'T' : 'N', m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
#else
  cblas_sgemm(CblasRowMajor, transA ? CblasTrans : CblasNoTrans, transB ? CblasTrans : CblasNoTrans,
              m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
#endif
}

void registerLinalgKernels(KernelRegistry &r) { r.add("matmul", prepareMatmul); }

} // namespace ds::rt::cpu

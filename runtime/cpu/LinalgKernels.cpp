// matmul with numpy batch broadcasting. f32 GEMM runs on oneDNN's sgemm
// when built with it (DS_GEMM_ONEDNN; bench/gemm_blas.sh measured it ~10%
// faster than OpenBLAS per thread here), the fallback build on OpenBLAS.
// Shapes are checked here, so the library never sees a leading dimension or
// a pointer the plan did not pay for. f64 and i32/i64 products (integer
// GEMMs) use a plain loop: oneDNN has neither, they serve reference-precision
// and quantized models, and linking OpenBLAS for f64 alone started its thread
// pool in every process (see runtime/CMakeLists.txt).
#include <omp.h>
#ifdef DS_GEMM_ONEDNN
#include <dnnl.h>
#include <oneapi/dnnl/dnnl.hpp>
#endif

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <array>
#include <optional>
#include <map>
#include <memory>
#include <unordered_map>

#include "runtime/cpu/CpuFeatures.h"
#include "runtime/cpu/KernelFamilies.h"
#include "runtime/kernels/ElementMath.h"
#include "runtime/plan/StridedViews.h"

// Compiled once per instruction set (Isa.h).
#include "runtime/cpu/IsaBegin.h"
#include "runtime/cpu/SoftmaxRows.h"
#include "runtime/cpu/SkinnyGemm.h"
#include "runtime/cpu/MatmulEpilogue.h"
namespace ds::rt::cpu::DS_CPU_ISA {
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

/// What the plain GEMM loop accumulates in: T itself, unsigned for integers.
template <typename T, bool = std::is_integral_v<T>> struct GemmAccumulator {
  using type = T;
};
template <typename T> struct GemmAccumulator<T, true> {
  using type = std::make_unsigned_t<T>;
};

/// One single-threaded GEMM block, C = op(A) op(B) (C += ... with
/// `accumulate`, f32 only: fused_matmul's in-place gradient accumulation).
template <typename T>
void gemmBlock(int64_t m, int64_t n, int64_t k, const T *a, int64_t lda, const T *b,
               int64_t ldb, T *c, int64_t ldc, bool ta = false, bool tb = false,
               float alpha = 1.0f, bool accumulate = false) {
  if constexpr (std::is_same_v<T, float>) {
    // Inside our parallel regions oneDNN's OpenMP runtime runs one thread.
    sgemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, accumulate ? 1.0f : 0.0f, c, ldc);
  } else {
    // f64 and integers (transposed operands are refused for integers when the
    // step is prepared). Integers accumulate unsigned, so overflow wraps the
    // way two's complement accumulators do, without UB. With B not transposed
    // the i-k-j order keeps the inner loop contiguous and vectorizable; with
    // B transposed each element is a dot product along B's rows.
    using U = typename GemmAccumulator<T>::type;
    auto aAt = [&](int64_t i, int64_t p) {
      return static_cast<U>(ta ? a[p * lda + i] : a[i * lda + p]);
    };
    const U *bu = reinterpret_cast<const U *>(b);
    for (int64_t i = 0; i < m; ++i) {
      U *ci = reinterpret_cast<U *>(c + i * ldc);
      if (tb) {
        for (int64_t j = 0; j < n; ++j) {
          const U *bj = bu + j * ldb;
          U sum = 0;
          for (int64_t p = 0; p < k; ++p) sum += aAt(i, p) * bj[p];
          ci[j] = sum;
        }
        continue;
      }
      std::fill(ci, ci + n, U(0));
      for (int64_t p = 0; p < k; ++p) {
        const U av = aAt(i, p);
        const U *bp = bu + p * ldb;
#pragma omp simd
        for (int64_t j = 0; j < n; ++j) ci[j] += av * bp[j];
      }
    }
  }
}

/// Leading dimensions (elements between rows as stored) of a GEMM's
/// operands and result; 0 is the dense default. Strided views
/// (fused_matmul's) set them.
struct LeadingDims {
  int64_t a = 0, b = 0, c = 0;
};

/// C = A x B on the backend's OpenMP threads. BLAS itself runs one thread
/// per call (CpuBackend sets it so): one thread pool for every kernel means
/// no spinning BLAS workers stealing cores from the next elementwise step.
/// Rows are split when there are enough, else columns. With an epilogue
/// (f32), each thread applies it to the block it just computed; `add` is
/// this product's addend (C itself when accumulating in place), laid out
/// like C.
template <typename T>
void gemm(int64_t m, int64_t n, int64_t k, const T *a, const T *b, T *c, bool ta = false,
          bool tb = false, const Epilogue *e = nullptr, const float *add = nullptr,
          LeadingDims ld = {}, int64_t rowBase = 0) {
  const int64_t work = m * n * k;
  // Called from a parallel region (one of many small products): one block.
  const int64_t threads = omp_in_parallel() ? 1 : omp_get_max_threads();
  // A transposed operand is stored [k, m] (A) or [n, k] (B): its leading
  // dimension and where a block of rows/columns starts change with it.
  const int64_t lda = ld.a ? ld.a : ta ? m : k, ldb = ld.b ? ld.b : tb ? k : n;
  const int64_t ldc = ld.c ? ld.c : n;
  // In place over the addend (C is the addend): beta = 1, no pass after.
  const bool accumulate = e && e->accumulateOnly() && static_cast<const void *>(add) == c;
  const float alpha = e && accumulate ? e->alpha : 1.0f;
  auto finish = [&](int64_t r0, int64_t r1, int64_t c0, int64_t c1) {
    if constexpr (std::is_same_v<T, float>)
      if (e && !accumulate) e->apply(c, c, add, ldc, r0, r1, c0, c1, rowBase);
  };
  // A row epilogue (softmax) needs each block's rows whole.
  const bool wholeRows = e && e->wholeRows();
  if (work < (1 << 16) || threads == 1) {
    gemmBlock<T>(m, n, k, a, lda, b, ldb, c, ldc, ta, tb, alpha, accumulate);
    finish(0, m, 0, n);
  } else if (m >= 8 * threads || wholeRows) {
    parallelFor(m, m >= 8 * threads ? 8 : 1, [&](int64_t lo, int64_t hi) {
      gemmBlock<T>(hi - lo, n, k, a + (ta ? lo : lo * lda), lda, b, ldb, c + lo * ldc, ldc, ta,
                   tb, alpha, accumulate);
      finish(lo, hi, 0, n);
    });
  } else {
    parallelFor(n, 16, [&](int64_t lo, int64_t hi) {
      gemmBlock<T>(m, hi - lo, k, a, lda, b + (tb ? lo * ldb : lo), ldb, c + lo, ldc, ta, tb,
                   alpha, accumulate);
      finish(0, m, lo, hi);
    });
  }
}

/// The product of the step's operands into `po` (the result's buffer, or
/// scratch), then the epilogue `e` (f32 fused_matmul) if any.
template <typename T>
absl::StatusOr<PreparedStep> makeMatmul(const KernelContext &c, MatmulGeometry g, T *po,
                                        std::shared_ptr<const Epilogue> e = nullptr) {
  const T *pa = c.in[0].as<T>();
  const T *pb = c.in[1].as<T>();
  int64_t batches = 1;
  for (int64_t d : g.batch) batches *= d;
  int64_t bBatches = 1;
  for (int64_t d : g.bBatch) bBatches *= d;
  const float *add = e ? e->addend : nullptr;
  if (g.k == 0 || batches == 0 || g.m == 0 || g.n == 0) {
    const int64_t numel = c.out[0].numel, cols = g.n;
    return PreparedStep([po, numel, cols, e, add] {
      std::fill(po, po + numel, T(0));
      if constexpr (std::is_same_v<T, float>)
        if (e && numel) e->apply(po, po, add, cols, 0, numel / cols, 0, cols);
      return absl::OkStatus();
    });
  }
  // A shared right operand and a full left batch fold into one tall GEMM:
  // the common [B, T, K] x [K, N] projection.
  if (bBatches == 1 && g.aBatch == g.batch && !g.ta) {
    int64_t rows = batches * g.m;
    return PreparedStep([=] {
      gemm<T>(rows, g.n, g.k, pa, pb, po, false, g.tb, e.get(), add);
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
    const Epilogue *ep = e.get(); // `e` is captured: it lives as long as the step
    const int64_t aMat = g.m * g.k, bMat = g.k * g.n, oMat = g.m * g.n;
    const int64_t inner = ix.inner();
    const int64_t sa = ix.strides[0].back(), sb = ix.strides[1].back();
    auto operands = [&](int64_t batch) {
      int64_t off[2];
      ix.rowOffsets(batch / inner, off);
      int64_t i = batch % inner;
      return std::pair{pa + (off[0] + i * sa) * aMat, pb + (off[1] + i * sb) * bMat};
    };
    // Many small products (attention scores) parallelize over batches,
    // each a one-thread BLAS call; few big ones split inside gemm().
    if (batches >= omp_get_max_threads()) {
      parallelFor(batches, 1, [&](int64_t lo, int64_t hi) {
        for (int64_t b = lo; b < hi; ++b) {
          auto [a, bm] = operands(b);
          // gemm() on one thread: the block and its epilogue.
          gemm<T>(g.m, g.n, g.k, a, bm, po + b * oMat, g.ta, g.tb, ep,
                  add ? add + b * oMat : nullptr, {}, b * g.m);
        }
      });
    } else {
      for (int64_t b = 0; b < batches; ++b) {
        auto [a, bm] = operands(b);
        gemm<T>(g.m, g.n, g.k, a, bm, po + b * oMat, g.ta, g.tb, ep,
                add ? add + b * oMat : nullptr, {}, b * g.m);
      }
    }
    return absl::OkStatus();
  });
}

/// A fused_matmul operand or result as the product indexes it: sizes and
/// element strides (a strided view, or the tensor's dense layout).
struct ProductView {
  std::vector<int64_t> shape, strides;
  int64_t offset = 0; // where the view starts in its tensor (lhs_offset, rhs_offset)
};

/// fused_matmul's views (lhs_*, rhs_*, result_*): each operand and the
/// result as the product sees them; nullopt when the step has none.
struct ProductViews {
  ProductView lhs, rhs, result;
  std::vector<int64_t> batch; // the product's batch shape
};

ProductView denseView(std::vector<int64_t> shape, bool transposed) {
  ProductView v{std::move(shape), {}};
  v.strides.assign(v.shape.size(), 1);
  for (size_t i = v.shape.size(); i-- > 1;) v.strides[i - 1] = v.strides[i] * v.shape[i];
  if (transposed) {
    std::swap(v.shape[v.shape.size() - 1], v.shape[v.shape.size() - 2]);
    std::swap(v.strides[v.strides.size() - 1], v.strides[v.strides.size() - 2]);
  }
  return v;
}

absl::StatusOr<std::optional<ProductViews>> productViews(const KernelContext &c) {
  const char *names[] = {"lhs", "rhs", "result"};
  bool any = false;
  for (const char *name : names)
    any = any || c.hasAttr(std::string(name) + "_shape") || c.hasAttr(std::string(name) + "_strides");
  if (!any) return std::nullopt;
  ProductViews pv;
  ProductView *views[] = {&pv.lhs, &pv.rhs, &pv.result};
  for (int i = 0; i < 3; ++i) {
    const std::string name = names[i];
    const TensorView &t = i < 2 ? c.in[i] : c.out[0];
    if (!c.hasAttr(name + "_shape") && !c.hasAttr(name + "_strides")) {
      if (c.hasAttr(name + "_offset")) return c.error(name + "_offset needs a view");
      if (t.rank() < 2) return c.error("strided views need operands of rank >= 2");
      bool transposed = false;
      if (i < 2 && c.hasAttr(i == 0 ? "transpose_lhs" : "transpose_rhs")) {
        DS_ASSIGN_OR_RETURN(int64_t on, c.intAttr(i == 0 ? "transpose_lhs" : "transpose_rhs"));
        transposed = on != 0;
      }
      *views[i] = denseView(t.shape, transposed);
      continue;
    }
    DS_ASSIGN_OR_RETURN(views[i]->shape, c.intsAttr(name + "_shape"));
    DS_ASSIGN_OR_RETURN(views[i]->strides, c.intsAttr(name + "_strides"));
    if (i < 2 && c.hasAttr(name + "_offset")) {
      DS_ASSIGN_OR_RETURN(views[i]->offset, c.intAttr(name + "_offset"));
    }
    const ProductView &v = *views[i];
    if (v.shape.size() != v.strides.size() || v.shape.size() < 2)
      return c.error(name + "_shape and " + name + "_strides must have one length >= 2");
    if (const char *problem = plan::viewProblem(v.shape.data(), v.strides.data(), v.shape.size(),
                                                t.numel, v.offset))
      return c.error(name + " " + problem);
    if (i < 2 && !plan::gemmReadable(v.shape.data(), v.strides.data(), v.shape.size()))
      return c.error(name + " view needs unit steps along its rows or columns, the other "
                            "dimension's steps clear of them");
    if (i < 2 && c.hasAttr(i == 0 ? "transpose_lhs" : "transpose_rhs")) {
      DS_ASSIGN_OR_RETURN(int64_t on, c.intAttr(i == 0 ? "transpose_lhs" : "transpose_rhs"));
      if (on) return c.error(name + " view is not also transposed by transpose_" + name);
    }
  }
  const std::vector<int64_t> &a = pv.lhs.shape, &b = pv.rhs.shape;
  const int64_t m = a[a.size() - 2], k = a.back(), n = b.back();
  if (b[b.size() - 2] != k)
    return c.error(absl::StrCat("contraction dimensions differ: [", shapeToString(a), "] x [",
                                shapeToString(b), "]"));
  auto batch = broadcastShapes(std::vector<int64_t>(a.begin(), a.end() - 2),
                               std::vector<int64_t>(b.begin(), b.end() - 2));
  if (!batch)
    return c.error(absl::StrCat("batch dimensions of [", shapeToString(a), "] and [",
                                shapeToString(b), "] do not broadcast"));
  pv.batch = *batch;
  std::vector<int64_t> product = pv.batch;
  product.push_back(m);
  product.push_back(n);
  const ProductView &r = pv.result;
  if (r.shape != product)
    return c.error(absl::StrCat("the result view must be the product's shape [",
                                shapeToString(product), "], got [", shapeToString(r.shape), "]"));
  int64_t numel = 1;
  for (int64_t d : product) numel *= d;
  if (numel != c.out[0].numel || !plan::denseView(r.shape.data(), r.strides.data(), r.shape.size()))
    return c.error("the result view must write every element of the result once");
  if (k == 0) return c.error("strided views need a contraction of length >= 1");
  const size_t rr = r.shape.size();
  if (!(r.shape[rr - 1] == 1 || r.strides[rr - 1] == 1 || r.shape[rr - 2] == 1 ||
        r.strides[rr - 2] == 1))
    return c.error("the result view needs unit steps along its rows or columns");
  return pv;
}

/// One matrix of a view for BLAS: transposed or not, and its leading
/// dimension. `rows` x `cols` with strides `sr`, `sc`; productViews made
/// sure one of them steps by 1 (a dimension of size 1 steps by anything).
std::pair<bool, int64_t> blasLayout(int64_t rows, int64_t cols, int64_t sr, int64_t sc) {
  if ((cols == 1 || sc == 1) && (rows == 1 || sr >= cols))
    return {false, rows == 1 ? std::max<int64_t>(cols, 1) : sr};
  return {true, cols == 1 ? std::max<int64_t>(rows, 1) : sc};
}

/// fused_matmul through strided views: one GEMM per batch element, each
/// with its operands' own layout and leading dimensions, the result
/// written where its view says (computed as C^T = B^T A^T when the view
/// steps by 1 down the columns). No copies of transposed operands.
absl::StatusOr<PreparedStep> makeViewedMatmul(const KernelContext &c, const ProductViews &pv,
                                              float *po, std::shared_ptr<const Epilogue> e) {
  const float *pa = c.in[0].as<float>(), *pb = c.in[1].as<float>();
  const float *add = e ? e->addend : nullptr;
  const std::vector<int64_t> &batch = pv.batch;
  const size_t nb = batch.size();
  int64_t batches = 1;
  for (int64_t d : batch) batches *= d;
  // Each operand's strides along the product's batch dimensions (0 where it
  // broadcasts), then every batch element's offsets, in row-major order.
  auto batchStrides = [&](const ProductView &v) {
    std::vector<int64_t> s(nb, 0);
    const size_t own = v.shape.size() - 2;
    for (size_t i = 0; i < own; ++i)
      if (v.shape[i] != 1) s[nb - own + i] = v.strides[i];
    return s;
  };
  const std::vector<int64_t> strides[3] = {batchStrides(pv.lhs), batchStrides(pv.rhs),
                                           batchStrides(pv.result)};
  auto offsets = std::make_shared<std::vector<std::array<int64_t, 3>>>(batches);
  std::vector<int64_t> index(nb, 0);
  const int64_t starts[3] = {pv.lhs.offset, pv.rhs.offset, 0};
  for (int64_t b = 0; b < batches; ++b) {
    for (int o = 0; o < 3; ++o) {
      int64_t off = starts[o];
      for (size_t d = 0; d < nb; ++d) off += index[d] * strides[o][d];
      (*offsets)[b][o] = off;
    }
    for (size_t d = nb; d-- > 0;) {
      if (++index[d] < batch[d]) break;
      index[d] = 0;
    }
  }
  // The last two dimensions' sizes and strides (plain variables, not
  // structured bindings: the lambda below captures them).
  auto at = [](const std::vector<int64_t> &v, size_t back) { return v[v.size() - back]; };
  const int64_t m = at(pv.lhs.shape, 2), k = at(pv.lhs.shape, 1), n = at(pv.rhs.shape, 1);
  const int64_t sam = at(pv.lhs.strides, 2), sak = at(pv.lhs.strides, 1);
  const int64_t sbk = at(pv.rhs.strides, 2), sbn = at(pv.rhs.strides, 1);
  const int64_t scm = at(pv.result.strides, 2), scn = at(pv.result.strides, 1);
  // The result steps by 1 along its rows (or is one row): C as stored.
  // Otherwise it steps by 1 down its columns: store C^T = B^T A^T.
  const bool direct = n == 1 || scn == 1;
  const std::pair<bool, int64_t> la = blasLayout(m, k, sam, sak), lb = blasLayout(k, n, sbk, sbn);
  const bool ta = la.first, tb = lb.first;
  const int64_t lda = la.second, ldb = lb.second;
  const int64_t ldc = direct ? (m == 1 ? n : scm) : (n == 1 ? m : scn);
  return PreparedStep([=] {
    const Epilogue *ep = e.get();
    auto one = [&](int64_t b) {
      const auto &off = (*offsets)[b];
      const float *a = pa + off[0], *bm = pb + off[1];
      float *out = po + off[2];
      const float *addend = add ? add + off[2] : nullptr;
      if (direct)
        gemm<float>(m, n, k, a, bm, out, ta, tb, ep, addend, {lda, ldb, ldc}, b * m);
      else
        gemm<float>(n, m, k, bm, a, out, !tb, !ta, ep, addend, {ldb, lda, ldc});
    };
    // Many small products (attention heads) split over batches, one
    // thread each; few big ones split inside gemm().
    if (batches >= omp_get_max_threads())
      parallelFor(batches, 1, [&](int64_t lo, int64_t hi) {
        for (int64_t b = lo; b < hi; ++b) one(b);
      });
    else
      for (int64_t b = 0; b < batches; ++b) one(b);
    return absl::OkStatus();
  });
}

/// Below this many left-operand rows a 16-bit product is memory-bound.
constexpr int64_t kMemoryBoundRows = 32;

#ifdef DS_GEMM_ONEDNN
/// A product on oneDNN's matmul primitive, which splits the work over the
/// threads itself. Two uses: bf16 / f16 products (AVX512-BF16 or AMX where
/// the CPU has them, fp32 sums, the result rounded once), and f32 products
/// of a constant right operand (an inference plan's weight), packed once
/// here into the blocked layout the kernel reads, with fused_matmul's
/// epilogue as post-ops. Shapes that flatten to one 2-D or 3-D product (a
/// shared right operand, equal batches, or a left operand broadcast over
/// the batch) are run here; null for the rest, and for anything oneDNN
/// declines, which take the GEMM paths.
class OneDnnMatmul {
public:
  static std::shared_ptr<OneDnnMatmul> create(const KernelContext &c, const MatmulGeometry &g,
                                              const Epilogue *e = nullptr) {
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
    // A constant weight shared by the batch is packed once, here, into the
    // layout the kernel reads fastest (what it would otherwise copy every run).
    const bool packOnce = bDims[0] == 1 && c.hasAttr("constant_weight");
    if (cb == 1) {
      // One product: 2-D descriptors, for which oneDNN picks a blocked
      // (packed) weight layout; with a unit batch dimension it keeps B plain
      // and copies it on every call.
      for (dims *d : {&aDims, &bDims, &cDims, &aStr, &bStr, &cStr}) d->erase(d->begin());
    }
    auto t = c.in[0].dtype == plan::F32    ? memory::data_type::f32
             : c.in[0].dtype == plan::BF16 ? memory::data_type::bf16
                                           : memory::data_type::f16;
    try {
      auto self = std::make_shared<OneDnnMatmul>();
      memory::desc a(aDims, t, aStr), b(bDims, t, bStr), o(cDims, t, cStr);
      memory::desc bWant = packOnce ? memory::desc(bDims, t, memory::format_tag::any) : b;
      primitive_attr attr;
      if (e && !self->setEpilogue(*e, cDims, c.out[0].data, attr)) return nullptr;
      matmul::primitive_desc pd(matmul::desc(a, bWant, o), attr, self->engine_);
      // Plain activations: the operands are the plan's buffers as they are.
      if (pd.src_desc() != a || pd.dst_desc() != o || (!packOnce && pd.weights_desc() != b))
        return nullptr;
      self->matmul_ = matmul(pd);
      memory bUser(b, self->engine_, c.in[1].data);
      memory weights = bUser;
      if (packOnce && pd.weights_desc() != b) {
        weights = memory(pd.weights_desc(), self->engine_);
        reorder(bUser, weights).execute(self->stream_, bUser, weights);
        self->stream_.wait();
      }
      self->args_.insert({DNNL_ARG_SRC, memory(a, self->engine_, c.in[0].data)});
      self->args_.insert({DNNL_ARG_WEIGHTS, weights});
      self->args_.insert({DNNL_ARG_DST, memory(o, self->engine_, c.out[0].data)});
      return self;
    } catch (const dnnl::error &) {
      return nullptr; // not implemented for this type, ISA or post-op chain here
    }
  }

  absl::Status run() {
    try {
      matmul_.execute(stream_, args_);
      stream_.wait();
      return absl::OkStatus();
    } catch (const dnnl::error &e) {
      return absl::InternalError(std::string("oneDNN matmul failed: ") + e.what());
    }
  }

private:
  /// The epilogue as post-ops, in its order: scale, bias, activation,
  /// addend (oneDNN's `sum` when the addend is the result's own buffer).
  bool setEpilogue(const Epilogue &e, const dnnl::memory::dims &dst, void *out,
                   dnnl::primitive_attr &attr) {
    using namespace dnnl;
    auto f32 = memory::data_type::f32;
    post_ops ops;
    auto binary = [&](algorithm alg, const memory::dims &d, const float *data) {
      memory::desc md(d, f32, d.size() == 2 ? memory::format_tag::ab : memory::format_tag::abc);
      ops.append_binary(alg, md);
      args_.insert({DNNL_ARG_ATTR_MULTIPLE_POST_OP(ops.len() - 1) | DNNL_ARG_SRC_1,
                    memory(md, engine_, const_cast<float *>(data))});
    };
    if (e.alpha != 1.0f) ops.append_eltwise(1.0f, algorithm::eltwise_linear, e.alpha, 0.0f);
    if (e.bias) {
      memory::dims row(dst.size(), 1);
      row.back() = dst.back();
      binary(algorithm::binary_add, row, e.bias);
    }
    switch (e.act) {
    case Epilogue::Act::None: break;
    case Epilogue::Act::Relu: ops.append_eltwise(1.0f, algorithm::eltwise_relu, 0.0f, 0.0f); break;
    case Epilogue::Act::Gelu: ops.append_eltwise(1.0f, algorithm::eltwise_gelu_erf, 0.0f, 0.0f); break;
    case Epilogue::Act::GeluTanh:
      ops.append_eltwise(1.0f, algorithm::eltwise_gelu_tanh, 0.0f, 0.0f);
      break;
    case Epilogue::Act::Silu: ops.append_eltwise(1.0f, algorithm::eltwise_swish, 1.0f, 0.0f); break;
    case Epilogue::Act::Sigmoid:
      ops.append_eltwise(1.0f, algorithm::eltwise_logistic, 0.0f, 0.0f);
      break;
    case Epilogue::Act::Tanh: ops.append_eltwise(1.0f, algorithm::eltwise_tanh, 0.0f, 0.0f); break;
    }
    if (e.combine == Epilogue::Combine::GeluGrad || e.combine == Epilogue::Combine::GeluTanhGrad ||
        e.wholeRows() || e.pre)
      return false; // no such post-op: the GEMM paths apply it
    const bool multiply = e.combine == Epilogue::Combine::Mul;
    if (e.addend) {
      if (e.addend == out) {
        if (multiply) return false; // the GEMM paths read it first
        ops.append_sum(1.0f);
      } else {
        binary(multiply ? algorithm::binary_mul : algorithm::binary_add, dst, e.addend);
      }
    }
    attr.set_post_ops(ops);
    return true;
  }

  dnnl::engine engine_{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream_{engine_};
  dnnl::matmul matmul_;
  std::unordered_map<int, dnnl::memory> args_;
};
#endif

absl::StatusOr<PreparedStep> prepareMatmul(const KernelContext &c);

#ifdef DS_GEMM_ONEDNN
/// Whether oneDNN's native 16-bit GEMM of `t` beats the f32 GEMM on this
/// CPU (CpuFeatures.h), decided once per process.
bool native16BitFaster(DType t) {
  auto decide = [](DType t) { return ::ds::rt::cpu::native16BitProducts(t == plan::F16); };
  static const bool bf16 = decide(plan::BF16), f16 = decide(plan::F16);
  return t == plan::BF16 ? bf16 : f16;
}
#endif

/// bf16 / f16 products, fp32 sums either way and the result rounded once.
/// Few rows (a memory-bound product: decoding, small batches) run on
/// oneDNN's 16-bit GEMM, which reads half the weight bytes; so do all
/// products where the CPU's 16-bit GEMM is clearly faster than its f32 one
/// (native16BitFaster). Otherwise the f32 GEMM runs on widened copies:
/// widening costs O(MK + KN) next to the GEMM's O(MNK).
absl::StatusOr<PreparedStep> makeMatmul16(const KernelContext &c, const MatmulGeometry &g) {
#ifdef DS_GEMM_ONEDNN
  int64_t rows = g.m;
  for (int64_t d : g.aBatch) rows *= d;
  if (rows < kMemoryBoundRows || native16BitFaster(c.in[0].dtype))
    if (auto fast = OneDnnMatmul::create(c, g))
      return PreparedStep([fast] { return fast->run(); });
#endif
  return prepareWidened(c, prepareMatmul);
}

/// A product of at most kSkinnyMaxRows rows (all batch dimensions on the
/// left operand) and a constant 2-D weight: a decode step's, memory-bound,
/// on the skinny kernel (SkinnyGemm.h), its epilogue applied per block of
/// columns; empty for other shapes. The product goes to scratch first when
/// the epilogue reads the result's bytes (an addend sharing them).
PreparedStep skinnyProduct(const KernelContext &c, const MatmulGeometry &g,
                           std::shared_ptr<const Epilogue> e) {
  int64_t rows = g.m;
  for (int64_t d : g.aBatch) rows *= d;
  if (rows < 1 || rows > kSkinnyMaxRows || g.ta || !g.bBatch.empty() || g.aBatch != g.batch ||
      c.in[1].rank() != 2 || (e && (e->wholeRows() || e->pre)))
    return nullptr;
  auto w = std::make_shared<SkinnyWeight>(packSkinny(c.in[1].as<float>(), g.k, g.n, g.tb));
  const float *a = c.in[0].as<float>();
  float *out = c.out[0].as<float>();
  const int64_t k = g.k, n = g.n;
  if (!e)
    return [=] {
      skinnyGemm(rows, a, k, *w, out, n, 1.0f, nullptr);
      return absl::OkStatus();
    };
  auto scratch = std::make_shared<std::vector<float>>(static_cast<size_t>(rows * n));
  return [=] {
    float *p = scratch->data();
    skinnyGemm(rows, a, k, *w, p, n, 1.0f, [&](int64_t c0, int64_t c1) {
      e->apply(p, out, e->addend, n, 0, rows, c0, c1);
    });
    return absl::OkStatus();
  };
}

/// An f32 product whose right operand is constant (`constant_weight`) runs
/// on the skinny kernel when it has few rows, else on oneDNN's primitive
/// with the weight packed once; empty otherwise.
PreparedStep packedProduct(const KernelContext &c, const MatmulGeometry &g,
                           std::shared_ptr<const Epilogue> e) {
  if (!c.hasAttr("constant_weight")) return nullptr;
  if (PreparedStep skinny = skinnyProduct(c, g, e)) return skinny;
#ifdef DS_GEMM_ONEDNN
  if (auto fast = OneDnnMatmul::create(c, g, e.get())) return [fast] { return fast->run(); };
#endif
  return nullptr;
}

absl::StatusOr<PreparedStep> prepareMatmul(const KernelContext &c) {
  DS_RETURN_IF_ERROR(c.expectArity(2, 2, 1));
  if (c.in[0].dtype != c.in[1].dtype || c.out[0].dtype != c.in[0].dtype)
    return c.error("operands and result must share one element type");
  DS_ASSIGN_OR_RETURN(MatmulGeometry g, matmulGeometry(c));
  switch (c.in[0].dtype) {
  case plan::F32:
    if (PreparedStep packed = packedProduct(c, g, nullptr)) return packed;
    return makeMatmul<float>(c, std::move(g), c.out[0].as<float>());
  case plan::F64: return makeMatmul<double>(c, std::move(g), c.out[0].as<double>());
  case plan::BF16:
  case plan::F16: return makeMatmul16(c, g);
  case plan::I32: return makeMatmul<int32_t>(c, std::move(g), c.out[0].as<int32_t>());
  case plan::I64: return makeMatmul<int64_t>(c, std::move(g), c.out[0].as<int64_t>());
  default:
    return c.error(absl::StrCat("does not support element type ", dtypeName(c.in[0].dtype)));
  }
}

/// fused_matmul's row epilogue, if any: `softmax` (after nothing but
/// alpha) or combine = softmax_grad (with the addend, no bias or
/// activation), with an optional last operand `mask` broadcast to the
/// result (i1 with `mask_fill` or f32 for softmax; i1 for its gradient).
absl::Status rowEpilogue(const KernelContext &c, bool softmax, bool hasMask, Epilogue &e) {
  const bool grad = e.combine == Epilogue::Combine::SoftmaxGrad && e.addend;
  if (softmax && (e.bias || e.addend || e.act != Epilogue::Act::None))
    return c.error("softmax comes with neither bias, addend nor activation");
  if (grad && (e.bias || e.act != Epilogue::Act::None))
    return c.error("combine softmax_grad comes with neither bias nor activation");
  if (!softmax && !grad) {
    if (hasMask || c.hasAttr("mask_fill"))
      return c.error("a mask comes only with softmax or combine softmax_grad");
    return absl::OkStatus();
  }
  e.softmax = softmax;
  if (!hasMask) {
    if (c.hasAttr("mask_fill")) return c.error("mask_fill needs a mask");
    return absl::OkStatus();
  }
  const TensorView &mask = c.in.back();
  const bool selects = c.hasAttr("mask_fill");
  if (grad && selects) return c.error("a softmax_grad mask has no mask_fill");
  DS_RETURN_IF_ERROR(c.expectDType(mask, selects || grad ? plan::BOOL : plan::F32, "mask"));
  DS_ASSIGN_OR_RETURN(MaskRows rows, MaskRows::make(c, mask, c.out[0].shape));
  float fill = 0.0f;
  if (selects) {
    DS_ASSIGN_OR_RETURN(double f, c.floatAttr("mask_fill"));
    fill = static_cast<float>(f);
  }
  e.rowOp = SoftmaxRows{mask.data, selects || grad, fill, std::move(rows)};
  return absl::OkStatus();
}

/// fused_matmul: the product (operands 0, 1), then the epilogue with the
/// optional `bias` and `addend` operands that follow, as the step's flags
/// say. f32 only.
absl::StatusOr<PreparedStep> prepareFusedMatmul(const KernelContext &c) {
  DS_ASSIGN_OR_RETURN(bool hasBias, c.flagAttr("bias"));
  DS_ASSIGN_OR_RETURN(bool hasAddend, c.flagAttr("addend"));
  DS_ASSIGN_OR_RETURN(bool hasMask, c.flagAttr("mask"));
  DS_ASSIGN_OR_RETURN(bool softmax, c.flagAttr("softmax"));
  const size_t arity = 2 + hasBias + hasAddend + hasMask;
  // A second result: the activation's input (pre_activation).
  const bool hasPre = c.out.size() == 2;
  DS_RETURN_IF_ERROR(c.expectArity(arity, arity, hasPre ? 2 : 1));
  for (size_t i = 0; i < arity - hasMask; ++i)
    DS_RETURN_IF_ERROR(c.expectDType(c.in[i], plan::F32, "operand"));
  DS_RETURN_IF_ERROR(c.expectDType(c.out[0], plan::F32, "result"));
  DS_ASSIGN_OR_RETURN(std::optional<ProductViews> views, productViews(c));
  if (!views && c.in[1].rank() < 2) return c.error("the right operand must have rank >= 2");
  const bool resultView = c.hasAttr("result_shape") || c.hasAttr("result_strides");
  if (views && (hasBias || hasAddend || hasMask || softmax) && resultView)
    return c.error("a result view comes with neither bias, addend, mask nor softmax");
  MatmulGeometry g;
  if (!views) {
    DS_ASSIGN_OR_RETURN(g, matmulGeometry(c));
  } else {
    g.n = views->rhs.shape.back();
  }
  auto e = std::make_shared<Epilogue>();
  const TensorView *addend = hasAddend ? &c.in[2 + hasBias] : nullptr;
  DS_RETURN_IF_ERROR(readEpilogue(c, g.n, hasBias ? &c.in[2] : nullptr, addend, *e));
  DS_RETURN_IF_ERROR(rowEpilogue(c, softmax, hasMask, *e));
  if (hasPre) {
    DS_RETURN_IF_ERROR(c.expectDType(c.out[1], plan::F32, "pre_activation"));
    DS_RETURN_IF_ERROR(c.expectShape(c.out[1], c.out[0].shape, "pre_activation"));
    if (e->act == Epilogue::Act::None || addend || e->wholeRows() || c.hasAttr("result_shape") ||
        c.hasAttr("result_strides"))
      return c.error("pre_activation comes with an activation, and with neither addend, row "
                     "epilogue nor result view");
    e->pre = c.out[1].as<float>();
  }
  float *out = c.out[0].as<float>();
  const int64_t numel = c.out[0].numel;
  // An addend sharing the result's bytes (a gradient accumulator updated in
  // place) must be read before the product overwrites it: a GEMM with
  // beta = 1 or oneDNN's sum post-op do; otherwise the product goes to
  // scratch first.
  const bool exact = addend && e->addend == out;
  const bool overlaps = addend && e->addend < out + numel && out < e->addend + numel;
  auto compute = [&](float *po, std::shared_ptr<const Epilogue> ep) {
    return views ? makeViewedMatmul(c, *views, po, std::move(ep))
                 : makeMatmul<float>(c, g, po, std::move(ep));
  };
  if (!views && (!overlaps || exact))
    if (PreparedStep packed = packedProduct(c, g, e)) return packed;
  if (!overlaps || (exact && e->accumulateOnly())) return compute(out, e);
  auto scratch = std::make_shared<std::vector<float>>(numel);
  DS_ASSIGN_OR_RETURN(PreparedStep product, compute(scratch->data(), nullptr));
  const int64_t cols = g.n, rows = cols ? numel / cols : 0;
  return PreparedStep([=]() -> absl::Status {
    DS_RETURN_IF_ERROR(product());
    parallelFor(rows, 8, [&](int64_t lo, int64_t hi) {
      e->apply(scratch->data(), out, e->addend, cols, lo, hi, 0, cols);
    });
    return absl::OkStatus();
  });
}

} // namespace

void registerLinalgKernels(KernelRegistry &r) {
  r.add("matmul", prepareMatmul);
  r.add("fused_matmul", prepareFusedMatmul);
}

} // namespace ds::rt::cpu::DS_CPU_ISA
#include "runtime/cpu/IsaEnd.h"

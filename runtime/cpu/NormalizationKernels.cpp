// Reductions (sum, mean, max, min, prod over axes), softmax and layer_norm.
// Each views its operand as [outer, reduced, inner] so the loops are flat.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "runtime/cpu/KernelFamilies.h"
#include "runtime/cpu/VectorMath.h"
#include "runtime/kernels/ElementMath.h"

// Compiled once per instruction set (Isa.h).
#include "runtime/cpu/IsaBegin.h"
#include "runtime/cpu/RowMath.h"
#include "runtime/cpu/SoftmaxRows.h"
namespace ds::rt::cpu::DS_CPU_ISA {
namespace {

enum class ReduceKind { Sum, Mean, Max, Min, Prod };

template <typename T, ReduceKind K> struct Reducer {
  using Acc = std::conditional_t<std::is_floating_point_v<T>, double, T>;
  static Acc init() {
    // An empty reduction is the identity: -inf / +inf for floats (ONNX),
    // the type's extremes for integers.
    if constexpr (K == ReduceKind::Max)
      return std::numeric_limits<T>::has_infinity ? -std::numeric_limits<T>::infinity()
                                                  : std::numeric_limits<T>::lowest();
    else if constexpr (K == ReduceKind::Min)
      return std::numeric_limits<T>::has_infinity ? std::numeric_limits<T>::infinity()
                                                  : std::numeric_limits<T>::max();
    else if constexpr (K == ReduceKind::Prod) return Acc(1);
    else return Acc(0);
  }
  static Acc step(Acc a, T x) {
    if constexpr (K == ReduceKind::Max) return (x > a || x != x) ? Acc(x) : a;
    else if constexpr (K == ReduceKind::Min) return (x < a || x != x) ? Acc(x) : a;
    else if constexpr (K == ReduceKind::Prod) return a * x;
    else return a + x;
  }
  /// Two partial results (of consecutive blocks) as one.
  static Acc combine(Acc a, Acc b) {
    if constexpr (K == ReduceKind::Max) return (b > a || b != b) ? b : a;
    else if constexpr (K == ReduceKind::Min) return (b < a || b != b) ? b : a;
    else if constexpr (K == ReduceKind::Prod) return a * b;
    else return a + b;
  }
};

/// Rows per block when a reduction down many rows runs in parallel.
constexpr int64_t kRowBlock = 128;

// out[o, i] = reduce_r in[o, r, i]
template <typename T, ReduceKind K>
void reduceBlock(const T *in, T *out, int64_t outer, int64_t r, int64_t inner) {
  using R = Reducer<T, K>;
  using Acc = typename R::Acc;
  auto finish = [r](Acc acc) {
    if constexpr (K == ReduceKind::Mean)
      acc = r ? acc / static_cast<Acc>(r) : std::numeric_limits<T>::quiet_NaN();
    return static_cast<T>(acc);
  };
  if (inner >= 16 && outer * inner <= 4096 && r >= 2 * kRowBlock) {
    // Few columns down many rows (a bias gradient [tokens, features] ->
    // [features], a global average pool [1, H*W, C] -> [C]): blocks of
    // rows reduced in parallel, then the blocks' partial results combined
    // in order, so every thread count gives the same bits.
    const int64_t blocks = (r + kRowBlock - 1) / kRowBlock;
    std::vector<Acc> partial(static_cast<size_t>(outer * blocks * inner));
    parallelFor(outer * blocks, 1, [&](int64_t lo, int64_t hi) {
      for (int64_t t = lo; t < hi; ++t) {
        const int64_t o = t / blocks, j0 = (t % blocks) * kRowBlock, j1 = std::min(r, j0 + kRowBlock);
        Acc *acc = partial.data() + t * inner;
        std::fill(acc, acc + inner, R::init());
        for (int64_t j = j0; j < j1; ++j) {
          const T *row = in + (o * r + j) * inner;
          for (int64_t i = 0; i < inner; ++i) acc[i] = R::step(acc[i], row[i]);
        }
      }
    });
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t i = 0; i < inner; ++i) {
        Acc a = R::init();
        for (int64_t b = 0; b < blocks; ++b) a = R::combine(a, partial[(o * blocks + b) * inner + i]);
        out[o * inner + i] = finish(a);
      }
    return;
  }
  if (inner >= 16) {
    // Column sums (a bias gradient: [rows, features] -> [features]): walk
    // the rows in order and update a run of contiguous columns, which
    // vectorizes and reads memory once, instead of striding down each
    // column.
    parallelFor(outer * inner, 256, [&](int64_t lo, int64_t hi) {
      std::vector<Acc> acc;
      for (int64_t idx = lo; idx < hi;) {
        int64_t o = idx / inner, i0 = idx % inner, i1 = std::min(inner, i0 + (hi - idx));
        acc.assign(i1 - i0, R::init());
        for (int64_t j = 0; j < r; ++j) {
          const T *row = in + (o * r + j) * inner + i0;
          for (int64_t i = 0; i < i1 - i0; ++i) acc[i] = R::step(acc[i], row[i]);
        }
        for (int64_t i = 0; i < i1 - i0; ++i) out[o * inner + i0 + i] = finish(acc[i]);
        idx += i1 - i0;
      }
    });
    return;
  }
  if constexpr (std::is_same_v<T, float> && (K == ReduceKind::Sum || K == ReduceKind::Mean)) {
    if (inner == 1) {
      // Row sums (softmax's backward sums y * dy over each row): kLanes f32
      // lanes, vectorized, added in f64; a single running f64 sum is a
      // serial chain GCC may not reorder.
      parallelFor(outer, std::max<int64_t>(1, 4096 / std::max<int64_t>(r, 1)),
                  [&](int64_t lo, int64_t hi) {
                    // The f32 lanes are added into f64 every 4096 elements:
                    // a long row (2^24 elements) kept in f32 lanes lost 1%.
                    constexpr int64_t kBlock = 4096;
                    for (int64_t o = lo; o < hi; ++o) {
                      const float *p = in + o * r;
                      Acc acc = 0;
                      int64_t j = 0;
                      while (j + kLanes <= r) {
                        float lanes[kLanes] = {};
                        const int64_t end = std::min(r, j + kBlock);
                        for (; j + kLanes <= end; j += kLanes)
                          for (int64_t l = 0; l < kLanes; ++l) lanes[l] += p[j + l];
                        for (int64_t l = 0; l < kLanes; ++l) acc += lanes[l];
                      }
                      for (; j < r; ++j) acc += p[j];
                      out[o] = finish(acc);
                    }
                  });
      return;
    }
  }
  parallelFor(outer * inner, std::max<int64_t>(1, 4096 / std::max<int64_t>(r, 1)),
              [&](int64_t lo, int64_t hi) {
                for (int64_t idx = lo; idx < hi; ++idx) {
                  int64_t o = idx / inner, i = idx % inner;
                  const T *p = in + o * r * inner + i;
                  Acc acc = R::init();
                  for (int64_t j = 0; j < r; ++j) acc = R::step(acc, p[j * inner]);
                  out[idx] = finish(acc);
                }
              });
}

/// Reduces `src` (of `shape`) over the axes of `runs` (maximal contiguous
/// runs of axes), last run first, one [outer, r, inner] pass each through a
/// temporary; the last pass writes `out`.
template <typename T, ReduceKind K>
void reduceRuns(const T *src, std::vector<int64_t> shape,
                const std::vector<std::pair<int64_t, int64_t>> &runs, T *out) {
  std::vector<T> tmpA, tmpB;
  for (size_t k = runs.size(); k-- > 0;) {
    auto [from, to] = runs[k];
    int64_t outer = product(shape, 0, from), r = product(shape, from, to),
            inner = product(shape, to, shape.size());
    T *dst;
    if (k == 0) {
      dst = out;
    } else {
      auto &buf = (src == tmpA.data() && !tmpA.empty()) ? tmpB : tmpA;
      buf.assign(outer * inner, T());
      dst = buf.data();
    }
    reduceBlock<T, K>(src, dst, outer, r, inner);
    for (int64_t d = from; d < to; ++d) shape[d] = 1;
    src = dst;
  }
}

template <typename T, ReduceKind K>
absl::StatusOr<PreparedStep> makeReduce(const KernelContext &c,
                                        std::vector<int64_t> axes) {
  const std::vector<int64_t> shape = c.in[0].shape;
  const T *pin = c.in[0].as<T>();
  T *pout = c.out[0].as<T>();
  std::vector<std::pair<int64_t, int64_t>> runs;
  int64_t count = 1;
  for (int64_t a : axes) {
    count *= shape[a];
    if (!runs.empty() && runs.back().second == a) runs.back().second = a + 1;
    else runs.push_back({a, a + 1});
  }
  const int64_t inNumel = c.in[0].numel, outNumel = c.out[0].numel;
  return PreparedStep([=]() -> absl::Status {
    if (runs.empty()) {
      std::copy(pin, pin + inNumel, pout);
    } else if constexpr (K == ReduceKind::Mean && !std::is_floating_point_v<T>) {
      // An integer mean is the exact mean truncated toward zero (numpy's
      // mean, then astype): sum in double over every axis, divide once.
      // Means of the partial means would truncate at every run.
      std::vector<double> wide(pin, pin + inNumel), sums(outNumel);
      reduceRuns<double, ReduceKind::Sum>(wide.data(), shape, runs, sums.data());
      for (int64_t i = 0; i < outNumel; ++i)
        pout[i] = count ? static_cast<T>(sums[i] / static_cast<double>(count)) : T(0);
    } else {
      reduceRuns<T, K>(pin, shape, runs, pout);
    }
    return absl::OkStatus();
  });
}

/// 16-bit floats reduce in f32 (the accumulation width of their matmuls)
/// and round the result once: exact for max and min.
template <ReduceKind K, float (*Widen)(uint16_t), uint16_t (*Narrow)(float)>
absl::StatusOr<PreparedStep> makeReduce16(const KernelContext &c, std::vector<int64_t> axes) {
  std::vector<int64_t> shape = c.in[0].shape;
  const uint16_t *pin = c.in[0].as<uint16_t>();
  uint16_t *pout = c.out[0].as<uint16_t>();
  std::vector<std::pair<int64_t, int64_t>> runs;
  for (int64_t a : axes) {
    if (!runs.empty() && runs.back().second == a) runs.back().second = a + 1;
    else runs.push_back({a, a + 1});
  }
  const int64_t inNumel = c.in[0].numel, outNumel = c.out[0].numel;
  return PreparedStep([=]() -> absl::Status {
    std::vector<float> wide(inNumel), narrow(outNumel);
    for (int64_t i = 0; i < inNumel; ++i) wide[i] = Widen(pin[i]);
    if (runs.empty()) narrow = wide;
    else reduceRuns<float, K>(wide.data(), shape, runs, narrow.data());
    for (int64_t i = 0; i < outNumel; ++i) pout[i] = Narrow(narrow[i]);
    return absl::OkStatus();
  });
}

template <ReduceKind K>
absl::StatusOr<PreparedStep> prepareReduce(const KernelContext &c) {
  DS_RETURN_IF_ERROR(c.expectArity(1, 1, 1));
  DS_RETURN_IF_ERROR(c.expectDType(c.out[0], c.in[0].dtype, "result"));
  const auto &shape = c.in[0].shape;
  const int64_t rank = c.in[0].rank();
  DS_ASSIGN_OR_RETURN(std::vector<int64_t> axes, c.intsAttr("axes"));
  for (int64_t &a : axes) {
    if (a < -rank || a >= rank)
      return c.error(absl::StrCat("axis ", a, " is out of range for rank ", rank));
    if (a < 0) a += rank;
  }
  std::sort(axes.begin(), axes.end());
  if (std::adjacent_find(axes.begin(), axes.end()) != axes.end())
    return c.error("axes repeat");
  std::vector<int64_t> kept, squeezed;
  for (int64_t d = 0; d < rank; ++d) {
    bool red = std::binary_search(axes.begin(), axes.end(), d);
    kept.push_back(red ? 1 : shape[d]);
    if (!red) squeezed.push_back(shape[d]);
  }
  if (c.out[0].shape != kept && c.out[0].shape != squeezed)
    return c.error(absl::StrCat("result shape [", shapeToString(c.out[0].shape),
                                "] does not match reducing [", shapeToString(shape),
                                "] over the axes"));
  switch (c.in[0].dtype) {
  case plan::F32: return makeReduce<float, K>(c, axes);
  case plan::F64: return makeReduce<double, K>(c, axes);
  case plan::I32: return makeReduce<int32_t, K>(c, axes);
  case plan::I64: return makeReduce<int64_t, K>(c, axes);
  // The narrow integers ONNX allows, summed in their own type (wrapping,
  // as the ONNX reference's astype does).
  case plan::I8: return makeReduce<int8_t, K>(c, axes);
  case plan::I16: return makeReduce<int16_t, K>(c, axes);
  case plan::U8: return makeReduce<uint8_t, K>(c, axes);
  case plan::U16: return makeReduce<uint16_t, K>(c, axes);
  case plan::U32: return makeReduce<uint32_t, K>(c, axes);
  case plan::U64: return makeReduce<uint64_t, K>(c, axes);
  case plan::F16: return makeReduce16<K, math::halfToFloat, math::floatToHalf>(c, axes);
  case plan::BF16: return makeReduce16<K, math::bf16ToFloat, math::floatToBf16>(c, axes);
  default:
    return c.error(absl::StrCat("does not support element type ", dtypeName(c.in[0].dtype)));
  }
}

/// Sum over p[0, n) of (p - shift) (or its square with kSquare), in double
/// lanes: vectorized, and as accurate as the serial double sum it replaced.
inline double rowSum(const float *p, int64_t n, float shift, bool square) {
  double acc[kLanes] = {};
  int64_t j = 0;
  if (square) {
    for (; j + kLanes <= n; j += kLanes)
      for (int64_t k = 0; k < kLanes; ++k) {
        double d = p[j + k] - shift;
        acc[k] += d * d;
      }
  } else {
    for (; j + kLanes <= n; j += kLanes)
      for (int64_t k = 0; k < kLanes; ++k) acc[k] += p[j + k] - shift;
  }
  double sum = 0;
  for (int64_t k = 0; k < kLanes; ++k) sum += acc[k];
  for (; j < n; ++j) {
    double d = p[j] - shift;
    sum += square ? d * d : d;
  }
  return sum;
}

/// body(o) for each row o of [0, rows), rows of n elements, in chunks of
/// about 8192 elements per thread.
template <class F> void parallelRows(int64_t rows, int64_t n, F body) {
  parallelFor(rows, std::max<int64_t>(1, 8192 / std::max<int64_t>(n, 1)),
              [&](int64_t lo, int64_t hi) {
                for (int64_t o = lo; o < hi; ++o) body(o);
              });
}

// Masked rows, as functions of plain pointers: inside the kernels'
// lambdas GCC left these loops scalar, with a branch per element (the
// forward's: selectMaxRow and addMaxRow, RowMath.h).
/// y * (dy - sum), 0 where the mask is set (none with a null mask).
inline void softmaxGradRow(const float *y, const float *dy, const uint8_t *mask, float sum,
                           float *dx, int64_t n) {
  if (!mask) {
#pragma omp simd
    for (int64_t k = 0; k < n; ++k) dx[k] = y[k] * (dy[k] - sum);
    return;
  }
#pragma omp simd
  for (int64_t k = 0; k < n; ++k) dx[k] = mask[k] ? 0.0f : y[k] * (dy[k] - sum);
}

} // namespace

// Out of line (and never inlined): fused_matmul's epilogues call these very
// instructions, so a fused softmax gives the bits of the softmax kernels.
__attribute__((noinline)) void SoftmaxRows::row(const float *px, float *py, int64_t o,
                                                int64_t n, float alpha) const {
  // The scaled, masked row and its maximum in one pass where the mask
  // selects per element (attention's causal mask) or there is none: the
  // values and the maximum rowMax finds, with one pass over the row fewer.
  const float *src = py; // the masked row, built in the result
  float mx;
  if (!mask && alpha == 1.0f) {
    src = px;
    mx = rowMax(px, n);
  } else if (!mask || (selects && rows.step)) {
    const uint8_t *pm = mask ? static_cast<const uint8_t *>(mask) + rows.offset(o) : nullptr;
    mx = selectMaxRow(px, alpha, pm, fill, py, n);
  } else {
    if (alpha != 1.0f) { // the scaled product, as the unfused product stored it
#pragma omp simd
      for (int64_t j = 0; j < n; ++j) py[j] = alpha * px[j];
      px = py;
    }
    // An additive mask row (masked and its maximum taken in one pass), or
    // one mask value for the row (step 0): loops of their own, so each
    // vectorizes without a gather.
    const int64_t mo = rows.offset(o);
    if (!selects && rows.step) {
      mx = addMaxRow(px, static_cast<const float *>(mask) + mo, py, n);
    } else {
      if (selects) {
        if (*(static_cast<const uint8_t *>(mask) + mo)) std::fill(py, py + n, fill);
        else if (px != py) std::copy(px, px + n, py);
      } else {
        const float m0 = *(static_cast<const float *>(mask) + mo);
#pragma omp simd
        for (int64_t j = 0; j < n; ++j) py[j] = px[j] + m0;
      }
      mx = rowMax(py, n);
    }
  }
  const float inv = 1.0f / rowExpSum<true>(src, py, mx, n);
#pragma omp simd
  for (int64_t j = 0; j < n; ++j) py[j] *= inv;
}

__attribute__((noinline)) void SoftmaxRows::gradRow(const float *py, const float *pg, float *pd,
                                                    int64_t o, int64_t n) const {
  const uint8_t *pm = mask ? static_cast<const uint8_t *>(mask) + rows.offset(o) : nullptr;
  const float sum = static_cast<float>(rowDot(py, pg, n));
  if (pm && rows.step == 0 && *pm) std::fill(pd, pd + n, 0.0f);
  else softmaxGradRow(py, pg, pm && rows.step ? pm : nullptr, sum, pd, n);
}

namespace {

/// Operand 0 as [outer, n, inner] around the step's `axis` (rank >= 1).
struct AxisGeometry {
  int64_t outer, n, inner;
};
absl::StatusOr<AxisGeometry> axisGeometry(const KernelContext &c) {
  const int64_t rank = c.in[0].rank();
  if (rank == 0) return c.error("operand must have rank >= 1");
  DS_ASSIGN_OR_RETURN(int64_t axis, c.axisAttr("axis", rank));
  const auto &s = c.in[0].shape;
  return AxisGeometry{product(s, 0, axis), s[axis], product(s, axis + 1, s.size())};
}

/// softmax_grad(y, dy) = y * (dy - sum(y * dy)) along `axis`: per row, the
/// dot product in kLanes f32 lanes (added in f64), then one update pass;
/// a strided axis (inner > 1) walks its columns with the same arithmetic.
absl::StatusOr<PreparedStep> prepareSoftmaxGrad(const KernelContext &c) {
  DS_RETURN_IF_ERROR(c.expectArity(2, 3, 1));
  if (isHalf(c.in[0].dtype)) return prepareWidened(c, prepareSoftmaxGrad);
  DS_RETURN_IF_ERROR(c.expectDType(c.in[0], plan::F32, "softmax"));
  DS_RETURN_IF_ERROR(c.expectDType(c.in[1], plan::F32, "dy"));
  DS_RETURN_IF_ERROR(c.expectDType(c.out[0], plan::F32, "result"));
  DS_RETURN_IF_ERROR(c.expectShape(c.in[1], c.in[0].shape, "dy"));
  DS_RETURN_IF_ERROR(c.expectShape(c.out[0], c.in[0].shape, "result"));
  DS_ASSIGN_OR_RETURN(AxisGeometry geo, axisGeometry(c));
  const auto &s = c.in[0].shape;
  const int64_t outer = geo.outer, n = geo.n, inner = geo.inner;
  const float *y = c.in[0].as<float>(), *dy = c.in[1].as<float>();
  float *dx = c.out[0].as<float>();
  if (c.in.size() == 3) {
    // With a mask (i1, broadcast to y): 0 where it is true. Rows only: the
    // masked form comes from attention scores, softmax'd over the last axis.
    DS_RETURN_IF_ERROR(c.expectDType(c.in[2], plan::BOOL, "mask"));
    if (inner != 1) return c.error("a mask needs axis to be the last dimension");
    DS_ASSIGN_OR_RETURN(MaskRows rows, MaskRows::make(c, c.in[2], s));
    const uint8_t *mask = static_cast<const uint8_t *>(c.in[2].data);
    const SoftmaxRows sm{mask, true, 0.0f, std::move(rows)};
    return PreparedStep([=] {
      parallelRows(outer, n, [&](int64_t o) { sm.gradRow(y + o * n, dy + o * n, dx + o * n, o, n); });
      return absl::OkStatus();
    });
  }
  return PreparedStep([=] {
    parallelFor(outer * inner, std::max<int64_t>(1, 8192 / std::max<int64_t>(n, 1)),
                [&](int64_t lo, int64_t hi) {
                  for (int64_t idx = lo; idx < hi; ++idx) {
                    const int64_t o = idx / inner, i = idx % inner;
                    const float *py = y + o * n * inner + i, *pg = dy + o * n * inner + i;
                    float *pd = dx + o * n * inner + i;
                    double dot = 0;
                    if (inner == 1) {
                      SoftmaxRows().gradRow(py, pg, pd, o, n);
                    } else {
                      for (int64_t j = 0; j < n; ++j) dot += py[j * inner] * pg[j * inner];
                      const float sum = static_cast<float>(dot);
                      for (int64_t j = 0; j < n; ++j)
                        pd[j * inner] = py[j * inner] * (pg[j * inner] - sum);
                    }
                  }
                });
    return absl::OkStatus();
  });
}

/// softmax / log_softmax of f64 operands: the same three passes in double
/// (the f32 kernel's lanes and inline exp are f32 arithmetic).
template <bool kLog> absl::StatusOr<PreparedStep> prepareSoftmaxF64(const KernelContext &c) {
  DS_RETURN_IF_ERROR(c.expectDType(c.out[0], plan::F64, "result"));
  DS_RETURN_IF_ERROR(c.expectShape(c.out[0], c.in[0].shape, "result"));
  DS_ASSIGN_OR_RETURN(AxisGeometry geo, axisGeometry(c));
  const int64_t outer = geo.outer, n = geo.n, inner = geo.inner;
  const double *x = c.in[0].as<double>();
  double *y = c.out[0].as<double>();
  return PreparedStep([=] {
    parallelRows(outer * inner, n, [&](int64_t idx) {
      const int64_t o = idx / inner, i = idx % inner;
      const double *px = x + o * n * inner + i;
      double *py = y + o * n * inner + i;
      double mx = -std::numeric_limits<double>::infinity(), sum = 0;
      for (int64_t j = 0; j < n; ++j) mx = px[j * inner] > mx ? px[j * inner] : mx;
      for (int64_t j = 0; j < n; ++j) sum += std::exp(px[j * inner] - mx);
      for (int64_t j = 0; j < n; ++j)
        py[j * inner] = kLog ? px[j * inner] - mx - std::log(sum) : std::exp(px[j * inner] - mx) / sum;
    });
    return absl::OkStatus();
  });
}

template <bool kLog>
absl::StatusOr<PreparedStep> prepareSoftmax(const KernelContext &c) {
  DS_RETURN_IF_ERROR(c.expectArity(1, 1, 1));
  // 16-bit operands compute in f32 (widened), f64 ones in double.
  if (isHalf(c.in[0].dtype)) return prepareWidened(c, prepareSoftmax<kLog>);
  if (c.in[0].dtype == plan::F64) return prepareSoftmaxF64<kLog>(c);
  DS_RETURN_IF_ERROR(c.expectDType(c.in[0], plan::F32, "operand"));
  DS_RETURN_IF_ERROR(c.expectDType(c.out[0], plan::F32, "result"));
  DS_RETURN_IF_ERROR(c.expectShape(c.out[0], c.in[0].shape, "result"));
  DS_ASSIGN_OR_RETURN(AxisGeometry geo, axisGeometry(c));
  const int64_t outer = geo.outer, n = geo.n, inner = geo.inner;
  const float *x = c.in[0].as<float>();
  float *y = c.out[0].as<float>();
  return PreparedStep([=] {
    if (inner == 1) {
      // Rows are contiguous: three vectorized passes (max, exp + sum, scale).
      parallelRows(outer, n, [&](int64_t o) {
        const float *px = x + o * n;
        float *py = y + o * n;
        if (kLog) {
          const float mx = rowMax(px, n);
          const float ls = std::log(rowExpSum<false>(px, nullptr, mx, n));
#pragma omp simd
          for (int64_t j = 0; j < n; ++j) py[j] = px[j] - mx - ls;
        } else {
          SoftmaxRows().row(px, py, o, n);
        }
      });
      return absl::OkStatus();
    }
    parallelFor(outer * inner, std::max<int64_t>(1, 8192 / std::max<int64_t>(n, 1)),
                [&](int64_t lo, int64_t hi) {
                  for (int64_t idx = lo; idx < hi; ++idx) {
                    int64_t o = idx / inner, i = idx % inner;
                    const float *px = x + o * n * inner + i;
                    float *py = y + o * n * inner + i;
                    float mx = -std::numeric_limits<float>::infinity();
                    for (int64_t j = 0; j < n; ++j) mx = std::max(mx, px[j * inner]);
                    double sum = 0;
                    for (int64_t j = 0; j < n; ++j) {
                      float e = std::exp(px[j * inner] - mx);
                      if (!kLog) py[j * inner] = e;
                      sum += e;
                    }
                    if (kLog) {
                      float ls = static_cast<float>(std::log(sum));
                      for (int64_t j = 0; j < n; ++j) py[j * inner] = px[j * inner] - mx - ls;
                    } else {
                      float inv = static_cast<float>(1.0 / sum);
                      for (int64_t j = 0; j < n; ++j) py[j * inner] *= inv;
                    }
                  }
                });
    return absl::OkStatus();
  });
}

/// masked_softmax(x, mask): softmax over the last axis of
/// where(mask, mask_fill, x) (i1 mask) or x + mask (f32 mask), the masked
/// row built in the result and normalized there: the same arithmetic as
/// the where (or add) followed by softmax, in one pass over memory.
absl::StatusOr<PreparedStep> prepareMaskedSoftmax(const KernelContext &c) {
  DS_RETURN_IF_ERROR(c.expectArity(2, 2, 1));
  DS_RETURN_IF_ERROR(c.expectDType(c.in[0], plan::F32, "operand"));
  DS_RETURN_IF_ERROR(c.expectDType(c.out[0], plan::F32, "result"));
  DS_RETURN_IF_ERROR(c.expectShape(c.out[0], c.in[0].shape, "result"));
  const auto &s = c.in[0].shape;
  const int64_t rank = c.in[0].rank();
  if (rank == 0) return c.error("operand must have rank >= 1");
  DS_ASSIGN_OR_RETURN(int64_t axis, c.axisAttr("axis", rank));
  if (axis != rank - 1) return c.error("axis must be the last dimension");
  const bool selects = c.hasAttr("mask_fill");
  float fill = 0.0f;
  if (selects) {
    DS_ASSIGN_OR_RETURN(double f, c.floatAttr("mask_fill"));
    fill = static_cast<float>(f);
  }
  DS_RETURN_IF_ERROR(c.expectDType(c.in[1], selects ? plan::BOOL : plan::F32, "mask"));
  DS_ASSIGN_OR_RETURN(MaskRows rows, MaskRows::make(c, c.in[1], s));
  const int64_t n = s.back(), outer = product(s, 0, rank - 1);
  const float *x = c.in[0].as<float>();
  const SoftmaxRows sm{c.in[1].data, selects, fill, std::move(rows)};
  float *y = c.out[0].as<float>();
  return PreparedStep([=] {
    parallelRows(outer, n, [&](int64_t o) { sm.row(x + o * n, y + o * n, o, n); });
    return absl::OkStatus();
  });
}

// layer_norm(x, scale[, bias]) over dims [axis, rank).
absl::StatusOr<PreparedStep> prepareLayerNormF64(const KernelContext &c);

absl::StatusOr<PreparedStep> prepareLayerNorm(const KernelContext &c) {
  DS_RETURN_IF_ERROR(c.expectArity(2, 3, 1));
  // 16-bit operands compute in f32 (widened), f64 ones in double.
  if (isHalf(c.in[0].dtype)) return prepareWidened(c, prepareLayerNorm);
  if (c.in[0].dtype == plan::F64) return prepareLayerNormF64(c);
  for (const auto &t : c.in) DS_RETURN_IF_ERROR(c.expectDType(t, plan::F32, "operand"));
  DS_RETURN_IF_ERROR(c.expectDType(c.out[0], plan::F32, "result"));
  DS_RETURN_IF_ERROR(c.expectShape(c.out[0], c.in[0].shape, "result"));
  const auto &s = c.in[0].shape;
  const int64_t rank = c.in[0].rank();
  if (rank == 0)
    return c.error("operand must have rank >= 1");
  DS_ASSIGN_OR_RETURN(int64_t axis, c.axisAttr("axis", rank));
  DS_ASSIGN_OR_RETURN(double eps, c.floatAttr("epsilon"));
  std::vector<int64_t> norm(s.begin() + axis, s.end());
  DS_RETURN_IF_ERROR(c.expectShape(c.in[1], norm, "scale"));
  if (c.in.size() == 3)
    DS_RETURN_IF_ERROR(c.expectShape(c.in[2], norm, "bias"));
  int64_t outer = product(s, 0, axis), n = product(s, axis, s.size());
  const float *x = c.in[0].as<float>(), *g = c.in[1].as<float>();
  const float *b = c.in.size() == 3 ? c.in[2].as<float>() : nullptr;
  float *y = c.out[0].as<float>();
  float epsf = static_cast<float>(eps);
  return PreparedStep([=] {
    parallelRows(outer, n, [&](int64_t o) {
      const float *px = x + o * n;
      float *py = y + o * n;
      float mean = static_cast<float>(rowSum(px, n, 0.0f, false) / n);
      double var = rowSum(px, n, mean, true);
      float rstd = static_cast<float>(1.0 / std::sqrt(var / n + epsf));
      if (b) {
#pragma omp simd
        for (int64_t j = 0; j < n; ++j) py[j] = (px[j] - mean) * rstd * g[j] + b[j];
      } else {
#pragma omp simd
        for (int64_t j = 0; j < n; ++j) py[j] = (px[j] - mean) * rstd * g[j];
      }
    });
    return absl::OkStatus();
  });
}

/// layer_norm of f64 operands, in double.
absl::StatusOr<PreparedStep> prepareLayerNormF64(const KernelContext &c) {
  for (const auto &t : c.in) DS_RETURN_IF_ERROR(c.expectDType(t, plan::F64, "operand"));
  DS_RETURN_IF_ERROR(c.expectDType(c.out[0], plan::F64, "result"));
  DS_RETURN_IF_ERROR(c.expectShape(c.out[0], c.in[0].shape, "result"));
  const auto &s = c.in[0].shape;
  const int64_t rank = c.in[0].rank();
  if (rank == 0) return c.error("operand must have rank >= 1");
  DS_ASSIGN_OR_RETURN(int64_t axis, c.axisAttr("axis", rank));
  DS_ASSIGN_OR_RETURN(double eps, c.floatAttr("epsilon"));
  std::vector<int64_t> norm(s.begin() + axis, s.end());
  DS_RETURN_IF_ERROR(c.expectShape(c.in[1], norm, "scale"));
  if (c.in.size() == 3) DS_RETURN_IF_ERROR(c.expectShape(c.in[2], norm, "bias"));
  const int64_t outer = product(s, 0, axis), n = product(s, axis, s.size());
  const double *x = c.in[0].as<double>(), *g = c.in[1].as<double>();
  const double *b = c.in.size() == 3 ? c.in[2].as<double>() : nullptr;
  double *y = c.out[0].as<double>();
  return PreparedStep([=] {
    parallelRows(outer, n, [&](int64_t o) {
      const double *px = x + o * n;
      double *py = y + o * n, mean = 0, var = 0;
      for (int64_t j = 0; j < n; ++j) mean += px[j];
      mean /= n;
      for (int64_t j = 0; j < n; ++j) var += (px[j] - mean) * (px[j] - mean);
      const double rstd = 1.0 / std::sqrt(var / n + eps);
      for (int64_t j = 0; j < n; ++j) py[j] = (px[j] - mean) * rstd * g[j] + (b ? b[j] : 0.0);
    });
    return absl::OkStatus();
  });
}

/// rms_norm: y = x / sqrt(mean(x^2) + eps) * scale per row of the last
/// dimension; the sum of squares in f64 as layer_norm's variance.
absl::StatusOr<PreparedStep> prepareRmsNorm(const KernelContext &c) {
  DS_RETURN_IF_ERROR(c.expectArity(1, 2, 1));
  for (const auto &t : c.in) DS_RETURN_IF_ERROR(c.expectDType(t, plan::F32, "operand"));
  DS_RETURN_IF_ERROR(c.expectDType(c.out[0], plan::F32, "result"));
  DS_RETURN_IF_ERROR(c.expectShape(c.out[0], c.in[0].shape, "result"));
  if (c.in[0].rank() == 0) return c.error("operand must have rank >= 1");
  const int64_t n = c.in[0].shape.back(), outer = n ? c.in[0].numel / n : 0;
  if (c.in.size() == 2) DS_RETURN_IF_ERROR(c.expectShape(c.in[1], {n}, "scale"));
  DS_ASSIGN_OR_RETURN(double eps, c.floatAttr("epsilon"));
  if (!std::isfinite(eps) || eps < 0) return c.error("epsilon must be finite and >= 0");
  const float *x = c.in[0].as<float>(), *g = c.in.size() == 2 ? c.in[1].as<float>() : nullptr;
  float *y = c.out[0].as<float>();
  const float epsf = static_cast<float>(eps);
  return PreparedStep([=] {
    parallelRows(outer, n, [&](int64_t o) {
      const float *px = x + o * n;
      float *py = y + o * n;
      float ms = static_cast<float>(rowSum(px, n, 0.0f, true) / n);
      // The graph squares in f32: an element past sqrt(FLT_MAX) squares to
      // inf there, and so does the mean (the row becomes x * 0).
      float peak = 0.0f;
#pragma omp simd reduction(max : peak)
      for (int64_t j = 0; j < n; ++j) peak = std::max(peak, std::fabs(px[j]));
      if (peak > 1.8446743e19f) ms = std::numeric_limits<float>::infinity();
      const float inv = 1.0f / std::sqrt(ms + epsf);
      if (g) {
#pragma omp simd
        for (int64_t j = 0; j < n; ++j) py[j] = px[j] * inv * g[j];
      } else {
#pragma omp simd
        for (int64_t j = 0; j < n; ++j) py[j] = px[j] * inv;
      }
    });
    return absl::OkStatus();
  });
}

template <typename T, bool kProduct>
PreparedStep makeCumulative(const KernelContext &c, int64_t axis, bool exclusive, bool reverse) {
  const auto &s = c.in[0].shape;
  int64_t outer = product(s, 0, axis), n = s[axis], inner = product(s, axis + 1, s.size());
  const T *x = c.in[0].as<T>();
  T *y = c.out[0].as<T>();
  return [=]() -> absl::Status {
    parallelFor(outer * inner, 64, [&](int64_t lo, int64_t hi) {
      for (int64_t idx = lo; idx < hi; ++idx) {
        int64_t o = idx / inner, i = idx % inner;
        const T *px = x + o * n * inner + i;
        T *py = y + o * n * inner + i;
        T acc = kProduct ? T(1) : T(0);
        for (int64_t t = 0; t < n; ++t) {
          int64_t j = reverse ? n - 1 - t : t;
          if (exclusive) py[j * inner] = acc;
          acc = kProduct ? static_cast<T>(acc * px[j * inner]) : static_cast<T>(acc + px[j * inner]);
          if (!exclusive) py[j * inner] = acc;
        }
      }
    });
    return absl::OkStatus();
  };
}

/// arg_max/arg_min: first (or last) index of the extreme along the axis;
/// NaN counts as the extreme, as numpy's argmax does.
template <typename T, bool kMax>
PreparedStep makeArg(const KernelContext &c, int64_t axis, bool last) {
  const auto &s = c.in[0].shape;
  int64_t outer = product(s, 0, axis), n = s[axis], inner = product(s, axis + 1, s.size());
  const T *x = c.in[0].as<T>();
  int64_t *y = c.out[0].as<int64_t>();
  return [=]() -> absl::Status {
    parallelFor(outer * inner, 256, [&](int64_t lo, int64_t hi) {
      for (int64_t idx = lo; idx < hi; ++idx) {
        int64_t o = idx / inner, i = idx % inner;
        const T *p = x + o * n * inner + i;
        int64_t best = 0;
        for (int64_t j = 1; j < n; ++j) {
          T a = p[j * inner], b = p[best * inner];
          if (b != b) break; // NaN already found
          bool better = a != a || (kMax ? (last ? a >= b : a > b) : (last ? a <= b : a < b));
          if (better) best = j;
        }
        y[idx] = best;
      }
    });
    return absl::OkStatus();
  };
}

template <bool kMax>
absl::StatusOr<PreparedStep> prepareArg(const KernelContext &c) {
  DS_RETURN_IF_ERROR(c.expectArity(1, 1, 1));
  DS_RETURN_IF_ERROR(c.expectDType(c.out[0], plan::I64, "result"));
  if (c.in[0].rank() == 0) return c.error("operand must have rank >= 1");
  DS_ASSIGN_OR_RETURN(int64_t axis, c.axisAttr("axis", c.in[0].rank()));
  DS_ASSIGN_OR_RETURN(int64_t last, c.intAttr("select_last_index"));
  if (c.out[0].numel != c.in[0].numel / std::max<int64_t>(1, c.in[0].shape[axis]) ||
      c.in[0].shape[axis] == 0)
    return c.error("result does not match reducing the axis");
  return dispatchNative(c, c.in[0].dtype, [&](auto tag) -> absl::StatusOr<PreparedStep> {
    return makeArg<decltype(tag), kMax>(c, axis, last);
  });
}

/// top_k: per line along the axis, a partial sort of the indices. Order:
/// better value first (NaN above every number), then the lower index, so
/// the result is deterministic and matches ONNX and torch.topk.
template <typename T>
PreparedStep makeTopK(const KernelContext &c, int64_t axis, int64_t k, bool largest) {
  const auto &s = c.in[0].shape;
  int64_t outer = product(s, 0, axis), n = s[axis], inner = product(s, axis + 1, s.size());
  const T *x = c.in[0].as<T>();
  T *values = c.out[0].as<T>();
  int64_t *indices = c.out[1].as<int64_t>();
  return [=]() -> absl::Status {
    parallelFor(outer * inner, 16, [&](int64_t lo, int64_t hi) {
      std::vector<int64_t> order(n);
      for (int64_t line = lo; line < hi; ++line) {
        int64_t o = line / inner, i = line % inner;
        const T *p = x + o * n * inner + i;
        auto before = [&](int64_t a, int64_t b) {
          T va = p[a * inner], vb = p[b * inner];
          bool nanA = va != va, nanB = vb != vb;
          if (nanA || nanB) {
            if (nanA != nanB) return largest ? nanA : nanB;
          } else if (va != vb) {
            return largest ? va > vb : va < vb;
          }
          return a < b;
        };
        for (int64_t j = 0; j < n; ++j) order[j] = j;
        std::partial_sort(order.begin(), order.begin() + k, order.end(), before);
        for (int64_t j = 0; j < k; ++j) {
          int64_t at = o * k * inner + j * inner + i;
          values[at] = p[order[j] * inner];
          indices[at] = order[j];
        }
      }
    });
    return absl::OkStatus();
  };
}

absl::StatusOr<PreparedStep> prepareTopK(const KernelContext &c) {
  DS_RETURN_IF_ERROR(c.expectArity(1, 1, 2));
  DS_RETURN_IF_ERROR(c.expectDType(c.out[0], c.in[0].dtype, "values"));
  DS_RETURN_IF_ERROR(c.expectDType(c.out[1], plan::I64, "indices"));
  if (c.in[0].rank() == 0) return c.error("operand must have rank >= 1");
  DS_ASSIGN_OR_RETURN(int64_t axis, c.axisAttr("axis", c.in[0].rank()));
  DS_ASSIGN_OR_RETURN(int64_t k, c.intAttr("k"));
  DS_ASSIGN_OR_RETURN(int64_t largest, c.intAttr("largest"));
  if (k < 0 || k > c.in[0].shape[axis])
    return c.error(absl::StrCat("k = ", k, " is outside [0, ", c.in[0].shape[axis], "]"));
  std::vector<int64_t> shape = c.in[0].shape;
  shape[axis] = k;
  DS_RETURN_IF_ERROR(c.expectShape(c.out[0], shape, "values"));
  DS_RETURN_IF_ERROR(c.expectShape(c.out[1], shape, "indices"));
  return dispatchNative(c, c.in[0].dtype, [&](auto tag) -> absl::StatusOr<PreparedStep> {
    return makeTopK<decltype(tag)>(c, axis, k, largest != 0);
  });
}

/// cumsum and cumprod (kProduct): one running accumulation along an axis.
template <bool kProduct>
absl::StatusOr<PreparedStep> prepareCumulative(const KernelContext &c) {
  DS_RETURN_IF_ERROR(c.expectArity(1, 1, 1));
  DS_RETURN_IF_ERROR(c.expectDType(c.out[0], c.in[0].dtype, "result"));
  DS_RETURN_IF_ERROR(c.expectShape(c.out[0], c.in[0].shape, "result"));
  if (c.in[0].rank() == 0) return c.error("operand must have rank >= 1");
  DS_ASSIGN_OR_RETURN(int64_t axis, c.axisAttr("axis", c.in[0].rank()));
  DS_ASSIGN_OR_RETURN(int64_t exclusive, c.intAttr("exclusive"));
  DS_ASSIGN_OR_RETURN(int64_t reverse, c.intAttr("reverse"));
  switch (c.in[0].dtype) {
  case plan::F32: return makeCumulative<float, kProduct>(c, axis, exclusive, reverse);
  case plan::F64: return makeCumulative<double, kProduct>(c, axis, exclusive, reverse);
  case plan::I32: return makeCumulative<int32_t, kProduct>(c, axis, exclusive, reverse);
  case plan::I64: return makeCumulative<int64_t, kProduct>(c, axis, exclusive, reverse);
  case plan::U32: return makeCumulative<uint32_t, kProduct>(c, axis, exclusive, reverse);
  case plan::U64: return makeCumulative<uint64_t, kProduct>(c, axis, exclusive, reverse);
  default: return c.error(absl::StrCat("does not support element type ", dtypeName(c.in[0].dtype)));
  }
}

} // namespace

void registerNormalizationKernels(KernelRegistry &r) {
  r.add("top_k", prepareTopK);
  r.add("cumsum", prepareCumulative<false>);
  r.add("cumprod", prepareCumulative<true>);
  r.add("arg_max", prepareArg<true>);
  r.add("arg_min", prepareArg<false>);
  r.add("reduce_sum", prepareReduce<ReduceKind::Sum>);
  r.add("reduce_mean", prepareReduce<ReduceKind::Mean>);
  r.add("reduce_max", prepareReduce<ReduceKind::Max>);
  r.add("reduce_min", prepareReduce<ReduceKind::Min>);
  r.add("reduce_prod", prepareReduce<ReduceKind::Prod>);
  r.add("softmax", prepareSoftmax<false>);
  r.add("log_softmax", prepareSoftmax<true>);
  r.add("softmax_grad", prepareSoftmaxGrad);
  r.add("masked_softmax", prepareMaskedSoftmax);
  r.add("layer_norm", prepareLayerNorm);
  r.add("rms_norm", prepareRmsNorm);
}

} // namespace ds::rt::cpu::DS_CPU_ISA
#include "runtime/cpu/IsaEnd.h"

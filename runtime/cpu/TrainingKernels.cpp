// Kernels of the training step: the loss and its gradient, the gradients
// of ops whose adjoint is not a composition of forward ops, and the fused
// optimizer updates (one pass over param, grad and moments, like
// DeepSpeed's CPU Adam). Updates run in place: outputs may alias inputs.
#include <cmath>
#include <cstring>
#include <limits>
#include <omp.h>

#include "runtime/cpu/KernelFamilies.h"
#include "runtime/cpu/VectorMath.h"
#include "runtime/kernels/ElementMath.h"

// Compiled once per instruction set (Isa.h).
#include "runtime/cpu/IsaBegin.h"
#include "runtime/cpu/RowMath.h"
namespace ds::rt::cpu::DS_CPU_ISA {
namespace {

absl::Status checkLabels(const KernelContext &c, const TensorView &logits,
                         const TensorView &labels) {
  if (logits.rank() < 1) return c.error("logits must have rank >= 1");
  std::vector<int64_t> want(logits.shape.begin(), logits.shape.end() - 1);
  DS_RETURN_IF_ERROR(c.expectShape(labels, want, "labels"));
  if (labels.dtype != plan::I64 && labels.dtype != plan::I32)
    return c.error("labels must be i32 or i64");
  return c.expectDType(logits, plan::F32, "logits");
}

int64_t labelAt(const TensorView &labels, int64_t i) {
  return labels.dtype == plan::I64 ? labels.as<int64_t>()[i]
                                   : static_cast<int64_t>(labels.as<int32_t>()[i]);
}

/// Labels not ignored; a label outside [0, classes) is a data error.
absl::StatusOr<int64_t> countLabels(const TensorView &labels, int64_t rows, int64_t classes,
                                    int64_t ignore, const std::string &where) {
  int64_t count = 0;
  for (int64_t r = 0; r < rows; ++r) {
    int64_t y = labelAt(labels, r);
    if (y == ignore) continue;
    if (y < 0 || y >= classes)
      return absl::OutOfRangeError(absl::StrCat(where, "label ", y, " at position ", r,
                                                " is outside [0, ", classes, ")"));
    ++count;
  }
  return count;
}

/// Per-row log-sum-exp of the logits.
void rowLogSumExp(const float *x, int64_t rows, int64_t classes, std::vector<double> &lse) {
  lse.resize(rows);
  parallelFor(rows, 16, [&](int64_t lo, int64_t hi) {
    for (int64_t r = lo; r < hi; ++r) {
      const float *p = x + r * classes;
      const float mx = rowMax(p, classes);
      lse[r] = mx + std::log(static_cast<double>(rowExpSum<false>(p, nullptr, mx, classes)));
    }
  });
}

absl::StatusOr<PreparedStep> prepareSoftmaxCrossEntropy(const KernelContext &c) {
  DS_RETURN_IF_ERROR(c.expectArity(2, 2, 1));
  DS_RETURN_IF_ERROR(checkLabels(c, c.in[0], c.in[1]));
  DS_RETURN_IF_ERROR(c.expectShape(c.out[0], {}, "loss"));
  DS_RETURN_IF_ERROR(c.expectDType(c.out[0], plan::F32, "loss"));
  DS_ASSIGN_OR_RETURN(int64_t ignore, c.intAttr("ignore_index"));
  const TensorView logits = c.in[0], labels = c.in[1];
  int64_t classes = logits.shape.back(), rows = labels.numel;
  float *loss = c.out[0].as<float>();
  std::string where(c.error("").message());
  return PreparedStep([=]() -> absl::Status {
    std::vector<double> lse;
    rowLogSumExp(logits.as<float>(), rows, classes, lse);
    DS_ASSIGN_OR_RETURN(int64_t count, countLabels(labels, rows, classes, ignore, where));
    double total = 0;
    for (int64_t r = 0; r < rows; ++r) {
      int64_t y = labelAt(labels, r);
      if (y != ignore) total += lse[r] - logits.as<float>()[r * classes + y];
    }
    *loss = count ? static_cast<float>(total / count) : std::numeric_limits<float>::quiet_NaN();
    return absl::OkStatus();
  });
}

absl::StatusOr<PreparedStep> prepareSoftmaxCrossEntropyGrad(const KernelContext &c) {
  // One output, or two with the loss.
  DS_RETURN_IF_ERROR(c.expectArity(3, 3, c.out.size() == 2 ? 2 : 1));
  DS_RETURN_IF_ERROR(checkLabels(c, c.in[0], c.in[1]));
  DS_RETURN_IF_ERROR(c.expectShape(c.in[2], {}, "dloss"));
  DS_RETURN_IF_ERROR(c.expectDType(c.in[2], plan::F32, "dloss"));
  DS_RETURN_IF_ERROR(c.expectShape(c.out[0], c.in[0].shape, "result"));
  DS_RETURN_IF_ERROR(c.expectDType(c.out[0], plan::F32, "result"));
  // The loss too (ds-fuse-softmax): softmax_cross_entropy's value.
  const bool withLoss = c.out.size() == 2;
  if (withLoss) {
    DS_RETURN_IF_ERROR(c.expectShape(c.out[1], {}, "loss"));
    DS_RETURN_IF_ERROR(c.expectDType(c.out[1], plan::F32, "loss"));
  }
  DS_ASSIGN_OR_RETURN(int64_t ignore, c.intAttr("ignore_index"));
  const TensorView logits = c.in[0], labels = c.in[1], dloss = c.in[2];
  int64_t classes = logits.shape.back(), rows = labels.numel;
  float *out = c.out[0].as<float>();
  float *lossOut = withLoss ? c.out[1].as<float>() : nullptr;
  std::string where(c.error("").message());
  return PreparedStep([=]() -> absl::Status {
    DS_ASSIGN_OR_RETURN(int64_t count, countLabels(labels, rows, classes, ignore, where));
    const float scale = count ? *dloss.as<float>() / static_cast<float>(count) : 0.0f;
    const float *x = logits.as<float>();
    // Each row's loss term, summed in row order afterwards: the bits of
    // softmax_cross_entropy, whose log-sum-exp adds the same f32 sum.
    std::vector<double> terms(withLoss ? rows : 0, 0.0);
    // softmax(row) * scale, one exp pass: e^(p - max) stored while summed,
    // then scaled by scale / sum (the log-sum-exp pass and a second exp
    // pass were half of this kernel).
    parallelFor(rows, 16, [&](int64_t lo, int64_t hi) {
      for (int64_t r = lo; r < hi; ++r) {
        int64_t y = labelAt(labels, r);
        float *o = out + r * classes;
        if (y == ignore) {
          std::fill(o, o + classes, 0.0f);
          continue;
        }
        const float *p = x + r * classes;
        const float mx = rowMax(p, classes);
        const float sum = rowExpSum<true>(p, o, mx, classes);
        if (withLoss) terms[r] = mx + std::log(static_cast<double>(sum)) - p[y];
        const float f = scale / sum;
#pragma omp simd
        for (int64_t j = 0; j < classes; ++j) o[j] *= f;
        o[y] -= scale;
      }
    });
    if (withLoss) {
      double total = 0;
      for (int64_t r = 0; r < rows; ++r)
        if (labelAt(labels, r) != ignore) total += terms[r];
      *lossOut = count ? static_cast<float>(total / count) : std::numeric_limits<float>::quiet_NaN();
    }
    return absl::OkStatus();
  });
}

// layer_norm_grad(x, scale, dy[, addend]) -> (dx [+ addend], dscale, dbias)
// over dims [axis, rank).
/// Rows whose dscale/dbias terms are summed in f32 before the f64 sums.
constexpr int64_t kBlockRows = 8;

absl::StatusOr<PreparedStep> prepareLayerNormGrad(const KernelContext &c) {
  DS_RETURN_IF_ERROR(c.expectArity(3, 4, 3));
  for (const auto &t : c.in) DS_RETURN_IF_ERROR(c.expectDType(t, plan::F32, "operand"));
  for (const auto &t : c.out) DS_RETURN_IF_ERROR(c.expectDType(t, plan::F32, "result"));
  const auto &s = c.in[0].shape;
  if (s.empty()) return c.error("operand must have rank >= 1");
  DS_ASSIGN_OR_RETURN(int64_t axis, c.axisAttr("axis", c.in[0].rank()));
  DS_ASSIGN_OR_RETURN(double eps, c.floatAttr("epsilon"));
  std::vector<int64_t> norm(s.begin() + axis, s.end());
  DS_RETURN_IF_ERROR(c.expectShape(c.in[1], norm, "scale"));
  DS_RETURN_IF_ERROR(c.expectShape(c.in[2], s, "dy"));
  if (c.in.size() == 4) DS_RETURN_IF_ERROR(c.expectShape(c.in[3], s, "addend"));
  DS_RETURN_IF_ERROR(c.expectShape(c.out[0], s, "d_operand"));
  DS_RETURN_IF_ERROR(c.expectShape(c.out[1], norm, "d_scale"));
  DS_RETURN_IF_ERROR(c.expectShape(c.out[2], norm, "d_bias"));
  int64_t outer = product(s, 0, axis), n = product(s, axis, s.size());
  const float *x = c.in[0].as<float>(), *g = c.in[1].as<float>(), *dy = c.in[2].as<float>();
  float *dx = c.out[0].as<float>(), *dg = c.out[1].as<float>(), *db = c.out[2].as<float>();
  // The addend is read where dx is written (it may be dx's own bytes).
  const float *add = c.in.size() == 4 ? c.in[3].as<float>() : nullptr;
  float epsf = static_cast<float>(eps);
  return PreparedStep([=] {
    // dscale/dbias are sums over rows: each thread accumulates its own
    // partial sums, added in thread order (deterministic for a thread count).
    int threads = std::max(1, std::min<int>(omp_get_max_threads(), static_cast<int>(outer)));
    std::vector<double> partG(static_cast<size_t>(threads) * n, 0.0), partB(partG.size(), 0.0);
#pragma omp parallel for num_threads(threads) schedule(static)
    for (int t = 0; t < threads; ++t) {
      int64_t lo = outer * t / threads, hi = outer * (t + 1) / threads;
      double *pg = partG.data() + static_cast<size_t>(t) * n;
      double *pb = partB.data() + static_cast<size_t>(t) * n;
      // The column sums gather kBlockRows rows in f32 (vectorized), then
      // go to the f64 partial sums: f64 for every element halved the
      // vector width and was most of this kernel's time.
      std::vector<float> blockG(n, 0.0f), blockB(n, 0.0f);
      auto flushBlock = [&] {
        for (int64_t j = 0; j < n; ++j) {
          pg[j] += blockG[j];
          pb[j] += blockB[j];
        }
        std::fill(blockG.begin(), blockG.end(), 0.0f);
        std::fill(blockB.begin(), blockB.end(), 0.0f);
      };
      for (int64_t o = lo; o < hi; ++o) {
        const float *px = x + o * n, *pdy = dy + o * n;
        float *pdx = dx + o * n;
        // Row sums in kLanes f32 lanes (vectorized; a single f64 running
        // sum is a serial chain GCC may not reorder: 5x slower), the lanes
        // added in f64.
        auto rowSum = [n](auto term) {
          float acc[kLanes] = {};
          int64_t j = 0;
          for (; j + kLanes <= n; j += kLanes)
            for (int64_t l = 0; l < kLanes; ++l) acc[l] += term(j + l);
          double s = 0;
          for (int64_t l = 0; l < kLanes; ++l) s += acc[l];
          for (; j < n; ++j) s += term(j);
          return s;
        };
        const float mean = static_cast<float>(rowSum([&](int64_t j) { return px[j]; }) / n);
        const double var = rowSum([&](int64_t j) {
          const float d = px[j] - mean;
          return d * d;
        }) / n;
        const float rstd = static_cast<float>(1.0 / std::sqrt(var + epsf));
        // dx = rstd * (dyg - mean(dyg) - xhat * mean(dyg * xhat)), dyg = dy*g
        // Both sums of the gradient in one pass over the row (the same
        // lanes and order as two passes).
        float accA[kLanes] = {}, accB[kLanes] = {};
        int64_t j0 = 0;
        for (; j0 + kLanes <= n; j0 += kLanes)
          for (int64_t l = 0; l < kLanes; ++l) {
            const float dyg = pdy[j0 + l] * g[j0 + l];
            accA[l] += dyg;
            accB[l] += dyg * ((px[j0 + l] - mean) * rstd);
          }
        double sumA = 0, sumB = 0;
        for (int64_t l = 0; l < kLanes; ++l) sumA += accA[l], sumB += accB[l];
        for (; j0 < n; ++j0) {
          const float dyg = pdy[j0] * g[j0];
          sumA += dyg;
          sumB += dyg * ((px[j0] - mean) * rstd);
        }
        const float meanDyg = static_cast<float>(sumA / n);
        const float meanDygX = static_cast<float>(sumB / n);
        float *bg = blockG.data(), *bb = blockB.data();
        if (const float *pa = add ? add + o * n : nullptr) {
#pragma omp simd
          for (int64_t j = 0; j < n; ++j) {
            const float xhat = (px[j] - mean) * rstd;
            bg[j] += pdy[j] * xhat;
            bb[j] += pdy[j];
            pdx[j] = pa[j] + rstd * (pdy[j] * g[j] - meanDyg - xhat * meanDygX);
          }
        } else {
#pragma omp simd
          for (int64_t j = 0; j < n; ++j) {
            const float xhat = (px[j] - mean) * rstd;
            bg[j] += pdy[j] * xhat;
            bb[j] += pdy[j];
            pdx[j] = rstd * (pdy[j] * g[j] - meanDyg - xhat * meanDygX);
          }
        }
        if ((o - lo + 1) % kBlockRows == 0 || o + 1 == hi) flushBlock();
      }
    }
    for (int64_t j = 0; j < n; ++j) {
      double sg = 0, sb = 0;
      for (int t = 0; t < threads; ++t) {
        sg += partG[static_cast<size_t>(t) * n + j];
        sb += partB[static_cast<size_t>(t) * n + j];
      }
      dg[j] = static_cast<float>(sg);
      db[j] = static_cast<float>(sb);
    }
    return absl::OkStatus();
  });
}

absl::StatusOr<PreparedStep> prepareGeluGrad(const KernelContext &c) {
  DS_RETURN_IF_ERROR(c.expectArity(2, 2, 1));
  for (const auto &t : c.in) DS_RETURN_IF_ERROR(c.expectDType(t, plan::F32, "operand"));
  DS_RETURN_IF_ERROR(c.expectShape(c.in[1], c.in[0].shape, "dy"));
  DS_RETURN_IF_ERROR(c.expectShape(c.out[0], c.in[0].shape, "result"));
  std::string approx = "none";
  if (c.hasAttr("approximate")) {
    DS_ASSIGN_OR_RETURN(approx, c.stringAttr("approximate"));
  }
  if (approx != "none" && approx != "tanh") return c.error("unknown approximation");
  bool tanhForm = approx == "tanh";
  const float *x = c.in[0].as<float>(), *dy = c.in[1].as<float>();
  float *dx = c.out[0].as<float>();
  int64_t n = c.out[0].numel;
  return PreparedStep([=] {
    // The derivatives fused_matmul's gelu_grad epilogue applies too.
    parallelFor(n, 8192, [&](int64_t lo, int64_t hi) {
      if (tanhForm) {
        math::GeluTanhDeriv d;
#pragma omp simd
        for (int64_t i = lo; i < hi; ++i) dx[i] = dy[i] * d(x[i]);
      } else {
        math::GeluDeriv d;
#pragma omp simd
        for (int64_t i = lo; i < hi; ++i) dx[i] = dy[i] * d(x[i]);
      }
    });
    return absl::OkStatus();
  });
}

absl::StatusOr<PreparedStep> prepareGatherGrad(const KernelContext &c) {
  DS_RETURN_IF_ERROR(c.expectArity(2, 2, 1));
  const TensorView idx = c.in[0], dy = c.in[1], out = c.out[0];
  if (idx.dtype != plan::I64 && idx.dtype != plan::I32) return c.error("indices must be i32 or i64");
  DS_RETURN_IF_ERROR(c.expectDType(dy, plan::F32, "dy"));
  DS_RETURN_IF_ERROR(c.expectDType(out, plan::F32, "result"));
  if (out.rank() < 1) return c.error("result must have rank >= 1");
  DS_ASSIGN_OR_RETURN(int64_t axis, c.axisAttr("axis", out.rank()));
  std::vector<int64_t> want(out.shape.begin(), out.shape.begin() + axis);
  want.insert(want.end(), idx.shape.begin(), idx.shape.end());
  want.insert(want.end(), out.shape.begin() + axis + 1, out.shape.end());
  DS_RETURN_IF_ERROR(c.expectShape(dy, want, "dy"));
  int64_t outer = product(out.shape, 0, axis), dim = out.shape[axis];
  int64_t inner = product(out.shape, axis + 1, out.shape.size()), nIdx = idx.numel;
  // PyTorch's Embedding(padding_idx): that row gets no gradient.
  int64_t padding = INT64_MIN;
  if (c.hasAttr("padding_idx")) {
    DS_ASSIGN_OR_RETURN(padding, c.intAttr("padding_idx"));
    if (padding < -dim || padding >= dim)
      return c.error(absl::StrCat("padding_idx ", padding, " is out of range for ", dim));
    if (padding < 0) padding += dim;
  }
  std::string where(c.error("").message());
  return PreparedStep([=]() -> absl::Status {
    for (int64_t j = 0; j < nIdx; ++j) {
      int64_t v = labelAt(idx, j);
      if (v < -dim || v >= dim)
        return absl::OutOfRangeError(absl::StrCat(where, "index ", v, " is out of range for ", dim));
    }
    float *o = out.as<float>();
    const float *g = dy.as<float>();
    std::fill(o, o + out.numel, 0.0f);
    // Rows of the result are disjoint across `inner` chunks: parallelize
    // over the inner dimension so repeated indices never race.
    parallelFor(inner, 64, [&](int64_t lo, int64_t hi) {
      for (int64_t a = 0; a < outer; ++a)
        for (int64_t j = 0; j < nIdx; ++j) {
          int64_t v = labelAt(idx, j);
          if (v < 0) v += dim;
          if (v == padding) continue;
          float *dst = o + (a * dim + v) * inner;
          const float *src = g + (a * nIdx + j) * inner;
          for (int64_t i = lo; i < hi; ++i) dst[i] += src[i];
        }
    });
    return absl::OkStatus();
  });
}

absl::StatusOr<PreparedStep> prepareInsertSlice(const KernelContext &c) {
  DS_RETURN_IF_ERROR(c.expectArity(1, 1, 1));
  if (c.in[0].dtype != c.out[0].dtype) return c.error("operand and result types differ");
  DS_ASSIGN_OR_RETURN(std::vector<int64_t> starts, c.intsAttr("starts"));
  DS_ASSIGN_OR_RETURN(std::vector<int64_t> steps, c.intsAttr("steps"));
  const auto &o = c.out[0].shape, &s = c.in[0].shape;
  if (starts.size() != o.size() || steps.size() != o.size() || s.size() != o.size())
    return c.error("starts, steps and operand must match the result's rank");
  std::vector<int64_t> outStrides(o.size());
  int64_t acc = 1;
  for (size_t d = o.size(); d-- > 0;) {
    outStrides[d] = acc;
    acc *= o[d];
  }
  int64_t base = 0;
  std::vector<int64_t> strides(o.size());
  for (size_t d = 0; d < o.size(); ++d) {
    if (s[d] == 0) continue;
    int64_t last = starts[d] + (s[d] - 1) * steps[d];
    if (steps[d] == 0 || starts[d] < 0 || starts[d] >= o[d] || last < 0 || last >= o[d])
      return c.error(absl::StrCat("window of dimension ", d, " leaves the result"));
    base += starts[d] * outStrides[d];
    strides[d] = steps[d] * outStrides[d];
  }
  size_t es = dtypeSize(c.out[0].dtype);
  auto *src = static_cast<const uint8_t *>(c.in[0].data);
  auto *dst = static_cast<uint8_t *>(c.out[0].data);
  int64_t n = c.in[0].numel;
  uint64_t outBytes = c.out[0].bytes();
  return PreparedStep([=] {
    std::memset(dst, 0, outBytes);
    for (int64_t i = 0; i < n; ++i) {
      int64_t rem = i, off = base;
      for (size_t d = s.size(); d-- > 0;) {
        off += (rem % s[d]) * strides[d];
        rem /= s[d];
      }
      std::memcpy(dst + off * es, src + i * es, es);
    }
    return absl::OkStatus();
  });
}

/// Checks an update step: `tensors` same-shaped f32 tensors, then `scalars`
/// f32 scalars and optionally found_inf (one more f32 scalar); returns
/// found_inf, or null when the step has none.
absl::StatusOr<const float *> checkUpdate(const KernelContext &c, size_t tensors,
                                          size_t scalars) {
  DS_RETURN_IF_ERROR(c.expectArity(tensors + scalars, tensors + scalars + 1, tensors - 1));
  for (size_t i = 0; i < tensors; ++i) {
    DS_RETURN_IF_ERROR(c.expectDType(c.in[i], plan::F32, "operand"));
    DS_RETURN_IF_ERROR(c.expectShape(c.in[i], c.in[0].shape, "operand"));
  }
  for (size_t i = tensors; i < c.in.size(); ++i) {
    DS_RETURN_IF_ERROR(c.expectDType(c.in[i], plan::F32, "scalar"));
    DS_RETURN_IF_ERROR(c.expectShape(c.in[i], {}, "scalar"));
  }
  for (const auto &t : c.out) {
    DS_RETURN_IF_ERROR(c.expectDType(t, plan::F32, "result"));
    DS_RETURN_IF_ERROR(c.expectShape(t, c.in[0].shape, "result"));
  }
  return c.in.size() > tensors + scalars ? c.in.back().as<float>() : nullptr;
}

/// What a skipped step (found_inf set) does: every result keeps its
/// operand's value. Results pair with operands 0, 2, 3, ... (operand 1 is
/// the gradient); in-place results need no copy.
struct KeepOperands {
  struct Copy {
    const void *src;
    void *dst;
    uint64_t bytes;
  };
  std::vector<Copy> copies;
  explicit KeepOperands(const KernelContext &c) {
    for (size_t r = 0; r < c.out.size(); ++r) {
      const TensorView &src = c.in[r == 0 ? 0 : r + 1];
      if (src.data != c.out[r].data) copies.push_back({src.data, c.out[r].data, c.out[r].bytes()});
    }
  }
  absl::Status operator()() const {
    for (const Copy &k : copies) std::memmove(k.dst, k.src, k.bytes);
    return absl::OkStatus();
  }
};

// adam_update(p, g, m, v, lr, step_size, bias2_sqrt, grad_scale) -> (p, m, v)
absl::StatusOr<PreparedStep> prepareAdamUpdate(const KernelContext &c) {
  // A cycled beta1 (OneCycle) comes as the last operand, after found_inf.
  int64_t beta1Now = 0;
  if (c.hasAttr("beta1_now")) {
    DS_ASSIGN_OR_RETURN(beta1Now, c.intAttr("beta1_now"));
  }
  DS_ASSIGN_OR_RETURN(const float *lastOperand, checkUpdate(c, 4, beta1Now ? 5 : 4));
  const float *b1p = beta1Now ? c.in.back().as<float>() : nullptr;
  const float *foundInf = beta1Now ? (c.in.size() == 10 ? c.in[8].as<float>() : nullptr)
                                   : lastOperand;
  DS_ASSIGN_OR_RETURN(double b1, c.floatAttr("beta1"));
  DS_ASSIGN_OR_RETURN(double b2, c.floatAttr("beta2"));
  DS_ASSIGN_OR_RETURN(double eps, c.floatAttr("eps"));
  DS_ASSIGN_OR_RETURN(double wd, c.floatAttr("weight_decay"));
  DS_ASSIGN_OR_RETURN(int64_t decoupled, c.intAttr("decoupled"));
  const float *p = c.in[0].as<float>(), *g = c.in[1].as<float>(), *m = c.in[2].as<float>(),
              *v = c.in[3].as<float>();
  const float *lrp = c.in[4].as<float>(), *ssp = c.in[5].as<float>(), *bcp = c.in[6].as<float>(),
              *gsp = c.in[7].as<float>();
  float *po = c.out[0].as<float>(), *mo = c.out[1].as<float>(), *vo = c.out[2].as<float>();
  int64_t n = c.in[0].numel;
  KeepOperands keep(c);
  return PreparedStep([=] {
    if (foundInf && *foundInf != 0.0f) return keep();
    const float lr = *lrp, stepSize = *ssp, bias2 = *bcp, gs = *gsp;
    const float beta1 = b1p ? *b1p : static_cast<float>(b1), beta2 = static_cast<float>(b2);
    const float epsf = static_cast<float>(eps), wdf = static_cast<float>(wd);
    const float decay = decoupled ? 1.0f - lr * wdf : 1.0f;
    parallelFor(n, 16384, [&](int64_t lo, int64_t hi) {
#pragma omp simd
      for (int64_t i = lo; i < hi; ++i) {
        float grad = g[i] * gs;
        float param = p[i];
        if (!decoupled) grad += wdf * param;
        param *= decay;
        float mi = beta1 * m[i] + (1.0f - beta1) * grad;
        float vi = beta2 * v[i] + (1.0f - beta2) * grad * grad;
        float denom = std::sqrt(vi) / bias2 + epsf;
        po[i] = param - stepSize * (mi / denom);
        mo[i] = mi;
        vo[i] = vi;
      }
    });
    return absl::OkStatus();
  });
}

// sgd_update(p, g, buf, lr, grad_scale, first) -> (p, buf)
absl::StatusOr<PreparedStep> prepareSgdUpdate(const KernelContext &c) {
  DS_ASSIGN_OR_RETURN(const float *foundInf, checkUpdate(c, 3, 3));
  DS_ASSIGN_OR_RETURN(double mom, c.floatAttr("momentum"));
  DS_ASSIGN_OR_RETURN(double damp, c.floatAttr("dampening"));
  DS_ASSIGN_OR_RETURN(double wd, c.floatAttr("weight_decay"));
  DS_ASSIGN_OR_RETURN(int64_t nesterov, c.intAttr("nesterov"));
  const float *p = c.in[0].as<float>(), *g = c.in[1].as<float>(), *b = c.in[2].as<float>();
  const float *lrp = c.in[3].as<float>(), *gsp = c.in[4].as<float>(), *fp = c.in[5].as<float>();
  float *po = c.out[0].as<float>(), *bo = c.out[1].as<float>();
  int64_t n = c.in[0].numel;
  KeepOperands keep(c);
  return PreparedStep([=] {
    if (foundInf && *foundInf != 0.0f) return keep();
    const float lr = *lrp, gs = *gsp, m = static_cast<float>(mom), dmp = static_cast<float>(damp);
    const float wdf = static_cast<float>(wd);
    const bool first = *fp != 0.0f;
    parallelFor(n, 16384, [&](int64_t lo, int64_t hi) {
#pragma omp simd
      for (int64_t i = lo; i < hi; ++i) {
        float d = g[i] * gs + wdf * p[i];
        float buf = b[i];
        if (m != 0.0f) {
          buf = first ? d : m * buf + (1.0f - dmp) * d;
          d = nesterov ? d + m * buf : buf;
        }
        po[i] = p[i] - lr * d;
        bo[i] = buf;
      }
    });
    return absl::OkStatus();
  });
}

// lamb_update(p, g, m, v, lr, step_size, bias2_sqrt, grad_scale) -> (p, m, v)
absl::StatusOr<PreparedStep> prepareLambUpdate(const KernelContext &c) {
  DS_ASSIGN_OR_RETURN(const float *foundInf, checkUpdate(c, 4, 4));
  DS_ASSIGN_OR_RETURN(double b1, c.floatAttr("beta1"));
  DS_ASSIGN_OR_RETURN(double b2, c.floatAttr("beta2"));
  DS_ASSIGN_OR_RETURN(double eps, c.floatAttr("eps"));
  DS_ASSIGN_OR_RETURN(double wd, c.floatAttr("weight_decay"));
  DS_ASSIGN_OR_RETURN(double maxCoeff, c.floatAttr("max_coeff"));
  DS_ASSIGN_OR_RETURN(double minCoeff, c.floatAttr("min_coeff"));
  DS_ASSIGN_OR_RETURN(int64_t inside, c.intAttr("eps_inside_sqrt"));
  const float *p = c.in[0].as<float>(), *g = c.in[1].as<float>(), *m = c.in[2].as<float>(),
              *v = c.in[3].as<float>();
  const float *lrp = c.in[4].as<float>(), *ssp = c.in[5].as<float>(), *bcp = c.in[6].as<float>(),
              *gsp = c.in[7].as<float>();
  float *po = c.out[0].as<float>(), *mo = c.out[1].as<float>(), *vo = c.out[2].as<float>();
  const int64_t n = c.in[0].numel;
  KeepOperands keep(c);
  // The update u, kept until the trust ratio is known (p may be updated in
  // place, and its norm is of the old values).
  auto u = std::make_shared<std::vector<float>>(static_cast<size_t>(n));
  constexpr int64_t kChunk = 1 << 14;
  const int64_t chunks = (n + kChunk - 1) / kChunk;
  auto sums = std::make_shared<std::vector<double>>(static_cast<size_t>(2 * chunks));
  return PreparedStep([=] {
    if (foundInf && *foundInf != 0.0f) return keep();
    const float gs = *gsp, beta1 = static_cast<float>(b1), beta2 = static_cast<float>(b2);
    const float epsf = static_cast<float>(eps), wdf = static_cast<float>(wd);
    float *uu = u->data();
    // Moments, u, and per-chunk squared norms of p and u (chunks summed in
    // order in double: the same ratio whatever the thread count).
    parallelFor(chunks, 1, [&](int64_t lo, int64_t hi) {
      for (int64_t k = lo; k < hi; ++k) {
        double pp = 0, qq = 0;
        for (int64_t i = k * kChunk; i < std::min(n, (k + 1) * kChunk); ++i) {
          const float grad = g[i] * gs;
          const float mi = beta1 * m[i] + (1.0f - beta1) * grad;
          const float vi = beta2 * v[i] + (1.0f - beta2) * grad * grad;
          const float denom = inside ? std::sqrt(vi + epsf) : std::sqrt(vi) + epsf;
          const float ui = mi / denom + wdf * p[i];
          uu[i] = ui;
          mo[i] = mi;
          vo[i] = vi;
          pp += static_cast<double>(p[i]) * p[i];
          qq += static_cast<double>(ui) * ui;
        }
        (*sums)[2 * k] = pp;
        (*sums)[2 * k + 1] = qq;
      }
    });
    double pn = 0, un = 0;
    for (int64_t k = 0; k < chunks; ++k) pn += (*sums)[2 * k], un += (*sums)[2 * k + 1];
    pn = std::sqrt(pn), un = std::sqrt(un);
    double ratio = 1.0;
    if (pn != 0 && un != 0) ratio = std::min(std::max(pn / un, minCoeff), maxCoeff);
    const float step = static_cast<float>(static_cast<double>(*ssp) * *bcp * ratio);
    (void)lrp;
    parallelFor(n, 16384, [&](int64_t lo, int64_t hi) {
#pragma omp simd
      for (int64_t i = lo; i < hi; ++i) po[i] = p[i] - step * uu[i];
    });
    return absl::OkStatus();
  });
}

// lion_update(p, g, m, lr, grad_scale) -> (p, m)
absl::StatusOr<PreparedStep> prepareLionUpdate(const KernelContext &c) {
  DS_ASSIGN_OR_RETURN(const float *foundInf, checkUpdate(c, 3, 2));
  DS_ASSIGN_OR_RETURN(double b1, c.floatAttr("beta1"));
  DS_ASSIGN_OR_RETURN(double b2, c.floatAttr("beta2"));
  DS_ASSIGN_OR_RETURN(double wd, c.floatAttr("weight_decay"));
  const float *p = c.in[0].as<float>(), *g = c.in[1].as<float>(), *m = c.in[2].as<float>();
  const float *lrp = c.in[3].as<float>(), *gsp = c.in[4].as<float>();
  float *po = c.out[0].as<float>(), *mo = c.out[1].as<float>();
  int64_t n = c.in[0].numel;
  KeepOperands keep(c);
  return PreparedStep([=] {
    if (foundInf && *foundInf != 0.0f) return keep();
    const float lr = *lrp, gs = *gsp;
    const float beta1 = static_cast<float>(b1), beta2 = static_cast<float>(b2);
    const float decay = 1.0f - lr * static_cast<float>(wd);
    parallelFor(n, 16384, [&](int64_t lo, int64_t hi) {
#pragma omp simd
      for (int64_t i = lo; i < hi; ++i) {
        const float grad = g[i] * gs;
        const float cur = beta1 * m[i] + (1.0f - beta1) * grad;
        po[i] = p[i] * decay - std::copysign(lr, cur);
        mo[i] = beta2 * m[i] + (1.0f - beta2) * grad;
      }
    });
    return absl::OkStatus();
  });
}

// adagrad_update(p, g, sum, lr, grad_scale) -> (p, sum)
absl::StatusOr<PreparedStep> prepareAdagradUpdate(const KernelContext &c) {
  DS_ASSIGN_OR_RETURN(const float *foundInf, checkUpdate(c, 3, 2));
  DS_ASSIGN_OR_RETURN(double eps, c.floatAttr("eps"));
  DS_ASSIGN_OR_RETURN(double wd, c.floatAttr("weight_decay"));
  DS_ASSIGN_OR_RETURN(int64_t sumOnly, c.intAttr("decay_in_sum_only"));
  const float *p = c.in[0].as<float>(), *g = c.in[1].as<float>(), *sq = c.in[2].as<float>();
  const float *lrp = c.in[3].as<float>(), *gsp = c.in[4].as<float>();
  float *po = c.out[0].as<float>(), *so = c.out[1].as<float>();
  int64_t n = c.in[0].numel;
  KeepOperands keep(c);
  return PreparedStep([=] {
    if (foundInf && *foundInf != 0.0f) return keep();
    const float lr = *lrp, gs = *gsp, epsf = static_cast<float>(eps);
    const float wdf = static_cast<float>(wd);
    parallelFor(n, 16384, [&](int64_t lo, int64_t hi) {
#pragma omp simd
      for (int64_t i = lo; i < hi; ++i) {
        const float grad = g[i] * gs;
        const float d = grad + wdf * p[i];
        const float s2 = sq[i] + d * d;
        po[i] = p[i] - lr * (sumOnly ? grad : d) / (std::sqrt(s2) + epsf);
        so[i] = s2;
      }
    });
    return absl::OkStatus();
  });
}


/// C (rows x n) = alpha A B + beta C over row blocks on the pool's threads
/// (sgemm itself is single-threaded).
void parallelSgemm(bool transB, int64_t rows, int64_t n, int64_t k, float alpha, const float *a,
                   const float *b, int64_t ldb, float beta, float *cOut) {
  parallelFor(rows, 32, [&](int64_t lo, int64_t hi) {
    sgemm(false, transB, hi - lo, n, k, alpha, a + lo * k, k, b, ldb, beta, cOut + lo * n, n);
  });
}

/// Muon's orthogonalization of one n x m matrix (n <= m) in place: the
/// quintic Newton-Schulz iteration of DeepSpeed's zeropower_via_newtonschulz5
/// in f32. `a` and `b` are n x n scratch, `next` n x m.
void newtonSchulz(float *x, int64_t n, int64_t m, int64_t steps, float *a, float *b,
                  float *next) {
  constexpr float ka = 3.4445f, kb = -4.7750f, kc = 2.0315f;
  double sq = 0;
  for (int64_t i = 0; i < n * m; ++i) sq += static_cast<double>(x[i]) * x[i];
  const float inv = static_cast<float>(1.0 / (std::sqrt(sq) + 1e-7));
  for (int64_t i = 0; i < n * m; ++i) x[i] *= inv;
  for (int64_t it = 0; it < steps; ++it) {
    parallelSgemm(true, n, n, m, 1.0f, x, x, m, 0.0f, a);       // A = X X^T
    std::memcpy(b, a, sizeof(float) * n * n);
    parallelSgemm(false, n, n, n, kc, a, a, n, kb, b);          // B = b A + c A A
    std::memcpy(next, x, sizeof(float) * n * m);
    parallelSgemm(false, n, m, n, 1.0f, b, x, m, ka, next);     // X = a X + B X
    std::memcpy(x, next, sizeof(float) * n * m);
  }
}

// muon_update(p, g, buf, lr, grad_scale) -> (p, buf)
absl::StatusOr<PreparedStep> prepareMuonUpdate(const KernelContext &c) {
  DS_ASSIGN_OR_RETURN(const float *foundInf, checkUpdate(c, 3, 2));
  DS_ASSIGN_OR_RETURN(double beta, c.floatAttr("momentum"));
  DS_ASSIGN_OR_RETURN(double wd, c.floatAttr("weight_decay"));
  DS_ASSIGN_OR_RETURN(int64_t nesterov, c.intAttr("nesterov"));
  DS_ASSIGN_OR_RETURN(int64_t steps, c.intAttr("ns_steps"));
  DS_ASSIGN_OR_RETURN(double scale, c.floatAttr("scale"));
  const std::vector<int64_t> &shape = c.in[0].shape;
  if (shape.size() < 2) return c.error("muon_update needs a parameter of rank >= 2");
  if (steps < 0 || steps > 100) return c.error("ns_steps must be in [0, 100]");
  // The matrices DeepSpeed orthogonalizes: a filter [O, I, kh, kw] as
  // O x (I kh kw); otherwise a batch of the last two dimensions.
  const int64_t numel = c.in[0].numel;
  int64_t rows = shape[shape.size() - 2], cols = shape.back();
  if (shape.size() == 4) rows = shape[0], cols = numel / std::max<int64_t>(1, shape[0]);
  const int64_t batch = rows * cols == 0 ? 0 : numel / (rows * cols);
  const float *p = c.in[0].as<float>(), *g = c.in[1].as<float>(), *buf = c.in[2].as<float>();
  const float *lrp = c.in[3].as<float>(), *gsp = c.in[4].as<float>();
  float *po = c.out[0].as<float>(), *bo = c.out[1].as<float>();
  const int64_t n = std::min(rows, cols), m = std::max(rows, cols);
  const bool wide = rows <= cols;
  auto u = std::make_shared<std::vector<float>>(static_cast<size_t>(numel));
  auto scratch = std::make_shared<std::vector<float>>(static_cast<size_t>(2 * n * n + 2 * n * m));
  KeepOperands keep(c);
  return PreparedStep([=] {
    if (foundInf && *foundInf != 0.0f) return keep();
    const float gs = *gsp, mom = static_cast<float>(beta), lr = *lrp;
    float *uu = u->data();
    // buf = lerp(buf, g, 1 - momentum); u = lerp(g, buf, momentum) (Nesterov).
    parallelFor(numel, 16384, [&](int64_t lo, int64_t hi) {
#pragma omp simd
      for (int64_t i = lo; i < hi; ++i) {
        const float grad = g[i] * gs;
        const float nb = buf[i] + (1.0f - mom) * (grad - buf[i]);
        bo[i] = nb;
        uu[i] = nesterov ? grad + mom * (nb - grad) : nb;
      }
    });
    float *x = scratch->data(), *a = x + n * m, *bb = a + n * n, *next = bb + n * n;
    for (int64_t k = 0; k < batch; ++k) {
      float *mat = uu + k * rows * cols;
      if (wide) std::memcpy(x, mat, sizeof(float) * n * m);
      else
        for (int64_t i = 0; i < rows; ++i)
          for (int64_t j = 0; j < cols; ++j) x[j * rows + i] = mat[i * cols + j];
      newtonSchulz(x, n, m, steps, a, bb, next);
      if (wide) std::memcpy(mat, x, sizeof(float) * n * m);
      else
        for (int64_t i = 0; i < rows; ++i)
          for (int64_t j = 0; j < cols; ++j) mat[i * cols + j] = x[j * rows + i];
    }
    const float decay = 1.0f - lr * static_cast<float>(wd);
    const float step = lr * static_cast<float>(scale);
    parallelFor(numel, 16384, [&](int64_t lo, int64_t hi) {
#pragma omp simd
      for (int64_t i = lo; i < hi; ++i) po[i] = p[i] * decay - step * uu[i];
    });
    return absl::OkStatus();
  });
}
} // namespace

/// sum_squares: sum of x^2 over every element of every operand (the
/// squared gradient norm). Fixed chunks of kChunk elements are summed in
/// kLanes f32 lanes, independently, and the chunk sums added in f64 in
/// order: the same result whatever the thread count.
absl::StatusOr<PreparedStep> prepareSumSquares(const KernelContext &c) {
  if (c.in.empty()) return c.error("needs at least one operand");
  DS_RETURN_IF_ERROR(c.expectArity(1, c.in.size(), 1));
  for (const TensorView &t : c.in) DS_RETURN_IF_ERROR(c.expectDType(t, plan::F32, "operand"));
  DS_RETURN_IF_ERROR(c.expectDType(c.out[0], plan::F32, "result"));
  DS_RETURN_IF_ERROR(c.expectShape(c.out[0], {}, "result"));
  constexpr int64_t kChunk = 1 << 14;
  struct Chunk {
    const float *data;
    int64_t n;
  };
  std::vector<Chunk> chunks;
  for (const TensorView &t : c.in)
    for (int64_t at = 0; at < t.numel; at += kChunk)
      chunks.push_back({t.as<float>() + at, std::min(kChunk, t.numel - at)});
  float *out = c.out[0].as<float>();
  auto sums = std::make_shared<std::vector<double>>(chunks.size());
  return PreparedStep([chunks = std::move(chunks), sums, out] {
    parallelFor(static_cast<int64_t>(chunks.size()), 1, [&](int64_t lo, int64_t hi) {
      for (int64_t k = lo; k < hi; ++k) {
        (*sums)[k] = rowDot(chunks[k].data, chunks[k].data, chunks[k].n);
      }
    });
    double total = 0;
    for (double s : *sums) total += s;
    *out = static_cast<float>(total);
    return absl::OkStatus();
  });
}

void registerTrainingKernels(KernelRegistry &r) {
  r.add("sum_squares", prepareSumSquares);
  r.add("softmax_cross_entropy", prepareSoftmaxCrossEntropy);
  r.add("softmax_cross_entropy_grad", prepareSoftmaxCrossEntropyGrad);
  r.add("layer_norm_grad", prepareLayerNormGrad);
  r.add("gelu_grad", prepareGeluGrad);
  r.add("gather_grad", prepareGatherGrad);
  r.add("insert_slice", prepareInsertSlice);
  r.add("adam_update", prepareAdamUpdate);
  r.add("sgd_update", prepareSgdUpdate);
  r.add("lion_update", prepareLionUpdate);
  r.add("lamb_update", prepareLambUpdate);
  r.add("adagrad_update", prepareAdagradUpdate);
  r.add("muon_update", prepareMuonUpdate);
}

} // namespace ds::rt::cpu::DS_CPU_ISA
#include "runtime/cpu/IsaEnd.h"

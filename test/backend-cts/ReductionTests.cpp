// Reductions, softmax, layer_norm, cumsum, arg_max/arg_min and top_k.
#include <algorithm>
#include <numeric>

#include "test/backend-cts/Cts.h"

using namespace cts;

namespace {

enum class Red { Sum, Mean, Max, Min, Prod };

/// Reference reduction of `x` (shape `s`) over sorted, normalized `axes`;
/// the result in keep-dims layout (same flat order as the squeezed one).
std::vector<double> reduceRef(Red kind, DType dt, const Shape &s, const std::vector<double> &x,
                              const std::vector<int64_t> &axes) {
  Shape kept = s;
  for (int64_t a : axes) kept[a] = 1;
  bool integer = dt == plan::I32 || dt == plan::I64;
  // An empty max/min is the identity: -inf/+inf for floats (ONNX), the
  // type's extremes for integers.
  const double inf = std::numeric_limits<double>::infinity();
  double lowest = dt == plan::F32 || dt == plan::F64 ? -inf
                  : dt == plan::I32                  ? -2147483648.0
                                                     : -9223372036854775808.0;
  double highest = dt == plan::F32 || dt == plan::F64 ? inf
                   : dt == plan::I32                  ? 2147483647.0
                                                      : 9223372036854775807.0;
  double init = kind == Red::Max ? lowest : kind == Red::Min ? highest : kind == Red::Prod ? 1 : 0;
  std::vector<double> acc(numel(kept), init);
  std::vector<int64_t> count(numel(kept), 0);
  Shape ks = stridesOf(kept);
  for (int64_t i = 0; i < numel(s); ++i) {
    Shape c = unravel(i, s);
    int64_t o = 0;
    for (size_t d = 0; d < s.size(); ++d) o += (kept[d] == 1 ? 0 : c[d]) * ks[d];
    double v = x[i];
    double &a = acc[o];
    switch (kind) {
    case Red::Sum:
    case Red::Mean: a += v; break;
    case Red::Prod: a *= v; break;
    case Red::Max: a = (std::isnan(v) || v > a) ? v : a; break;
    case Red::Min: a = (std::isnan(v) || v < a) ? v : a; break;
    }
    ++count[o];
  }
  if (kind == Red::Mean) {
    int64_t r = numel(s) / std::max<int64_t>(1, numel(kept));
    for (double &a : acc)
      a = r == 0 ? (integer ? 0 : std::nan("")) : integer ? std::trunc(a / r) : a / r;
  }
  return acc;
}

} // namespace

CTS_TEST(Reductions, "reduce_sum", "reduce_mean", "reduce_max", "reduce_min", "reduce_prod") {
  const std::vector<std::pair<std::string, Red>> kinds = {{"reduce_sum", Red::Sum},
                                                          {"reduce_mean", Red::Mean},
                                                          {"reduce_max", Red::Max},
                                                          {"reduce_min", Red::Min},
                                                          {"reduce_prod", Red::Prod}};
  struct Case {
    Shape shape;
    std::vector<int64_t> axes; // as written in the step (may be negative)
  };
  const std::vector<Case> cases = {
      {{2, 3, 4}, {0, 2}}, {{2, 3, 4}, {1}},    {{2, 3, 4}, {-1}},  {{2, 3, 4}, {0, 1, 2}},
      {{2, 3, 4}, {}},     {{1023}, {0}},       {{17, 5}, {0}},     {{3, 0, 2}, {1}},
      {{0, 3}, {1}},       {{1, 1, 7}, {0, 1}}, {{2, 2, 3, 2}, {1, 3}},
      // Few columns down many rows (blocks of rows in parallel): a bias
      // gradient, and a global average pool over channels-last [1, H, W, C].
      {{2, 700, 20}, {1}}, {{1, 30, 20, 24}, {1, 2}},
  };
  for (DType dt : {plan::F32, plan::F64, plan::I32, plan::I64})
    for (const auto &[kernel, kind] : kinds)
      for (const Case &c : cases) {
        bool integer = dt == plan::I32 || dt == plan::I64;
        // Products stay near 1 so long reductions neither overflow nor vanish.
        auto xv = kind == Red::Prod ? sample(numel(c.shape), 0.9, 1.1, 30) : sample(numel(c.shape), -50, 50, 31);
        if (integer) {
          for (auto &v : xv) v = kind == Red::Prod ? (v < 1 ? -1 : 1) : std::round(v);
        }
        HostTensor x = HostTensor::of(dt, c.shape, xv);
        std::vector<int64_t> axes;
        for (int64_t a : c.axes) axes.push_back(a < 0 ? a + static_cast<int64_t>(c.shape.size()) : a);
        std::sort(axes.begin(), axes.end());
        std::vector<double> want = reduceRef(kind, dt, c.shape, x.values(), axes);
        Shape kept = c.shape, squeezed;
        for (int64_t a : axes) kept[a] = 1;
        for (size_t d = 0; d < c.shape.size(); ++d)
          if (!std::binary_search(axes.begin(), axes.end(), static_cast<int64_t>(d))) squeezed.push_back(c.shape[d]);
        // Both result layouts the compiler writes: kept dims and squeezed.
        for (const Shape &os : {kept, squeezed}) {
          HostTensor o = run1(Step(kernel).ints("axes", c.axes), {x}, dt, os);
          double rtol = integer ? 0 : dt == plan::F32 ? 1e-5 : 1e-12;
          // Backends may group the sums differently: absolute slack for
          // results that cancel to near zero.
          double atol = integer ? 0 : dt == plan::F32 ? 1e-3 : 1e-9;
          expectClose(o.values(), roundTo(dt, want), rtol, atol,
                      kernel + " " + ds::rt::dtypeName(dt) + " " + shapeStr(c.shape) + " -> " + shapeStr(os));
        }
      }
  // NaN wins in max/min, as numpy's.
  const double nan = std::nan("");
  expectClose(run1(Step("reduce_max").ints("axes", {1}), {f32({2, 3}, {1, nan, 3, 4, 5, 6})}, plan::F32, {2}).values(),
              {nan, 6}, 0, 0, "reduce_max NaN");
  expectClose(run1(Step("reduce_min").ints("axes", {0}), {f64({2, 2}, {nan, 1, 0, 2})}, plan::F64, {2}).values(),
              {nan, 1}, 0, 0, "reduce_min NaN");
  // ... also when it sits in one block of many rows.
  std::vector<double> tall = sample(600 * 16, -5, 5, 32);
  tall[300 * 16 + 3] = nan;
  std::vector<double> wantMax(16, -1e300);
  for (int64_t j = 0; j < 600; ++j)
    for (int64_t i = 0; i < 16; ++i)
      wantMax[i] = std::isnan(wantMax[i]) ? wantMax[i]
                   : (std::isnan(tall[j * 16 + i]) || tall[j * 16 + i] > wantMax[i]) ? tall[j * 16 + i]
                                                                                        : wantMax[i];
  expectClose(run1(Step("reduce_max").ints("axes", {0}), {f32({600, 16}, tall)}, plan::F32, {16}).values(),
              roundTo(plan::F32, wantMax), 0, 0, "reduce_max NaN in a block of rows");
  // A long f32 row sums as accurately as a short one: 2^22 elements of 0.1
  // (f32 lanes added over the whole row were 2.5e-3 off).
  const int64_t n = int64_t(1) << 22;
  const double tenth = static_cast<float>(0.1);
  for (const char *kernel : {"reduce_sum", "reduce_mean"}) {
    HostTensor row = HostTensor::of(plan::F32, {1, n}, std::vector<double>(n, tenth));
    const double want = std::string(kernel) == "reduce_sum" ? tenth * n : tenth;
    expectClose(run1(Step(kernel).ints("axes", {1}), {row}, plan::F32, {1}).values(), {want}, 1e-5,
                0, std::string(kernel) + " of a 2^22-element row");
  }
}

CTS_TEST(ReductionErrors, "reduce_sum") {
  HostTensor x = f32({2, 3}, {1, 2, 3, 4, 5, 6});
  auto err = [&](Step step, HostTensor in, HostTensor out, const std::string &needle) {
    std::vector<HostTensor> outs{std::move(out)};
    expectError(run(step, {std::move(in)}, outs), needle);
  };
  err(Step("reduce_sum").ints("axes", {2}), x, HostTensor::result(plan::F32, {2}), "axis 2 is out of range for rank 2");
  err(Step("reduce_sum").ints("axes", {1, -1}), x, HostTensor::result(plan::F32, {2}), "axes repeat");
  err(Step("reduce_sum").ints("axes", {1}), x, HostTensor::result(plan::F32, {3}), "does not match reducing");
  err(Step("reduce_sum"), x, HostTensor::result(plan::F32, {2}), "integer-list attribute 'axes'");
  err(Step("reduce_sum").ints("axes", {1}), x, HostTensor::result(plan::F64, {2}), "result must be f32");
  err(Step("reduce_sum").ints("axes", {0}), boolean({2}, {1, 1}), HostTensor::result(plan::BOOL, {}),
      "does not support element type bool");
  expectEqualValues(run1(Step("reduce_sum").ints("axes", {1}), {x}, plan::F32, {2}).values(), {6, 15}, "good step");
}

namespace {
std::vector<double> softmaxRef(const Shape &s, const std::vector<double> &x, int64_t axis, bool log) {
  int64_t n = s[axis], inner = 1, outer = 1;
  for (size_t d = axis + 1; d < s.size(); ++d) inner *= s[d];
  for (int64_t d = 0; d < axis; ++d) outer *= s[d];
  std::vector<double> y(x.size());
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      auto at = [&](int64_t j) { return (o * n + j) * inner + i; };
      double mx = -std::numeric_limits<double>::infinity(), sum = 0;
      for (int64_t j = 0; j < n; ++j) mx = std::max(mx, x[at(j)]);
      for (int64_t j = 0; j < n; ++j) sum += std::exp(x[at(j)] - mx);
      for (int64_t j = 0; j < n; ++j)
        y[at(j)] = log ? x[at(j)] - mx - std::log(sum) : std::exp(x[at(j)] - mx) / sum;
    }
  return y;
}
} // namespace

CTS_TEST(SoftmaxAndLogSoftmax, "softmax", "log_softmax") {
  struct Case {
    Shape shape;
    int64_t axis;
  };
  const double inf = std::numeric_limits<double>::infinity();
  for (const Case &c : {Case{{2, 3}, 1}, Case{{3, 1023}, -1}, Case{{4, 17, 3}, 1}, Case{{5}, 0},
                        Case{{17, 2}, 0}, Case{{0, 4}, 1}, Case{{2, 0, 3}, 1}, Case{{3, 1}, 1}})
    for (bool log : {false, true}) {
      auto xv = sample(numel(c.shape), -20, 20, 40);
      // A masked logit and a huge one: the results stay finite and exact.
      if (xv.size() > 4) xv[1] = -inf, xv[3] = 1000;
      int64_t axis = c.axis < 0 ? c.axis + static_cast<int64_t>(c.shape.size()) : c.axis;
      HostTensor x = f32(c.shape, xv);
      std::vector<double> want = softmaxRef(c.shape, x.values(), axis, log);
      const char *kernel = log ? "log_softmax" : "softmax";
      HostTensor o = run1(Step(kernel).i("axis", c.axis), {x}, plan::F32, c.shape);
      expectClose(o.values(), roundTo(plan::F32, want), 1e-4, log ? 1e-5 : 1e-7,
                  std::string(kernel) + " " + shapeStr(c.shape) + " axis " + std::to_string(c.axis));
    }
  std::vector<HostTensor> outs{HostTensor::result(plan::F32, {})};
  expectError(run(Step("softmax").i("axis", 0), {f32({}, {1})}, outs), "rank >= 1");
  // f64 computes in double, bf16/f16 in f32 on widened copies.
  for (bool log : {false, true}) {
    const char *kernel = log ? "log_softmax" : "softmax";
    const Shape shape{3, 5};
    std::vector<double> xv = sample(15, -4, 4, 42);
    std::vector<double> want = softmaxRef(shape, xv, 1, log);
    expectClose(run1(Step(kernel).i("axis", 1), {f64(shape, xv)}, plan::F64, shape).values(), want,
                1e-13, 1e-14, std::string(kernel) + " f64");
    HostTensor h = HostTensor::of(plan::BF16, shape, xv);
    expectClose(run1(Step(kernel).i("axis", 1), {h}, plan::BF16, shape).values(),
                roundTo(plan::BF16, softmaxRef(shape, h.values(), 1, log)), 1e-2, 1e-3,
                std::string(kernel) + " bf16");
  }
  outs = {HostTensor::result(plan::F32, {2})};
  expectError(run(Step("log_softmax").i("axis", 0), {f64({2}, {1, 2})}, outs), "result must be f64, got f32");
  outs = {HostTensor::result(plan::F32, {2})};
  expectError(run(Step("softmax"), {f32({2}, {1, 2})}, outs), "integer attribute 'axis'");
  expectError(run(Step("softmax").i("axis", 1), {f32({2}, {1, 2})}, outs), "axis 1 is out of range for rank 1");
}

CTS_TEST(MaskedSoftmax, "masked_softmax") {
  struct Case {
    Shape shape, mask;
  };
  const double inf = std::numeric_limits<double>::infinity();
  // A causal mask broadcast over batch and heads, a mask per row (the last
  // dim broadcast), one per batch broadcast over rows (a padding mask), a
  // full-shape mask, long rows with a tail, and an empty tensor.
  for (const Case &c : {Case{{2, 3, 5, 5}, {1, 1, 5, 5}}, Case{{4, 37}, {4, 1}}, Case{{2, 3, 19}, {2, 1, 19}},
                        Case{{3, 7}, {3, 7}}, Case{{2, 130}, {130}}, Case{{0, 4}, {1, 4}}}) {
    const int64_t rank = static_cast<int64_t>(c.shape.size()), n = c.shape.back();
    const int64_t size = numel(c.shape);
    std::vector<double> xv = sample(size, -6, 6, 91);
    // The mask's element for each operand element (numpy broadcasting).
    Shape padded(rank - c.mask.size(), 1);
    padded.insert(padded.end(), c.mask.begin(), c.mask.end());
    auto maskIndex = [&](int64_t e) {
      int64_t idx = 0, stride = 1;
      for (int64_t d = rank - 1; d >= 0; --d) {
        int64_t i = e % c.shape[d];
        e /= c.shape[d];
        if (padded[d] != 1) idx += i * stride;
        stride *= padded[d];
      }
      return idx;
    };
    const int64_t msize = numel(c.mask);
    std::vector<double> bits(msize), add = sample(msize, -3, 0, 92);
    for (int64_t i = 0; i < msize; ++i) bits[i] = (i * 7 + 3) % 5 == 0; // never a whole row
    if (!c.mask.empty() && c.mask.back() == 1) bits[0] = 1;              // except one, to NaN (fill -inf)
    for (double fill : {-inf, -1e4}) {
      std::vector<double> masked(size);
      for (int64_t e = 0; e < size; ++e) masked[e] = bits[maskIndex(e)] ? fill : xv[e];
      std::vector<double> want = softmaxRef(c.shape, masked, rank - 1, false);
      HostTensor o = run1(Step("masked_softmax").i("axis", -1).f("mask_fill", fill),
                          {f32(c.shape, xv), boolean(c.mask, bits)}, plan::F32, c.shape);
      expectClose(o.values(), roundTo(plan::F32, want), 1e-4, 1e-7,
                  "masked_softmax " + shapeStr(c.shape) + " fill " + std::to_string(fill));
    }
    std::vector<double> summed(size);
    for (int64_t e = 0; e < size; ++e) summed[e] = xv[e] + add[maskIndex(e)];
    HostTensor o = run1(Step("masked_softmax").i("axis", rank - 1), {f32(c.shape, xv), f32(c.mask, add)},
                        plan::F32, c.shape);
    expectClose(o.values(), roundTo(plan::F32, softmaxRef(c.shape, summed, rank - 1, false)), 1e-4, 1e-7,
                "masked_softmax additive " + shapeStr(c.shape));
    (void)n;
  }
  HostTensor x = f32({2, 3}, sample(6, 0, 1, 93));
  std::vector<HostTensor> outs{HostTensor::result(plan::F32, {2, 3})};
  expectError(run(Step("masked_softmax").i("axis", 0).f("mask_fill", 0), {x, boolean({3}, {0, 1, 0})}, outs),
              "axis must be the last dimension");
  expectError(run(Step("masked_softmax").i("axis", 1).f("mask_fill", 0), {x, boolean({2}, {0, 1})}, outs),
              "does not broadcast");
  expectError(run(Step("masked_softmax").i("axis", 1).f("mask_fill", 0), {x, f32({3}, {0, 1, 0})}, outs),
              "mask must be bool");
  expectError(run(Step("masked_softmax").i("axis", 1), {x, boolean({3}, {0, 1, 0})}, outs), "mask must be f32");
  expectError(run(Step("masked_softmax").i("axis", 1), {x, f32({1, 1, 3}, {0, 1, 0})}, outs), "higher rank");
}

CTS_TEST(LayerNorm, "layer_norm") {
  struct Case {
    Shape shape;
    int64_t axis;
    bool bias;
  };
  for (const Case &c : {Case{{3, 4, 5}, 1, true}, Case{{3, 4, 5}, -1, false}, Case{{2, 1023}, 1, true},
                        Case{{17}, 0, true}, Case{{0, 6}, 1, true}, Case{{4, 1}, 1, false}}) {
    int64_t axis = c.axis < 0 ? c.axis + static_cast<int64_t>(c.shape.size()) : c.axis;
    Shape norm(c.shape.begin() + axis, c.shape.end());
    int64_t n = numel(norm), outer = numel(c.shape) / std::max<int64_t>(1, n);
    HostTensor x = f32(c.shape, sample(numel(c.shape), -3, 5, 41));
    HostTensor g = f32(norm, sample(n, 0.5, 2, 42)), b = f32(norm, sample(n, -1, 1, 43));
    std::vector<double> X = x.values(), G = g.values(), B = b.values(), want(X.size());
    const double eps = 1e-5;
    for (int64_t o = 0; o < outer; ++o) {
      double mean = 0, var = 0;
      for (int64_t j = 0; j < n; ++j) mean += X[o * n + j] / n;
      for (int64_t j = 0; j < n; ++j) var += (X[o * n + j] - mean) * (X[o * n + j] - mean) / n;
      for (int64_t j = 0; j < n; ++j)
        want[o * n + j] = (X[o * n + j] - mean) / std::sqrt(var + eps) * G[j] + (c.bias ? B[j] : 0);
    }
    std::vector<HostTensor> ins{x, g};
    if (c.bias) ins.push_back(b);
    HostTensor y = run1(Step("layer_norm").i("axis", c.axis).f("epsilon", eps), ins, plan::F32, c.shape);
    expectClose(y.values(), want, 1e-4, 1e-5, "layer_norm " + shapeStr(c.shape));
  }
  HostTensor x = f32({2, 3}, {1, 2, 3, 4, 5, 6});
  std::vector<HostTensor> outs{HostTensor::result(plan::F32, {2, 3})};
  expectError(run(Step("layer_norm").i("axis", 1).f("epsilon", 1e-5), {x, f32({2}, {1, 1})}, outs),
              "scale must have shape");
  expectError(run(Step("layer_norm").i("axis", 1).f("epsilon", 1e-5), {x, f32({3}, {1, 1, 1}), f32({2}, {0, 0})}, outs),
              "bias must have shape");
  expectError(run(Step("layer_norm").i("axis", 1), {x, f32({3}, {1, 1, 1})}, outs), "float attribute 'epsilon'");
  expectError(run(Step("layer_norm").i("axis", 1).f("epsilon", 1e-5), {x}, outs), "takes 2-3 inputs, got 1");
}

CTS_TEST(CumSumAndCumProd, "cumsum", "cumprod") {
  struct Case {
    Shape shape;
    int64_t axis;
  };
  for (std::string kernel : {"cumsum", "cumprod"})
  for (DType dt : {plan::F32, plan::F64, plan::I32, plan::I64})
    for (const Case &c : {Case{{3, 4}, 0}, Case{{3, 4}, 1}, Case{{3, 4}, -1}, Case{{1023}, 0},
                          Case{{2, 5, 3}, 1}, Case{{0, 3}, 1}, Case{{3, 0}, 1}})
      for (int exclusive : {0, 1})
        for (int reverse : {0, 1}) {
          // Integer values: sums and products (of -1, 0, 1 and, in short
          // runs, 2) are exact in every type, in any order.
          const bool product = kernel == "cumprod";
          auto xv = sample(numel(c.shape), product ? -1.4 : -20, product ? (numel(c.shape) < 64 ? 2.4 : 1.4) : 20, 44);
          for (auto &v : xv) v = std::round(v);
          HostTensor x = HostTensor::of(dt, c.shape, xv);
          int64_t axis = c.axis < 0 ? c.axis + static_cast<int64_t>(c.shape.size()) : c.axis;
          int64_t n = c.shape[axis], inner = 1, outer = 1;
          for (size_t d = axis + 1; d < c.shape.size(); ++d) inner *= c.shape[d];
          for (int64_t d = 0; d < axis; ++d) outer *= c.shape[d];
          std::vector<double> want(xv.size());
          for (int64_t o = 0; o < outer; ++o)
            for (int64_t i = 0; i < inner; ++i) {
              double acc = product ? 1 : 0;
              for (int64_t t = 0; t < n; ++t) {
                int64_t j = reverse ? n - 1 - t : t, at = (o * n + j) * inner + i;
                if (exclusive) want[at] = acc;
                acc = product ? acc * xv[at] : acc + xv[at];
                if (!exclusive) want[at] = acc;
              }
            }
          HostTensor y = run1(Step(kernel).i("axis", c.axis).i("exclusive", exclusive).i("reverse", reverse),
                              {x}, dt, c.shape);
          expectEqualValues(y.values(), want,
                            kernel + " " + ds::rt::dtypeName(dt) + " " + shapeStr(c.shape) +
                                " exclusive " + std::to_string(exclusive) + " reverse " + std::to_string(reverse));
        }
  std::vector<HostTensor> outs{HostTensor::result(plan::F32, {2})};
  expectError(run(Step("cumsum").i("axis", 0).i("reverse", 0), {f32({2}, {1, 2})}, outs), "integer attribute 'exclusive'");
  outs = {HostTensor::result(plan::BOOL, {2})};
  expectError(run(Step("cumsum").i("axis", 0).i("exclusive", 0).i("reverse", 0), {boolean({2}, {1, 1})}, outs),
              "does not support element type bool");
}

namespace {
/// First index of the extreme along the axis (last with `last`); a NaN is
/// the extreme, the first NaN wins.
std::vector<double> argRef(const Shape &s, const std::vector<double> &x, int64_t axis, bool max, bool last) {
  int64_t n = s[axis], inner = 1, outer = 1;
  for (size_t d = axis + 1; d < s.size(); ++d) inner *= s[d];
  for (int64_t d = 0; d < axis; ++d) outer *= s[d];
  std::vector<double> out;
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      int64_t best = -1;
      for (int64_t j = 0; j < n && best < 0; ++j)
        if (std::isnan(x[(o * n + j) * inner + i])) best = j;
      if (best < 0) {
        best = 0;
        for (int64_t j = 1; j < n; ++j) {
          double a = x[(o * n + j) * inner + i], b = x[(o * n + best) * inner + i];
          if (max ? (a > b || (last && a == b)) : (a < b || (last && a == b))) best = j;
        }
      }
      out.push_back(static_cast<double>(best));
    }
  return out;
}
} // namespace

CTS_TEST(ArgMaxArgMin, "arg_max", "arg_min") {
  const double nan = std::nan("");
  struct Case {
    Shape shape;
    int64_t axis;
    std::vector<double> x; // empty: sampled with ties
  };
  const std::vector<Case> cases = {
      {{3, 4}, 0, {}},  {{3, 4}, 1, {}},  {{2, 5, 3}, 1, {}}, {{1023}, 0, {}}, {{2, 5, 3}, -1, {}},
      {{4}, 0, {1, 3, 3, 2}}, {{4}, 0, {1, nan, 3, nan}}, {{1}, 0, {7}}, {{0, 3}, 1, {}},
  };
  for (DType dt : {plan::F32, plan::F64, plan::I32, plan::I64, plan::U8})
    for (const Case &c : cases)
      for (bool max : {true, false})
        for (int last : {0, 1}) {
          bool hasNan = std::any_of(c.x.begin(), c.x.end(), [](double v) { return std::isnan(v); });
          if (hasNan && dt != plan::F32 && dt != plan::F64) continue;
          std::vector<double> xv = c.x;
          if (xv.empty()) {
            xv = sample(numel(c.shape), 0, 6, 45);
            for (auto &v : xv) v = std::floor(v); // ties on purpose
          }
          int64_t axis = c.axis < 0 ? c.axis + static_cast<int64_t>(c.shape.size()) : c.axis;
          HostTensor x = HostTensor::of(dt, c.shape, xv);
          Shape os = c.shape;
          os.erase(os.begin() + axis);
          const char *kernel = max ? "arg_max" : "arg_min";
          HostTensor o = run1(Step(kernel).i("axis", c.axis).i("select_last_index", last), {x}, plan::I64, os);
          expectEqualValues(o.values(), argRef(c.shape, x.values(), axis, max, last),
                            std::string(kernel) + " " + ds::rt::dtypeName(dt) + " " + shapeStr(c.shape) +
                                " last " + std::to_string(last));
        }
  // Keep-dims result layout.
  expectEqualValues(run1(Step("arg_max").i("axis", 1).i("select_last_index", 0), {f32({2, 2}, {1, 2, 4, 3})}, plan::I64, {2, 1}).values(),
                    {1, 0}, "arg_max keepdims");
  std::vector<HostTensor> outs{HostTensor::result(plan::I32, {2})};
  expectError(run(Step("arg_max").i("axis", 1).i("select_last_index", 0), {f32({2, 2}, {1, 2, 3, 4})}, outs),
              "result must be i64");
  outs = {HostTensor::result(plan::I64, {2})};
  expectError(run(Step("arg_min").i("axis", 1).i("select_last_index", 0), {f32({2, 0}, {})}, outs),
              "does not match reducing the axis");
  expectError(run(Step("arg_min").i("axis", 1), {f32({2, 2}, {1, 2, 3, 4})}, outs),
              "integer attribute 'select_last_index'");
}

CTS_TEST(TopK, "top_k") {
  const double nan = std::nan("");
  struct Case {
    Shape shape;
    int64_t axis, k;
    std::vector<double> x;
  };
  const std::vector<Case> cases = {
      {{3, 7}, 1, 3, {}},   {{3, 7}, -1, 7, {}}, {{5, 4}, 0, 2, {}}, {{1023}, 0, 17, {}},
      {{3, 7}, 1, 0, {}},   {{2, 3, 2}, 1, 2, {}},
      {{6}, 0, 4, {2, nan, 5, 5, nan, -1}},
  };
  for (DType dt : {plan::F32, plan::F64, plan::I64, plan::I32})
    for (const Case &c : cases)
      for (int largest : {1, 0}) {
        bool hasNan = std::any_of(c.x.begin(), c.x.end(), [](double v) { return std::isnan(v); });
        if (hasNan && dt != plan::F32 && dt != plan::F64) continue;
        std::vector<double> xv = c.x;
        if (xv.empty()) {
          xv = sample(numel(c.shape), -5, 5, 46);
          for (auto &v : xv) v = std::round(v); // ties: the lower index first
        }
        HostTensor x = HostTensor::of(dt, c.shape, xv);
        int64_t axis = c.axis < 0 ? c.axis + static_cast<int64_t>(c.shape.size()) : c.axis;
        int64_t n = c.shape[axis], inner = 1, outer = 1;
        for (size_t d = axis + 1; d < c.shape.size(); ++d) inner *= c.shape[d];
        for (int64_t d = 0; d < axis; ++d) outer *= c.shape[d];
        Shape os = c.shape;
        os[axis] = c.k;
        std::vector<double> X = x.values(), wantV(numel(os)), wantI(numel(os));
        for (int64_t o = 0; o < outer; ++o)
          for (int64_t i = 0; i < inner; ++i) {
            std::vector<int64_t> idx(n);
            std::iota(idx.begin(), idx.end(), 0);
            auto val = [&](int64_t j) { return X[(o * n + j) * inner + i]; };
            // Order: NaN first when largest (last when smallest), then by
            // value, then by index.
            std::stable_sort(idx.begin(), idx.end(), [&](int64_t a, int64_t b) {
              bool na = std::isnan(val(a)), nb = std::isnan(val(b));
              if (na != nb) return largest ? na : nb;
              if (na) return false;
              return largest ? val(a) > val(b) : val(a) < val(b);
            });
            for (int64_t j = 0; j < c.k; ++j) {
              int64_t at = (o * c.k + j) * inner + i;
              wantV[at] = val(idx[j]);
              wantI[at] = static_cast<double>(idx[j]);
            }
          }
        std::vector<HostTensor> outs{HostTensor::result(dt, os), HostTensor::result(plan::I64, os)};
        absl::Status st = run(Step("top_k").i("axis", c.axis).i("k", c.k).i("largest", largest), {x}, outs);
        ASSERT_TRUE(st.ok()) << st.message();
        std::string what = std::string("top_k ") + ds::rt::dtypeName(dt) + " " + shapeStr(c.shape) +
                           " k " + std::to_string(c.k) + (largest ? " largest" : " smallest");
        expectEqualValues(outs[0].values(), wantV, what + " values");
        expectEqualValues(outs[1].values(), wantI, what + " indices");
      }
  std::vector<HostTensor> outs{HostTensor::result(plan::F32, {8}), HostTensor::result(plan::I64, {8})};
  expectError(run(Step("top_k").i("axis", 0).i("k", 8).i("largest", 1), {f32({7}, std::vector<double>(7, 1))}, outs),
              "k = 8 is outside [0, 7]");
  outs = {HostTensor::result(plan::F32, {2}), HostTensor::result(plan::I32, {2})};
  expectError(run(Step("top_k").i("axis", 0).i("k", 2).i("largest", 1), {f32({3}, {1, 2, 3})}, outs),
              "indices must be i64");
  outs = {HostTensor::result(plan::F32, {2})};
  expectError(run(Step("top_k").i("axis", 0).i("k", 2).i("largest", 1), {f32({3}, {1, 2, 3})}, outs),
              "produces 2 outputs, got 1");
}

CTS_TEST(RmsNorm, "rms_norm") {
  for (const Shape &shape : {Shape{3, 4, 5}, Shape{2, 1023}, Shape{17}, Shape{0, 6}, Shape{4, 1}})
    for (bool scaled : {true, false}) {
      const int64_t n = shape.back(), outer = n ? numel(shape) / n : 0;
      HostTensor x = f32(shape, sample(numel(shape), -3, 5, 51)), g = f32({n}, sample(n, 0.5, 2, 52));
      std::vector<double> X = x.values(), G = g.values(), want(X.size());
      const double eps = 1e-6;
      for (int64_t o = 0; o < outer; ++o) {
        double ms = 0;
        for (int64_t j = 0; j < n; ++j) ms += X[o * n + j] * X[o * n + j] / n;
        for (int64_t j = 0; j < n; ++j)
          want[o * n + j] = X[o * n + j] / std::sqrt(ms + eps) * (scaled ? G[j] : 1.0);
      }
      std::vector<HostTensor> ins{x};
      if (scaled) ins.push_back(g);
      HostTensor y = run1(Step("rms_norm").f("epsilon", eps), ins, plan::F32, shape);
      expectClose(y.values(), want, 1e-5, 1e-6,
                  "rms_norm " + shapeStr(shape) + (scaled ? " scaled" : ""));
    }
  std::vector<HostTensor> outs{HostTensor::result(plan::F32, {2, 3})};
  HostTensor x = f32({2, 3}, {1, 2, 3, 4, 5, 6});
  expectError(run(Step("rms_norm").f("epsilon", 1e-5), {x, f32({2}, {1, 1})}, outs), "scale");
  expectError(run(Step("rms_norm").f("epsilon", -1), {x}, outs), "epsilon");
  expectError(run(Step("rms_norm").f("epsilon", 1e-5), {HostTensor::of(plan::F64, {2, 3}, std::vector<double>(6, 1))}, outs),
              "f32");
}

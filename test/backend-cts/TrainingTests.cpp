// Kernels of the training step: the loss and its gradient, the gradients of
// layer_norm, gelu and gather, insert_slice, and the fused optimizer
// updates (also run in place, as plans bind them).
#include <algorithm>
#include <cmath>
#include <functional>

#include "test/backend-cts/Cts.h"

using namespace cts;

namespace {

/// Central difference of f at x in double: an independent reference for
/// gradient kernels.
double derivative(const std::function<double(double)> &f, double x, double h = 1e-5) {
  return (f(x + h) - f(x - h)) / (2 * h);
}

} // namespace

CTS_TEST(SoftmaxCrossEntropy, "softmax_cross_entropy", "softmax_cross_entropy_grad") {
  struct Case {
    Shape logits;
    std::vector<double> labels;
    int64_t ignore;
  };
  const std::vector<Case> cases = {
      {{4, 5}, {0, 4, -100, 2}, -100},
      {{2, 3, 7}, {6, 0, 3, 3, -1, 1}, -1},
      {{5}, {3}, -100},
      {{17, 1023}, {}, -100},
      {{3, 4}, {-100, -100, -100}, -100}, // nothing counted: loss NaN, gradient 0
      {{0, 4}, {}, -100},
  };
  for (DType lt : {plan::I64, plan::I32})
    for (const Case &c : cases) {
      Shape ls(c.logits.begin(), c.logits.end() - 1);
      int64_t classes = c.logits.back(), rows = numel(ls);
      std::vector<double> labels = c.labels;
      if (labels.empty() && rows > 0) {
        labels = sample(rows, 0, classes, 60);
        for (auto &v : labels) v = std::floor(v);
      }
      HostTensor x = f32(c.logits, sample(numel(c.logits), -8, 8, 61));
      HostTensor y = HostTensor::of(lt, ls, labels);
      HostTensor dloss = f32({}, {0.75});
      std::vector<double> X = x.values(), grad(X.size(), 0.0);
      double total = 0;
      int64_t count = 0;
      for (int64_t r = 0; r < rows; ++r) {
        if (labels[r] == c.ignore) continue;
        ++count;
        double mx = -INFINITY, s = 0;
        for (int64_t j = 0; j < classes; ++j) mx = std::max(mx, X[r * classes + j]);
        for (int64_t j = 0; j < classes; ++j) s += std::exp(X[r * classes + j] - mx);
        total += mx + std::log(s) - X[r * classes + static_cast<int64_t>(labels[r])];
      }
      for (int64_t r = 0; r < rows && count; ++r) {
        if (labels[r] == c.ignore) continue;
        double mx = -INFINITY, s = 0;
        for (int64_t j = 0; j < classes; ++j) mx = std::max(mx, X[r * classes + j]);
        for (int64_t j = 0; j < classes; ++j) s += std::exp(X[r * classes + j] - mx);
        for (int64_t j = 0; j < classes; ++j)
          grad[r * classes + j] = 0.75 / count * (std::exp(X[r * classes + j] - mx) / s - (j == labels[r]));
      }
      std::string what = "softmax_cross_entropy " + shapeStr(c.logits) + " labels " + ds::rt::dtypeName(lt);
      HostTensor loss = run1(Step("softmax_cross_entropy").i("ignore_index", c.ignore), {x, y}, plan::F32, {});
      expectClose(loss.values(), {count ? total / count : std::nan("")}, 1e-5, 0, what);
      HostTensor dx = run1(Step("softmax_cross_entropy_grad").i("ignore_index", c.ignore), {x, y, dloss}, plan::F32, c.logits);
      expectClose(dx.values(), grad, 1e-4, 1e-7, what + " grad");
      // The gradient with the loss as a second result (ds-fuse-softmax):
      // the bits of both kernels run apart.
      std::vector<HostTensor> both{HostTensor::result(plan::F32, c.logits), HostTensor::result(plan::F32, {})};
      absl::Status st = run(Step("softmax_cross_entropy_grad").i("ignore_index", c.ignore), {x, y, dloss}, both);
      ASSERT_TRUE(st.ok()) << st.message();
      expectEqualValues(both[0].values(), dx.values(), what + " grad with the loss");
      if (count) expectEqualValues(both[1].values(), loss.values(), what + " loss with the grad");
      else EXPECT_TRUE(std::isnan(both[1].values()[0])) << what;
    }
  HostTensor x = f32({2, 5}, sample(10, -1, 1, 62));
  std::vector<HostTensor> outs{HostTensor::result(plan::F32, {})};
  absl::Status st = run(Step("softmax_cross_entropy").i("ignore_index", -100), {x, i64({2}, {1, 5})}, outs);
  EXPECT_EQ(st.code(), absl::StatusCode::kOutOfRange) << st.message();
  expectError(st, "label 5 at position 1 is outside [0, 5)");
  expectError(run(Step("softmax_cross_entropy").i("ignore_index", -100), {x, i64({3}, {1, 1, 1})}, outs),
              "labels must have shape");
  expectError(run(Step("softmax_cross_entropy").i("ignore_index", -100), {x, f32({2}, {1, 1})}, outs),
              "labels must be i32 or i64");
  expectError(run(Step("softmax_cross_entropy"), {x, i64({2}, {1, 1})}, outs), "integer attribute 'ignore_index'");
  outs = {HostTensor::result(plan::F32, {1})};
  expectError(run(Step("softmax_cross_entropy").i("ignore_index", -100), {x, i64({2}, {1, 1})}, outs),
              "loss must have shape");
  outs = {HostTensor::result(plan::F32, {2, 5})};
  expectError(run(Step("softmax_cross_entropy_grad").i("ignore_index", -100), {x, i64({2}, {1, 1}), f32({1}, {1})}, outs),
              "dloss must have shape");
}

CTS_TEST(SoftmaxGrad, "softmax_grad") {
  struct Case {
    Shape shape;
    int64_t axis;
  };
  // Rows shorter and longer than a vector of lanes (with a tail), a
  // strided axis, and an empty tensor.
  for (const Case &c : {Case{{3, 5}, 1}, Case{{2, 37}, 1}, Case{{4, 3, 6}, 1}, Case{{2, 3, 130}, -1},
                        Case{{0, 4}, 1}}) {
    const int64_t rank = static_cast<int64_t>(c.shape.size());
    const int64_t axis = c.axis < 0 ? c.axis + rank : c.axis;
    const int64_t n = c.shape[axis], inner = numel(Shape(c.shape.begin() + axis + 1, c.shape.end()));
    const int64_t outer = numel(c.shape) / std::max<int64_t>(1, n * inner);
    std::vector<double> x = f32(c.shape, sample(numel(c.shape), -3, 3, 71)).values();
    std::vector<double> dy = f32(c.shape, sample(numel(c.shape), -1, 1, 72)).values();
    // y = softmax(x) in double; dx = y * (dy - sum(y * dy)) along the axis.
    std::vector<double> y(x.size()), want(x.size());
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t i = 0; i < inner; ++i) {
        auto at = [&](int64_t j) { return (o * n + j) * inner + i; };
        double mx = -1e300, sum = 0, dot = 0;
        for (int64_t j = 0; j < n; ++j) mx = std::max(mx, x[at(j)]);
        for (int64_t j = 0; j < n; ++j) sum += std::exp(x[at(j)] - mx);
        for (int64_t j = 0; j < n; ++j) y[at(j)] = std::exp(x[at(j)] - mx) / sum;
        for (int64_t j = 0; j < n; ++j) dot += y[at(j)] * dy[at(j)];
        for (int64_t j = 0; j < n; ++j) want[at(j)] = y[at(j)] * (dy[at(j)] - dot);
      }
    std::vector<HostTensor> outs{HostTensor::result(plan::F32, c.shape)};
    absl::Status st =
        run(Step("softmax_grad").i("axis", c.axis), {f32(c.shape, y), f32(c.shape, dy)}, outs);
    ASSERT_TRUE(st.ok()) << st.message();
    expectClose(outs[0].values(), want, 1e-5, 1e-6, "softmax_grad " + shapeStr(c.shape));
  }
  HostTensor y = f32({2, 3}, sample(6, 0, 1, 73));
  std::vector<HostTensor> outs{HostTensor::result(plan::F32, {2, 3})};
  expectError(run(Step("softmax_grad").i("axis", 1), {y, f32({3, 2}, sample(6, 0, 1, 74))}, outs),
              "dy must have shape");
  expectError(run(Step("softmax_grad").i("axis", 2), {y, y}, outs), "axis");
}

// With a mask (the backward of a masked_fill folded in): 0 where it is set,
// the unmasked gradient elsewhere; the row sum runs over every element.
CTS_TEST(SoftmaxGradMasked, "softmax_grad") {
  for (const auto &[shape, mshape] : {std::pair<Shape, Shape>{{2, 3, 6, 6}, {1, 1, 6, 6}},
                                      {{4, 37}, {4, 1}}, {{3, 130}, {130}}, {{0, 5}, {5}}}) {
    const int64_t n = shape.back(), rows = numel(shape) / std::max<int64_t>(1, n);
    const int64_t mrows = numel(mshape) / mshape.back(), mn = mshape.back();
    std::vector<double> y = f32(shape, sample(numel(shape), 0, 1, 75)).values();
    std::vector<double> dy = f32(shape, sample(numel(shape), -1, 1, 76)).values();
    std::vector<double> bits(numel(mshape));
    for (size_t i = 0; i < bits.size(); ++i) bits[i] = (i * 5 + 1) % 3 == 0;
    std::vector<double> want(y.size());
    for (int64_t r = 0; r < rows; ++r) {
      double dot = 0;
      for (int64_t j = 0; j < n; ++j) dot += y[r * n + j] * dy[r * n + j];
      for (int64_t j = 0; j < n; ++j) {
        bool masked = bits[(r % mrows) * mn + (mn == 1 ? 0 : j)];
        want[r * n + j] = masked ? 0.0 : y[r * n + j] * (dy[r * n + j] - dot);
      }
    }
    std::vector<HostTensor> outs{HostTensor::result(plan::F32, shape)};
    absl::Status st = run(Step("softmax_grad").i("axis", -1),
                          {f32(shape, y), f32(shape, dy), boolean(mshape, bits)}, outs);
    ASSERT_TRUE(st.ok()) << st.message();
    expectClose(outs[0].values(), want, 1e-5, 1e-6, "masked softmax_grad " + shapeStr(shape));
  }
  HostTensor y = f32({2, 3}, sample(6, 0, 1, 77));
  std::vector<HostTensor> outs{HostTensor::result(plan::F32, {2, 3})};
  expectError(run(Step("softmax_grad").i("axis", 0), {y, y, boolean({2, 3}, {0, 1, 0, 1, 0, 1})}, outs),
              "mask needs axis to be the last dimension");
  expectError(run(Step("softmax_grad").i("axis", 1), {y, y, f32({3}, {0, 1, 0})}, outs), "mask must be bool");
  expectError(run(Step("softmax_grad").i("axis", 1), {y, y, boolean({4}, {0, 1, 0, 1})}, outs),
              "does not broadcast");
}

CTS_TEST(LayerNormGrad, "layer_norm_grad") {
  struct Case {
    Shape shape;
    int64_t axis;
  };
  const double eps = 1e-5;
  for (const Case &c : {Case{{3, 4}, 1}, Case{{2, 3, 5}, 1}, Case{{4, 6}, -1}, Case{{7}, 0}, Case{{0, 3}, 1}}) {
    int64_t axis = c.axis < 0 ? c.axis + static_cast<int64_t>(c.shape.size()) : c.axis;
    Shape norm(c.shape.begin() + axis, c.shape.end());
    int64_t n = numel(norm), rows = numel(c.shape) / n;
    std::vector<double> x = f32(c.shape, sample(numel(c.shape), -2, 3, 63)).values();
    std::vector<double> g = f32(norm, sample(n, 0.5, 1.5, 64)).values();
    std::vector<double> dy = f32(c.shape, sample(numel(c.shape), -1, 1, 65)).values();
    // L = sum(dy * layer_norm(x, g, b)): its gradients are what the kernel
    // returns; a central difference of L in double is the reference.
    std::vector<double> b(n, 0.25);
    auto loss = [&](const std::vector<double> &xs, const std::vector<double> &gs, const std::vector<double> &bs) {
      double l = 0;
      for (int64_t r = 0; r < rows; ++r) {
        double mean = 0, var = 0;
        for (int64_t j = 0; j < n; ++j) mean += xs[r * n + j] / n;
        for (int64_t j = 0; j < n; ++j) var += (xs[r * n + j] - mean) * (xs[r * n + j] - mean) / n;
        for (int64_t j = 0; j < n; ++j)
          l += dy[r * n + j] * ((xs[r * n + j] - mean) / std::sqrt(var + eps) * gs[j] + bs[j]);
      }
      return l;
    };
    auto grad = [&](std::vector<double> &v, int64_t i) {
      double keep = v[i];
      double d = derivative([&](double t) { v[i] = t; return loss(x, g, b); }, keep);
      v[i] = keep;
      return d;
    };
    std::vector<double> wantDx, wantDg, wantDb;
    for (int64_t i = 0; i < numel(c.shape); ++i) wantDx.push_back(grad(x, i));
    for (int64_t j = 0; j < n; ++j) wantDg.push_back(grad(g, j)), wantDb.push_back(grad(b, j));
    std::vector<HostTensor> outs{HostTensor::result(plan::F32, c.shape), HostTensor::result(plan::F32, norm),
                                 HostTensor::result(plan::F32, norm)};
    absl::Status st = run(Step("layer_norm_grad").i("axis", c.axis).f("epsilon", eps),
                          {f32(c.shape, x), f32(norm, g), f32(c.shape, dy)}, outs);
    ASSERT_TRUE(st.ok()) << st.message();
    std::string what = "layer_norm_grad " + shapeStr(c.shape);
    expectClose(outs[0].values(), wantDx, 1e-3, 1e-4, what + " d_operand");
    expectClose(outs[1].values(), wantDg, 1e-3, 1e-4, what + " d_scale");
    expectClose(outs[2].values(), wantDb, 1e-3, 1e-4, what + " d_bias");
    // With an addend (the residual stream's gradient): d_operand + addend,
    // the other results unchanged; the addend may be d_operand's own bytes.
    std::vector<double> add = f32(c.shape, sample(numel(c.shape), -3, 3, 68)).values();
    std::vector<double> wantSum(wantDx.size());
    for (size_t i = 0; i < wantDx.size(); ++i) wantSum[i] = wantDx[i] + add[i];
    std::vector<HostTensor> withAdd{HostTensor::result(plan::F32, c.shape), HostTensor::result(plan::F32, norm),
                                    HostTensor::result(plan::F32, norm)};
    st = run(Step("layer_norm_grad").i("axis", c.axis).f("epsilon", eps),
             {f32(c.shape, x), f32(norm, g), f32(c.shape, dy), f32(c.shape, add)}, withAdd);
    ASSERT_TRUE(st.ok()) << st.message();
    expectClose(withAdd[0].values(), wantSum, 1e-3, 1e-4, what + " d_operand + addend");
    expectEqualValues(withAdd[1].values(), outs[1].values(), what + " d_scale with an addend");
    expectEqualValues(withAdd[2].values(), outs[2].values(), what + " d_bias with an addend");
  }
  {
    // Many rows (several f32 blocks of the column sums per thread): the
    // column sums stay within f32 rounding of the f64 reference.
    const int64_t rows = 1000, n = 16;
    std::vector<double> x = f32({rows, n}, sample(rows * n, -2, 3, 69)).values();
    std::vector<double> dy = f32({rows, n}, sample(rows * n, -1, 1, 70)).values();
    std::vector<double> wantDg(n, 0.0), wantDb(n, 0.0);
    for (int64_t r = 0; r < rows; ++r) {
      double mean = 0, var = 0;
      for (int64_t j = 0; j < n; ++j) mean += x[r * n + j] / n;
      for (int64_t j = 0; j < n; ++j) var += (x[r * n + j] - mean) * (x[r * n + j] - mean) / n;
      for (int64_t j = 0; j < n; ++j) {
        wantDg[j] += dy[r * n + j] * (x[r * n + j] - mean) / std::sqrt(var + eps);
        wantDb[j] += dy[r * n + j];
      }
    }
    std::vector<HostTensor> outs{HostTensor::result(plan::F32, {rows, n}), HostTensor::result(plan::F32, {n}),
                                 HostTensor::result(plan::F32, {n})};
    absl::Status st = run(Step("layer_norm_grad").i("axis", 1).f("epsilon", eps),
                          {f32({rows, n}, x), f32({n}, std::vector<double>(n, 1.0)), f32({rows, n}, dy)}, outs);
    ASSERT_TRUE(st.ok()) << st.message();
    expectClose(outs[1].values(), wantDg, 1e-5, 1e-4, "layer_norm_grad [1000, 16] d_scale");
    expectClose(outs[2].values(), wantDb, 1e-5, 1e-4, "layer_norm_grad [1000, 16] d_bias");
  }
  HostTensor x = f32({2, 3}, sample(6, -1, 1, 66)), dy = f32({2, 3}, sample(6, -1, 1, 67));
  std::vector<HostTensor> outs{HostTensor::result(plan::F32, {2, 3}), HostTensor::result(plan::F32, {3}),
                               HostTensor::result(plan::F32, {3})};
  expectError(run(Step("layer_norm_grad").i("axis", 1).f("epsilon", 1e-5), {x, f32({2}, {1, 1}), dy}, outs),
              "scale must have shape");
  expectError(run(Step("layer_norm_grad").i("axis", 1), {x, f32({3}, {1, 1, 1}), dy}, outs), "float attribute 'epsilon'");
  expectError(run(Step("layer_norm_grad").i("axis", 1).f("epsilon", 1e-5), {x, f32({3}, {1, 1, 1}), dy, f32({3}, {1, 1, 1})}, outs),
              "addend must have shape");
  outs.pop_back();
  expectError(run(Step("layer_norm_grad").i("axis", 1).f("epsilon", 1e-5), {x, f32({3}, {1, 1, 1}), dy}, outs),
              "produces 3 outputs, got 2");
}

CTS_TEST(GeluGrad, "gelu_grad") {
  auto exact = [](double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); };
  auto tanhForm = [](double x) {
    return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
  };
  for (const Shape &s : {Shape{1023}, Shape{}, Shape{0}, Shape{3, 17}})
    for (const std::string approx : {"", "none", "tanh"}) {
      HostTensor x = f32(s, sample(numel(s), -5, 5, 68)), dy = f32(s, sample(numel(s), -2, 2, 69));
      std::vector<double> X = x.values(), DY = dy.values(), want;
      for (size_t i = 0; i < X.size(); ++i)
        want.push_back(DY[i] * (approx == "tanh" ? derivative(tanhForm, X[i]) : derivative(exact, X[i])));
      Step step("gelu_grad");
      if (!approx.empty()) step.s("approximate", approx);
      expectClose(run1(step, {x, dy}, plan::F32, s).values(), want, 1e-4, 1e-5,
                  "gelu_grad " + approx + " " + shapeStr(s));
    }
  std::vector<HostTensor> outs{HostTensor::result(plan::F32, {2})};
  expectError(run(Step("gelu_grad"), {f64({2}, {1, 2}), f64({2}, {1, 1})}, outs), "operand must be f32");
  expectError(run(Step("gelu_grad"), {f32({2}, {1, 2}), f32({3}, {1, 1, 1})}, outs), "dy must have shape");
  expectError(run(Step("gelu_grad").s("approximate", "erf"), {f32({2}, {1, 2}), f32({2}, {1, 1})}, outs),
              "unknown approximation");
}

CTS_TEST(GatherGrad, "gather_grad") {
  struct Case {
    Shape out, idxShape;
    std::vector<double> idx;
    int64_t axis;
  };
  const std::vector<Case> cases = {
      {{5, 3}, {4}, {1, -1, 1, 0}, 0},       // repeated indices add up
      {{2, 5, 3}, {2, 2}, {4, 4, 0, -5}, 1},
      {{4}, {}, {2}, 0},
      {{3, 1023}, {6}, {2, 0, 2, 2, -3, 1}, 0},
      {{3, 4}, {0}, {}, 1},
  };
  for (DType it : {plan::I64, plan::I32})
    for (const Case &c : cases) {
      int64_t axis = c.axis, dim = c.out[axis], outer = 1, inner = 1, n = numel(c.idxShape);
      for (int64_t d = 0; d < axis; ++d) outer *= c.out[d];
      for (size_t d = axis + 1; d < c.out.size(); ++d) inner *= c.out[d];
      Shape dyShape(c.out.begin(), c.out.begin() + axis);
      dyShape.insert(dyShape.end(), c.idxShape.begin(), c.idxShape.end());
      dyShape.insert(dyShape.end(), c.out.begin() + axis + 1, c.out.end());
      HostTensor dy = f32(dyShape, sample(numel(dyShape), -1, 1, 70));
      std::vector<double> DY = dy.values(), want(numel(c.out), 0.0);
      for (int64_t o = 0; o < outer; ++o)
        for (int64_t j = 0; j < n; ++j) {
          int64_t v = static_cast<int64_t>(c.idx[j]);
          v = v < 0 ? v + dim : v;
          for (int64_t i = 0; i < inner; ++i) want[(o * dim + v) * inner + i] += DY[(o * n + j) * inner + i];
        }
      HostTensor g = run1(Step("gather_grad").i("axis", c.axis), {HostTensor::of(it, c.idxShape, c.idx), dy}, plan::F32, c.out);
      expectClose(g.values(), roundTo(plan::F32, want), 1e-6, 1e-7, "gather_grad " + shapeStr(c.out));
    }
  std::vector<HostTensor> outs{HostTensor::result(plan::F32, {5, 2})};
  absl::Status st = run(Step("gather_grad").i("axis", 0), {i64({2}, {0, 5}), f32({2, 2}, {1, 1, 1, 1})}, outs);
  EXPECT_EQ(st.code(), absl::StatusCode::kOutOfRange) << st.message();
  expectError(st, "index 5 is out of range for 5");
  expectError(run(Step("gather_grad").i("axis", 0), {i64({2}, {0, 1}), f32({3, 2}, std::vector<double>(6, 1))}, outs),
              "dy must have shape");
  expectError(run(Step("gather_grad").i("axis", 0), {i64({2}, {0, 1}), f64({2, 2}, {1, 1, 1, 1})}, outs), "dy must be f32");
  expectError(run(Step("gather_grad").i("axis", 0), {f32({2}, {0, 1}), f32({2, 2}, {1, 1, 1, 1})}, outs),
              "indices must be i32 or i64");

  // padding_idx (PyTorch's Embedding(padding_idx)): that row gets nothing,
  // also when reached by a negative index; the others add up as before.
  HostTensor pad = run1(Step("gather_grad").i("axis", 0).i("padding_idx", 2),
                        {i64({5}, {2, 1, -3, 1, 4}), f32({5, 2}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10})},
                        plan::F32, {5, 2});
  expectClose(pad.values(), {0, 0, 10, 12, 0, 0, 0, 0, 9, 10}, 0, 0, "gather_grad padding_idx");
  HostTensor padNeg = run1(Step("gather_grad").i("axis", 0).i("padding_idx", -1),
                           {i64({3}, {4, 0, 4}), f32({3, 2}, {1, 2, 3, 4, 5, 6})}, plan::F32, {5, 2});
  expectClose(padNeg.values(), {3, 4, 0, 0, 0, 0, 0, 0, 0, 0}, 0, 0, "gather_grad padding_idx -1");
  expectError(run(Step("gather_grad").i("axis", 0).i("padding_idx", 5),
                  {i64({2}, {0, 1}), f32({2, 2}, {1, 1, 1, 1})}, outs),
              "padding_idx 5 is out of range for 5");
}

CTS_TEST(InsertSlice, "insert_slice") {
  struct Case {
    Shape out, in;
    std::vector<int64_t> starts, steps;
  };
  const std::vector<Case> cases = {
      {{5}, {3}, {4}, {-2}},
      {{4, 6}, {2, 2}, {1, 0}, {2, 3}},
      {{4, 6}, {0, 6}, {0, 0}, {1, 1}},
      {{3, 4, 5}, {3, 4, 2}, {2, 3, 1}, {-1, -1, 2}},
      {{1023}, {341}, {1}, {3}},
  };
  for (DType dt : {plan::F32, plan::I64, plan::U8, plan::BOOL, plan::F64})
    for (const Case &c : cases) {
      std::vector<double> xv(numel(c.in));
      for (size_t i = 0; i < xv.size(); ++i) xv[i] = dt == plan::BOOL ? 1 : static_cast<double>(i % 200 + 1);
      HostTensor x = HostTensor::of(dt, c.in, xv);
      std::vector<double> X = x.values(), want(numel(c.out), 0.0);
      Shape st = stridesOf(c.out);
      for (int64_t i = 0; i < numel(c.in); ++i) {
        Shape ic = unravel(i, c.in);
        int64_t off = 0;
        for (size_t d = 0; d < ic.size(); ++d) off += (c.starts[d] + ic[d] * c.steps[d]) * st[d];
        want[off] = X[i];
      }
      expectEqualValues(run1(Step("insert_slice").ints("starts", c.starts).ints("steps", c.steps), {x}, dt, c.out).values(),
                        want, std::string("insert_slice ") + ds::rt::dtypeName(dt) + " " + shapeStr(c.in) + " into " + shapeStr(c.out));
    }
  std::vector<HostTensor> outs{HostTensor::result(plan::F32, {5})};
  expectError(run(Step("insert_slice").ints("starts", {3}).ints("steps", {1}), {f32({3}, {1, 2, 3})}, outs),
              "window of dimension 0 leaves the result");
  expectError(run(Step("insert_slice").ints("starts", {0, 0}).ints("steps", {1, 1}), {f32({3}, {1, 2, 3})}, outs),
              "must match the result's rank");
  expectError(run(Step("insert_slice").ints("starts", {0}).ints("steps", {1}), {i32({3}, {1, 2, 3})}, outs),
              "operand and result types differ");
}

namespace {
struct AdamAttrs {
  double beta1, beta2, eps, wd;
  int decoupled;
};
} // namespace

CTS_TEST(AdamUpdate, "adam_update") {
  const double lr = 1e-2, stepSize = 1e-2 / (1 - 0.9 * 0.9), bias2 = std::sqrt(1 - 0.999 * 0.999), gs = 0.5;
  for (const AdamAttrs &a : {AdamAttrs{0.9, 0.999, 1e-8, 0.0, 0}, AdamAttrs{0.9, 0.999, 1e-8, 0.01, 0},
                             AdamAttrs{0.8, 0.99, 1e-6, 0.1, 1}})
    for (const Shape &s : {Shape{1023}, Shape{17}, Shape{}, Shape{0}, Shape{3, 5}})
      for (bool inPlace : {false, true}) {
        int64_t n = numel(s);
        HostTensor p = f32(s, sample(n, -1, 1, 71)), g = f32(s, sample(n, -1, 1, 72));
        HostTensor m = f32(s, sample(n, -0.1, 0.1, 73)), v = f32(s, sample(n, 0, 0.01, 74));
        std::vector<double> P = p.values(), G = g.values(), M = m.values(), V = v.values();
        std::vector<double> wantP(n), wantM(n), wantV(n);
        for (int64_t i = 0; i < n; ++i) {
          // Adam (L2 decay in the gradient) or AdamW (decoupled decay).
          double grad = G[i] * gs + (a.decoupled ? 0 : a.wd * P[i]);
          double param = P[i] * (a.decoupled ? 1 - lr * a.wd : 1);
          wantM[i] = a.beta1 * M[i] + (1 - a.beta1) * grad;
          wantV[i] = a.beta2 * V[i] + (1 - a.beta2) * grad * grad;
          wantP[i] = param - stepSize * wantM[i] / (std::sqrt(wantV[i]) / bias2 + a.eps);
        }
        Step step = Step("adam_update").f("beta1", a.beta1).f("beta2", a.beta2).f("eps", a.eps)
                        .f("weight_decay", a.wd).i("decoupled", a.decoupled);
        std::vector<HostTensor> outs{HostTensor::result(plan::F32, s), HostTensor::result(plan::F32, s),
                                     HostTensor::result(plan::F32, s)};
        absl::Status st = run(step, {p, g, m, v, f32({}, {lr}), f32({}, {stepSize}), f32({}, {bias2}), f32({}, {gs})},
                              outs, inPlace ? std::vector<int>{0, 2, 3} : std::vector<int>{});
        ASSERT_TRUE(st.ok()) << st.message();
        std::string what = "adam_update " + shapeStr(s) + (inPlace ? " in place" : "") + " wd " + std::to_string(a.wd);
        expectClose(outs[0].values(), wantP, 1e-5, 1e-6, what + " param");
        expectClose(outs[1].values(), wantM, 1e-5, 1e-7, what + " m");
        expectClose(outs[2].values(), wantV, 1e-5, 1e-9, what + " v");
      }
  Step step = Step("adam_update").f("beta1", 0.9).f("beta2", 0.999).f("eps", 1e-8).f("weight_decay", 0).i("decoupled", 0);
  HostTensor t = f32({2}, {1, 2}), one = f32({}, {1});
  std::vector<HostTensor> outs{HostTensor::result(plan::F32, {2}), HostTensor::result(plan::F32, {2}),
                               HostTensor::result(plan::F32, {2})};
  expectError(run(step, {t, t, t, t, f32({1}, {1}), one, one, one}, outs), "scalar must have shape");
  expectError(run(step, {t, t, f64({2}, {1, 2}), t, one, one, one, one}, outs), "operand must be f32");
  expectError(run(step, {t, t, t, f32({3}, {1, 2, 3}), one, one, one, one}, outs), "operand must have shape");
  expectError(run(Step("adam_update").f("beta2", 0.999).f("eps", 1e-8).f("weight_decay", 0).i("decoupled", 0),
                  {t, t, t, t, one, one, one, one}, outs),
              "float attribute 'beta1'");
  expectError(run(step, {t, t, t, t, one, one, one}, outs), "takes 8-9 inputs, got 7");
}

CTS_TEST(UpdatesSkippedOnFoundInf, "adam_update", "sgd_update") {
  // found_inf != 0 (an overflowed step, also NaN): every result keeps its
  // operand, in place or not; found_inf = 0 is the ordinary update.
  HostTensor p = f32({3}, {1, -2, 3}), g = f32({3}, {0.5, NAN, 1}), m = f32({3}, {0.1, 0.2, 0.3}),
             v = f32({3}, {0.01, 0.02, 0.03}), one = f32({}, {1});
  Step adam = Step("adam_update").f("beta1", 0.9).f("beta2", 0.999).f("eps", 1e-8)
                  .f("weight_decay", 0.1).i("decoupled", 1);
  for (double flag : {1.0, double(NAN)})
    for (bool inPlace : {false, true}) {
      std::vector<HostTensor> outs{HostTensor::result(plan::F32, {3}), HostTensor::result(plan::F32, {3}),
                                   HostTensor::result(plan::F32, {3})};
      absl::Status st = run(adam, {p, g, m, v, one, one, one, one, f32({}, {flag})}, outs,
                            inPlace ? std::vector<int>{0, 2, 3} : std::vector<int>{});
      ASSERT_TRUE(st.ok()) << st.message();
      expectEqualValues(outs[0].values(), p.values(), "adam_update skipped: param");
      expectEqualValues(outs[1].values(), m.values(), "adam_update skipped: m");
      expectEqualValues(outs[2].values(), v.values(), "adam_update skipped: v");
    }
  HostTensor finite = f32({3}, {0.5, -1, 1});
  std::vector<HostTensor> outs{HostTensor::result(plan::F32, {3}), HostTensor::result(plan::F32, {3}),
                               HostTensor::result(plan::F32, {3})};
  ASSERT_TRUE(run(adam, {p, finite, m, v, one, one, one, one, f32({}, {0})}, outs).ok());
  EXPECT_NE(outs[0].values(), p.values()) << "found_inf 0 must update";
  Step sgd = Step("sgd_update").f("momentum", 0.9).f("dampening", 0).f("weight_decay", 0).i("nesterov", 0);
  std::vector<HostTensor> sgdOuts{HostTensor::result(plan::F32, {3}), HostTensor::result(plan::F32, {3})};
  ASSERT_TRUE(run(sgd, {p, g, m, one, one, one, f32({}, {1})}, sgdOuts).ok());
  expectEqualValues(sgdOuts[0].values(), p.values(), "sgd_update skipped: param");
  expectEqualValues(sgdOuts[1].values(), m.values(), "sgd_update skipped: buffer");
}

CTS_TEST(SgdUpdate, "sgd_update") {
  struct Attrs {
    double momentum, dampening, wd;
    int nesterov;
  };
  const double lr = 0.1, gs = 2;
  for (const Attrs &a : {Attrs{0, 0, 0, 0}, Attrs{0.9, 0, 0, 0}, Attrs{0.9, 0.1, 0.01, 0}, Attrs{0.9, 0, 0.01, 1}})
    for (double first : {1.0, 0.0})
      for (const Shape &s : {Shape{1023}, Shape{}, Shape{0}, Shape{4, 3}})
        for (bool inPlace : {false, true}) {
          int64_t n = numel(s);
          HostTensor p = f32(s, sample(n, -1, 1, 75)), g = f32(s, sample(n, -1, 1, 76)), b = f32(s, sample(n, -1, 1, 77));
          std::vector<double> P = p.values(), G = g.values(), B = b.values(), wantP(n), wantB(n);
          for (int64_t i = 0; i < n; ++i) {
            double d = G[i] * gs + a.wd * P[i], buf = B[i];
            if (a.momentum != 0) {
              buf = first != 0 ? d : a.momentum * buf + (1 - a.dampening) * d;
              d = a.nesterov ? d + a.momentum * buf : buf;
            }
            wantP[i] = P[i] - lr * d;
            wantB[i] = buf;
          }
          std::vector<HostTensor> outs{HostTensor::result(plan::F32, s), HostTensor::result(plan::F32, s)};
          absl::Status st = run(Step("sgd_update").f("momentum", a.momentum).f("dampening", a.dampening)
                                    .f("weight_decay", a.wd).i("nesterov", a.nesterov),
                                {p, g, b, f32({}, {lr}), f32({}, {gs}), f32({}, {first})}, outs,
                                inPlace ? std::vector<int>{0, 2} : std::vector<int>{});
          ASSERT_TRUE(st.ok()) << st.message();
          std::string what = "sgd_update " + shapeStr(s) + " momentum " + std::to_string(a.momentum) +
                             " first " + std::to_string(first) + (inPlace ? " in place" : "");
          expectClose(outs[0].values(), wantP, 1e-5, 1e-6, what + " param");
          expectClose(outs[1].values(), wantB, 1e-5, 1e-6, what + " buffer");
        }
  HostTensor t = f32({2}, {1, 2}), one = f32({}, {1});
  std::vector<HostTensor> outs{HostTensor::result(plan::F32, {2}), HostTensor::result(plan::F32, {2})};
  expectError(run(Step("sgd_update").f("momentum", 0).f("dampening", 0).f("weight_decay", 0),
                  {t, t, t, one, one, one}, outs),
              "integer attribute 'nesterov'");
  outs.push_back(HostTensor::result(plan::F32, {2}));
  expectError(run(Step("sgd_update").f("momentum", 0).f("dampening", 0).f("weight_decay", 0).i("nesterov", 0),
                  {t, t, t, one, one, one}, outs),
              "produces 2 outputs, got 3");
}

CTS_TEST(SumSquares, "sum_squares") {
  // Several operands of every size class: scalar, empty, shorter than the
  // lanes, and longer than one chunk of the kernel.
  std::vector<Shape> shapes{Shape{}, Shape{0}, Shape{7}, Shape{3, 5}, Shape{70001}};
  std::vector<HostTensor> ins;
  double want = 0;
  for (size_t i = 0; i < shapes.size(); ++i) {
    HostTensor t = f32(shapes[i], sample(numel(shapes[i]), -2, 2, 80 + i));
    for (double x : t.values()) want += x * x;
    ins.push_back(t);
  }
  expectClose(run1(Step("sum_squares"), ins, plan::F32, {}).values(), {want}, 1e-6, 0,
              "sum of squares of 5 operands");
  expectClose(run1(Step("sum_squares"), {f32({2}, {3, -4})}, plan::F32, {}).values(), {25}, 0, 0,
              "3^2 + 4^2");
  // An overflowing square is inf, a NaN stays NaN: the norm check sees them.
  expectClose(run1(Step("sum_squares"), {f32({2}, {1e30, 1})}, plan::F32, {}).values(), {INFINITY},
              0, 0, "overflow");
  expectClose(run1(Step("sum_squares"), {f32({2}, {NAN, 1})}, plan::F32, {}).values(), {NAN}, 0, 0,
              "NaN");
  std::vector<HostTensor> outs{HostTensor::result(plan::F32, {1})};
  expectError(run(Step("sum_squares"), {f32({2}, {1, 2})}, outs), "result");
  std::vector<HostTensor> scalar{HostTensor::result(plan::F32, {})};
  expectError(run(Step("sum_squares"), {HostTensor::of(plan::F64, {2}, {1, 2})}, scalar), "f32");
}

// Lion (DeepSpeed's CPU arithmetic: a zero interpolation moves by -lr) and
// Adagrad (torch's, and DeepSpeedCPUAdagrad's with decay_in_sum_only), in
// place or not, and skipped when found_inf is set.
CTS_TEST(LionAndAdagradUpdates, "lion_update", "adagrad_update") {
  const double lr = 0.01, gs = 0.5, b1 = 0.9, b2 = 0.99, wd = 0.1, eps = 1e-10;
  for (const Shape &s : {Shape{1023}, Shape{}, Shape{0}, Shape{4, 3}})
    for (bool inPlace : {false, true}) {
      int64_t n = numel(s);
      HostTensor p = f32(s, sample(n, -1, 1, 80)), g = f32(s, sample(n, -1, 1, 81)),
                 m = f32(s, sample(n, -1, 1, 82)), sq = f32(s, sample(n, 0, 1, 83));
      std::vector<double> P = p.values(), G = g.values(), M = m.values(), S = sq.values();
      if (n > 2) G[0] = 0, M[0] = 0; // c = +0
      if (n > 2) g = f32(s, G), m = f32(s, M);
      std::vector<double> lionP(n), lionM(n), adaP(n), adaS(n), cpuP(n);
      for (int64_t i = 0; i < n; ++i) {
        const double grad = G[i] * gs, c = b1 * M[i] + (1 - b1) * grad;
        lionP[i] = P[i] * (1 - lr * wd) - std::copysign(lr, c);
        lionM[i] = b2 * M[i] + (1 - b2) * grad;
        const double d = grad + wd * P[i];
        adaS[i] = S[i] + d * d;
        adaP[i] = P[i] - lr * d / (std::sqrt(adaS[i]) + eps);
        cpuP[i] = P[i] - lr * grad / (std::sqrt(adaS[i]) + eps);
      }
      const std::string where = shapeStr(s) + (inPlace ? " in place" : "");
      auto outs = [&] {
        return std::vector<HostTensor>{HostTensor::result(plan::F32, s),
                                       HostTensor::result(plan::F32, s)};
      };
      std::vector<int> alias = inPlace ? std::vector<int>{0, 2} : std::vector<int>{};
      std::vector<HostTensor> lo = outs();
      absl::Status st = run(Step("lion_update").f("beta1", b1).f("beta2", b2).f("weight_decay", wd),
                            {p, g, m, f32({}, {lr}), f32({}, {gs})}, lo, alias);
      ASSERT_TRUE(st.ok()) << st.message();
      expectClose(lo[0].values(), lionP, 1e-6, 1e-7, "lion_update " + where + " param");
      expectClose(lo[1].values(), lionM, 1e-6, 1e-7, "lion_update " + where + " m");
      for (int sumOnly : {0, 1}) {
        std::vector<HostTensor> ao = outs();
        st = run(Step("adagrad_update").f("eps", eps).f("weight_decay", wd).i("decay_in_sum_only", sumOnly),
                 {p, g, sq, f32({}, {lr}), f32({}, {gs})}, ao, alias);
        ASSERT_TRUE(st.ok()) << st.message();
        expectClose(ao[0].values(), sumOnly ? cpuP : adaP, 1e-5, 1e-7, "adagrad_update " + where + " param");
        expectClose(ao[1].values(), adaS, 1e-6, 1e-7, "adagrad_update " + where + " sum");
      }
      std::vector<HostTensor> skipped = outs();
      ASSERT_TRUE(run(Step("lion_update").f("beta1", b1).f("beta2", b2).f("weight_decay", wd),
                      {p, g, m, f32({}, {lr}), f32({}, {gs}), f32({}, {1})}, skipped, alias)
                      .ok());
      expectEqualValues(skipped[0].values(), p.values(), "lion_update skipped: param");
      expectEqualValues(skipped[1].values(), m.values(), "lion_update skipped: m");
    }
  HostTensor t = f32({2}, {1, 2}), one = f32({}, {1});
  std::vector<HostTensor> outs{HostTensor::result(plan::F32, {2}), HostTensor::result(plan::F32, {2})};
  expectError(run(Step("adagrad_update").f("eps", 1e-10).f("weight_decay", 0), {t, t, t, one, one}, outs),
              "integer attribute 'decay_in_sum_only'");
}

// LAMB: Adam's moments, the trust ratio |p| / |u| over the whole tensor
// clamped to [min_coeff, max_coeff] (1 when a norm is 0), in place or not.
CTS_TEST(LambUpdate, "lamb_update") {
  const double lr = 0.01, ss = 0.02, bc = 0.3, gs = 0.5, b1 = 0.9, b2 = 0.99, eps = 1e-8, wd = 0.1;
  for (double maxCoeff : {10.0, 0.05})
    for (const Shape &s : {Shape{40000}, Shape{4, 3}, Shape{0}})
      for (bool inPlace : {false, true}) {
        int64_t n = numel(s);
        HostTensor p = f32(s, sample(n, -1, 1, 90)), g = f32(s, sample(n, -1, 1, 91)),
                   m = f32(s, sample(n, -1, 1, 92)), v = f32(s, sample(n, 0, 1, 93));
        std::vector<double> P = p.values(), G = g.values(), M = m.values(), V = v.values();
        std::vector<double> U(n), wantM(n), wantV(n), wantP(n);
        double pn = 0, un = 0;
        for (int64_t i = 0; i < n; ++i) {
          const double grad = G[i] * gs;
          wantM[i] = b1 * M[i] + (1 - b1) * grad;
          wantV[i] = b2 * V[i] + (1 - b2) * grad * grad;
          U[i] = wantM[i] / (std::sqrt(wantV[i]) + eps) + wd * P[i];
          pn += P[i] * P[i], un += U[i] * U[i];
        }
        pn = std::sqrt(pn), un = std::sqrt(un);
        const double c = pn > 0 && un > 0 ? std::min(std::max(pn / un, 0.01), maxCoeff) : 1.0;
        for (int64_t i = 0; i < n; ++i) wantP[i] = P[i] - ss * bc * c * U[i];
        std::vector<HostTensor> outs{HostTensor::result(plan::F32, s), HostTensor::result(plan::F32, s),
                                     HostTensor::result(plan::F32, s)};
        absl::Status st = run(Step("lamb_update").f("beta1", b1).f("beta2", b2).f("eps", eps)
                                  .f("weight_decay", wd).f("max_coeff", maxCoeff).f("min_coeff", 0.01)
                                  .i("eps_inside_sqrt", 0),
                              {p, g, m, v, f32({}, {lr}), f32({}, {ss}), f32({}, {bc}), f32({}, {gs})},
                              outs, inPlace ? std::vector<int>{0, 2, 3} : std::vector<int>{});
        ASSERT_TRUE(st.ok()) << st.message();
        const std::string what = "lamb_update " + shapeStr(s) + " max_coeff " +
                                 std::to_string(maxCoeff) + (inPlace ? " in place" : "");
        expectClose(outs[0].values(), wantP, 1e-5, 1e-7, what + " param");
        expectClose(outs[1].values(), wantM, 1e-6, 1e-7, what + " m");
        expectClose(outs[2].values(), wantV, 1e-6, 1e-7, what + " v");
      }
}

// Muon: momentum (Nesterov or not) orthogonalized by five quintic
// Newton-Schulz steps on the wide orientation, per matrix (a filter as
// O x I kh kw, a rank-3 operand as a batch), scaled, with decoupled decay.
namespace {
/// DeepSpeed's zeropower_via_newtonschulz5 in double, on one rows x cols matrix.
std::vector<double> newtonSchulzReference(std::vector<double> g, int64_t rows, int64_t cols) {
  const bool tall = rows > cols;
  const int64_t n = std::min(rows, cols), m = std::max(rows, cols);
  std::vector<double> x(n * m);
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) (tall ? x[j * rows + i] : x[i * cols + j]) = g[i * cols + j];
  double norm = 0;
  for (double v : x) norm += v * v;
  for (double &v : x) v /= std::sqrt(norm) + 1e-7;
  for (int step = 0; step < 5; ++step) {
    std::vector<double> a(n * n, 0), b(n * n, 0), next(n * m, 0);
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < n; ++j)
        for (int64_t k = 0; k < m; ++k) a[i * n + j] += x[i * m + k] * x[j * m + k];
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double aa = 0;
        for (int64_t k = 0; k < n; ++k) aa += a[i * n + k] * a[k * n + j];
        b[i * n + j] = -4.7750 * a[i * n + j] + 2.0315 * aa;
      }
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < m; ++j) {
        double bx = 0;
        for (int64_t k = 0; k < n; ++k) bx += b[i * n + k] * x[k * m + j];
        next[i * m + j] = 3.4445 * x[i * m + j] + bx;
      }
    x = next;
  }
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) g[i * cols + j] = tall ? x[j * rows + i] : x[i * cols + j];
  return g;
}
} // namespace

CTS_TEST(MuonUpdate, "muon_update") {
  const double lr = 0.02, gs = 0.5, beta = 0.95, wd = 0.1, scale = 1.5;
  for (const Shape &s : {Shape{6, 10}, Shape{10, 6}, Shape{3, 2, 4, 4}, Shape{2, 5, 3}})
    for (int nesterov : {0, 1})
      for (bool inPlace : {false, true}) {
        const int64_t n = numel(s);
        HostTensor p = f32(s, sample(n, -1, 1, 94)), g = f32(s, sample(n, -1, 1, 95)),
                   buf = f32(s, sample(n, -1, 1, 96));
        std::vector<double> P = p.values(), G = g.values(), B = buf.values();
        std::vector<double> wantB(n), u(n), wantP(n);
        for (int64_t i = 0; i < n; ++i) {
          const double grad = G[i] * gs;
          wantB[i] = beta * B[i] + (1 - beta) * grad;
          u[i] = nesterov ? (1 - beta) * grad + beta * wantB[i] : wantB[i];
        }
        const int64_t rows = s.size() == 4 ? s[0] : s[s.size() - 2];
        const int64_t cols = s.size() == 4 ? n / s[0] : s.back();
        for (int64_t k = 0; k < n / (rows * cols); ++k) {
          std::vector<double> mat(u.begin() + k * rows * cols, u.begin() + (k + 1) * rows * cols);
          mat = newtonSchulzReference(mat, rows, cols);
          std::copy(mat.begin(), mat.end(), u.begin() + k * rows * cols);
        }
        for (int64_t i = 0; i < n; ++i) wantP[i] = P[i] * (1 - lr * wd) - lr * scale * u[i];
        std::vector<HostTensor> outs{HostTensor::result(plan::F32, s), HostTensor::result(plan::F32, s)};
        absl::Status st = run(Step("muon_update").f("momentum", beta).f("weight_decay", wd)
                                  .i("nesterov", nesterov).i("ns_steps", 5).f("scale", scale),
                              {p, g, buf, f32({}, {lr}), f32({}, {gs})}, outs,
                              inPlace ? std::vector<int>{0, 2} : std::vector<int>{});
        ASSERT_TRUE(st.ok()) << st.message();
        const std::string what = "muon_update " + shapeStr(s) + (nesterov ? " nesterov" : "") +
                                 (inPlace ? " in place" : "");
        expectClose(outs[0].values(), wantP, 1e-5, 1e-6, what + " param");
        expectClose(outs[1].values(), wantB, 1e-6, 1e-7, what + " buf");
      }
  HostTensor v = f32({4}, {1, 2, 3, 4}), one = f32({}, {1});
  std::vector<HostTensor> outs{HostTensor::result(plan::F32, {4}), HostTensor::result(plan::F32, {4})};
  expectError(run(Step("muon_update").f("momentum", 0.95).f("weight_decay", 0).i("nesterov", 1)
                      .i("ns_steps", 5).f("scale", 1),
                  {v, v, v, one, one}, outs),
              "rank >= 2");
}

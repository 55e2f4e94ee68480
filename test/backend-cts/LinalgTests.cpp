// matmul: numpy semantics (vector operands, broadcast batch dimensions),
// operands stored transposed, every element type it takes.
#include "test/backend-cts/Cts.h"

using namespace cts;

namespace {

/// Reference product of operands stored with shapes `as`, `bs` (ta/tb: the
/// last two dimensions are stored swapped); sets the result shape.
std::vector<double> matmulRef(const Shape &as, const std::vector<double> &A, const Shape &bs,
                              const std::vector<double> &B, bool ta, bool tb, Shape &outShape) {
  Shape la = as, lb = bs;
  if (ta) std::swap(la[la.size() - 1], la[la.size() - 2]);
  if (tb) std::swap(lb[lb.size() - 1], lb[lb.size() - 2]);
  bool aVec = la.size() == 1, bVec = lb.size() == 1;
  int64_t m = aVec ? 1 : la[la.size() - 2], k = la.back(), n = bVec ? 1 : lb.back();
  Shape aBatch = aVec ? Shape{} : Shape(la.begin(), la.end() - 2);
  Shape bBatch = bVec ? Shape{} : Shape(lb.begin(), lb.end() - 2);
  Shape batch = broadcastShape(aBatch, bBatch);
  outShape = batch;
  if (!aVec) outShape.push_back(m);
  if (!bVec) outShape.push_back(n);
  std::vector<double> out(numel(outShape), 0.0);
  for (int64_t bi = 0; bi < numel(batch); ++bi) {
    int64_t aOff = broadcastSource(batch, aBatch, bi) * m * k;
    int64_t bOff = broadcastSource(batch, bBatch, bi) * k * n;
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double s = 0;
        for (int64_t p = 0; p < k; ++p) {
          double a = ta ? A[aOff + p * m + i] : A[aOff + i * k + p];
          double b = tb ? B[bOff + j * k + p] : B[bOff + p * n + j];
          s += a * b;
        }
        out[(bi * m + i) * n + j] = s;
      }
  }
  return out;
}

void checkMatmul(BackendCts &t, DType dt, const Shape &as, const Shape &bs, bool ta = false,
                 bool tb = false, bool constantWeight = false) {
  bool integer = dt == plan::I32 || dt == plan::I64;
  auto av = sample(numel(as), -1, 1, 20), bv = sample(numel(bs), -1, 1, 21);
  if (integer) {
    for (auto &x : av) x = std::round(5 * x);
    for (auto &x : bv) x = std::round(5 * x);
  }
  HostTensor a = HostTensor::of(dt, as, av), b = HostTensor::of(dt, bs, bv);
  Shape os;
  std::vector<double> want = matmulRef(as, a.values(), bs, b.values(), ta, tb, os);
  Step step("matmul");
  if (ta) step.i("transpose_lhs", 1);
  if (tb) step.i("transpose_rhs", 1);
  if (constantWeight) step.i("constant_weight", 1);
  HostTensor o = t.run1(step, {a, b}, dt, os);
  // 16-bit products sum in f32 and round once: within half an ulp of the
  // exact product of the (16-bit) operands, plus f32 summation error.
  double tol = integer ? 0 : dt == plan::F32 ? 1e-4 : dt == plan::BF16 ? 4e-3
                           : dt == plan::F16 ? 6e-4 : 1e-12;
  expectClose(o.values(), want, tol, tol,
              std::string("matmul ") + ds::rt::dtypeName(dt) + " " + shapeStr(as) + (ta ? "^T" : "") +
                  " x " + shapeStr(bs) + (tb ? "^T" : "") + (constantWeight ? " constant" : ""));
}

} // namespace

// A constant weight times few rows (a decode step's: one row per
// sequence), the memory-bound shape the CPU backend streams the weight for:
// every row count up to 16 and just past it, columns that are no multiple
// of 16, a weight stored transposed (nn.Linear's [N, K]), rows in a batch.
CTS_TEST(MatmulFewRowsConstantWeight, "matmul") {
  for (int64_t m : {1, 2, 3, 5, 8, 9, 15, 16, 17})
    for (int64_t n : {1, 16, 37, 200}) {
      checkMatmul(*this, plan::F32, {m, 33}, {33, n}, false, false, true);
      checkMatmul(*this, plan::F32, {m, 33}, {n, 33}, false, true, true);
    }
  checkMatmul(*this, plan::F32, {2, 4, 64}, {64, 300}, false, false, true);
  checkMatmul(*this, plan::F32, {3, 1, 7}, {7, 1023}, false, false, true);
}

CTS_TEST(MatmulShapes, "matmul") {
  const std::vector<std::pair<Shape, Shape>> shapes = {
      {{17, 33}, {33, 5}},       {{3, 4, 5}, {5, 6}},    {{3, 4, 5}, {3, 5, 6}},
      {{2, 1, 4, 5}, {3, 5, 6}}, {{5}, {3, 5, 6}},       {{3, 4, 5}, {5}},
      {{5}, {5}},                {{4, 0}, {0, 3}},       {{0, 4}, {4, 3}},
      {{2, 0, 4, 5}, {5, 6}},    {{1, 1}, {1, 1}},       {{16, 9, 7}, {16, 7, 5}},
      {{1, 7}, {7, 1023}},       {{1023, 3}, {3, 1}},
  };
  for (DType dt : {plan::F32, plan::F64, plan::I32, plan::I64, plan::BF16, plan::F16})
    for (const auto &[as, bs] : shapes) checkMatmul(*this, dt, as, bs);
  // Products big enough for the backend to split them across threads: by
  // rows, by columns.
  checkMatmul(*this, plan::F32, {96, 300}, {300, 200});
  checkMatmul(*this, plan::F32, {8, 300}, {300, 500});
  checkMatmul(*this, plan::F64, {8, 300}, {300, 500});
  checkMatmul(*this, plan::BF16, {96, 300}, {300, 200});
  checkMatmul(*this, plan::F16, {8, 300}, {300, 500});
}

CTS_TEST(MatmulTransposedOperands, "matmul") {
  struct Case {
    Shape a, b; // stored shapes
    bool ta, tb;
  };
  for (DType dt : {plan::F32, plan::F64, plan::BF16, plan::F16})
    for (const Case &c : {Case{{7, 5}, {7, 3}, true, false}, Case{{2, 4, 6}, {5, 6}, false, true},
                          Case{{2, 6, 4}, {2, 6, 5}, true, false}, Case{{3, 4, 6}, {1, 5, 6}, false, true},
                          Case{{40, 8}, {300, 40}, true, true}, Case{{96, 300}, {96, 200}, true, false},
                          Case{{300, 96}, {200, 96}, false, true}, Case{{5, 0}, {5, 3}, true, false}})
      checkMatmul(*this, dt, c.a, c.b, c.ta, c.tb);
  // transpose_* = 0 is the plain product.
  HostTensor a = f32({2, 2}, {1, 2, 3, 4}), b = f32({2, 2}, {5, 6, 7, 8});
  expectEqualValues(run1(Step("matmul").i("transpose_lhs", 0).i("transpose_rhs", 0), {a, b}, plan::F32, {2, 2}).values(),
                    {19, 22, 43, 50}, "transpose flags off");
}

CTS_TEST(MatmulErrors, "matmul") {
  auto expectMatmulError = [&](std::vector<HostTensor> ins, HostTensor out, const std::string &needle,
                               Step step = Step("matmul")) {
    std::vector<HostTensor> outs{std::move(out)};
    expectError(run(step, ins, outs), needle);
  };
  auto z = [](DType d, Shape s) { return HostTensor::of(d, s, std::vector<double>(numel(s), 1)); };
  expectMatmulError({z(plan::F32, {2, 3}), z(plan::F32, {4, 5})}, HostTensor::result(plan::F32, {2, 5}),
                    "contraction dimensions differ");
  expectMatmulError({z(plan::F32, {2, 3}), z(plan::F64, {3, 5})}, HostTensor::result(plan::F32, {2, 5}),
                    "share one element type");
  expectMatmulError({z(plan::F32, {2, 3, 4}), z(plan::F32, {3, 4, 5})}, HostTensor::result(plan::F32, {3, 3, 5}),
                    "do not broadcast");
  expectMatmulError({z(plan::F32, {2, 3}), z(plan::F32, {3, 5})}, HostTensor::result(plan::F32, {2, 4}),
                    "result must have shape");
  expectMatmulError({z(plan::F32, {}), z(plan::F32, {3, 5})}, HostTensor::result(plan::F32, {5}), "rank >= 1");
  expectMatmulError({z(plan::I64, {2, 2}), z(plan::I64, {2, 2})}, HostTensor::result(plan::I64, {2, 2}),
                    "transpose_lhs needs float operands", Step("matmul").i("transpose_lhs", 1));
  expectMatmulError({z(plan::F32, {3, 2}), z(plan::F32, {2})}, HostTensor::result(plan::F32, {3}),
                    "transpose_rhs needs an operand of rank >= 2", Step("matmul").i("transpose_rhs", 1));
  expectMatmulError({z(plan::F32, {2, 2}), z(plan::F32, {2, 2})}, HostTensor::result(plan::F32, {2, 2}),
                    "integer attribute 'transpose_lhs'", Step("matmul").f("transpose_lhs", 1));
  expectMatmulError({z(plan::BOOL, {1, 1}), z(plan::BOOL, {1, 1})}, HostTensor::result(plan::BOOL, {1, 1}),
                    "does not support element type bool");
  checkMatmul(*this, plan::F32, {2, 3}, {3, 4});
}

namespace {

double activate(const std::string &act, double x) {
  if (act == "relu") return x < 0 ? 0 : x;
  if (act == "gelu") return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0)));
  if (act == "gelu_tanh")
    return 0.5 * x * (1 + std::tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
  if (act == "silu") return x / (1 + std::exp(-x));
  if (act == "sigmoid") return 1 / (1 + std::exp(-x));
  if (act == "tanh") return std::tanh(x);
  return x;
}

/// One fused_matmul epilogue to check.
struct Fused {
  double alpha = 1;
  bool bias = false, addend = false, multiply = false, constantWeight = false, inPlace = false;
  std::string act = "none";
};

void checkFusedMatmul(BackendCts &t, const Shape &as, const Shape &bs, const Fused &f,
                      bool ta = false, bool tb = false) {
  auto av = sample(numel(as), -1, 1, 30), bv = sample(numel(bs), -1, 1, 31);
  HostTensor a = HostTensor::of(plan::F32, as, av), b = HostTensor::of(plan::F32, bs, bv);
  Shape os;
  std::vector<double> want = matmulRef(as, a.values(), bs, b.values(), ta, tb, os);
  const int64_t n = os.back();
  std::vector<HostTensor> ins{a, b};
  Step step("fused_matmul");
  if (ta) step.i("transpose_lhs", 1);
  if (tb) step.i("transpose_rhs", 1);
  if (f.constantWeight) step.i("constant_weight", 1);
  if (f.alpha != 1) step.f("alpha", f.alpha);
  if (f.act != "none") step.s("activation", f.act);
  std::vector<double> bias = sample(n, -1, 1, 32), add = sample(numel(os), -2, 2, 33);
  if (f.bias) {
    step.i("bias", 1);
    ins.push_back(HostTensor::of(plan::F32, {n}, bias));
  }
  if (f.addend) {
    step.i("addend", 1).s("combine", f.multiply ? "mul" : "add");
    ins.push_back(HostTensor::of(plan::F32, os, add));
  }
  for (size_t i = 0; i < want.size(); ++i) {
    double v = activate(f.act, f.alpha * want[i] + (f.bias ? bias[i % n] : 0));
    want[i] = !f.addend ? v : f.multiply ? v * add[i] : v + add[i];
  }
  std::vector<HostTensor> outs{HostTensor::result(plan::F32, os)};
  std::vector<int> alias;
  if (f.inPlace) alias.push_back(static_cast<int>(ins.size()) - 1);
  ASSERT_TRUE(t.run(step, ins, outs, alias).ok());
  expectClose(outs[0].values(), want, 1e-4, 1e-4,
              "fused_matmul " + shapeStr(as) + (ta ? "^T" : "") + " x " + shapeStr(bs) +
                  (tb ? "^T" : "") + " act " + f.act + (f.bias ? " bias" : "") +
                  (f.addend ? (f.multiply ? " *addend" : " +addend") : "") +
                  (f.inPlace ? " in place" : "") + (f.constantWeight ? " constant weight" : ""));
}

} // namespace

CTS_TEST(FusedMatmulEpilogues, "fused_matmul") {
  const std::vector<std::pair<Shape, Shape>> shapes = {
      {{17, 33}, {33, 5}},   {{3, 4, 5}, {5, 6}},  {{3, 4, 5}, {3, 5, 6}}, {{2, 1, 4, 5}, {3, 5, 6}},
      {{4, 0}, {0, 3}},      {{96, 300}, {300, 200}}, {{8, 300}, {300, 500}}, {{1, 7}, {7, 1023}},
  };
  for (bool cw : {false, true})
    for (const auto &[as, bs] : shapes)
      for (const char *act : {"none", "relu", "gelu", "gelu_tanh", "silu", "sigmoid", "tanh"}) {
        checkFusedMatmul(*this, as, bs, Fused{1, true, false, false, cw, false, act});
        checkFusedMatmul(*this, as, bs, Fused{0.125, false, true, false, cw, false, act});
        checkFusedMatmul(*this, as, bs, Fused{-2, true, true, true, cw, false, act});
      }
  // Transposed operands with every part of the epilogue.
  checkFusedMatmul(*this, {7, 5}, {7, 3}, Fused{0.5, true, true, false, false, false, "gelu"}, true);
  checkFusedMatmul(*this, {2, 4, 6}, {5, 6}, Fused{1, true, true, true, true, false, "silu"}, false,
                   true);
  checkFusedMatmul(*this, {300, 96}, {200, 96}, Fused{1, true, true, false, true, false, "relu"},
                   false, true);
}

CTS_TEST(FusedMatmulAddendInPlace, "fused_matmul") {
  // The addend is the result's own buffer (a gradient accumulator): it must
  // be read before the product lands on it, whichever path runs.
  for (bool cw : {false, true})
    for (const auto &[as, bs] : std::vector<std::pair<Shape, Shape>>{
             {{17, 33}, {33, 5}}, {{96, 300}, {300, 200}}, {{8, 300}, {300, 500}}, {{3, 4, 5}, {3, 5, 6}}}) {
      checkFusedMatmul(*this, as, bs, Fused{1, false, true, false, cw, true, "none"});
      checkFusedMatmul(*this, as, bs, Fused{0.25, false, true, false, cw, true, "none"});
      checkFusedMatmul(*this, as, bs, Fused{1, true, true, false, cw, true, "gelu"});
      checkFusedMatmul(*this, as, bs, Fused{1, false, true, true, cw, true, "silu"});
    }
  checkFusedMatmul(*this, {300, 96}, {300, 200}, Fused{1, false, true, false, false, true, "none"},
                   true);
}

// An MLP's backward: the product is dy of a GELU, the addend its input x;
// the result is dy * gelu'(x) (erf and tanh forms), in place over x too.
CTS_TEST(FusedMatmulGeluGrad, "fused_matmul") {
  auto deriv = [](double v, bool tanhForm) {
    if (!tanhForm) return 0.5 * (1 + std::erf(v / std::sqrt(2.0))) + v * std::exp(-0.5 * v * v) / std::sqrt(2 * M_PI);
    const double k = std::sqrt(2 / M_PI), a = 0.044715, t = std::tanh(k * (v + a * v * v * v));
    return 0.5 * (1 + t) + 0.5 * v * (1 - t * t) * k * (1 + 3 * a * v * v);
  };
  for (const auto &[as, bs, tb] : std::vector<std::tuple<Shape, Shape, bool>>{
           {{17, 33}, {33, 5}, false}, {{2, 64, 32}, {96, 32}, true}, {{40, 64}, {64, 48}, false}})
    for (bool tanhForm : {false, true})
      for (bool inPlace : {false, true})
        for (bool bias : {false, true}) {
          HostTensor a = f32(as, sample(numel(as), -1, 1, 34)), b = f32(bs, sample(numel(bs), -1, 1, 35));
          Shape os;
          std::vector<double> p = matmulRef(as, a.values(), bs, b.values(), false, tb, os);
          const int64_t n = os.back();
          HostTensor x = f32(os, sample(numel(os), -4, 4, 36)), bv = f32({n}, sample(n, -1, 1, 37));
          std::vector<double> want(p.size());
          for (size_t i = 0; i < p.size(); ++i)
            want[i] = (0.5 * p[i] + (bias ? bv.values()[i % n] : 0)) * deriv(x.values()[i], tanhForm);
          Step step("fused_matmul");
          step.f("alpha", 0.5).i("addend", 1).s("combine", tanhForm ? "gelu_tanh_grad" : "gelu_grad");
          if (tb) step.i("transpose_rhs", 1);
          std::vector<HostTensor> ins{a, b};
          if (bias) {
            step.i("bias", 1);
            ins.push_back(bv);
          }
          ins.push_back(x);
          std::vector<HostTensor> outs{HostTensor::result(plan::F32, os)};
          std::vector<int> alias;
          if (inPlace) alias.push_back(static_cast<int>(ins.size()) - 1);
          ASSERT_TRUE(run(step, ins, outs, alias).ok());
          expectClose(outs[0].values(), want, 1e-4, 1e-5,
                      "fused_matmul gelu grad " + shapeStr(as) + (tanhForm ? " tanh" : " erf") +
                          (inPlace ? " in place" : "") + (bias ? " bias" : ""));
        }
}

CTS_TEST(FusedMatmulErrors, "fused_matmul") {
  auto z = [](Shape s) { return HostTensor::of(plan::F32, s, std::vector<double>(numel(s), 1)); };
  auto expectFusedError = [&](std::vector<HostTensor> ins, const Step &step, const std::string &needle) {
    std::vector<HostTensor> outs{HostTensor::result(plan::F32, {2, 4})};
    expectError(run(step, ins, outs), needle);
  };
  expectFusedError({z({2, 3}), z({3, 4})}, Step("fused_matmul").i("bias", 1), "inputs");
  expectFusedError({z({2, 3}), z({3, 4}), z({3})}, Step("fused_matmul").i("bias", 1), "bias");
  expectFusedError({z({2, 3}), z({3, 4}), z({2, 3})}, Step("fused_matmul").i("addend", 1), "addend");
  expectFusedError({z({2, 3}), z({3, 4})}, Step("fused_matmul").s("activation", "swish"),
                   "unknown activation 'swish'");
  expectFusedError({z({2, 3}), z({3, 4}), z({2, 4})},
                   Step("fused_matmul").i("addend", 1).s("combine", "sub"),
                   "combine must be add, mul, gelu_grad, gelu_tanh_grad or softmax_grad");
  expectFusedError({z({2, 3}), z({3, 4})}, Step("fused_matmul").f("alpha", INFINITY),
                   "alpha must be finite");
  std::vector<HostTensor> outs{HostTensor::result(plan::F32, {2})};
  expectError(run(Step("fused_matmul"), {z({2, 3}), z({3})}, outs), "rank >= 2");
  std::vector<HostTensor> f64{HostTensor::result(plan::F64, {2, 4})};
  expectError(run(Step("fused_matmul"), {HostTensor::of(plan::F64, {2, 3}, std::vector<double>(6, 1)),
                                         HostTensor::of(plan::F64, {3, 4}, std::vector<double>(12, 1))},
                  f64),
              "f32");
  checkFusedMatmul(*this, {2, 3}, {3, 4}, Fused{});
}

namespace {

/// A strided view for fused_matmul: sizes and element strides.
struct View {
  Shape shape;
  std::vector<int64_t> strides;
  int64_t offset = 0;
};

/// Offset of each element of `v` (row-major over its shape).
std::vector<int64_t> viewOffsets(const View &v) {
  std::vector<int64_t> offs(numel(v.shape)), idx(v.shape.size(), 0);
  for (size_t e = 0; e < offs.size(); ++e) {
    int64_t off = v.offset;
    for (size_t d = 0; d < idx.size(); ++d) off += idx[d] * v.strides[d];
    offs[e] = off;
    for (size_t d = idx.size(); d-- > 0;) {
      if (++idx[d] < v.shape[d]) break;
      idx[d] = 0;
    }
  }
  return offs;
}

/// fused_matmul reading `lhs` / `rhs` (stored as `as` / `bs`) through the
/// views given (else as stored), writing the result (stored `os`) through
/// `res` if given, with alpha and an activation; against the product of
/// the gathered operands scattered through the result view.
void checkViewedMatmul(BackendCts &t, const Shape &as, const std::optional<View> &lv,
                       const Shape &bs, const std::optional<View> &rv, const Shape &os,
                       const std::optional<View> &res, double alpha = 1,
                       const std::string &act = "none") {
  auto av = sample(numel(as), -1, 1, 40), bv = sample(numel(bs), -1, 1, 41);
  auto gather = [](const std::vector<double> &x, const std::optional<View> &v) {
    if (!v) return x;
    std::vector<double> g;
    for (int64_t off : viewOffsets(*v)) g.push_back(x[off]);
    return g;
  };
  Shape product;
  std::vector<double> logical = matmulRef(lv ? lv->shape : as, gather(av, lv), rv ? rv->shape : bs,
                                          gather(bv, rv), false, false, product);
  for (double &x : logical) x = activate(act, alpha * x);
  std::vector<double> want(numel(os), NAN);
  if (res) {
    std::vector<int64_t> offs = viewOffsets(*res);
    for (size_t i = 0; i < offs.size(); ++i) want[offs[i]] = logical[i];
  } else {
    want = logical;
  }
  Step step("fused_matmul");
  for (auto [name, v] : {std::pair{"lhs", lv}, std::pair{"rhs", rv}, std::pair{"result", res}})
    if (v) {
      step.ints(std::string(name) + "_shape", v->shape).ints(std::string(name) + "_strides", v->strides);
      if (v->offset) step.i(std::string(name) + "_offset", v->offset);
    }
  if (alpha != 1) step.f("alpha", alpha);
  if (act != "none") step.s("activation", act);
  HostTensor o = t.run1(step, {HostTensor::of(plan::F32, as, av), HostTensor::of(plan::F32, bs, bv)},
                        plan::F32, os);
  expectClose(o.values(), want, 1e-4, 1e-4,
              "fused_matmul views " + shapeStr(as) + " x " + shapeStr(bs) + " -> " + shapeStr(os));
}

} // namespace

CTS_TEST(FusedMatmulViews, "fused_matmul") {
  // Attention's heads: q [B, T, H, D] read as [B, H, T, D], k as [B, H, D, T].
  checkViewedMatmul(*this, {2, 5, 3, 4}, View{{2, 3, 5, 4}, {60, 4, 12, 1}}, {2, 5, 3, 4},
                    View{{2, 3, 4, 5}, {60, 4, 1, 12}}, {2, 3, 5, 5}, std::nullopt, 0.5);
  // Heads merged on the way out: [B, H, T, D] written as [B, T, H, D].
  checkViewedMatmul(*this, {2, 3, 5, 6}, std::nullopt, {2, 3, 6, 4}, std::nullopt, {2, 5, 3, 4},
                    View{{2, 3, 5, 4}, {60, 4, 12, 1}});
  // A result stepping by 1 down its columns (written as C^T), with an
  // activation.
  checkViewedMatmul(*this, {2, 5, 6}, std::nullopt, {2, 6, 3}, std::nullopt, {2, 3, 5},
                    View{{2, 5, 3}, {15, 1, 5}}, 1, "gelu");
  // One key head shared by three query heads (stride 0), a 2-D left
  // operand broadcast over the batch, read transposed through its view.
  checkViewedMatmul(*this, {4, 5}, View{{5, 4}, {1, 5}}, {2, 5, 4}, View{{2, 3, 4, 5}, {20, 0, 1, 4}},
                    {2, 3, 5, 5}, std::nullopt);
  // Query and key pieces of one [B, T, 3 * H * D] projection, at offsets.
  checkViewedMatmul(*this, {2, 5, 36}, View{{2, 3, 5, 4}, {180, 4, 36, 1}, 0}, {2, 5, 36},
                    View{{2, 3, 4, 5}, {180, 4, 1, 36}, 12}, {2, 3, 5, 5}, std::nullopt);
  // A vector read as a column (rank 1 in memory).
  checkViewedMatmul(*this, {3, 4}, View{{4, 3}, {1, 4}}, {3}, View{{3, 1}, {1, 0}}, {4, 1},
                    std::nullopt);
  // One big product split across threads inside the GEMM, every matrix
  // strided: by rows, then by columns.
  checkViewedMatmul(*this, {96, 300}, View{{300, 96}, {1, 300}}, {200, 96}, View{{96, 200}, {1, 96}},
                    {200, 300}, View{{300, 200}, {1, 300}}, 1, "relu");
  checkViewedMatmul(*this, {2, 8, 300}, View{{8, 300}, {300, 1}}, {500, 300},
                    View{{300, 500}, {1, 300}}, {8, 500}, std::nullopt);
}

CTS_TEST(FusedMatmulViewErrors, "fused_matmul") {
  auto z = [](Shape s) { return HostTensor::of(plan::F32, s, std::vector<double>(numel(s), 1)); };
  auto expectViewError = [&](Step step, const std::vector<HostTensor> &ins, Shape os,
                             const std::string &needle) {
    std::vector<HostTensor> outs{HostTensor::result(plan::F32, os)};
    expectError(run(step, ins, outs), needle);
  };
  auto view = [](Step s, const std::string &name, std::vector<int64_t> shape,
                 std::vector<int64_t> strides) {
    return s.ints(name + "_shape", shape).ints(name + "_strides", strides);
  };
  expectViewError(view(Step("fused_matmul"), "lhs", {2, 3}, {4, 1}), {z({2, 3}), z({3, 5})}, {2, 5},
                  "lhs view reaches past its operand");
  expectViewError(view(Step("fused_matmul"), "lhs", {2, 3}, {1, 1}), {z({2, 3}), z({3, 5})}, {2, 5},
                  "lhs view needs unit steps");
  expectViewError(view(Step("fused_matmul").i("lhs_offset", 1), "lhs", {2, 3}, {3, 1}),
                  {z({2, 3}), z({3, 5})}, {2, 5}, "lhs view reaches past its operand");
  expectViewError(view(Step("fused_matmul").i("lhs_offset", -1), "lhs", {2, 3}, {3, 1}),
                  {z({2, 3}), z({3, 5})}, {2, 5}, "view offset is outside its operand");
  expectViewError(view(Step("fused_matmul").i("rhs_offset", 1), "lhs", {2, 3}, {3, 1}),
                  {z({2, 3}), z({3, 5})}, {2, 5}, "rhs_offset needs a view");
  expectViewError(view(Step("fused_matmul"), "rhs", {3, 5}, {-1, 1}), {z({2, 3}), z({3, 5})}, {2, 5},
                  "view sizes must be >= 1 and strides >= 0");
  expectViewError(view(Step("fused_matmul").i("transpose_lhs", 1), "lhs", {2, 3}, {3, 1}),
                  {z({2, 3}), z({3, 5})}, {2, 5}, "not also transposed");
  expectViewError(view(Step("fused_matmul"), "result", {2, 2}, {1, 1}), {z({2, 3}), z({3, 2})}, {4},
                  "write every element of the result once");
  expectViewError(view(Step("fused_matmul"), "result", {2, 3}, {3, 1}), {z({2, 3}), z({3, 2})}, {6},
                  "the result view must be the product's shape [2x2]");
  expectViewError(view(Step("fused_matmul").i("bias", 1), "result", {2, 2}, {1, 2}),
                  {z({2, 3}), z({3, 2}), z({2})}, {2, 2}, "neither bias, addend");
  expectViewError(view(Step("fused_matmul"), "lhs", {2, 3}, {3, 1}), {z({2, 3}), z({4, 2})}, {2, 2},
                  "contraction dimensions differ");
  checkViewedMatmul(*this, {2, 3}, View{{3, 2}, {1, 3}}, {2, 4}, std::nullopt, {3, 4}, std::nullopt);
}

// Attention's scores and their gradient: a softmax (masked or not) of
// alpha * product, and a softmax gradient with the product as dy, fused
// into the product. The same bits as the product followed by the softmax
// kernels, and softmax's values (checked in double).
CTS_TEST(FusedMatmulSoftmax, "fused_matmul", "masked_softmax", "softmax", "softmax_grad") {
  struct Case {
    Shape as, bs, mask;
    const char *maskKind; // "none", "i1" (with a fill), "f32" (added), "causal" (i1, j > i)
    double fill = -1e9;
  };
  const double inf = std::numeric_limits<double>::infinity();
  const std::vector<Case> cases = {
      {{2, 3, 5, 7}, {7, 9}, {1, 1, 5, 9}, "i1"},     // a random mask per head
      {{2, 3, 5, 7}, {2, 3, 7, 9}, {5, 1}, "i1"},     // one value per row (step 0)
      {{64, 16, 8}, {64, 8, 16}, {16, 16}, "f32"},    // many heads: batches split over threads
      {{96, 40}, {40, 300}, {96, 300}, "i1"},         // one product split by rows
      {{3, 64}, {64, 600}, {}, "none"},               // few rows: never split by columns
      // Causal: the masked columns of each block of rows are not computed,
      // and with -inf the softmax's masked tail is not read (many heads,
      // and one product split by rows across the threads).
      {{8, 70, 16}, {8, 16, 70}, {70, 70}, "causal", -inf},
      {{8, 70, 16}, {8, 16, 70}, {70, 70}, "causal"},
      {{200, 24}, {24, 200}, {200, 200}, "causal", -inf},
  };
  auto bits = [](const HostTensor &t) { return t.as<uint32_t>(); };
  for (const Case &k : cases) {
    HostTensor a = f32(k.as, sample(numel(k.as), -2, 2, 40)), b = f32(k.bs, sample(numel(k.bs), -2, 2, 41));
    Shape os;
    std::vector<double> p = matmulRef(k.as, a.values(), k.bs, b.values(), false, false, os);
    const std::string kind = k.maskKind == std::string("causal") ? "i1" : k.maskKind;
    std::vector<double> mv = sample(numel(k.mask), 0, 1, 42);
    for (double &v : mv) v = kind == "i1" ? (v < 0.3 ? 1 : 0) : (v < 0.3 ? -1e4 : v);
    if (k.maskKind == std::string("causal"))
      for (size_t i = 0; i < mv.size(); ++i) mv[i] = i % k.mask.back() > i / k.mask.back();
    HostTensor mask = kind == "i1" ? boolean(k.mask, mv) : f32(k.mask, mv);
    const double fill = k.fill;
    // Unfused: the scaled product, then the softmax kernel.
    Step scaled("fused_matmul");
    scaled.f("alpha", 0.25);
    HostTensor s = run1(scaled, {a, b}, plan::F32, os);
    Step sm(kind == "none" ? "softmax" : "masked_softmax");
    sm.i("axis", static_cast<int64_t>(os.size()) - 1);
    if (kind == "i1") sm.f("mask_fill", fill);
    std::vector<HostTensor> smIns{s};
    if (kind != "none") smIns.push_back(mask);
    HostTensor want = run1(sm, smIns, plan::F32, os);
    // Fused.
    Step fused("fused_matmul");
    fused.f("alpha", 0.25).i("softmax", 1);
    std::vector<HostTensor> ins{a, b};
    if (kind != "none") {
      fused.i("mask", 1);
      ins.push_back(mask);
    }
    if (kind == "i1") fused.f("mask_fill", fill);
    HostTensor got = run1(fused, ins, plan::F32, os);
    const std::string what = "fused softmax " + shapeStr(k.as) + " x " + shapeStr(k.bs) + " mask " +
                             k.maskKind + " fill " + std::to_string(fill);
    EXPECT_EQ(bits(got), bits(want)) << what;
    // softmax itself, in double.
    const int64_t n = os.back(), rows = numel(os) / n;
    Shape padded(os.size() - k.mask.size(), 1);
    padded.insert(padded.end(), k.mask.begin(), k.mask.end());
    std::vector<double> ref(p.size());
    for (int64_t r = 0; r < rows; ++r) {
      double mx = -INFINITY, sum = 0;
      std::vector<double> row(n);
      for (int64_t j = 0; j < n; ++j) {
        double v = 0.25 * p[r * n + j];
        if (kind != "none") {
          double m = mv[broadcastSource(os, padded, r * n + j)];
          v = kind == "i1" ? (m ? fill : v) : v + m;
        }
        row[j] = v;
        mx = std::max(mx, v);
      }
      for (int64_t j = 0; j < n; ++j) sum += std::exp(row[j] - mx);
      for (int64_t j = 0; j < n; ++j) ref[r * n + j] = std::exp(row[j] - mx) / sum;
    }
    expectClose(got.values(), ref, 1e-4, 1e-6, what);

    // The gradient: the product is dy, `want` (a softmax's result) the addend,
    // the i1 mask zeroing; in place over the addend too.
    if (kind == "f32") continue;
    Step grad("softmax_grad");
    grad.i("axis", static_cast<int64_t>(os.size()) - 1);
    std::vector<HostTensor> gIns{want, s};
    if (kind == "i1") gIns.push_back(mask);
    HostTensor gWant = run1(grad, gIns, plan::F32, os);
    for (bool inPlace : {false, true}) {
      Step fg("fused_matmul");
      fg.f("alpha", 0.25).i("addend", 1).s("combine", "softmax_grad");
      std::vector<HostTensor> fIns{a, b, want};
      if (kind == "i1") {
        fg.i("mask", 1);
        fIns.push_back(mask);
      }
      std::vector<HostTensor> outs{HostTensor::result(plan::F32, os)};
      std::vector<int> alias;
      if (inPlace) alias.push_back(2);
      ASSERT_TRUE(run(fg, fIns, outs, alias).ok()) << what;
      EXPECT_EQ(bits(outs[0]), bits(gWant)) << what << " gradient" << (inPlace ? " in place" : "");
    }
  }
  {
    // A causal row whose live scores are all -inf (a -inf query row): the
    // full row is NaN, skipped tail or not.
    Shape as{40, 4}, bs{4, 40}, ms{40, 40};
    std::vector<double> av = sample(numel(as), -1, 1, 43);
    for (int j = 0; j < 4; ++j) av[j] = -inf; // row 0 of the product: -inf (or NaN)
    std::vector<double> mv(numel(ms));
    for (size_t i = 0; i < mv.size(); ++i) mv[i] = i % 40 > i / 40;
    HostTensor a = f32(as, av), b = f32(bs, sample(numel(bs), 0.5, 1, 44)), mask = boolean(ms, mv);
    HostTensor s = run1(Step("fused_matmul"), {a, b}, plan::F32, {40, 40});
    HostTensor want = run1(Step("masked_softmax").i("axis", 1).f("mask_fill", -inf), {s, mask}, plan::F32, {40, 40});
    HostTensor got = run1(Step("fused_matmul").i("softmax", 1).i("mask", 1).f("mask_fill", -inf),
                          {a, b, mask}, plan::F32, {40, 40});
    EXPECT_EQ(bits(got), bits(want)) << "causal softmax with a -inf row";
  }
  // What the kernel refuses.
  auto z = [](Shape sh) { return HostTensor::of(plan::F32, sh, std::vector<double>(numel(sh), 1)); };
  auto expectFusedError = [&](std::vector<HostTensor> ins, const Step &step, const std::string &needle) {
    std::vector<HostTensor> outs{HostTensor::result(plan::F32, {2, 4})};
    expectError(run(step, ins, outs), needle);
  };
  expectFusedError({z({2, 3}), z({3, 4}), z({4})}, Step("fused_matmul").i("softmax", 1).i("bias", 1),
                   "softmax comes with neither bias");
  expectFusedError({z({2, 3}), z({3, 4}), z({2, 4})}, Step("fused_matmul").i("mask", 1),
                   "a mask comes only with softmax");
  expectFusedError({z({2, 3}), z({3, 4}), z({3, 4})}, Step("fused_matmul").i("softmax", 1).i("mask", 1),
                   "does not broadcast");
  expectFusedError({z({2, 3}), z({3, 4}), z({2, 4})},
                   Step("fused_matmul").i("softmax", 1).i("mask", 1).f("mask_fill", 0), "bool");
  expectFusedError({z({2, 3}), z({3, 4})}, Step("fused_matmul").i("softmax", 1).f("mask_fill", 0),
                   "mask_fill needs a mask");
  expectFusedError({z({2, 3}), z({3, 4}), z({2, 4}), boolean({2, 4}, std::vector<double>(8, 0))},
                   Step("fused_matmul").i("addend", 1).s("combine", "softmax_grad").i("mask", 1).f("mask_fill", 0),
                   "softmax_grad mask has no mask_fill");
}

// A training forward's product with its activation and the activation's
// input (pre_activation) as a second result: the input is the bits of the
// product without the activation, the result the activation of it.
CTS_TEST(FusedMatmulPreActivation, "fused_matmul") {
  auto bits = [](const HostTensor &t) { return t.as<uint32_t>(); };
  for (const auto &[as, bs] : std::vector<std::pair<Shape, Shape>>{
           {{17, 33}, {33, 5}}, {{2, 64, 32}, {32, 96}}, {{96, 300}, {300, 200}}, {{3, 40}, {40, 700}}})
    for (const char *act : {"gelu", "relu", "silu"})
      for (bool bias : {false, true}) {
        HostTensor a = f32(as, sample(numel(as), -1, 1, 50)), b = f32(bs, sample(numel(bs), -1, 1, 51));
        Shape os;
        std::vector<double> p = matmulRef(as, a.values(), bs, b.values(), false, false, os);
        const int64_t n = os.back();
        HostTensor bv = f32({n}, sample(n, -1, 1, 52));
        std::vector<HostTensor> ins{a, b};
        Step plain("fused_matmul");
        plain.f("alpha", 0.5);
        if (bias) {
          plain.i("bias", 1);
          ins.push_back(bv);
        }
        HostTensor pre = run1(plain, ins, plan::F32, os);
        Step both = plain;
        both.s("activation", act);
        std::vector<HostTensor> outs{HostTensor::result(plan::F32, os), HostTensor::result(plan::F32, os)};
        ASSERT_TRUE(run(both, ins, outs).ok());
        const std::string what = std::string("pre_activation ") + act + " " + shapeStr(as) + (bias ? " bias" : "");
        EXPECT_EQ(bits(outs[1]), bits(pre)) << what;
        std::vector<double> want = pre.values();
        for (double &v : want) {
          if (act == std::string("relu")) v = v > 0 ? v : 0;
          else if (act == std::string("silu")) v = v / (1 + std::exp(-v));
          else v = 0.5 * v * (1 + std::erf(v / std::sqrt(2.0)));
        }
        expectClose(outs[0].values(), want, 1e-5, 1e-6, what);
      }
  // Only beside an activation, and without an addend.
  auto z = [](Shape s) { return HostTensor::of(plan::F32, s, std::vector<double>(numel(s), 1)); };
  std::vector<HostTensor> outs{HostTensor::result(plan::F32, {2, 4}), HostTensor::result(plan::F32, {2, 4})};
  expectError(run(Step("fused_matmul"), {z({2, 3}), z({3, 4})}, outs), "pre_activation comes with an activation");
  expectError(run(Step("fused_matmul").s("activation", "relu").i("addend", 1), {z({2, 3}), z({3, 4}), z({2, 4})}, outs),
              "pre_activation comes with an activation");
}

// Elementwise kernels: arithmetic, comparisons and logic with numpy
// broadcasting, unary math, predicates, where, cast.
#include <functional>

#include "test/backend-cts/Cts.h"

using namespace cts;

namespace {

using Fn2 = std::function<double(double, double)>;
using Fn1 = std::function<double(double)>;

// Shapes every binary kernel sees: equal, broadcast either way, scalars,
// zero-size, size-1 dims, and lengths off the vector width.
const std::vector<std::pair<Shape, Shape>> kBinaryShapes = {
    {{17}, {17}},      {{1023}, {1023}}, {{3, 1}, {4}},  {{}, {5}},         {{2, 3, 4}, {}},
    {{}, {}},          {{0, 3}, {3}},    {{1, 1}, {1}},  {{2, 1, 5}, {1, 3, 1}}, {{4, 0}, {1, 0}},
    {{1023}, {1}},
};

std::string label(const std::string &kernel, DType dt, const Shape &a, const Shape &b) {
  return kernel + " " + ds::rt::dtypeName(dt) + " " + shapeStr(a) + " x " + shapeStr(b);
}

/// Runs a binary kernel and checks it against `ref` under numpy broadcasting.
void checkBinary(BackendCts &t, const std::string &kernel, DType dt, DType outDt, const Shape &as,
                 const Shape &bs, const std::vector<double> &av, const std::vector<double> &bv,
                 const Fn2 &ref, double rtol) {
  Shape os = broadcastShape(as, bs);
  HostTensor a = HostTensor::of(dt, as, av), b = HostTensor::of(dt, bs, bv);
  HostTensor o = t.run1(Step(kernel), {a, b}, outDt, os);
  std::vector<double> A = a.values(), B = b.values(), want(numel(os));
  for (int64_t i = 0; i < numel(os); ++i)
    want[i] = ref(A[broadcastSource(os, as, i)], B[broadcastSource(os, bs, i)]);
  expectClose(o.values(), roundTo(outDt, want), rtol, 0, label(kernel, dt, as, bs));
}

double pyMod(double a, double b) {
  double r = std::fmod(a, b);
  return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
}

double nanMin(double a, double b) { return std::isnan(a) ? a : std::isnan(b) ? b : std::min(a, b); }
double nanMax(double a, double b) { return std::isnan(a) ? a : std::isnan(b) ? b : std::max(a, b); }

} // namespace

CTS_TEST(FloatArithmetic, "add", "sub", "mul", "div", "min", "max", "pow") {
  const std::vector<std::pair<std::string, Fn2>> ops = {
      {"add", [](double a, double b) { return a + b; }},
      {"sub", [](double a, double b) { return a - b; }},
      {"mul", [](double a, double b) { return a * b; }},
      {"div", [](double a, double b) { return a / b; }},
      {"min", nanMin},
      {"max", nanMax},
      {"pow", [](double a, double b) { return std::pow(a, b); }},
  };
  for (DType dt : {plan::F32, plan::F64})
    for (const auto &[as, bs] : kBinaryShapes)
      for (const auto &[kernel, ref] : ops) {
        // Positive bases keep pow real; the quotient of two such is finite.
        auto av = sample(numel(as), 0.25, 4, 1), bv = sample(numel(bs), -3, 3, 2);
        // pow goes through the math library; the rest are exact IEEE ops.
        double rtol = kernel == "pow" ? (dt == plan::F32 ? 2e-6 : 1e-14) : 0;
        checkBinary(*this, kernel, dt, dt, as, bs, av, bv, ref, rtol);
      }
}

CTS_TEST(MinMaxPropagateNaN, "min", "max") {
  const double nan = std::nan("");
  for (DType dt : {plan::F32, plan::F64}) {
    checkBinary(*this, "min", dt, dt, {4}, {4}, {nan, 1, 2, nan}, {0, nan, 3, nan}, nanMin, 0);
    checkBinary(*this, "max", dt, dt, {4}, {4}, {nan, 1, 2, nan}, {0, nan, 3, nan}, nanMax, 0);
  }
}

CTS_TEST(IntegerArithmetic, "add", "sub", "mul", "min", "max", "pow") {
  const std::vector<std::pair<std::string, Fn2>> ops = {
      {"add", [](double a, double b) { return a + b; }},
      {"sub", [](double a, double b) { return a - b; }},
      {"mul", [](double a, double b) { return a * b; }},
      {"min", [](double a, double b) { return std::min(a, b); }},
      {"max", [](double a, double b) { return std::max(a, b); }},
  };
  for (DType dt : {plan::I32, plan::I64})
    for (const auto &[as, bs] : kBinaryShapes) {
      auto av = sample(numel(as), -1000, 1000, 3), bv = sample(numel(bs), -1000, 1000, 4);
      for (auto &x : av) x = std::trunc(x);
      for (auto &x : bv) x = std::trunc(x);
      for (const auto &[kernel, ref] : ops) checkBinary(*this, kernel, dt, dt, as, bs, av, bv, ref, 0);
    }
  // Integer pow is exact repeated multiplication; negative exponents give
  // 1/a^n truncated (0 unless |a| == 1).
  auto intPow = [](double a, double b) {
    if (b < 0) return a == 1 ? 1.0 : a == -1 ? (std::fmod(-b, 2) == 1 ? -1.0 : 1.0) : 0.0;
    return std::pow(a, b);
  };
  std::vector<double> base = {-3, -2, -1, 0, 1, 2, 3, 5, -1, 2, 1, -2};
  std::vector<double> exps = {3, 2, -3, 0, -2, 10, 0, 4, -2, -1, 7, 5};
  for (DType dt : {plan::I32, plan::I64}) {
    checkBinary(*this, "pow", dt, dt, {12}, {12}, base, exps, intPow, 0);
    checkBinary(*this, "pow", dt, dt, {3, 4}, {}, base, {3}, intPow, 0);
  }
}

CTS_TEST(DivAndModTruncateAndFollowTheDivisor, "div", "mod") {
  std::vector<double> a = {7, -7, 7, -7, 0, 9, -9, 1};
  std::vector<double> b = {3, 3, -3, -3, 5, 1, 2, 10};
  for (DType dt : {plan::I32, plan::I64}) {
    checkBinary(*this, "div", dt, dt, {8}, {8}, a, b, [](double x, double y) { return std::trunc(x / y); }, 0);
    checkBinary(*this, "mod", dt, dt, {8}, {8}, a, b, pyMod, 0);
    checkBinary(*this, "mod", dt, dt, {2, 4}, {1}, a, {-4}, pyMod, 0);
  }
  // Floats: IEEE division (x/0 is inf, no error) and fmod.
  for (DType dt : {plan::F32, plan::F64}) {
    checkBinary(*this, "div", dt, dt, {3}, {3}, {1, -1, 0.5}, {0, 0, 0.25},
                [](double x, double y) { return x / y; }, 0);
    checkBinary(*this, "mod", dt, dt, {4}, {4}, {5.5, -5.5, 5.5, -5.5}, {2, 2, -2, -2},
                [](double x, double y) { return std::fmod(x, y); }, 0);
    auto av = sample(1023, -50, 50, 5), bv = sample(1023, 0.5, 7, 6);
    checkBinary(*this, "mod", dt, dt, {1023}, {1023}, av, bv,
                [](double x, double y) { return std::fmod(x, y); }, dt == plan::F32 ? 1e-6 : 1e-14);
  }
}

CTS_TEST(IntegerDivisionErrorsAreReported, "div", "mod") {
  // Division by zero and INT_MIN / -1 are data errors of the run, reported
  // as a status, never a trap.
  for (DType dt : {plan::I32, plan::I64})
    for (std::string kernel : {"div", "mod"}) {
      std::vector<HostTensor> outs{HostTensor::result(dt, {3})};
      expectError(run(Step(kernel), {HostTensor::of(dt, {3}, {4, 5, 6}), HostTensor::of(dt, {3}, {1, 0, 2})}, outs),
                  "division by zero", kernel);
      double minValue = dt == plan::I32 ? -2147483648.0 : -9223372036854775808.0;
      outs = {HostTensor::result(dt, {2})};
      expectError(run(Step(kernel), {HostTensor::of(dt, {2}, {minValue, 3}), HostTensor::of(dt, {}, {-1})}, outs),
                  "overflows", kernel);
      // The same kernel still runs on good data afterwards.
      Fn2 ref = kernel == "div" ? Fn2([](double x, double y) { return std::trunc(x / y); }) : Fn2(pyMod);
      checkBinary(*this, kernel, dt, dt, {2}, {}, {9, -9}, {4}, ref, 0);
    }
}

CTS_TEST(Comparisons, "equal", "less", "greater", "less_equal", "greater_equal") {
  const std::vector<std::pair<std::string, Fn2>> ops = {
      {"equal", [](double a, double b) { return double(a == b); }},
      {"less", [](double a, double b) { return double(a < b); }},
      {"greater", [](double a, double b) { return double(a > b); }},
      {"less_equal", [](double a, double b) { return double(a <= b); }},
      {"greater_equal", [](double a, double b) { return double(a >= b); }},
  };
  const double nan = std::nan("");
  for (const auto &[kernel, ref] : ops) {
    // Small integers make ties common; every dtype a plan compares.
    for (DType dt : {plan::F32, plan::F64, plan::I32, plan::I64, plan::U8})
      for (const auto &[as, bs] : kBinaryShapes) {
        auto av = sample(numel(as), 0, 4, 7), bv = sample(numel(bs), 0, 4, 8);
        for (auto &x : av) x = std::floor(x);
        for (auto &x : bv) x = std::floor(x);
        checkBinary(*this, kernel, dt, plan::BOOL, as, bs, av, bv, ref, 0);
      }
    checkBinary(*this, kernel, plan::BOOL, plan::BOOL, {2, 1}, {2}, {0, 1}, {0, 1}, ref, 0);
    // NaN compares false with everything, itself included.
    for (DType dt : {plan::F32, plan::F64})
      checkBinary(*this, kernel, dt, plan::BOOL, {3}, {3}, {nan, 1, nan}, {1, nan, nan}, ref, 0);
  }
  std::vector<HostTensor> outs{HostTensor::result(plan::F32, {2})};
  expectError(run(Step("less"), {f32({2}, {1, 2}), f32({2}, {2, 1})}, outs), "result must be bool");
}

CTS_TEST(Logic, "and", "or", "xor", "not") {
  std::vector<double> a = {0, 1, 1, 0}, b = {0, 0, 1, 1};
  checkBinary(*this, "and", plan::BOOL, plan::BOOL, {2, 1, 2}, {1, 2, 1}, a, {0, 1},
              [](double x, double y) { return double(x && y); }, 0);
  checkBinary(*this, "or", plan::BOOL, plan::BOOL, {4}, {4}, a, b,
              [](double x, double y) { return double(x || y); }, 0);
  checkBinary(*this, "xor", plan::BOOL, plan::BOOL, {4}, {}, a, {1},
              [](double x, double y) { return double((x != 0) != (y != 0)); }, 0);
  checkBinary(*this, "xor", plan::BOOL, plan::BOOL, {0, 2}, {2}, {}, {1, 0},
              [](double x, double y) { return double((x != 0) != (y != 0)); }, 0);
  auto bits = sample(1023, 0, 2, 9);
  for (auto &x : bits) x = std::floor(x);
  HostTensor n = run1(Step("not"), {boolean({1023}, bits)}, plan::BOOL, {1023});
  std::vector<double> want(bits.size());
  for (size_t i = 0; i < bits.size(); ++i) want[i] = bits[i] == 0;
  expectEqualValues(n.values(), want, "not");
  std::vector<HostTensor> outs{HostTensor::result(plan::BOOL, {2})};
  expectError(run(Step("and"), {i32({2}, {1, 0}), i32({2}, {1, 1})}, outs), "operand must be bool");
  expectError(run(Step("not"), {f32({2}, {1, 0})}, outs), "operand must be bool");
}

namespace {
struct UnaryCase {
  const char *kernel;
  double lo, hi;
  Fn1 ref;
};
const std::vector<UnaryCase> kFloatUnary = {
    {"sin", -3, 3, [](double x) { return std::sin(x); }},
    {"cos", -3, 3, [](double x) { return std::cos(x); }},
    {"tan", -1.2, 1.2, [](double x) { return std::tan(x); }},
    {"asin", -0.99, 0.99, [](double x) { return std::asin(x); }},
    {"acos", -0.99, 0.99, [](double x) { return std::acos(x); }},
    {"atan", -5, 5, [](double x) { return std::atan(x); }},
    {"sinh", -5, 5, [](double x) { return std::sinh(x); }},
    {"cosh", -5, 5, [](double x) { return std::cosh(x); }},
    {"asinh", -5, 5, [](double x) { return std::asinh(x); }},
    {"acosh", 1, 6, [](double x) { return std::acosh(x); }},
    {"atanh", -0.99, 0.99, [](double x) { return std::atanh(x); }},
    {"floor", -5, 5, [](double x) { return std::floor(x); }},
    {"ceil", -5, 5, [](double x) { return std::ceil(x); }},
    {"round", -5, 5, [](double x) { return std::nearbyint(x); }},
    {"sign", -3, 3, [](double x) { return double((x > 0) - (x < 0)); }},
    {"softplus", -20, 20, [](double x) { return std::max(x, 0.0) + std::log1p(std::exp(-std::fabs(x))); }},
    {"neg", -5, 5, [](double x) { return -x; }},
    {"abs", -5, 5, [](double x) { return std::fabs(x); }},
    {"relu", -5, 5, [](double x) { return x > 0 ? x : 0.0; }},
    {"sqrt", 0, 10, [](double x) { return std::sqrt(x); }},
    {"reciprocal", 0.1, 5, [](double x) { return 1 / x; }},
    {"exp", -10, 10, [](double x) { return std::exp(x); }},
    {"log", 0.01, 10, [](double x) { return std::log(x); }},
    {"erf", -3, 3, [](double x) { return std::erf(x); }},
    {"tanh", -5, 5, [](double x) { return std::tanh(x); }},
    {"sigmoid", -10, 10, [](double x) { return 1 / (1 + std::exp(-x)); }},
};

void checkUnary(BackendCts &t, const std::string &kernel, DType dt, const Shape &s,
                const std::vector<double> &xv, const Fn1 &ref, double rtol, double atol) {
  HostTensor x = HostTensor::of(dt, s, xv);
  HostTensor o = t.run1(Step(kernel), {x}, dt, s);
  std::vector<double> X = x.values(), want(X.size());
  for (size_t i = 0; i < X.size(); ++i) want[i] = ref(X[i]);
  expectClose(o.values(), roundTo(dt, want), rtol, atol,
              kernel + " " + ds::rt::dtypeName(dt) + " " + shapeStr(s));
}
} // namespace

CTS_TEST(FloatUnaryMath, "sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "asinh",
         "acosh", "atanh", "floor", "ceil", "round", "sign", "softplus", "neg", "abs", "relu",
         "sqrt", "reciprocal", "exp", "log", "erf", "tanh", "sigmoid") {
  for (const UnaryCase &c : kFloatUnary)
    for (const Shape &s : {Shape{1023}, Shape{17}, Shape{}, Shape{0}, Shape{2, 0, 3}, Shape{1, 1, 1}}) {
      auto xv = sample(numel(s), c.lo, c.hi, 10);
      checkUnary(*this, c.kernel, plan::F32, s, xv, c.ref, 1e-5, 1e-6);
      checkUnary(*this, c.kernel, plan::F64, s, xv, c.ref, 1e-13, 1e-14);
    }
}

CTS_TEST(ReluKeepsNaN, "relu") {
  // torch.relu(nan) is nan: a NaN reaching a ReLU must not turn into 0 and
  // hide a diverged forward.
  for (DType dt : {plan::F32, plan::F64, plan::BF16, plan::F16}) {
    HostTensor x = HostTensor::of(dt, {3}, {std::nan(""), -1.0, 2.0});
    std::vector<double> y = run1(Step("relu"), {x}, dt, {3}).values();
    EXPECT_TRUE(std::isnan(y[0])) << "relu " << ds::rt::dtypeName(dt) << " of NaN gave " << y[0];
    EXPECT_EQ(y[1], 0.0);
    EXPECT_EQ(y[2], 2.0);
  }
}

CTS_TEST(RoundingIsExact, "round", "floor", "ceil") {
  // round is half to even (numpy, ONNX); the halves are exact in every type.
  std::vector<double> x = {0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 0.49999997, 3.0};
  for (DType dt : {plan::F32, plan::F64}) {
    HostTensor xs = HostTensor::of(dt, {8}, x);
    std::vector<double> X = xs.values(), fl, ce;
    for (double v : X) fl.push_back(std::floor(v)), ce.push_back(std::ceil(v));
    expectEqualValues(run1(Step("round"), {xs}, dt, {8}).values(), {0, 2, 2, -0.0, -2, -2, 0, 3}, "round");
    expectEqualValues(run1(Step("floor"), {xs}, dt, {8}).values(), fl, "floor");
    expectEqualValues(run1(Step("ceil"), {xs}, dt, {8}).values(), ce, "ceil");
  }
}

CTS_TEST(IntegerUnary, "sign", "neg", "abs", "relu") {
  std::vector<double> x = {-7, -1, 0, 1, 9, -100000, 123456, 2};
  for (DType dt : {plan::I32, plan::I64}) {
    checkUnary(*this, "sign", dt, {8}, x, [](double v) { return double((v > 0) - (v < 0)); }, 0, 0);
    checkUnary(*this, "neg", dt, {2, 4}, x, [](double v) { return -v; }, 0, 0);
    checkUnary(*this, "abs", dt, {8}, x, [](double v) { return std::fabs(v); }, 0, 0);
    checkUnary(*this, "relu", dt, {8, 1}, x, [](double v) { return v > 0 ? v : 0.0; }, 0, 0);
  }
}

CTS_TEST(UnaryErrors, "exp", "neg") {
  std::vector<HostTensor> outs{HostTensor::result(plan::I32, {2})};
  expectError(run(Step("exp").at("model.onnx:7"), {i32({2}, {1, 2})}, outs),
              "does not support element type i32");
  expectError(run(Step("exp").at("model.onnx:7"), {i32({2}, {1, 2})}, outs), "model.onnx:7",
              "errors name the step's location");
  outs = {HostTensor::result(plan::F32, {3})};
  expectError(run(Step("neg"), {f32({2}, {1, 2})}, outs), "result must have shape [2], got [3]");
  outs = {HostTensor::result(plan::F64, {2})};
  expectError(run(Step("neg"), {f32({2}, {1, 2})}, outs), "result must be f32, got f64");
  outs = {HostTensor::result(plan::F32, {2})};
  expectError(run(Step("neg"), {f32({2}, {1, 2}), f32({2}, {1, 2})}, outs), "takes 1 inputs, got 2");
  // A good step still works.
  checkUnary(*this, "exp", plan::F32, {2}, {0, 1}, [](double v) { return std::exp(v); }, 1e-6, 0);
  checkUnary(*this, "neg", plan::F32, {2}, {0, 1}, [](double v) { return -v; }, 0, 0);
}

CTS_TEST(Gelu, "gelu") {
  auto exact = [](double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); };
  auto tanhForm = [](double x) {
    return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
  };
  for (DType dt : {plan::F32, plan::F64}) {
    double rtol = dt == plan::F32 ? 1e-5 : 1e-13, atol = dt == plan::F32 ? 1e-6 : 1e-14;
    for (const Shape &s : {Shape{1023}, Shape{}, Shape{0, 4}}) {
      auto xv = sample(numel(s), -6, 6, 11);
      HostTensor x = HostTensor::of(dt, s, xv);
      std::vector<double> X = x.values(), we, wt;
      for (double v : X) we.push_back(exact(v)), wt.push_back(tanhForm(v));
      // No attribute means the exact form, as the compiler writes it.
      expectClose(run1(Step("gelu"), {x}, dt, s).values(), roundTo(dt, we), rtol, atol, "gelu default");
      expectClose(run1(Step("gelu").s("approximate", "none"), {x}, dt, s).values(), roundTo(dt, we),
                  rtol, atol, "gelu none");
      expectClose(run1(Step("gelu").s("approximate", "tanh"), {x}, dt, s).values(), roundTo(dt, wt),
                  rtol, atol, "gelu tanh");
    }
  }
  std::vector<HostTensor> outs{HostTensor::result(plan::F32, {1})};
  expectError(run(Step("gelu").s("approximate", "sigmoid"), {f32({1}, {1})}, outs),
              "unknown approximation 'sigmoid'");
  expectError(run(Step("gelu").i("approximate", 1), {f32({1}, {1})}, outs),
              "string attribute 'approximate'");
}

CTS_TEST(Predicates, "is_nan", "is_inf") {
  const double inf = std::numeric_limits<double>::infinity(), nan = std::nan("");
  std::vector<double> x = {0, nan, inf, -inf, 1e4, -1, nan};
  for (DType dt : {plan::F32, plan::F64, plan::F16, plan::BF16}) {
    HostTensor xs = HostTensor::of(dt, {7}, x);
    expectEqualValues(run1(Step("is_nan"), {xs}, plan::BOOL, {7}).values(), {0, 1, 0, 0, 0, 0, 1}, "is_nan");
    expectEqualValues(run1(Step("is_inf"), {xs}, plan::BOOL, {7}).values(), {0, 0, 1, 1, 0, 0, 0}, "is_inf");
    expectEqualValues(run1(Step("is_nan"), {HostTensor::of(dt, {}, {nan})}, plan::BOOL, {}).values(), {1}, "is_nan scalar");
  }
  std::vector<HostTensor> outs{HostTensor::result(plan::F32, {2})};
  expectError(run(Step("is_nan"), {f32({2}, {1, 2})}, outs), "result must be bool");
  outs = {HostTensor::result(plan::BOOL, {2})};
  expectError(run(Step("is_inf"), {i64({2}, {1, 2})}, outs), "does not support element type i64");
}

CTS_TEST(Bitwise, "bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_not", "shift_left",
         "shift_right") {
  // References in 64 bits, then wrapped to the type (two's complement).
  auto bits = [](DType dt) { return 8 * static_cast<int>(ds::rt::dtypeSize(dt)); };
  auto isSigned = [](DType dt) {
    return dt == plan::I8 || dt == plan::I16 || dt == plan::I32 || dt == plan::I64;
  };
  for (DType dt : {plan::I8, plan::I32, plan::I64, plan::U8, plan::U16, plan::U64}) {
    const int w = bits(dt);
    const bool sgn = isSigned(dt);
    auto wrap = [&](uint64_t v) -> double {
      if (w < 64) v &= (uint64_t(1) << w) - 1;
      if (sgn && w < 64 && (v >> (w - 1)) & 1) return static_cast<double>(static_cast<int64_t>(v) - (int64_t(1) << w));
      return sgn ? static_cast<double>(static_cast<int64_t>(v)) : static_cast<double>(v);
    };
    auto u = [](double v) { return static_cast<uint64_t>(static_cast<int64_t>(v)); };
    std::vector<double> a = sgn ? std::vector<double>{-7, -1, 0, 5, 100, -128, 127, 3, -2, 1, 64, -100}
                                : std::vector<double>{7, 255, 0, 5, 100, 128, 127, 3, 254, 1, 64, 200};
    std::vector<double> b = sgn ? std::vector<double>{3, -1, 9, 1, 0, 2, 7, -5, 1, 6, 3, 4}
                                : std::vector<double>{3, 1, 9, 1, 0, 2, 7, 5, 1, 6, 3, 4};
    checkBinary(*this, "bitwise_and", dt, dt, {12}, {12}, a, b, [&](double x, double y) { return wrap(u(x) & u(y)); }, 0);
    checkBinary(*this, "bitwise_or", dt, dt, {3, 4}, {4}, a, {b[0], b[1], b[2], b[3]},
                [&](double x, double y) { return wrap(u(x) | u(y)); }, 0);
    checkBinary(*this, "bitwise_xor", dt, dt, {12}, {}, a, {b[0]}, [&](double x, double y) { return wrap(u(x) ^ u(y)); }, 0);
    expectEqualValues(run1(Step("bitwise_not"), {HostTensor::of(dt, {12}, a)}, dt, {12}).values(),
                      [&] { std::vector<double> r; for (double x : a) r.push_back(wrap(~u(x))); return r; }(),
                      std::string("bitwise_not ") + ds::rt::dtypeName(dt));
    // Shifts: amounts in and out of [0, width), negative ones for signed types.
    std::vector<double> amounts = {0, 1, 3, static_cast<double>(w - 1), static_cast<double>(w), static_cast<double>(w + 5)};
    if (sgn) amounts.push_back(-1);
    std::vector<double> xs, ss;
    for (double x : a)
      for (double s : amounts) xs.push_back(x), ss.push_back(s);
    int64_t n = static_cast<int64_t>(xs.size());
    auto outOfRange = [&](double s) { return s < 0 || s >= w; };
    checkBinary(*this, "shift_left", dt, dt, {n}, {n}, xs, ss,
                [&](double x, double s) { return outOfRange(s) ? 0.0 : wrap(u(x) << static_cast<int>(s)); }, 0);
    checkBinary(*this, "shift_right", dt, dt, {n}, {n}, xs, ss, [&](double x, double s) {
      if (outOfRange(s)) return sgn && x < 0 ? -1.0 : 0.0;
      return sgn ? std::floor(x / std::ldexp(1.0, static_cast<int>(s)))
                 : static_cast<double>(u(x) >> static_cast<int>(s));
    }, 0);
  }
  std::vector<HostTensor> outs{HostTensor::result(plan::F32, {2})};
  expectError(run(Step("bitwise_and"), {f32({2}, {1, 2}), f32({2}, {1, 2})}, outs),
              "does not support element type f32");
  expectError(run(Step("bitwise_not"), {f32({2}, {1, 2})}, outs), "does not support element type f32");
}

CTS_TEST(Bitcast, "bitcast") {
  // f32 1.0 is 0x3f800000; -2.0 is 0xc0000000 (as i32: -1073741824).
  expectEqualValues(run1(Step("bitcast"), {f32({2}, {1.0, -2.0})}, plan::I32, {2}).values(),
                    {1065353216.0, -1073741824.0}, "bitcast f32 -> i32");
  expectEqualValues(run1(Step("bitcast"), {i32({2}, {1065353216.0, -1073741824.0})}, plan::F32, {2}).values(),
                    {1.0, -2.0}, "bitcast i32 -> f32");
  expectEqualValues(run1(Step("bitcast"), {HostTensor::of(plan::I8, {3}, {-1, 5, -128})}, plan::U8, {3}).values(),
                    {255, 5, 128}, "bitcast i8 -> u8");
  expectEqualValues(run1(Step("bitcast"), {boolean({2}, {1, 0})}, plan::U8, {2}).values(), {1, 0},
                    "bitcast bool -> u8");
  std::vector<HostTensor> outs{HostTensor::result(plan::I64, {2})};
  expectError(run(Step("bitcast"), {f32({2}, {1, 2})}, outs), "the widths differ");
}

CTS_TEST(HalfPrecisionComputesThroughF32, "add", "mul", "less", "sqrt", "neg") {
  // Bit patterns: f16 1.5 = 0x3E00, 0.5 = 0x3800, 2 = 0x4000, -2 = 0xC000,
  // 65504 (largest) = 0x7BFF, inf = 0x7C00, -3 = 0xC200, 4 = 0x4400.
  auto h = [](Shape s, std::vector<uint16_t> b) { return HostTensor::bits16(plan::F16, std::move(s), b); };
  auto bf = [](Shape s, std::vector<uint16_t> b) { return HostTensor::bits16(plan::BF16, std::move(s), b); };
  EXPECT_EQ(run1(Step("add"), {h({3}, {0x3E00, 0x7BFF, 0xC000}), h({3}, {0x3800, 0x7BFF, 0x4000})}, plan::F16, {3}).as<uint16_t>(),
            (std::vector<uint16_t>{0x4000, 0x7C00, 0x0000}));
  EXPECT_EQ(run1(Step("mul"), {h({2}, {0x3E00, 0x4000}), h({}, {0xC000})}, plan::F16, {2}).as<uint16_t>(),
            (std::vector<uint16_t>{0xC200, 0xC400}));
  EXPECT_EQ(run1(Step("less"), {h({2}, {0x3E00, 0x4000}), h({2}, {0x4000, 0x3E00})}, plan::BOOL, {2}).as<uint8_t>(),
            (std::vector<uint8_t>{1, 0}));
  EXPECT_EQ(run1(Step("neg"), {h({2}, {0x3E00, 0xC000})}, plan::F16, {2}).as<uint16_t>(),
            (std::vector<uint16_t>{0xBE00, 0x4000}));
  // bf16: 1.5 = 0x3FC0, 3 = 0x4040, 4 = 0x4080, 2 = 0x4000.
  EXPECT_EQ(run1(Step("add"), {bf({1}, {0x3FC0}), bf({1}, {0x3FC0})}, plan::BF16, {1}).as<uint16_t>(),
            (std::vector<uint16_t>{0x4040}));
  EXPECT_EQ(run1(Step("sqrt"), {bf({2}, {0x4080, 0x3F80})}, plan::BF16, {2}).as<uint16_t>(),
            (std::vector<uint16_t>{0x4000, 0x3F80}));
}

CTS_TEST(BinaryOperandChecks, "add", "mul", "sub") {
  std::vector<HostTensor> outs{HostTensor::result(plan::F32, {3})};
  expectError(run(Step("add").at("layer3/add"), {f32({3}, {1, 2, 3}), f64({3}, {1, 2, 3})}, outs),
              "operands differ in type: f32 and f64");
  expectError(run(Step("add").at("layer3/add"), {f32({3}, {1, 2, 3}), f64({3}, {1, 2, 3})}, outs),
              "layer3/add", "errors name the step's location");
  expectError(run(Step("mul"), {f32({3}, {1, 2, 3}), f32({2}, {1, 2})}, outs), "do not broadcast");
  outs = {HostTensor::result(plan::F32, {4})};
  expectError(run(Step("mul"), {f32({3}, {1, 2, 3}), f32({3}, {1, 2, 3})}, outs),
              "do not broadcast to the result [4]");
  outs = {HostTensor::result(plan::I32, {3})};
  expectError(run(Step("sub"), {f32({3}, {1, 2, 3}), f32({3}, {1, 2, 3})}, outs), "result must be f32, got i32");
  outs = {HostTensor::result(plan::F32, {3})};
  expectError(run(Step("sub"), {f32({3}, {1, 2, 3})}, outs), "takes 2 inputs, got 1");
  outs = {HostTensor::result(plan::BOOL, {2})};
  expectError(run(Step("add"), {boolean({2}, {1, 0}), boolean({2}, {1, 1})}, outs),
              "does not support element type bool");
  // And the good cases run.
  checkBinary(*this, "add", plan::F32, plan::F32, {3}, {3}, {1, 2, 3}, {4, 5, 6}, [](double a, double b) { return a + b; }, 0);
  checkBinary(*this, "sub", plan::F32, plan::F32, {3}, {}, {1, 2, 3}, {4}, [](double a, double b) { return a - b; }, 0);
  checkBinary(*this, "mul", plan::I64, plan::I64, {3}, {}, {1, 2, 3}, {4}, [](double a, double b) { return a * b; }, 0);
}

CTS_TEST(Where, "where") {
  // where is a select by element size: 1, 2, 4 and 8-byte types.
  Shape cs{3, 1}, xs{1, 4}, ys{}, os{3, 4};
  std::vector<double> cond = {1, 0, 1}, xv = {1, 2, 3, 4}, yv = {-9};
  for (DType dt : {plan::F32, plan::F64, plan::I64, plan::I32, plan::U8, plan::BOOL, plan::I16}) {
    HostTensor x = HostTensor::of(dt, xs, xv), y = HostTensor::of(dt, ys, dt == plan::BOOL || dt == plan::U8 ? std::vector<double>{0} : yv);
    HostTensor o = run1(Step("where"), {boolean(cs, cond), x, y}, dt, os);
    std::vector<double> X = x.values(), Y = y.values(), want(numel(os));
    for (int64_t i = 0; i < numel(os); ++i)
      want[i] = cond[broadcastSource(os, cs, i)] ? X[broadcastSource(os, xs, i)] : Y[0];
    expectEqualValues(o.values(), want, std::string("where ") + ds::rt::dtypeName(dt));
  }
  // Long rows, and zero-size.
  auto c = sample(1023, 0, 2, 12);
  for (auto &v : c) v = std::floor(v);
  auto a = sample(1023, -1, 1, 13), b = sample(1023, -1, 1, 14);
  HostTensor o = run1(Step("where"), {boolean({1023}, c), f32({1023}, a), f32({1023}, b)}, plan::F32, {1023});
  std::vector<double> want(1023);
  for (int i = 0; i < 1023; ++i) want[i] = c[i] ? a[i] : b[i];
  expectEqualValues(o.values(), roundTo(plan::F32, want), "where 1023");
  EXPECT_TRUE(run1(Step("where"), {boolean({0}, {}), f32({0}, {}), f32({1}, {1})}, plan::F32, {0}).bytes.empty());
  std::vector<HostTensor> outs{HostTensor::result(plan::F32, {2})};
  expectError(run(Step("where"), {f32({2}, {1, 0}), f32({2}, {1, 2}), f32({2}, {3, 4})}, outs), "condition must be bool");
  expectError(run(Step("where"), {boolean({2}, {1, 0}), f32({2}, {1, 2}), f64({2}, {3, 4})}, outs),
              "share one element type");
  expectError(run(Step("where"), {boolean({3}, {1, 0, 1}), f32({2}, {1, 2}), f32({2}, {3, 4})}, outs),
              "do not broadcast");
}

CTS_TEST(Cast, "cast") {
  const double nan = std::nan("");
  // float -> int truncates toward zero, saturates, and sends NaN to 0.
  EXPECT_EQ(run1(Step("cast"), {f32({6}, {1.9, -1.9, 1e30, -1e30, nan, 0.5})}, plan::I32, {6}).as<int32_t>(),
            (std::vector<int32_t>{1, -1, INT32_MAX, INT32_MIN, 0, 0}));
  EXPECT_EQ(run1(Step("cast"), {f64({4}, {-2.7, 3.99, 1e300, nan})}, plan::I64, {4}).as<int64_t>(),
            (std::vector<int64_t>{-2, 3, INT64_MAX, 0}));
  EXPECT_EQ(run1(Step("cast"), {f32({3}, {300, -5, 7.5})}, plan::U8, {3}).as<uint8_t>(),
            (std::vector<uint8_t>{255, 0, 7}));
  // Integers and bools to floats, widening and narrowing.
  expectEqualValues(run1(Step("cast"), {i64({3}, {3, -7, 1099511627776.0})}, plan::F32, {3}).values(),
                    {3, -7, 1099511627776.0}, "i64 -> f32");
  expectEqualValues(run1(Step("cast"), {f64({2}, {0.1, -1e20})}, plan::F32, {2}).values(),
                    {double(0.1f), double(-1e20f)}, "f64 -> f32");
  expectEqualValues(run1(Step("cast"), {i32({3}, {0, 5, -1})}, plan::BOOL, {3}).values(), {0, 1, 1}, "i32 -> bool");
  expectEqualValues(run1(Step("cast"), {f32({4}, {0, -0.0, 0.1, nan})}, plan::BOOL, {4}).values(), {0, 0, 1, 1},
                    "f32 -> bool");
  expectEqualValues(run1(Step("cast"), {boolean({2, 1}, {1, 0})}, plan::F32, {2, 1}).values(), {1, 0}, "bool -> f32");
  expectEqualValues(run1(Step("cast"), {boolean({2}, {1, 0})}, plan::I64, {2}).values(), {1, 0}, "bool -> i64");
  expectEqualValues(run1(Step("cast"), {i64({}, {-3})}, plan::F64, {}).values(), {-3}, "scalar");
  EXPECT_TRUE(run1(Step("cast"), {f32({0, 2}, {})}, plan::I32, {0, 2}).bytes.empty());
  // f32 -> f16 rounds to nearest even: 1 + 2^-11 is halfway to 1 + 2^-10,
  // 1 + 3 * 2^-11 halfway to 1 + 2^-9; 1e6 overflows to inf.
  EXPECT_EQ(run1(Step("cast"), {f32({7}, {1.5, -2, 65504, 1e6, 0.5, 1 + std::ldexp(1, -11), 1 + 3 * std::ldexp(1, -11)})},
                 plan::F16, {7}).as<uint16_t>(),
            (std::vector<uint16_t>{0x3E00, 0xC000, 0x7BFF, 0x7C00, 0x3800, 0x3C00, 0x3C02}));
  expectEqualValues(run1(Step("cast"), {HostTensor::bits16(plan::F16, {3}, {0x3E00, 0xC000, 0x7C00})}, plan::F32, {3}).values(),
                    {1.5, -2, std::numeric_limits<double>::infinity()}, "f16 -> f32");
  // bf16 keeps the top half of the float, rounding to nearest even.
  EXPECT_EQ(run1(Step("cast"), {f32({3}, {1e6, 1 + std::ldexp(1, -8), 1 + 3 * std::ldexp(1, -8)})}, plan::BF16, {3}).as<uint16_t>(),
            (std::vector<uint16_t>{0x4974, 0x3F80, 0x3F82}));
  expectEqualValues(run1(Step("cast"), {HostTensor::bits16(plan::BF16, {2}, {0x4040, 0xC000})}, plan::F64, {2}).values(),
                    {3, -2}, "bf16 -> f64");
  // Integers and bools to and from 16-bit floats (ONNX Cast allows every
  // pair): one rounding to nearest even (2049 -> 2048 in f16), and to
  // integers NaN is 0, out of range saturates, fractions truncate.
  EXPECT_EQ(run1(Step("cast"), {i32({4}, {1, -2, 2049, 70000})}, plan::F16, {4}).as<uint16_t>(),
            (std::vector<uint16_t>{0x3C00, 0xC000, 0x6800, 0x7C00}));
  // 2^24 + 2^16 + 1 is just above halfway between bf16's 2^24 and
  // 2^24 + 2^17; rounded to f32 first (to even: 2^24 + 2^16) it would tie
  // down to 2^24.
  EXPECT_EQ(run1(Step("cast"), {i64({2}, {16777217, 16777216 + 65537})}, plan::BF16, {2})
                .as<uint16_t>(),
            (std::vector<uint16_t>{0x4B80, 0x4B81}));
  EXPECT_EQ(run1(Step("cast"), {boolean({3}, {1, 0, 1})}, plan::BF16, {3}).as<uint16_t>(),
            (std::vector<uint16_t>{0x3F80, 0x0000, 0x3F80}));
  expectEqualValues(run1(Step("cast"), {HostTensor::bits16(plan::F16, {5}, {0x3E00, 0xC100, 0x7C00, 0x7E00, 0x0000})},
                         plan::I32, {5}).values(),
                    {1, -2, 2147483647, 0, 0}, "f16 -> i32");
  expectEqualValues(run1(Step("cast"), {HostTensor::bits16(plan::BF16, {3}, {0x3F80, 0x0000, 0xC000})},
                         plan::BOOL, {3}).values(),
                    {1, 0, 1}, "bf16 -> bool");
  expectEqualValues(run1(Step("cast"), {HostTensor::bits16(plan::F16, {2}, {0x5640, 0xD640})}, plan::U8, {2}).values(),
                    {100, 0}, "f16 -> u8 (saturating)");
  std::vector<HostTensor> outs{HostTensor::result(plan::I32, {3})};
  expectError(run(Step("cast"), {f32({2}, {1, 2})}, outs), "result must have shape [2], got [3]");
}

namespace {
/// Bytes as a tensor of a narrow type (one element per byte).
HostTensor narrow(DType dtype, const std::vector<uint8_t> &bytes) {
  return HostTensor{dtype, {static_cast<int64_t>(bytes.size())}, bytes};
}
} // namespace

CTS_TEST(CastNarrowFloats, "cast") {
  auto castBytes = [&](const Step &step, const HostTensor &in, DType to) {
    return run1(step, {in}, to, in.shape).as<uint8_t>();
  };
  const double inf = std::numeric_limits<double>::infinity();
  struct Format {
    DType dtype;
    int maxCode;                       // the largest finite positive code
    std::vector<std::pair<uint8_t, double>> known; // codes and their values (NaN: nan)
  };
  const double nan = std::nan("");
  const std::vector<Format> formats = {
      {plan::F8E4M3FN, 0x7E, {{0x38, 1}, {0xB8, -1}, {0x7E, 448}, {0x01, std::ldexp(1, -9)},
                              {0x08, std::ldexp(1, -6)}, {0x7F, nan}, {0x80, -0.0}}},
      {plan::F8E4M3FNUZ, 0x7F, {{0x40, 1}, {0x7F, 240}, {0x01, std::ldexp(1, -10)}, {0x80, nan}}},
      {plan::F8E5M2, 0x7B, {{0x3C, 1}, {0x7B, 57344}, {0x7C, inf}, {0xFC, -inf}, {0x7E, nan},
                            {0x01, std::ldexp(1, -16)}}},
      {plan::F8E5M2FNUZ, 0x7F, {{0x40, 1}, {0x7F, 57344}, {0x80, nan}, {0x01, std::ldexp(1, -17)}}},
      {plan::F4E2M1, 0x7, {{0, 0}, {1, 0.5}, {2, 1}, {3, 1.5}, {4, 2}, {5, 3}, {6, 4}, {7, 6}, {0xF, -6}}},
  };
  for (const Format &f : formats) {
    SCOPED_TRACE(ds::rt::dtypeName(f.dtype));
    std::vector<uint8_t> codes;
    std::vector<double> want;
    for (auto [c, v] : f.known) codes.push_back(c), want.push_back(v);
    expectEqualValues(run1(Step("cast"), {narrow(f.dtype, codes)}, plan::F64, {int64_t(codes.size())}).values(),
                      want, "known codes");
    // Every positive code decodes and encodes back to itself; the midpoint
    // of two neighbours goes to the even one (nearest even), a hair either
    // side to the nearer.
    std::vector<uint8_t> all;
    for (int c = 0; c <= f.maxCode; ++c) all.push_back(uint8_t(c));
    std::vector<double> v = run1(Step("cast"), {narrow(f.dtype, all)}, plan::F64, {int64_t(all.size())}).values();
    EXPECT_EQ(castBytes(Step("cast"), f64({int64_t(v.size())}, v), f.dtype), all);
    std::vector<double> probes;
    std::vector<uint8_t> expected;
    for (int c = 0; c < f.maxCode; ++c) {
      const double mid = (v[c] + v[c + 1]) / 2, eps = (v[c + 1] - v[c]) / 64;
      probes.insert(probes.end(), {mid, mid - eps, mid + eps, -(mid - eps)});
      const bool fnuzZero = c == 0 && (f.dtype == plan::F8E4M3FNUZ || f.dtype == plan::F8E5M2FNUZ);
      const uint8_t sign = f.dtype == plan::F4E2M1 ? 0x8 : 0x80;
      expected.insert(expected.end(), {uint8_t(c % 2 ? c + 1 : c), uint8_t(c), uint8_t(c + 1),
                                       uint8_t(fnuzZero ? 0 : (c | sign))});
    }
    EXPECT_EQ(castBytes(Step("cast"), f64({int64_t(probes.size())}, probes), f.dtype), expected);
  }
  // Beyond the largest finite value: saturate (the default) gives it,
  // saturate=false infinity (e5m2) or NaN (the rest); e2m1 always saturates.
  auto sat = [&](DType t, std::vector<double> x, bool saturate) {
    Step s("cast");
    if (!saturate) s.i("saturate", 0);
    return castBytes(s, f32({int64_t(x.size())}, x), t);
  };
  EXPECT_EQ(sat(plan::F8E4M3FN, {464, 465, inf, -1e9, nan}, true), (std::vector<uint8_t>{0x7E, 0x7E, 0x7E, 0xFE, 0x7F}));
  EXPECT_EQ(sat(plan::F8E4M3FN, {464, 465, inf, -1e9}, false), (std::vector<uint8_t>{0x7E, 0x7F, 0x7F, 0xFF}));
  EXPECT_EQ(sat(plan::F8E5M2, {61439, 61440, inf, -inf}, true), (std::vector<uint8_t>{0x7B, 0x7B, 0x7B, 0xFB}));
  EXPECT_EQ(sat(plan::F8E5M2, {61439, 61440, inf, -inf}, false), (std::vector<uint8_t>{0x7B, 0x7C, 0x7C, 0xFC}));
  EXPECT_EQ(sat(plan::F8E4M3FNUZ, {1e6, -0.0, nan}, false), (std::vector<uint8_t>{0x80, 0x00, 0x80}));
  EXPECT_EQ(sat(plan::F4E2M1, {7, 1e9, -inf}, false), (std::vector<uint8_t>{0x7, 0x7, 0xF}));
}

CTS_TEST(CastE8M0AndNarrowIntegers, "cast") {
  auto castBytes = [&](const Step &step, const HostTensor &in, DType to) {
    return run1(step, {in}, to, in.shape).as<uint8_t>();
  };
  const double nan = std::nan("");
  // e8m0: 2^(code - 127), rounded up (default), down or to nearest.
  const std::vector<double> x = {1.0, 1.1, 1.5, 0.75, 3.0, 0.0, nan};
  auto e8m0 = [&](const char *mode) {
    Step s("cast");
    if (mode) s.s("round_mode", mode);
    return castBytes(s, f32({int64_t(x.size())}, x), plan::F8E8M0);
  };
  EXPECT_EQ(e8m0(nullptr), (std::vector<uint8_t>{127, 128, 128, 127, 129, 0, 0xFF}));
  EXPECT_EQ(e8m0("down"), (std::vector<uint8_t>{127, 127, 127, 126, 128, 0, 0xFF}));
  EXPECT_EQ(e8m0("nearest"), (std::vector<uint8_t>{127, 127, 128, 127, 129, 0, 0xFF}));
  expectEqualValues(run1(Step("cast"), {narrow(plan::F8E8M0, {127, 130, 0})}, plan::F64, {3}).values(),
                    {1, 8, std::ldexp(1, -127)}, "e8m0 -> f64");
  std::vector<HostTensor> outs{HostTensor::result(plan::F8E8M0, {1})};
  expectError(run(Step("cast").s("round_mode", "sideways"), {f32({1}, {1})}, outs), "round_mode");
  // 4- and 2-bit integers keep the low bits (ONNX's wrap-around): floats
  // truncate toward zero first, integers wrap with every bit kept.
  EXPECT_EQ(castBytes(Step("cast"), f32({7}, {-9, -8, 7, 8, 2.7, -2.7, nan}), plan::I4),
            (std::vector<uint8_t>{0x7, 0x8, 0x7, 0x8, 0x2, 0xE, 0x0}));
  EXPECT_EQ(castBytes(Step("cast"), i64({2}, {-1, 4}), plan::U2), (std::vector<uint8_t>{3, 0}));
  // 2^60 + 3: through double it would lose the 3.
  const int64_t big = (int64_t(1) << 60) + 3;
  HostTensor bigI64{plan::I64, {1}, std::vector<uint8_t>(8)};
  std::memcpy(bigI64.bytes.data(), &big, 8);
  EXPECT_EQ(castBytes(Step("cast"), bigI64, plan::U2), (std::vector<uint8_t>{3}));
  expectEqualValues(run1(Step("cast"), {narrow(plan::I4, {0x8, 0xF, 0x7})}, plan::F32, {3}).values(), {-8, -1, 7},
                    "i4 -> f32");
  expectEqualValues(run1(Step("cast"), {narrow(plan::I2, {0x2, 0x3, 0x1})}, plan::I8, {3}).values(), {-2, -1, 1},
                    "i2 -> i8");
  expectEqualValues(run1(Step("cast"), {narrow(plan::U4, {0xF, 0x0})}, plan::F16, {2}).values(), {15, 0},
                    "u4 -> f16");
  // Narrow float to narrow integer goes through the value.
  EXPECT_EQ(castBytes(Step("cast"), narrow(plan::F8E4M3FN, {0x40, 0xC0, 0x48}), plan::I4),
            (std::vector<uint8_t>{0x2, 0xE, 0x4})); // 2, -2 and 4
}

// Kernels that move elements (and fill them): fill, random_mask, trilu, copy, transpose, slice, concat,
// split, gather (and its element-wise forms), scatter_elements, expand.
// They are byte movers, so each test covers element sizes 1, 2, 4 and 8.
#include <algorithm>

#include "runtime/kernels/ElementMath.h"
#include "test/backend-cts/Cts.h"

using namespace cts;

namespace {

// One type per element size, plus the ones plans move most.
const std::vector<DType> kMovedTypes = {plan::F32, plan::F64, plan::I64, plan::U8, plan::U16, plan::BOOL};

/// 0, 1, 2, ... wrapped to what `dt` holds, so every element is distinct
/// where the type allows.
std::vector<double> iota(DType dt, int64_t n) {
  std::vector<double> v(n);
  for (int64_t i = 0; i < n; ++i)
    v[i] = dt == plan::BOOL ? i % 2 : dt == plan::U8 ? i % 251 : static_cast<double>(i);
  return v;
}

std::string what(const std::string &kernel, DType dt, const Shape &s) {
  return kernel + " " + ds::rt::dtypeName(dt) + " " + shapeStr(s);
}

int64_t norm(int64_t axis, size_t rank) { return axis < 0 ? axis + static_cast<int64_t>(rank) : axis; }

} // namespace

CTS_TEST(Fill, "fill") {
  for (const Shape &s : {Shape{2, 3}, Shape{}, Shape{1023}, Shape{0, 4}}) {
    expectEqualValues(run1(Step("fill").f("value", 2.5), {}, plan::F32, s).values(),
                      std::vector<double>(numel(s), 2.5), "fill f32 " + shapeStr(s));
    expectEqualValues(run1(Step("fill").f("value", -1e-300), {}, plan::F64, s).values(),
                      std::vector<double>(numel(s), -1e-300), "fill f64 " + shapeStr(s));
  }
  // The value is rounded to the result type.
  expectEqualValues(run1(Step("fill").f("value", 0.1), {}, plan::F32, {3}).values(),
                    std::vector<double>(3, double(0.1f)), "fill rounds");
  // 16-bit (mixed-precision gradient accumulators), rounded to nearest even.
  expectEqualValues(run1(Step("fill").f("value", 0.0), {}, plan::BF16, {1023}).values(),
                    std::vector<double>(1023, 0.0), "fill bf16 zero");
  expectEqualValues(run1(Step("fill").f("value", 0.1), {}, plan::BF16, {5}).values(),
                    std::vector<double>(5, roundTo(plan::BF16, {0.1})[0]), "fill bf16");
  expectEqualValues(run1(Step("fill").f("value", -2.5e-3), {}, plan::F16, {7}).values(),
                    std::vector<double>(7, roundTo(plan::F16, {-2.5e-3})[0]), "fill f16");
  std::vector<HostTensor> outs{HostTensor::result(plan::I32, {2})};
  expectError(run(Step("fill").f("value", 1), {}, outs), "does not support element type i32");
  outs = {HostTensor::result(plan::F32, {2})};
  expectError(run(Step("fill"), {}, outs), "float attribute 'value'");
  expectError(run(Step("fill").f("value", 1), {f32({2}, {1, 2})}, outs), "takes 0 inputs, got 1");
}

CTS_TEST(RandomMask, "random_mask") {
  // Reference: the keep decision per element from the shared counter
  // function (the kernel's indexing, scale and key/stream plumbing are what
  // is checked), plus the statistics every dropout mask must have.
  for (DType dt : {plan::F32, plan::F64})
    for (double ratio : {0.0, 0.1, 0.5, 0.9})
      for (int64_t key : {0LL, 7LL, -3LL}) {
        const Shape s{37, 1021};
        const int64_t stream = 5;
        HostTensor o = run1(Step("random_mask").f("ratio", ratio).i("stream", stream),
                            {i64({}, {double(key)})}, dt, s);
        std::vector<double> got = o.values(), want(got.size());
        ds::math::DropoutKeep keep{ds::math::DropoutKeep::baseOf(uint64_t(key), stream),
                                   uint32_t(std::ldexp(ratio, 24))};
        double scale = dt == plan::F32 ? double(float(1.0 / (1.0 - ratio))) : 1.0 / (1.0 - ratio);
        int64_t kept = 0;
        for (size_t i = 0; i < want.size(); ++i) {
          want[i] = keep(i) ? scale : 0.0;
          kept += got[i] != 0;
        }
        std::string w = what("random_mask", dt, s) + " ratio " + std::to_string(ratio);
        expectEqualValues(got, want, w);
        // Kept fraction within 5 standard deviations of 1 - ratio.
        double n = double(got.size()), p = 1.0 - ratio;
        EXPECT_NEAR(kept / n, p, 5 * std::sqrt(p * (1 - p) / n) + 1e-12) << w;
      }
  // Another key or stream gives another mask; the same ones the same mask.
  auto mask = [&](int64_t key, int64_t stream) {
    return run1(Step("random_mask").f("ratio", 0.5).i("stream", stream), {i64({}, {double(key)})},
                plan::F32, {4096})
        .values();
  };
  EXPECT_EQ(mask(1, 0), mask(1, 0));
  EXPECT_NE(mask(1, 0), mask(2, 0));
  EXPECT_NE(mask(1, 0), mask(1, 1));
  std::vector<HostTensor> outs{HostTensor::result(plan::F32, {2})};
  expectError(run(Step("random_mask").f("ratio", 1.0).i("stream", 0), {i64({}, {1})}, outs),
              "ratio must be in [0, 1), got 1");
  expectError(run(Step("random_mask").f("ratio", 0.5).i("stream", 0), {f32({}, {1})}, outs),
              "key must be one i64");
  outs = {HostTensor::result(plan::I32, {2})};
  expectError(run(Step("random_mask").f("ratio", 0.5).i("stream", 0), {i64({}, {1})}, outs),
              "does not support element type i32");
}

CTS_TEST(Random, "random") {
  // Reference: each sample from the shared counter function, rounded once to
  // the result type; then the statistics every draw must have.
  for (DType dt : {plan::F32, plan::F64, plan::F16, plan::BF16})
    for (int64_t key : {0LL, 7LL, -3LL}) {
      const Shape s{37, 1021};
      const int64_t stream = 4;
      ds::math::RandomDraw draw{ds::math::DropoutKeep::baseOf(uint64_t(key), stream)};
      HostTensor u = run1(Step("random").s("distribution", "uniform").f("a", -2).f("b", 3).i(
                              "stream", stream),
                          {i64({}, {double(key)})}, dt, s);
      HostTensor g = run1(Step("random").s("distribution", "normal").f("a", 1).f("b", 0.5).i(
                              "stream", stream),
                          {i64({}, {double(key)})}, dt, s);
      std::vector<double> U = u.values(), G = g.values(), wantU(U.size()), wantG(G.size());
      for (size_t i = 0; i < U.size(); ++i) {
        wantU[i] = draw.uniform(i, -2, 3);
        wantG[i] = draw.normal(i, 1, 0.5);
      }
      wantU = roundTo(dt, wantU);
      wantG = roundTo(dt, wantG);
      // A uniform sample that rounded up to `high` is stepped below it.
      for (size_t i = 0; i < U.size(); ++i)
        if (wantU[i] >= 3) wantU[i] = U[i] < 3 && U[i] > 2.9 ? U[i] : wantU[i];
      const std::string w = what("random", dt, s) + " key " + std::to_string(key);
      expectEqualValues(U, wantU, w + " uniform");
      expectEqualValues(G, wantG, w + " normal");
      double n = double(U.size()), mu = 0, m2 = 0, lo = 1e9, hi = -1e9;
      for (double v : U) mu += v / n, lo = std::min(lo, v), hi = std::max(hi, v);
      EXPECT_GE(lo, -2) << w;
      EXPECT_LT(hi, 3) << w;
      EXPECT_NEAR(mu, 0.5, 6 * 5 / std::sqrt(12 * n) + 0.01) << w;
      mu = 0;
      for (double v : G) mu += v / n;
      for (double v : G) m2 += (v - mu) * (v - mu) / n;
      EXPECT_NEAR(mu, 1, 6 * 0.5 / std::sqrt(n) + 0.01) << w;
      EXPECT_NEAR(std::sqrt(m2), 0.5, 6 * 0.5 / std::sqrt(2 * n) + 0.01) << w;
    }
  // Another key or stream draws other values; the same ones the same values.
  auto draw = [&](int64_t key, int64_t stream) {
    return run1(Step("random").s("distribution", "uniform").f("a", 0).f("b", 1).i("stream", stream),
                {i64({}, {double(key)})}, plan::F32, {4096})
        .values();
  };
  EXPECT_EQ(draw(1, 0), draw(1, 0));
  EXPECT_NE(draw(1, 0), draw(2, 0));
  EXPECT_NE(draw(1, 0), draw(1, 1));
  // high == low: every sample is low.
  expectEqualValues(run1(Step("random").s("distribution", "uniform").f("a", 2).f("b", 2).i("stream", 0),
                         {i64({}, {1})}, plan::F32, {9})
                        .values(),
                    std::vector<double>(9, 2.0), "random low == high");
  std::vector<HostTensor> outs{HostTensor::result(plan::F32, {2})};
  auto step = [](const char *d, double a, double b) {
    return Step("random").s("distribution", d).f("a", a).f("b", b).i("stream", 0);
  };
  expectError(run(step("uniform", 1, 0), {i64({}, {1})}, outs),
              "bad parameters 1 and 0 for a uniform distribution");
  expectError(run(step("normal", 0, -1), {i64({}, {1})}, outs),
              "bad parameters 0 and -1 for a normal distribution");
  expectError(run(step("poisson", 0, 1), {i64({}, {1})}, outs),
              "distribution must be uniform or normal, got 'poisson'");
  expectError(run(step("uniform", 0, 1), {f32({}, {1})}, outs), "key must be one i64");
  outs = {HostTensor::result(plan::I32, {2})};
  expectError(run(step("uniform", 0, 1), {i64({}, {1})}, outs), "does not support element type i32");
}

CTS_TEST(Resample, "resample") {
  // Reference: the definition, element by element in double, over layouts
  // where the resampled axes are inner (NCHW) or have the channels inside
  // them (NHWC), one or two axes, 1 to 4 taps (nearest, linear, cubic).
  struct Case {
    Shape in;
    std::vector<int64_t> axes, outSizes, taps;
  };
  const Case cases[] = {
      {{2, 3, 5, 7}, {2, 3}, {10, 14}, {2, 2}},  // NCHW 2x bilinear
      {{2, 5, 7, 3}, {1, 2}, {10, 14}, {2, 2}},  // NHWC 2x bilinear
      {{1, 4, 9, 16}, {1, 2}, {4, 7}, {4, 4}},   // NHWC downsampling, cubic taps
      {{3, 6, 4}, {1}, {13}, {1}},               // one axis, nearest, channels inside
      {{3, 4, 6}, {2}, {5}, {3}},                // one axis, innermost
      {{2, 3, 4, 5, 6}, {1, 3}, {5, 2}, {2, 1}}, // axes with a dimension between
  };
  uint64_t seed = 1;
  auto next = [&] {
    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<double>(seed >> 40) / double(1 << 24);
  };
  for (const Case &k : cases) {
    Shape out = k.in;
    std::vector<std::vector<int64_t>> idx(k.axes.size());
    std::vector<std::vector<double>> w(k.axes.size());
    std::vector<double> flatIdx, flatW;
    for (size_t a = 0; a < k.axes.size(); ++a) {
      out[k.axes[a]] = k.outSizes[a];
      for (int64_t e = 0; e < k.outSizes[a] * k.taps[a]; ++e) {
        idx[a].push_back(static_cast<int64_t>(next() * k.in[k.axes[a]]));
        w[a].push_back(std::ldexp(std::round(std::ldexp(next() - 0.25, 8)), -8));
        flatIdx.push_back(double(idx[a].back()));
        flatW.push_back(w[a].back());
      }
    }
    std::vector<double> X(numel(k.in));
    for (double &v : X) v = std::round(next() * 64) - 32;
    std::vector<double> want(numel(out), 0.0);
    const size_t rank = k.in.size();
    std::vector<int64_t> pos(rank, 0);
    for (int64_t e = 0; e < numel(out); ++e) {
      int64_t rest = e;
      for (size_t d = rank; d-- > 0;) pos[d] = rest % out[d], rest /= out[d];
      // Every tap combination (one or two axes).
      const int64_t t0 = k.taps[0], t1 = k.axes.size() > 1 ? k.taps[1] : 1;
      for (int64_t a = 0; a < t0; ++a)
        for (int64_t b = 0; b < t1; ++b) {
          std::vector<int64_t> src = pos;
          double weight = w[0][pos[k.axes[0]] * t0 + a];
          src[k.axes[0]] = idx[0][pos[k.axes[0]] * t0 + a];
          if (k.axes.size() > 1) {
            weight *= w[1][pos[k.axes[1]] * t1 + b];
            src[k.axes[1]] = idx[1][pos[k.axes[1]] * t1 + b];
          }
          int64_t flat = 0;
          for (size_t d = 0; d < rank; ++d) flat = flat * k.in[d] + src[d];
          want[e] += weight * X[flat];
        }
    }
    Step step = Step("resample").ints("axes", k.axes).ints("taps", k.taps);
    HostTensor y = run1(step,
                        {f32(k.in, X), i64({int64_t(flatIdx.size())}, flatIdx),
                         f32({int64_t(flatW.size())}, flatW)},
                        plan::F32, out);
    expectClose(y.values(), want, 1e-6, 1e-5, what("resample", plan::F32, k.in));
  }
  std::vector<HostTensor> outs{HostTensor::result(plan::F32, {1, 4})};
  auto bad = [&](std::vector<double> index) {
    return run(Step("resample").ints("axes", {1}).ints("taps", {1}),
               {f32({1, 2}, {1, 2}), i64({4}, index), f32({4}, {1, 1, 1, 1})}, outs);
  };
  expectError(bad({0, 1, 2, 1}), "resample index 2 outside [0, 2)");
  expectError(bad({0, 1, -1, 1}), "resample index -1 outside [0, 2)");
  expectError(run(Step("resample").ints("axes", {1}).ints("taps", {2}),
                  {f32({1, 2}, {1, 2}), i64({4}, {0, 1, 0, 1}), f32({4}, {1, 1, 1, 1})}, outs),
              "index and weight need 8 entries each");
  expectError(run(Step("resample").ints("axes", {1, 0}).ints("taps", {1, 1}),
                  {f32({1, 2}, {1, 2}), i64({4}, {0, 1, 0, 1}), f32({4}, {1, 1, 1, 1})}, outs),
              "axes must be increasing");
}

CTS_TEST(Trilu, "trilu") {
  for (DType dt : kMovedTypes)
    for (const Shape &s : {Shape{3, 4}, Shape{2, 3, 4}, Shape{4, 3}, Shape{1, 1}, Shape{2, 0, 3}, Shape{33, 17}})
      for (int upper : {0, 1})
        for (int64_t k : {-1, 0, 2, -5, 10}) {
          HostTensor x = HostTensor::of(dt, s, iota(dt, numel(s)));
          std::vector<double> X = x.values(), want(X.size());
          int64_t rows = s[s.size() - 2], cols = s.back();
          for (int64_t i = 0; i < numel(s); ++i) {
            int64_t col = i % cols, row = (i / cols) % rows;
            bool keep = upper ? col - row >= k : col - row <= k;
            want[i] = keep ? X[i] : 0;
          }
          HostTensor o = run1(Step("trilu").i("upper", upper).i("k", k), {x}, dt, s);
          expectEqualValues(o.values(), want, what("trilu", dt, s) + " upper " + std::to_string(upper) + " k " + std::to_string(k));
        }
  std::vector<HostTensor> outs{HostTensor::result(plan::F32, {3})};
  expectError(run(Step("trilu").i("upper", 1).i("k", 0), {f32({3}, {1, 2, 3})}, outs), "rank >= 2");
  outs = {HostTensor::result(plan::F32, {2, 2})};
  expectError(run(Step("trilu").i("upper", 1), {f32({2, 2}, {1, 2, 3, 4})}, outs), "integer attribute 'k'");
}

CTS_TEST(Copy, "copy") {
  // copy is reshape, squeeze, unsqueeze and identity: bytes unchanged.
  const std::vector<std::pair<Shape, Shape>> cases = {
      {{2, 3}, {3, 2}}, {{6}, {1, 6, 1}}, {{}, {1}}, {{1, 1}, {}}, {{0, 3}, {0}}, {{1023}, {3, 341}}};
  for (DType dt : kMovedTypes)
    for (const auto &[from, to] : cases) {
      HostTensor x = HostTensor::of(dt, from, iota(dt, numel(from)));
      expectEqualValues(run1(Step("copy"), {x}, dt, to).values(), x.values(), what("copy", dt, from) + " -> " + shapeStr(to));
    }
  std::vector<HostTensor> outs{HostTensor::result(plan::F32, {5})};
  expectError(run(Step("copy"), {f32({2, 3}, iota(plan::F32, 6))}, outs), "cannot reshape");
  outs = {HostTensor::result(plan::F64, {6})};
  expectError(run(Step("copy"), {f32({2, 3}, iota(plan::F32, 6))}, outs), "operands must be f64, got f32");
}

CTS_TEST(Transfer, "offload", "fetch") {
  // ZeRO-Offload's device <-> host copies: bytes unchanged, one shape and type.
  for (const char *kernel : {"offload", "fetch"})
    for (DType dt : kMovedTypes)
      for (const Shape &s : std::vector<Shape>{{}, {0, 3}, {4, 5}, {1023}}) {
        HostTensor x = HostTensor::of(dt, s, iota(dt, numel(s)));
        expectEqualValues(run1(Step(kernel), {x}, dt, s).values(), x.values(), what(kernel, dt, s));
      }
  std::vector<HostTensor> outs{HostTensor::result(plan::F32, {3, 2})};
  expectError(run(Step("offload"), {f32({2, 3}, iota(plan::F32, 6))}, outs), "result");
  outs = {HostTensor::result(plan::F64, {2, 3})};
  expectError(run(Step("fetch"), {f32({2, 3}, iota(plan::F32, 6))}, outs), "operands must be f64, got f32");
}

CTS_TEST(Transpose, "transpose") {
  struct Case {
    Shape shape, perm;
  };
  // Small and odd shapes, and ones past the tile size of a blocked
  // innermost-dimension transpose (edges not divisible by it).
  const std::vector<Case> cases = {
      {{2, 3}, {1, 0}},          {{37, 70}, {1, 0}},         {{3, 45, 33}, {0, 2, 1}},
      {{2, 40, 3, 9}, {0, 2, 3, 1}}, {{2, 9, 33, 8}, {1, 0, 3, 2}}, {{}, {}},
      {{4, 1, 3}, {2, 1, 0}},    {{0, 5}, {1, 0}},           {{1023}, {0}},
      {{2, 3, 4}, {0, 1, 2}},    {{8, 8}, {1, 0}},
      // NCHW -> NHWC of RGB images (3 columns) and a 5-column case, with
      // rows longer than a thread's share (chunks split inside a row).
      {{2, 3, 70, 70}, {0, 2, 3, 1}}, {{3, 5, 1000}, {0, 2, 1}},
  };
  for (DType dt : kMovedTypes)
    for (const Case &c : cases) {
      HostTensor x = HostTensor::of(dt, c.shape, iota(dt, numel(c.shape)));
      Shape os;
      for (int64_t p : c.perm) os.push_back(c.shape[p]);
      std::vector<double> X = x.values(), want(X.size());
      Shape inStrides = stridesOf(c.shape);
      for (int64_t i = 0; i < numel(os); ++i) {
        Shape oc = unravel(i, os);
        int64_t src = 0;
        for (size_t d = 0; d < os.size(); ++d) src += oc[d] * inStrides[c.perm[d]];
        want[i] = X[src];
      }
      expectEqualValues(run1(Step("transpose").ints("perm", c.perm), {x}, dt, os).values(), want,
                        what("transpose", dt, c.shape) + " perm " + shapeStr(c.perm));
    }
  HostTensor x = f32({2, 3}, iota(plan::F32, 6));
  std::vector<HostTensor> outs{HostTensor::result(plan::F32, {3, 2})};
  expectError(run(Step("transpose").ints("perm", {1, 1}), {x}, outs), "perm is not a permutation");
  expectError(run(Step("transpose").ints("perm", {0, 2}), {x}, outs), "perm is not a permutation");
  expectError(run(Step("transpose").ints("perm", {0}), {x}, outs), "perm length differs");
  expectError(run(Step("transpose").ints("perm", {0, 1}), {x}, outs), "result must have shape");
  expectError(run(Step("transpose"), {x}, outs), "integer-list attribute 'perm'");
}

CTS_TEST(Slice, "slice") {
  struct Case {
    Shape shape;
    std::vector<int64_t> starts, steps;
    Shape out;
  };
  const std::vector<Case> cases = {
      {{5}, {4}, {-2}, {3}},
      {{4, 6}, {1, 0}, {2, 3}, {2, 2}},
      {{3, 4, 5}, {2, 3, 1}, {-1, -1, 2}, {3, 4, 2}},
      {{4, 6}, {0, 0}, {1, 1}, {0, 6}},
      {{4, 6}, {9, 0}, {1, 1}, {0, 6}}, // a count of 0 reads nothing, any start
      {{1023}, {1}, {3}, {341}},
      {{2, 3}, {0, 0}, {1, 1}, {2, 3}},
      {{40, 40}, {39, 0}, {-1, 1}, {40, 33}},
      {{6}, {2}, {int64_t(1) << 62}, {1}}, // one element taken: any step
  };
  for (DType dt : kMovedTypes)
    for (const Case &c : cases) {
      HostTensor x = HostTensor::of(dt, c.shape, iota(dt, numel(c.shape)));
      std::vector<double> X = x.values(), want(numel(c.out));
      Shape st = stridesOf(c.shape);
      for (int64_t i = 0; i < numel(c.out); ++i) {
        Shape oc = unravel(i, c.out);
        int64_t src = 0;
        for (size_t d = 0; d < oc.size(); ++d) src += (c.starts[d] + oc[d] * c.steps[d]) * st[d];
        want[i] = X[src];
      }
      expectEqualValues(run1(Step("slice").ints("starts", c.starts).ints("steps", c.steps), {x}, dt, c.out).values(),
                        want, what("slice", dt, c.shape) + " -> " + shapeStr(c.out));
    }
  HostTensor x = f32({5}, iota(plan::F32, 5));
  std::vector<HostTensor> outs{HostTensor::result(plan::F32, {3})};
  expectError(run(Step("slice").ints("starts", {3}).ints("steps", {1}), {x}, outs), "leaves the operand's extent 5");
  expectError(run(Step("slice").ints("starts", {0}).ints("steps", {0}), {x}, outs), "leaves the operand's extent");
  expectError(run(Step("slice").ints("starts", {1}).ints("steps", {-1}), {x}, outs), "leaves the operand's extent");
  // Steps whose product with the count wraps 64 bits back "into" the
  // extent: 2 * (2^62 + 1) = 2 mod 2^64, and 7 * (7^-1 mod 2^64) = 1.
  expectError(run(Step("slice").ints("starts", {0}).ints("steps", {(int64_t(1) << 62) + 1}), {x}, outs),
              "leaves the operand's extent");
  {
    std::vector<HostTensor> eight{HostTensor::result(plan::F32, {8})};
    HostTensor y = f32({24}, iota(plan::F32, 24));
    expectError(run(Step("slice").ints("starts", {0}).ints("steps", {int64_t(0x6DB6DB6DB6DB6DB7)}), {y}, eight),
                "leaves the operand's extent");
  }
  expectError(run(Step("slice").ints("starts", {0, 0}).ints("steps", {1, 1}), {x}, outs), "match the operand's rank");
  expectError(run(Step("slice").ints("starts", {0}), {x}, outs), "integer-list attribute 'steps'");
}

CTS_TEST(ConcatAndSplit, "concat", "split") {
  struct Case {
    std::vector<Shape> pieces;
    int64_t axis;
  };
  const std::vector<Case> cases = {
      {{{2, 1}, {2, 3}, {2, 0}}, 1}, {{{1, 3}, {2, 3}}, 0},     {{{2, 3, 1}, {2, 3, 2}}, -1},
      {{{4, 2}}, 0},                 {{{1023}, {17}}, 0},        {{{0, 2}, {0, 3}}, 1},
      {{{3, 2, 2}, {3, 1, 2}, {3, 4, 2}}, 1},
  };
  for (DType dt : kMovedTypes)
    for (const Case &c : cases) {
      size_t rank = c.pieces[0].size();
      int64_t axis = norm(c.axis, rank);
      Shape whole = c.pieces[0];
      whole[axis] = 0;
      for (const Shape &p : c.pieces) whole[axis] += p[axis];
      std::vector<HostTensor> ins;
      int64_t base = 0;
      for (const Shape &p : c.pieces) {
        std::vector<double> v = iota(dt, numel(p) + base);
        ins.push_back(HostTensor::of(dt, p, std::vector<double>(v.begin() + base, v.end())));
        base += numel(p);
      }
      // Reference: element i of the whole comes from the piece its axis
      // coordinate falls in.
      std::vector<std::vector<double>> pieceValues;
      for (const HostTensor &t : ins) pieceValues.push_back(t.values());
      std::vector<double> want(numel(whole));
      for (int64_t i = 0; i < numel(whole); ++i) {
        Shape wc = unravel(i, whole);
        int64_t a = wc[axis];
        size_t p = 0;
        while (a >= c.pieces[p][axis]) a -= c.pieces[p++][axis];
        wc[axis] = a;
        Shape ps = stridesOf(c.pieces[p]);
        int64_t off = 0;
        for (size_t d = 0; d < rank; ++d) off += wc[d] * ps[d];
        want[i] = pieceValues[p][off];
      }
      std::string label = what("concat", dt, whole) + " axis " + std::to_string(c.axis);
      HostTensor joined = run1(Step("concat").i("axis", c.axis), ins, dt, whole);
      expectEqualValues(joined.values(), want, label);
      // split is the inverse.
      std::vector<HostTensor> parts;
      for (const Shape &p : c.pieces) parts.push_back(HostTensor::result(dt, p));
      absl::Status st = run(Step("split").i("axis", c.axis), {joined}, parts);
      ASSERT_TRUE(st.ok()) << st.message();
      for (size_t p = 0; p < parts.size(); ++p)
        expectEqualValues(parts[p].values(), ins[p].values(), "split piece " + std::to_string(p) + " of " + label);
    }
  HostTensor a = f32({2, 2}, {1, 2, 3, 4}), b = f32({2, 1}, {5, 6});
  std::vector<HostTensor> outs{HostTensor::result(plan::F32, {2, 4})};
  expectError(run(Step("concat").i("axis", 1), {a, b}, outs), "add up to 3 along the axis, not 4");
  outs = {HostTensor::result(plan::F32, {4, 2})};
  expectError(run(Step("concat").i("axis", 0), {a, b}, outs), "off the axis");
  outs = {HostTensor::result(plan::F32, {2, 3})};
  expectError(run(Step("concat").i("axis", 1), {a, i64({2, 1}, {5, 6})}, outs), "operands must be f32, got i64");
  expectError(run(Step("concat").i("axis", 2), {a, b}, outs), "axis 2 is out of range for rank 2");
  outs = {HostTensor::result(plan::F32, {}), HostTensor::result(plan::F32, {})};
  expectError(run(Step("split").i("axis", 0), {f32({}, {1})}, outs), "rank >= 1");
  outs = {HostTensor::result(plan::F32, {2, 1}), HostTensor::result(plan::I64, {2, 1})};
  expectError(run(Step("split").i("axis", 1), {a}, outs), "outputs must share the input's element type");
}

CTS_TEST(Gather, "gather") {
  struct Case {
    Shape data;
    Shape idxShape;
    std::vector<double> idx;
    int64_t axis;
  };
  const std::vector<Case> cases = {
      {{3, 2}, {2}, {-1, 0}, 0},
      {{2, 5, 3}, {2, 2}, {4, 0, -5, 2}, 1},
      {{4}, {}, {2}, 0},
      {{3, 4}, {0}, {}, 1},
      {{1023, 3}, {5}, {1022, 0, 511, -1, 17}, 0},
      {{2, 3, 4}, {3}, {3, 3, 0}, -1},
  };
  for (DType dt : kMovedTypes)
    for (DType it : {plan::I64, plan::I32})
      for (const Case &c : cases) {
        int64_t axis = norm(c.axis, c.data.size());
        HostTensor x = HostTensor::of(dt, c.data, iota(dt, numel(c.data)));
        Shape os(c.data.begin(), c.data.begin() + axis);
        os.insert(os.end(), c.idxShape.begin(), c.idxShape.end());
        os.insert(os.end(), c.data.begin() + axis + 1, c.data.end());
        int64_t outer = 1, inner = 1, dim = c.data[axis], n = numel(c.idxShape);
        for (int64_t d = 0; d < axis; ++d) outer *= c.data[d];
        for (size_t d = axis + 1; d < c.data.size(); ++d) inner *= c.data[d];
        std::vector<double> X = x.values(), want;
        for (int64_t o = 0; o < outer; ++o)
          for (int64_t j = 0; j < n; ++j)
            for (int64_t i = 0; i < inner; ++i) {
              int64_t v = static_cast<int64_t>(c.idx[j]);
              want.push_back(X[(o * dim + (v < 0 ? v + dim : v)) * inner + i]);
            }
        HostTensor o = run1(Step("gather").i("axis", c.axis), {x, HostTensor::of(it, c.idxShape, c.idx)}, dt, os);
        expectEqualValues(o.values(), want, what("gather", dt, c.data) + " indices " + ds::rt::dtypeName(it));
      }
  HostTensor x = f32({3, 2}, {0, 1, 2, 3, 4, 5});
  std::vector<HostTensor> outs{HostTensor::result(plan::F32, {2, 2})};
  absl::Status st = run(Step("gather").i("axis", 0), {x, i64({2}, {0, 3})}, outs);
  EXPECT_EQ(st.code(), absl::StatusCode::kOutOfRange) << st.message();
  expectError(st, "index 3 at position 1 is out of range for a dimension of 3");
  expectError(run(Step("gather").i("axis", 0), {x, i32({2}, {-4, 0})}, outs), "index -4");
  expectError(run(Step("gather").i("axis", 0), {x, f32({2}, {0, 1})}, outs), "indices must be i32 or i64, got f32");
  expectError(run(Step("gather").i("axis", 1), {x, i64({2}, {0, 1})}, outs), "result must have shape");
  outs = {HostTensor::result(plan::F32, {})};
  expectError(run(Step("gather").i("axis", 0), {f32({}, {1}), i64({}, {0})}, outs), "rank >= 1");
}

namespace {
/// Offset in `data` (shape `ds`) that element `flat` of an index tensor of
/// shape `is` selects along `axis`.
int64_t elementOffset(const Shape &ds, const Shape &is, int64_t axis, int64_t flat, double idx) {
  Shape c = unravel(flat, is), st = stridesOf(ds);
  int64_t v = static_cast<int64_t>(idx);
  c[axis] = v < 0 ? v + ds[axis] : v;
  int64_t off = 0;
  for (size_t d = 0; d < c.size(); ++d) off += c[d] * st[d];
  return off;
}
} // namespace

CTS_TEST(GatherElements, "gather_elements", "gather_elements_grad") {
  struct Case {
    Shape data, idxShape;
    std::vector<double> idx;
    int64_t axis;
  };
  const std::vector<Case> cases = {
      {{3, 4}, {3, 2}, {3, 0, -1, 1, 2, 2}, 1},
      {{3, 4}, {2, 4}, {0, 1, 2, -3, 2, 2, 0, 0}, 0},
      {{4, 5}, {2, 3}, {3, 3, 0, 1, -4, 2}, 0},
      {{2, 3, 4}, {2, 3, 1}, {0, 1, 2, 3, -1, -2}, 2},
      {{5}, {0}, {}, 0},
  };
  for (const Case &c : cases)
    for (DType it : {plan::I64, plan::I32}) {
      int64_t axis = norm(c.axis, c.data.size());
      HostTensor idx = HostTensor::of(it, c.idxShape, c.idx);
      for (DType dt : kMovedTypes) {
        HostTensor x = HostTensor::of(dt, c.data, iota(dt, numel(c.data)));
        std::vector<double> X = x.values(), want;
        for (int64_t i = 0; i < numel(c.idxShape); ++i) want.push_back(X[elementOffset(c.data, c.idxShape, axis, i, c.idx[i])]);
        expectEqualValues(run1(Step("gather_elements").i("axis", c.axis), {x, idx}, dt, c.idxShape).values(), want,
                          what("gather_elements", dt, c.data));
      }
      // The gradient scatters dy back, adding where indices repeat.
      auto dyv = sample(numel(c.idxShape), -1, 1, 50);
      HostTensor dy = f32(c.idxShape, dyv);
      std::vector<double> want(numel(c.data), 0.0);
      for (int64_t i = 0; i < numel(c.idxShape); ++i)
        want[elementOffset(c.data, c.idxShape, axis, i, c.idx[i])] += dy.values()[i];
      expectClose(run1(Step("gather_elements_grad").i("axis", c.axis), {idx, dy}, plan::F32, c.data).values(),
                  roundTo(plan::F32, want), 1e-6, 1e-7, "gather_elements_grad " + shapeStr(c.data));
    }
  HostTensor x = f32({2, 4}, iota(plan::F32, 8));
  std::vector<HostTensor> outs{HostTensor::result(plan::F32, {2, 1})};
  absl::Status st = run(Step("gather_elements").i("axis", 1), {x, i64({2, 1}, {0, 4})}, outs);
  EXPECT_EQ(st.code(), absl::StatusCode::kOutOfRange) << st.message();
  expectError(st, "index 4 is out of range for 4");
  outs = {HostTensor::result(plan::F32, {3, 1})};
  expectError(run(Step("gather_elements").i("axis", 1), {x, i64({3, 1}, {0, 0, 0})}, outs),
              "indices are larger than the data off the axis");
  outs = {HostTensor::result(plan::F32, {2})};
  expectError(run(Step("gather_elements").i("axis", 0), {x, i64({2}, {0, 0})}, outs), "one rank");
  outs = {HostTensor::result(plan::F32, {2, 4})};
  expectError(run(Step("gather_elements_grad").i("axis", 1), {i64({2, 1}, {0, 9}), f32({2, 1}, {1, 1})}, outs),
              "index 9 is out of range");
  expectError(run(Step("gather_elements_grad").i("axis", 1), {i64({2, 1}, {0, 1}), f64({2, 1}, {1, 1})}, outs),
              "dy must be f32");
}

CTS_TEST(ScatterElements, "scatter_elements") {
  // Updates apply in index order: for "none" the last duplicate wins.
  Shape ds{3, 4}, is{2, 3};
  std::vector<double> idx = {1, 1, -1, 0, 3, 3};
  for (const std::string red : {"none", "add", "mul", "max", "min"})
    for (DType dt : {plan::F32, plan::F64, plan::I32, plan::I64})
      for (int64_t axis : {1, 0, -1}) {
        int64_t a = norm(axis, 2);
        std::vector<double> iv = idx;
        if (a == 0)
          for (auto &v : iv) v = std::fmod(v, 3); // in range for the 3 rows
        HostTensor data = HostTensor::of(dt, ds, sample(12, -4, 4, 51));
        HostTensor upd = HostTensor::of(dt, is, sample(6, -4, 4, 52));
        if (dt == plan::I32 || dt == plan::I64) {
          data = HostTensor::of(dt, ds, {3, -1, 4, 1, -5, 9, 2, -6, 5, 3, -5, 8});
          upd = HostTensor::of(dt, is, {2, -7, 1, 8, -2, 8});
        }
        std::vector<double> want = data.values(), U = upd.values();
        for (int64_t i = 0; i < numel(is); ++i) {
          double &d = want[elementOffset(ds, is, a, i, iv[i])];
          if (red == "none") d = U[i];
          else if (red == "add") d += U[i];
          else if (red == "mul") d *= U[i];
          else if (red == "max") d = std::max(d, U[i]);
          else d = std::min(d, U[i]);
        }
        HostTensor o = run1(Step("scatter_elements").i("axis", axis).s("reduction", red),
                            {data, HostTensor::of(plan::I64, is, iv), upd}, dt, ds);
        // Repeated indices combine step by step in the element type.
        double tol = dt == plan::F32 ? 1e-6 : 1e-15;
        expectClose(o.values(), roundTo(dt, want), tol, tol,
                    "scatter_elements " + red + " " + ds::rt::dtypeName(dt) + " axis " + std::to_string(axis));
      }
  // "none" moves bytes: any element type, i32 indices.
  for (DType dt : kMovedTypes) {
    HostTensor data = HostTensor::of(dt, {4}, iota(dt, 4)), upd = HostTensor::of(dt, {2}, {1, 1});
    std::vector<double> want = data.values();
    want[3] = upd.values()[0];
    want[0] = upd.values()[1];
    expectEqualValues(run1(Step("scatter_elements").i("axis", 0).s("reduction", "none"),
                           {data, i32({2}, {-1, 0}), upd}, dt, {4}).values(),
                      want, what("scatter_elements none", dt, {4}));
  }
  HostTensor data = f32({4}, {0, 0, 0, 0});
  std::vector<HostTensor> outs{HostTensor::result(plan::F32, {4})};
  expectError(run(Step("scatter_elements").i("axis", 0).s("reduction", "sum"), {data, i64({1}, {0}), f32({1}, {1})}, outs),
              "reduction must be none, add, mul, max or min, not 'sum'");
  expectError(run(Step("scatter_elements").i("axis", 0).s("reduction", "add"), {data, i64({2}, {0, 1}), f32({1}, {1})}, outs),
              "updates must have shape");
  absl::Status st = run(Step("scatter_elements").i("axis", 0).s("reduction", "add"), {data, i64({1}, {4}), f32({1}, {1})}, outs);
  EXPECT_EQ(st.code(), absl::StatusCode::kOutOfRange) << st.message();
  outs = {HostTensor::result(plan::BOOL, {2})};
  expectError(run(Step("scatter_elements").i("axis", 0).s("reduction", "add"),
                  {boolean({2}, {0, 1}), i64({1}, {0}), boolean({1}, {1})}, outs),
              "does not support element type bool");
}

CTS_TEST(Expand, "expand") {
  const std::vector<std::pair<Shape, Shape>> cases = {
      {{3, 1}, {2, 3, 4}}, {{}, {5}},   {{1}, {0}},   {{4}, {2, 4}},
      {{2, 1, 3}, {2, 1023, 3}}, {{1, 1}, {1, 1}}, {{5, 1, 1}, {5, 2, 17}}, {{}, {}},
  };
  for (DType dt : kMovedTypes)
    for (const auto &[from, to] : cases) {
      HostTensor x = HostTensor::of(dt, from, iota(dt, numel(from)));
      std::vector<double> X = x.values(), want(numel(to));
      for (int64_t i = 0; i < numel(to); ++i) want[i] = X[broadcastSource(to, from, i)];
      expectEqualValues(run1(Step("expand"), {x}, dt, to).values(), want, what("expand", dt, from) + " -> " + shapeStr(to));
    }
  std::vector<HostTensor> outs{HostTensor::result(plan::F32, {4})};
  expectError(run(Step("expand"), {f32({3}, {1, 2, 3})}, outs), "does not broadcast");
  outs = {HostTensor::result(plan::F32, {3})};
  expectError(run(Step("expand"), {f32({2, 3}, iota(plan::F32, 6))}, outs), "higher rank");
  expectError(run(Step("expand"), {i32({3}, {1, 2, 3})}, outs), "operands must be f32, got i32");
}

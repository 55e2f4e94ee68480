// Convolution and pooling over [N, C, spatial...] in 1, 2 and 3 spatial
// dimensions, with padding, strides, dilations and groups, and their
// gradients; against direct loops over the windows.
#include <functional>

#include "test/backend-cts/Cts.h"

using namespace cts;

namespace {

struct Geometry {
  Shape in, kernel, strides, dilations, pads; // pads: begins, then ends
  Shape fixedOut = {}; // when set: a result size other than the floor rule's
  Shape out() const {
    if (!fixedOut.empty()) return fixedOut;
    Shape o;
    for (size_t d = 0; d < in.size(); ++d)
      o.push_back((in[d] + pads[d] + pads[d + in.size()] - (dilations[d] * (kernel[d] - 1) + 1)) / strides[d] + 1);
    return o;
  }
  /// Calls f(outPos, kernelPos, inPos or -1 in the padding) for every
  /// window element, positions flattened row-major.
  void forEach(const std::function<void(int64_t, int64_t, int64_t)> &f) const {
    Shape os = out(), inStrides = stridesOf(in);
    for (int64_t p = 0; p < numel(os); ++p) {
      Shape pc = unravel(p, os);
      for (int64_t k = 0; k < numel(kernel); ++k) {
        Shape kc = unravel(k, kernel);
        int64_t off = 0;
        for (size_t d = 0; d < in.size() && off >= 0; ++d) {
          int64_t x = pc[d] * strides[d] - pads[d] + kc[d] * dilations[d];
          off = (x < 0 || x >= in[d]) ? -1 : off + x * inStrides[d];
        }
        f(p, k, off);
      }
    }
  }
  Step attrs(const std::string &kernel) const {
    return Step(kernel).ints("strides", strides).ints("dilations", dilations).ints("pads", pads);
  }
};

Shape cat(Shape a, const Shape &b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

struct ConvCase {
  int64_t n, c, m, group;
  Geometry g;
  bool bias;
};

const std::vector<ConvCase> kConvCases = {
    {2, 4, 6, 2, {{7, 6}, {3, 3}, {2, 1}, {1, 2}, {1, 0, 1, 2}}, true},
    {1, 3, 4, 1, {{17}, {5}, {1}, {1}, {2, 2}}, false},
    {1, 2, 3, 1, {{4, 4, 3}, {2, 2, 2}, {1, 2, 1}, {1, 1, 1}, {0, 0, 0, 0, 0, 0}}, true},
    {1, 3, 3, 3, {{5, 5}, {3, 3}, {1, 1}, {1, 1}, {1, 1, 1, 1}}, false}, // depthwise
    {0, 2, 2, 1, {{4, 4}, {3, 3}, {1, 1}, {1, 1}, {0, 0, 0, 0}}, true},  // empty batch
    {2, 1, 1, 1, {{1, 1}, {1, 1}, {1, 1}, {1, 1}, {0, 0, 0, 0}}, true},
    // 3x3, stride 1, >= 14x14 outputs, >= 16 channels: with constant
    // weights the CPU backend runs it as a Winograd convolution.
    {1, 32, 48, 1, {{16, 16}, {3, 3}, {1, 1}, {1, 1}, {1, 1, 1, 1}}, true},
};

} // namespace

CTS_TEST(Conv, "conv", "conv_grad") {
  // bf16/f16 (mixed precision) convolutions sum in f32 and round once: within
  // half an ulp of the exact result of the 16-bit operands. Their weights
  // are marked constant, as an inference plan's are.
  for (DType dt : {plan::F32, plan::BF16, plan::F16})
  for (const ConvCase &c : kConvCases) {
    const double tol = dt == plan::F32 ? 1e-4 : dt == plan::BF16 ? 8e-3 : 1e-3;
    const Geometry &g = c.g;
    int64_t cg = c.c / c.group, mg = c.m / c.group, inSize = numel(g.in), outSize = numel(g.out()),
            kSize = numel(g.kernel);
    Shape xs = cat({c.n, c.c}, g.in), ws = cat({c.m, cg}, g.kernel), ys = cat({c.n, c.m}, g.out());
    HostTensor x = HostTensor::of(dt, xs, sample(numel(xs), -1, 1, 80)),
               w = HostTensor::of(dt, ws, sample(numel(ws), -1, 1, 81));
    HostTensor b = HostTensor::of(dt, {c.m}, sample(c.m, -1, 1, 82)),
               dy = HostTensor::of(dt, ys, sample(numel(ys), -1, 1, 83));
    std::vector<double> X = x.values(), W = w.values(), B = b.values(), DY = dy.values();
    std::vector<double> y(numel(ys), 0.0), dx(numel(xs), 0.0), dw(numel(ws), 0.0);
    for (int64_t n = 0; n < c.n; ++n)
      for (int64_t m = 0; m < c.m; ++m) {
        int64_t grp = m / mg;
        for (int64_t p = 0; p < outSize; ++p) y[(n * c.m + m) * outSize + p] = c.bias ? B[m] : 0;
        for (int64_t ci = 0; ci < cg; ++ci) {
          int64_t ch = grp * cg + ci;
          g.forEach([&](int64_t p, int64_t k, int64_t off) {
            if (off < 0) return;
            double xv = X[(n * c.c + ch) * inSize + off], wv = W[(m * cg + ci) * kSize + k];
            double dyv = DY[(n * c.m + m) * outSize + p];
            y[(n * c.m + m) * outSize + p] += xv * wv;
            dx[(n * c.c + ch) * inSize + off] += wv * dyv;
            dw[(m * cg + ci) * kSize + k] += xv * dyv;
          });
        }
      }
    std::string what = "conv " + std::string(ds::rt::dtypeName(dt)) + " " + shapeStr(xs) + " * " +
                       shapeStr(ws) + " group " + std::to_string(c.group);
    std::vector<HostTensor> ins{x, w};
    if (c.bias) ins.push_back(b);
    Step conv = g.attrs("conv").i("group", c.group);
    if (dt != plan::F32) conv.i("constant_weight", 1);
    expectClose(run1(conv, ins, dt, ys).values(), y, tol, tol / 10, what);
    // Constant f32 weights: packed once at load (Winograd where it pays).
    if (dt == plan::F32)
      expectClose(run1(conv.i("constant_weight", 1), ins, dt, ys).values(), y, tol, tol / 10,
                  what + " constant weight");
    std::vector<HostTensor> outs{HostTensor::result(dt, xs), HostTensor::result(dt, ws)};
    absl::Status st = run(g.attrs("conv_grad").i("group", c.group), {x, w, dy}, outs);
    ASSERT_TRUE(st.ok()) << st.message();
    expectClose(outs[0].values(), dx, tol, tol / 10, what + " d_input");
    expectClose(outs[1].values(), dw, tol, tol / 10, what + " d_weight");
  }
  Geometry g{{4, 4}, {3, 3}, {1, 1}, {1, 1}, {0, 0, 0, 0}};
  HostTensor x = f32({1, 4, 4, 4}, sample(64, -1, 1, 84));
  auto err = [&](Step step, std::vector<HostTensor> ins, Shape out, const std::string &needle) {
    std::vector<HostTensor> outs{HostTensor::result(plan::F32, out)};
    expectError(run(step, ins, outs), needle);
  };
  HostTensor w3 = f32({2, 3, 3, 3}, sample(54, -1, 1, 85));
  err(g.attrs("conv").i("group", 1), {x, w3}, {1, 2, 2, 2}, "group does not divide the channels");
  HostTensor w = f32({2, 4, 3, 3}, sample(72, -1, 1, 86));
  err(g.attrs("conv").i("group", 1), {x, w}, {1, 3, 2, 2}, "result must have shape");
  err(g.attrs("conv").i("group", 1), {x, w}, {1, 2, 9, 9}, "result extent does not fit the windows");
  err(g.attrs("conv").i("group", 1), {x, w, f32({3}, {1, 2, 3})}, {1, 2, 2, 2}, "bias must have shape");
  err(Step("conv").ints("strides", {1}).ints("dilations", {1, 1}).ints("pads", {0, 0, 0, 0}).i("group", 1), {x, w},
      {1, 2, 2, 2}, "window attributes do not match the spatial rank");
  err(Step("conv").ints("strides", {0, 1}).ints("dilations", {1, 1}).ints("pads", {0, 0, 0, 0}).i("group", 1), {x, w},
      {1, 2, 2, 2}, "must be positive");
  err(g.attrs("conv"), {x, w}, {1, 2, 2, 2}, "integer attribute 'group'");
  err(g.attrs("conv").i("group", 1), {f32({4, 4}, sample(16, -1, 1, 87)), f32({2, 4}, sample(8, -1, 1, 88))}, {4, 2},
      "input must be [N, C, spatial...]");
  err(g.attrs("conv").i("group", 1), {x, f64({2, 4, 3, 3}, sample(72, -1, 1, 86))}, {1, 2, 2, 2}, "operand must be f32");
}

namespace {

struct PoolCase {
  int64_t n, c;
  Geometry g;
};

const std::vector<PoolCase> kPoolCases = {
    {2, 3, {{7, 6}, {3, 2}, {2, 2}, {1, 1}, {1, 0, 1, 1}}},
    {1, 2, {{9}, {3}, {1}, {2}, {2, 2}}},
    {1, 1, {{5}, {2}, {2}, {1}, {0, 0}, {3}}}, // ceil mode: the last window hangs past the end
    {1, 1, {{2}, {1}, {1}, {1}, {1, 1}}},  // windows wholly in the padding
    {1, 2, {{4, 3, 5}, {2, 2, 3}, {2, 1, 2}, {1, 1, 1}, {0, 1, 1, 0, 0, 1}}},
    {0, 2, {{4, 4}, {2, 2}, {2, 2}, {1, 1}, {0, 0, 0, 0}}},
};

/// Reference pooling of one [N, C, spatial] tensor: value and, for max,
/// the flat input index of each window's first maximum (-1 if none).
void poolRef(const PoolCase &c, const std::vector<double> &X, bool isMax, bool includePad,
             std::vector<double> &y, std::vector<int64_t> &argmax, std::vector<double> &counts) {
  const Geometry &g = c.g;
  int64_t inSize = numel(g.in), outSize = numel(g.out());
  y.assign(c.n * c.c * outSize, 0);
  argmax.assign(y.size(), -1);
  counts.assign(y.size(), 0);
  std::vector<double> inside(y.size(), 0), sum(y.size(), 0);
  for (int64_t nc = 0; nc < c.n * c.c; ++nc)
    g.forEach([&](int64_t p, int64_t k, int64_t off) {
      int64_t o = nc * outSize + p;
      if (off >= 0) {
        double v = X[nc * inSize + off];
        int64_t &at = argmax[o];
        double best = at >= 0 ? X[at] : 0;
        if (at < 0 || v > best || (std::isnan(v) && !std::isnan(best))) at = nc * inSize + off;
        sum[o] += v;
        inside[o] += 1;
      }
      // count_include_pad divides by the part of the window inside the
      // padded input (not past the end padding).
      Shape pc = unravel(p, g.out()), kc = unravel(k, g.kernel);
      bool inPadded = true;
      for (size_t d = 0; d < g.in.size(); ++d) {
        int64_t x = pc[d] * g.strides[d] - g.pads[d] + kc[d] * g.dilations[d];
        inPadded = inPadded && x >= -g.pads[d] && x < g.in[d] + g.pads[d + g.in.size()];
      }
      if (inPadded) counts[o] += 1;
    });
  for (size_t o = 0; o < y.size(); ++o) {
    if (isMax) y[o] = argmax[o] >= 0 ? X[argmax[o]] : -std::numeric_limits<double>::infinity();
    else {
      double div = includePad ? counts[o] : inside[o];
      y[o] = div ? sum[o] / div : 0;
      counts[o] = div;
    }
  }
}

} // namespace

CTS_TEST(Pooling, "pool", "pool_grad") {
  for (const PoolCase &c : kPoolCases) {
    Shape xs = cat({c.n, c.c}, c.g.in), ys = cat({c.n, c.c}, c.g.out());
    auto xv = sample(numel(xs), -4, 4, 90);
    for (auto &v : xv) v = std::round(4 * v) / 4; // ties: the first maximum wins
    HostTensor x = f32(xs, xv), dy = f32(ys, sample(numel(ys), -1, 1, 91));
    std::vector<double> X = x.values(), DY = dy.values();
    for (const std::string kind : {"max", "avg"})
      for (int includePad : {0, 1}) {
        std::vector<double> y, counts;
        std::vector<int64_t> argmax;
        poolRef(c, X, kind == "max", includePad, y, argmax, counts);
        std::string what = "pool " + kind + " " + shapeStr(xs) + " include_pad " + std::to_string(includePad);
        Step step = c.g.attrs("pool").s("kind", kind).ints("kernel", c.g.kernel).i("count_include_pad", includePad);
        expectClose(run1(step, {x}, plan::F32, ys).values(), roundTo(plan::F32, y), 1e-6, 1e-6, what);
        // Gradient: max routes dy to the first maximum, avg spreads it.
        std::vector<double> dx(numel(xs), 0.0);
        int64_t outSize = numel(c.g.out()), inSize = numel(c.g.in);
        for (int64_t nc = 0; nc < c.n * c.c; ++nc)
          c.g.forEach([&](int64_t p, int64_t, int64_t off) {
            int64_t o = nc * outSize + p;
            if (off < 0) return;
            if (kind == "avg") dx[nc * inSize + off] += counts[o] ? DY[o] / counts[o] : 0;
          });
        if (kind == "max")
          for (size_t o = 0; o < argmax.size(); ++o)
            if (argmax[o] >= 0) dx[argmax[o]] += DY[o];
        Step grad = c.g.attrs("pool_grad").s("kind", kind).ints("kernel", c.g.kernel).i("count_include_pad", includePad);
        expectClose(run1(grad, {x, dy}, plan::F32, xs).values(), dx, 1e-5, 1e-6, what + " grad");
      }
  }
  // Max pooling takes any native type; NaN is a maximum, as in PyTorch.
  const double nan = std::nan("");
  Geometry g{{4}, {2}, {2}, {1}, {0, 0}};
  Step maxStep = g.attrs("pool").s("kind", "max").ints("kernel", {2});
  expectClose(run1(maxStep, {f32({1, 1, 4}, {1, nan, 3, 2})}, plan::F32, {1, 1, 2}).values(), {nan, 3}, 0, 0, "max NaN");
  for (DType dt : {plan::I32, plan::I64, plan::F64, plan::U8})
    expectEqualValues(run1(maxStep, {HostTensor::of(dt, {1, 2, 4}, {1, 7, 3, 2, 0, 0, 9, 9})}, dt, {1, 2, 2}).values(),
                      {7, 3, 0, 9}, std::string("max pool ") + ds::rt::dtypeName(dt));
  // A window far longer than its input (a hostile plan's 2^62 taps) costs
  // only the taps inside: rows py..3 of a 4x4 input, max and average.
  const int64_t huge = int64_t{1} << 62;
  std::vector<double> grid(16);
  for (int i = 0; i < 16; ++i) grid[i] = i;
  Geometry tall{{4, 4}, {huge, 2}, {1, 2}, {1, 1}, {0, 0, 0, 0}, {2, 2}};
  expectEqualValues(run1(tall.attrs("pool").s("kind", "max").ints("kernel", {huge, 2}),
                         {f32({1, 1, 4, 4}, grid)}, plan::F32, {1, 1, 2, 2}).values(),
                    {13, 15, 13, 15}, "max pool, 2^62-row window");
  for (int includePad : {0, 1})
    expectClose(run1(tall.attrs("pool").s("kind", "avg").ints("kernel", {huge, 2}).i("count_include_pad", includePad),
                     {f32({1, 1, 4, 4}, grid)}, plan::F32, {1, 1, 2, 2}).values(),
                {6.5, 8.5, 8.5, 10.5}, 0, 0, "avg pool, 2^62-row window");
  Geometry longRow{{4}, {huge}, {1}, {1}, {0, 0}, {2}};
  expectEqualValues(run1(longRow.attrs("pool").s("kind", "max").ints("kernel", {huge}),
                         {f32({1, 1, 4}, {1, 5, 2, 3})}, plan::F32, {1, 1, 2}).values(),
                    {5, 5}, "max pool, 2^62-tap window");
  // avg without count_include_pad: the attribute is optional (excludes pad).
  expectClose(run1(g.attrs("pool").s("kind", "avg").ints("kernel", {2}), {f32({1, 1, 4}, {1, 2, 3, 5})}, plan::F32, {1, 1, 2}).values(),
              {1.5, 4}, 0, 0, "avg default");
  std::vector<HostTensor> outs{HostTensor::result(plan::F32, {1, 1, 2})};
  HostTensor x = f32({1, 1, 4}, {1, 2, 3, 4});
  expectError(run(g.attrs("pool").s("kind", "sum").ints("kernel", {2}), {x}, outs), "kind must be max or avg");
  expectError(run(g.attrs("pool").s("kind", "avg"), {x}, outs), "integer-list attribute 'kernel'");
  expectError(run(g.attrs("pool").s("kind", "avg").ints("kernel", {2}), {i32({1, 1, 4}, {1, 2, 3, 4})}, outs),
              "operand must be f32");
  outs = {HostTensor::result(plan::F32, {1, 2, 2})};
  expectError(run(g.attrs("pool").s("kind", "max").ints("kernel", {2}), {x}, outs), "result must keep N and C");
  outs = {HostTensor::result(plan::F32, {1, 1, 4})};
  expectError(run(g.attrs("pool_grad").s("kind", "avg").ints("kernel", {2}), {x, f32({1, 1, 2}, {1, 1}), x}, outs),
              "takes 2 inputs, got 3");
}

CTS_TEST(MaxPoolIndices, "max_pool_indices") {
  for (const PoolCase &c : kPoolCases)
    for (int colMajor : {0, 1})
      for (DType dt : {plan::F32, plan::I64}) {
        Shape xs = cat({c.n, c.c}, c.g.in), ys = cat({c.n, c.c}, c.g.out());
        auto xv = sample(numel(xs), -4, 4, 92);
        for (auto &v : xv) v = std::round(v);
        HostTensor x = HostTensor::of(dt, xs, xv);
        std::vector<double> y, counts;
        std::vector<int64_t> argmax;
        poolRef(c, x.values(), true, false, y, argmax, counts);
        // Indices are flat over the whole input; column-major (ONNX's
        // storage_order = 1) reverses the spatial dimensions' order.
        int64_t inSize = numel(c.g.in);
        std::vector<double> want;
        for (int64_t at : argmax) {
          if (at < 0) {
            want.push_back(-1);
            continue;
          }
          int64_t nc = at / inSize, off = at % inSize;
          if (colMajor) {
            Shape pc = unravel(off, c.g.in);
            int64_t r = 0, stride = 1;
            for (size_t d = 0; d < pc.size(); ++d) r += pc[d] * stride, stride *= c.g.in[d];
            off = r;
          }
          want.push_back(static_cast<double>(nc * inSize + off));
        }
        Step step = c.g.attrs("max_pool_indices").ints("kernel", c.g.kernel).i("column_major", colMajor);
        expectEqualValues(run1(step, {x}, plan::I64, ys).values(), want,
                          "max_pool_indices " + shapeStr(xs) + " column_major " + std::to_string(colMajor));
      }
  Geometry g{{4}, {2}, {2}, {1}, {0, 0}};
  std::vector<HostTensor> outs{HostTensor::result(plan::I32, {1, 1, 2})};
  HostTensor x = f32({1, 1, 4}, {1, 2, 3, 4});
  expectError(run(g.attrs("max_pool_indices").ints("kernel", {2}).i("column_major", 0), {x}, outs), "result must be i64");
  outs = {HostTensor::result(plan::I64, {1, 1, 2})};
  expectError(run(g.attrs("max_pool_indices").ints("kernel", {2}), {x}, outs), "integer attribute 'column_major'");
}

namespace {

/// [N, C, d...] <-> [N, d..., C] of a host tensor (its values, its type).
HostTensor moveChannels(const HostTensor &t, bool toLast) {
  Shape s = t.shape, o = s;
  if (toLast) std::rotate(o.begin() + 1, o.begin() + 2, o.end());
  else std::rotate(o.begin() + 1, o.end() - 1, o.end());
  const int64_t n = s[0], c = toLast ? s[1] : s.back();
  const int64_t sp = numel(s) / std::max<int64_t>(1, n * c);
  std::vector<double> v = t.values(), r(v.size());
  for (int64_t b = 0; b < n; ++b)
    for (int64_t ch = 0; ch < c; ++ch)
      for (int64_t p = 0; p < sp; ++p) {
        int64_t first = (b * c + ch) * sp + p, last = (b * sp + p) * c + ch;
        if (toLast) r[last] = v[first];
        else r[first] = v[last];
      }
  return HostTensor::of(t.dtype, o, r);
}

} // namespace

// channels_last: the same convolution and pooling on [N, d..., C] buffers
// (what ds-conv-channels-last gives inference plans) equals the
// channels-first result transposed.
CTS_TEST(ChannelsLast, "conv", "pool") {
  for (const ConvCase &c : kConvCases) {
    const Geometry &g = c.g;
    Shape xs = cat({c.n, c.c}, g.in), ws = cat({c.m, c.c / c.group}, g.kernel),
          ys = cat({c.n, c.m}, g.out());
    HostTensor x = f32(xs, sample(numel(xs), -1, 1, 180)), w = f32(ws, sample(numel(ws), -1, 1, 181));
    std::vector<HostTensor> ins{x, w};
    if (c.bias) ins.push_back(f32({c.m}, sample(c.m, -1, 1, 182)));
    Step step = g.attrs("conv").i("group", c.group).f("clip_min", -0.25).f("clip_max", 0.5);
    HostTensor first = run1(step, ins, plan::F32, ys);
    ins[0] = moveChannels(x, true);
    HostTensor last = run1(step.i("channels_last", 1), ins, plan::F32, moveChannels(first, true).shape);
    expectClose(moveChannels(last, false).values(), first.values(), 1e-5, 1e-6,
                "channels_last conv " + shapeStr(xs) + " group " + std::to_string(c.group));
  }
  const double nan = std::nan("");
  for (const PoolCase &c : kPoolCases) {
    Shape xs = cat({c.n, c.c}, c.g.in), ys = cat({c.n, c.c}, c.g.out());
    auto xv = sample(numel(xs), -4, 4, 190);
    for (auto &v : xv) v = std::round(4 * v) / 4; // ties: the first maximum wins
    if (xv.size() > 3) xv[3] = nan;
    HostTensor x = f32(xs, xv);
    for (const std::string kind : {"max", "avg"})
      for (int includePad : {0, 1}) {
        Step step = c.g.attrs("pool").s("kind", kind).ints("kernel", c.g.kernel).i("count_include_pad", includePad);
        HostTensor first = run1(step, {x}, plan::F32, ys);
        HostTensor last = run1(step.i("channels_last", 1), {moveChannels(x, true)}, plan::F32,
                               moveChannels(first, true).shape);
        expectClose(moveChannels(last, false).values(), first.values(), 1e-6, 0,
                    "channels_last pool " + kind + " " + shapeStr(xs));
      }
  }
  Geometry g{{4, 4}, {3, 3}, {1, 1}, {1, 1}, {0, 0, 0, 0}};
  std::vector<HostTensor> outs{HostTensor::result(plan::F32, {1, 2, 2, 2})};
  expectError(run(g.attrs("conv").i("group", 1).i("channels_last", 1),
                  {f32({1, 4, 4, 4}, sample(64, -1, 1, 183)), f32({2, 3, 3, 3}, sample(54, -1, 1, 184))},
                  outs),
              "group does not divide the channels");
  expectError(run(g.attrs("pool").s("kind", "max").ints("kernel", {3, 3}).i("channels_last", 1),
                  {HostTensor::of(plan::I32, {1, 4, 4, 2}, std::vector<double>(32, 1))}, outs),
              "channels_last input must be f32");
}

// addend: clamp(conv(x) + bias + addend), the residual ds-fuse-epilogues
// folds in, channels-first and channels-last, constant weights (oneDNN's
// post-ops) or not: the convolution alone, then the add and the clamp.
// ds.conv's activation hard_swish, x * clamp(x / 6 + 1/2, 0, 1), after the
// addend (MobileNetV3's epilogue, a oneDNN post-op), on inputs whose
// results cross both bends (-3 and 3).
CTS_TEST(ConvHardSwish, "conv") {
  for (const ConvCase &c : kConvCases)
    for (bool last : {false, true})
      for (bool addend : {false, true}) {
        const Geometry &g = c.g;
        Shape xs = cat({c.n, c.c}, g.in), ws = cat({c.m, c.c / c.group}, g.kernel),
              ys = cat({c.n, c.m}, g.out());
        HostTensor x = f32(xs, sample(numel(xs), -3, 3, 210)),
                   w = f32(ws, sample(numel(ws), -1, 1, 211)),
                   r = f32(ys, sample(numel(ys), -2, 2, 212));
        std::vector<HostTensor> ins{x, w};
        if (c.bias) ins.push_back(f32({c.m}, sample(c.m, -1, 1, 213)));
        Step base = g.attrs("conv").i("group", c.group).i("constant_weight", 1);
        HostTensor plain = run1(base, ins, plan::F32, ys);
        std::vector<double> want = plain.values(), rv = r.values();
        for (size_t i = 0; i < want.size(); ++i) {
          double v = want[i] + (addend ? rv[i] : 0.0);
          want[i] = v * std::min(std::max(v / 6 + 0.5, 0.0), 1.0);
        }
        Step step = base.s("activation", "hard_swish");
        if (addend) {
          step.i("addend", 1);
          ins.push_back(r);
        }
        if (last) {
          ins[0] = moveChannels(x, true);
          if (addend) ins.back() = moveChannels(r, true);
        }
        HostTensor got = run1(last ? step.i("channels_last", 1) : step, ins, plan::F32,
                              last ? moveChannels(plain, true).shape : ys);
        expectClose(last ? moveChannels(got, false).values() : got.values(), want, 1e-5, 1e-5,
                    "conv + hard_swish " + shapeStr(xs) + " group " + std::to_string(c.group) +
                        (last ? " channels_last" : "") + (addend ? " addend" : ""));
      }
  Geometry g{{4, 4}, {3, 3}, {1, 1}, {1, 1}, {0, 0, 0, 0}};
  std::vector<HostTensor> outs{HostTensor::result(plan::F32, {1, 2, 2, 2})};
  expectError(run(g.attrs("conv").i("group", 1).s("activation", "gelu"),
                  {f32({1, 3, 4, 4}, sample(48, -1, 1, 214)), f32({2, 3, 3, 3}, sample(54, -1, 1, 215))},
                  outs),
              "activation must be hard_swish");
}

CTS_TEST(ConvAddend, "conv") {
  for (const ConvCase &c : kConvCases)
    for (bool last : {false, true})
      for (bool constant : {false, true})
        for (float hi : {0.75f, INFINITY}) { // a clip, a ReLU
        const Geometry &g = c.g;
        Shape xs = cat({c.n, c.c}, g.in), ws = cat({c.m, c.c / c.group}, g.kernel),
              ys = cat({c.n, c.m}, g.out());
        HostTensor x = f32(xs, sample(numel(xs), -1, 1, 200)),
                   w = f32(ws, sample(numel(ws), -1, 1, 201)),
                   r = f32(ys, sample(numel(ys), -1, 1, 202));
        std::vector<HostTensor> ins{x, w};
        if (c.bias) ins.push_back(f32({c.m}, sample(c.m, -1, 1, 203)));
        Step base = g.attrs("conv").i("group", c.group);
        HostTensor plain = run1(base, ins, plan::F32, ys);
        std::vector<double> want = plain.values(), rv = r.values();
        for (size_t i = 0; i < want.size(); ++i) want[i] = std::min(std::max(want[i] + rv[i], 0.0), double(hi));
        Step step = base.i("addend", 1).f("clip_min", 0);
        if (hi != INFINITY) step.f("clip_max", hi);
        if (constant) step.i("constant_weight", 1);
        ins.push_back(r);
        if (last) {
          ins[0] = moveChannels(x, true);
          ins.back() = moveChannels(r, true);
        }
        HostTensor got = run1(last ? step.i("channels_last", 1) : step, ins, plan::F32,
                              last ? moveChannels(plain, true).shape : ys);
        // Absolute 1e-5: the Winograd case sums 288 products in another
        // order (its error is ~1e-6 of the products' size, not the result's).
        expectClose(last ? moveChannels(got, false).values() : got.values(), want, 1e-5, 1e-5,
                    "conv + addend " + shapeStr(xs) + " group " + std::to_string(c.group) +
                        (last ? " channels_last" : "") + (constant ? " constant weight" : "") +
                        (hi == INFINITY ? " relu" : " clip"));
      }
  Geometry g{{4, 4}, {3, 3}, {1, 1}, {1, 1}, {0, 0, 0, 0}};
  std::vector<HostTensor> outs{HostTensor::result(plan::F32, {1, 2, 2, 2})};
  expectError(run(g.attrs("conv").i("group", 1).i("addend", 1),
                  {f32({1, 3, 4, 4}, sample(48, -1, 1, 204)), f32({2, 3, 3, 3}, sample(54, -1, 1, 205)),
                   f32({1, 2, 2, 3}, sample(12, -1, 1, 206))},
                  outs),
              "addend");
}

// quantized_conv: activations rounded to uint8 with a fixed scale and zero
// point (or a uint8 input taken as it is), an int8 weight with per-channel
// scales, ds.conv's epilogue, an f32 or a uint8 result; against the integer
// sums over the windows (the padding a real zero). Every convolution case,
// channels-first and channels-last, with the weight the plan's own (packed
// once: oneDNN) or not (read at each run: direct loops), zero point 0 and
// not.
CTS_TEST(QuantizedConv, "quantized_conv") {
  unsigned seed = 300;
  for (const ConvCase &c : kConvCases)
    for (int variant = 0; variant < 3; ++variant) {
      // 0: f32 in and out, zero point 0, a clamp; 1: zero point 77, a
      // residual; 2: uint8 in and out, zero point 77.
      const Geometry &g = c.g;
      const int64_t cg = c.c / c.group, mg = c.m / c.group, inSize = numel(g.in),
                    outSize = numel(g.out()), kSize = numel(g.kernel);
      const Shape xs = cat({c.n, c.c}, g.in), ws = cat({c.m, cg}, g.kernel),
                  ys = cat({c.n, c.m}, g.out());
      const float sIn = 0.01f;
      const int zIn = variant == 0 ? 0 : 77;
      std::vector<double> xv = sample(numel(xs), -1, 1, seed++), q(xv.size());
      for (size_t i = 0; i < xv.size(); ++i)
        q[i] = std::min(std::max(std::nearbyint(static_cast<float>(xv[i]) / sIn) + zIn, 0.0f), 255.0f);
      std::vector<double> wv = sample(numel(ws), -127, 127, seed++);
      for (double &v : wv) v = std::round(v);
      std::vector<double> sc = sample(c.m, 0.001, 0.003, seed++), bias = sample(c.m, -1, 1, seed++),
                          add = sample(numel(ys), -1, 1, seed++);
      for (double &v : sc) v = static_cast<float>(v);
      std::vector<double> want(numel(ys));
      for (int64_t n = 0; n < c.n; ++n)
        for (int64_t m = 0; m < c.m; ++m) {
          const int64_t grp = m / mg;
          std::vector<int64_t> acc(outSize, 0);
          for (int64_t ci = 0; ci < cg; ++ci)
            g.forEach([&](int64_t p, int64_t k, int64_t off) {
              if (off < 0) return;
              acc[p] += static_cast<int64_t>(q[(n * c.c + grp * cg + ci) * inSize + off] - zIn) *
                        static_cast<int64_t>(wv[(m * cg + ci) * kSize + k]);
            });
          for (int64_t p = 0; p < outSize; ++p) {
            const int64_t i = (n * c.m + m) * outSize + p;
            double v = sIn * sc[m] * static_cast<double>(acc[p]) + (c.bias ? bias[m] : 0);
            if (variant == 0) v = std::min(std::max(v, -0.25), 0.5);
            if (variant == 1) v += add[i];
            if (variant == 2) v = std::min(std::max(std::nearbyint(v / 0.02) + 9, 0.0), 255.0);
            want[i] = v;
          }
        }
      HostTensor x = variant == 2 ? HostTensor::of(plan::U8, xs, q) : f32(xs, xv);
      HostTensor addend = f32(ys, add);
      const DType outType = variant == 2 ? plan::U8 : plan::F32;
      for (bool last : {false, true})
        for (bool constant : {true, false}) {
          Step step = g.attrs("quantized_conv").i("group", c.group).f("input_scale", sIn).i("input_zero_point", zIn);
          std::vector<HostTensor> ins{last ? moveChannels(x, true) : x,
                                      HostTensor::of(plan::I8, ws, wv), f32({c.m}, sc)};
          if (c.bias) {
            step.i("bias", 1);
            ins.push_back(f32({c.m}, bias));
          }
          if (variant == 0) step.f("clip_min", -0.25).f("clip_max", 0.5);
          if (variant == 1) {
            step.i("addend", 1);
            ins.push_back(last ? moveChannels(addend, true) : addend);
          }
          if (variant == 2) step.f("output_scale", 0.02).i("output_zero_point", 9);
          if (last) step.i("channels_last", 1);
          if (constant) step.i("constant_weight", 1);
          HostTensor y = run1(step, ins, outType, last ? moveChannels(HostTensor::result(outType, ys), true).shape : ys);
          std::vector<double> got = (last ? moveChannels(y, false) : y).values();
          const std::string what = "quantized_conv " + shapeStr(xs) + " * " + shapeStr(ws) + " group " +
                                   std::to_string(c.group) + " variant " + std::to_string(variant) +
                                   (last ? " channels-last" : "") + (constant ? " packed" : "");
          if (variant == 2) // a requantization may land on a half and round the other way
            expectClose(got, want, 0, 1.0, what);
          else
            expectClose(got, want, 1e-4, 1e-5, what);
        }
    }
  // Errors: a uint8 result with an addend; a zero point past uint8.
  Geometry g{{4, 4}, {3, 3}, {1, 1}, {1, 1}, {0, 0, 0, 0}};
  HostTensor x = f32({1, 2, 4, 4}, sample(32, -1, 1, 390));
  HostTensor w = HostTensor::of(plan::I8, {2, 2, 3, 3}, std::vector<double>(36, 1));
  HostTensor s = f32({2}, {0.1, 0.1});
  std::vector<HostTensor> outs{HostTensor::result(plan::U8, {1, 2, 2, 2})};
  Step base = g.attrs("quantized_conv").i("group", 1).f("input_scale", 0.1);
  expectError(run(Step(base).i("input_zero_point", 256), {x, w, s}, outs),
              "input_zero_point in [0, 255]");
  expectError(run(Step(base).i("input_zero_point", 0).f("output_scale", 0.1).i("output_zero_point", 0)
                      .i("addend", 1),
                  {x, w, s, f32({1, 2, 2, 2}, std::vector<double>(8, 0))}, outs),
              "no addend or activation");
}

// quantized_matmul and dynamic_quantize against references computed here:
// int8 and int4 weights (per channel and group-wise, with and without
// zero points), weight-only and dynamically quantized activations (per
// row, per tensor as ONNX's DynamicQuantizeLinear), row counts that take
// each path (a decode step's few rows, many), columns that are no multiple
// of 16, the epilogue, an addend in place.
#include "test/backend-cts/Cts.h"

using namespace cts;

namespace {

/// ONNX DynamicQuantizeLinear of all of `x`: the uint8 values, scale, zero point.
void dynamicQuantize(const std::vector<float> &x, std::vector<double> &q, float &scale,
                     uint8_t &zero) {
  float lo = 0, hi = 0;
  for (float v : x) lo = std::min(lo, v), hi = std::max(hi, v);
  scale = (hi - lo) / 255.0f;
  zero = scale == 0 ? 0 : static_cast<uint8_t>(std::min(std::max(std::nearbyint(0.0f - lo / scale), 0.0f), 255.0f));
  q.resize(x.size());
  for (size_t i = 0; i < x.size(); ++i)
    q[i] = scale == 0 ? zero
                      : std::min(std::max(std::nearbyint(x[i] / scale) + zero, 0.0f), 255.0f);
}

struct QCase {
  int64_t rows, k, n;
  int bits = 8;
  int64_t group = 0;
  std::string act = "none"; // none, dynamic_per_row, dynamic_per_tensor
  bool zeroPoint = false, bias = false, addend = false, inPlace = false;
  std::string activation = "none";
  bool round = false; // round_scale: the result rounded to a uint8 grid and back
};

void checkQuantized(BackendCts &t, const QCase &c, unsigned seed) {
  const int64_t groups = c.group ? c.k / c.group : 1, g = c.group ? c.group : c.k;
  std::vector<double> xv = sample(c.rows * c.k, -2, 2, seed);
  std::vector<float> x(xv.begin(), xv.end());
  // Quantized weight values, scales, zero points.
  std::vector<double> wq(c.n * c.k), scale(c.n * groups), zp(c.n * groups, c.bits == 4 ? 8 : 0);
  std::vector<double> raw = sample(c.n * c.k, 0, 1, seed + 1), sc = sample(c.n * groups, 0.01, 0.1, seed + 2);
  for (int64_t i = 0; i < c.n * c.k; ++i)
    wq[i] = c.bits == 8 ? std::floor(raw[i] * 255) - 128 : std::floor(raw[i] * 16);
  for (int64_t i = 0; i < c.n * groups; ++i) {
    scale[i] = static_cast<float>(sc[i]);
    if (c.zeroPoint) zp[i] = c.bits == 8 ? static_cast<int>(i % 7) - 3 : 5 + i % 6;
  }
  HostTensor weight;
  if (c.bits == 8) {
    weight = HostTensor::of(plan::I8, {c.n, c.k}, wq);
  } else {
    std::vector<double> packed(c.n * c.k / 2);
    for (int64_t i = 0; i < c.n * c.k; i += 2) packed[i / 2] = wq[i] + 16 * wq[i + 1];
    weight = HostTensor::of(plan::U8, {c.n, c.k / 2}, packed);
  }
  const Shape scaleShape = c.group ? Shape{c.n, groups} : Shape{c.n};
  // x' as the op defines it.
  std::vector<double> xd(x.size());
  if (c.act == "dynamic_per_row") {
    for (int64_t r = 0; r < c.rows; ++r) {
      float amax = 0;
      for (int64_t i = 0; i < c.k; ++i) amax = std::max(amax, std::fabs(x[r * c.k + i]));
      const float s = amax > 0 ? amax / 127.0f : 1.0f, inv = 1.0f / s;
      for (int64_t i = 0; i < c.k; ++i) xd[r * c.k + i] = std::nearbyint(x[r * c.k + i] * inv) * s;
    }
  } else if (c.act == "static_per_tensor") { // QuantizeLinear to uint8: scale 1/64, zero point 100
    for (size_t i = 0; i < x.size(); ++i)
      xd[i] = (std::min(std::max(std::nearbyint(x[i] / 0.015625f) + 100, 0.0f), 255.0f) - 100) *
              0.015625;
  } else if (c.act == "dynamic_per_tensor") {
    std::vector<double> q;
    float s;
    uint8_t z;
    dynamicQuantize(x, q, s, z);
    for (size_t i = 0; i < x.size(); ++i) xd[i] = (q[i] - z) * s;
  } else {
    xd.assign(x.begin(), x.end());
  }
  std::vector<double> bias = sample(c.n, -1, 1, seed + 3), add = sample(c.rows * c.n, -1, 1, seed + 4);
  std::vector<double> want(c.rows * c.n);
  for (int64_t r = 0; r < c.rows; ++r)
    for (int64_t col = 0; col < c.n; ++col) {
      double acc = 0;
      for (int64_t kk = 0; kk < c.k; ++kk) {
        const int64_t gi = col * groups + kk / g;
        acc += xd[r * c.k + kk] * (wq[col * c.k + kk] - zp[gi]) * scale[gi];
      }
      double v = acc + (c.bias ? bias[col] : 0);
      if (c.activation == "relu") v = std::max(v, 0.0);
      v = c.addend ? v + add[r * c.n + col] : v;
      if (c.round) // round_scale 1/8, round_zero_point 128
        v = (std::min(std::max(std::nearbyint(static_cast<float>(v) / 0.125f) + 128, 0.0f), 255.0f) -
             128) * 0.125;
      want[r * c.n + col] = v;
    }
  // Repacked at load (constant_weight: a plan's own weight) and read as it
  // is (a weight fetched from host memory each run).
  for (bool constant : {true, false}) {
    Step step("quantized_matmul");
    if (constant) step.i("constant_weight", 1);
    step.i("bits", c.bits);
    if (c.group) step.i("group_size", c.group);
    if (c.act != "none") step.s("activation_quant", c.act);
    if (c.act == "static_per_tensor") step.f("input_scale", 0.015625).i("input_zero_point", 100);
    if (c.round) step.f("round_scale", 0.125).i("round_zero_point", 128);
    if (c.activation != "none") step.s("activation", c.activation);
    std::vector<HostTensor> ins{HostTensor::of(plan::F32, {c.rows, c.k}, xv), weight,
                                HostTensor::of(plan::F32, scaleShape, scale)};
    if (c.zeroPoint) {
      step.i("zero_point", 1);
      ins.push_back(HostTensor::of(c.bits == 8 ? plan::I8 : plan::U8, scaleShape, zp));
    }
    if (c.bias) {
      step.i("bias", 1);
      ins.push_back(HostTensor::of(plan::F32, {c.n}, bias));
    }
    if (c.addend) {
      step.i("addend", 1).s("combine", "add");
      ins.push_back(HostTensor::of(plan::F32, {c.rows, c.n}, add));
    }
    std::vector<HostTensor> outs{HostTensor::result(plan::F32, {c.rows, c.n})};
    std::vector<int> alias;
    if (c.inPlace) alias.push_back(static_cast<int>(ins.size()) - 1);
    ASSERT_TRUE(t.run(step, ins, outs, alias).ok());
    expectClose(outs[0].values(), want, 2e-4, 2e-4,
                "quantized_matmul int" + std::to_string(c.bits) + " group " +
                    std::to_string(c.group) + " " + c.act + " rows " + std::to_string(c.rows) +
                    " n " + std::to_string(c.n) + (c.zeroPoint ? " zero points" : "") +
                    (c.inPlace ? " in place" : "") + (constant ? "" : " unpacked"));
  }
}

} // namespace

CTS_TEST(QuantizedMatmulWeightsAndActivations, "quantized_matmul") {
  unsigned seed = 70;
  // Rows taking each path: a decode step's few (1, 5, 16) and many (40).
  for (int64_t rows : {1, 5, 16, 40})
    for (int64_t n : {37, 64}) {
      for (const char *act : {"none", "dynamic_per_row", "dynamic_per_tensor", "static_per_tensor"})
        checkQuantized(*this, QCase{rows, 64, n, 8, 0, act}, seed++);
      // A QDQ product: static activations, bias, the result rounded.
      checkQuantized(*this, QCase{rows, 64, n, 8, 0, "static_per_tensor", false, true, false, false,
                                  "none", true},
                     seed++);
      checkQuantized(*this, QCase{rows, 64, n, 8, 16}, seed++);
      checkQuantized(*this, QCase{rows, 64, n, 8, 16, "none", true}, seed++);
      checkQuantized(*this, QCase{rows, 64, n, 4, 32}, seed++);
      checkQuantized(*this, QCase{rows, 64, n, 4, 0, "none", true}, seed++);
      checkQuantized(*this, QCase{rows, 64, n, 4, 16, "dynamic_per_row"}, seed++);
    }
  // The epilogue, and an addend sharing the result's bytes.
  for (int64_t rows : {3, 40})
    for (bool inPlace : {false, true}) {
      checkQuantized(*this, QCase{rows, 64, 48, 8, 0, "dynamic_per_row", false, true, true, inPlace, "relu"},
                     seed++);
      checkQuantized(*this, QCase{rows, 64, 48, 4, 32, "none", false, true, true, inPlace, "relu"},
                     seed++);
    }
}

CTS_TEST(QuantizedMatmulErrors, "quantized_matmul") {
  auto base = [] { return Step("quantized_matmul"); };
  HostTensor x = f32({2, 8}, std::vector<double>(16, 1)), s = f32({4}, std::vector<double>(4, 1));
  HostTensor w8 = HostTensor::of(plan::I8, {4, 8}, std::vector<double>(32, 1));
  std::vector<HostTensor> outs{HostTensor::result(plan::F32, {2, 4})};
  expectError(run(base().i("bits", 3), {x, w8, s}, outs), "bits must be 8 or 4");
  expectError(run(base().i("bits", 4), {x, w8, s}, outs), "weight must be");
  expectError(run(base().i("group_size", 3), {x, w8, s}, outs), "group_size must be 0 or divide K");
  expectError(run(base().i("group_size", 4), {x, w8, s}, outs), "scale must have shape");
  expectError(run(base().s("activation_quant", "static"), {x, w8, s}, outs),
              "activation_quant must be none, dynamic_per_row, dynamic_per_tensor or "
              "static_per_tensor");
  expectError(run(base().s("activation_quant", "static_per_tensor").f("input_scale", 0)
                      .i("input_zero_point", 0),
                  {x, w8, s}, outs),
              "static_per_tensor needs a positive finite input_scale");
  HostTensor zp = HostTensor::of(plan::I8, {4}, std::vector<double>(4, 0));
  expectError(run(base().i("zero_point", 1).s("activation_quant", "dynamic_per_row"), {x, w8, s, zp},
                  outs),
              "quantized activations take a weight without zero points");
  checkQuantized(*this, QCase{2, 8, 4}, 90);
}

// fake_quantize: QuantizeLinear to uint8 then DequantizeLinear; values
// past both ends saturate, halves round to even.
CTS_TEST(FakeQuantize, "fake_quantize") {
  // A scale whose reciprocal is inexact, and values at, one float below
  // and one above every half (k + 0.5) * scale: where a rounding from a
  // multiply by the reciprocal instead of ONNX's division would go wrong.
  const float scale = 0.0123f;
  std::vector<double> x = sample(3000, -3, 3, 95);
  for (int k = -140; k < 140; ++k) {
    const float h = (k + 0.5f) * scale;
    for (float v : {h, std::nextafter(h, -1e9f), std::nextafter(h, 1e9f)}) x.push_back(v);
  }
  x.push_back(-100), x.push_back(100); // saturation
  const int64_t n = static_cast<int64_t>(x.size());
  std::vector<double> want(x.size());
  for (size_t i = 0; i < x.size(); ++i)
    want[i] = static_cast<float>(
        (std::min(std::max(std::nearbyint(static_cast<float>(x[i]) / scale) + 20, 0.0f), 255.0f) -
         20) *
        scale);
  std::vector<HostTensor> outs{HostTensor::result(plan::F32, {n})};
  ASSERT_TRUE(run(Step("fake_quantize").f("scale", scale).i("zero_point", 20), {f32({n}, x)}, outs)
                  .ok());
  expectEqualValues(outs[0].values(), want, "fake_quantize");
  expectError(run(Step("fake_quantize").f("scale", 0.125).i("zero_point", 300), {f32({n}, x)}, outs),
              "zero_point in [0, 255]");
}

CTS_TEST(DynamicQuantizeLinear, "dynamic_quantize") {
  for (auto [n, lo, hi] : std::vector<std::tuple<int64_t, double, double>>{
           {1000, -3, 5}, {37, 0.5, 2}, {20000, -4, -1}, {16, 0, 0}}) {
    std::vector<double> xv = sample(n, lo, hi, 91);
    std::vector<float> x(xv.begin(), xv.end());
    std::vector<double> q;
    float scale;
    uint8_t zero;
    dynamicQuantize(x, q, scale, zero);
    std::vector<HostTensor> outs{HostTensor::result(plan::U8, {n}), HostTensor::result(plan::F32, {}),
                                 HostTensor::result(plan::U8, {})};
    ASSERT_TRUE(run(Step("dynamic_quantize"), {f32({n}, xv)}, outs).ok());
    expectEqualValues(outs[0].values(), q, "dynamic_quantize values");
    expectEqualValues(outs[1].values(), {scale}, "dynamic_quantize scale");
    expectEqualValues(outs[2].values(), {static_cast<double>(zero)}, "dynamic_quantize zero point");
  }
}

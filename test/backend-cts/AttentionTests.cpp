// attention: softmax(scale q k^T + mask) v per head against a reference
// that materializes the scores, with q, k, v read through strided views
// ([B, H, S, D] and [B, S, H, D] layouts, k stored transposed), grouped
// key/value heads, broadcast masks, rows with no number (all keys masked,
// a NaN) and sequences longer than one block of the online softmax.
#include <optional>

#include "test/backend-cts/Cts.h"

using namespace cts;

namespace {

/// A [B, H, S, D] logical tensor stored in a layout.
enum class Layout { BHSD, BSHD, BHDS };

struct Operand {
  Shape logical; // [B, H, S, D]
  Layout layout;
  std::vector<double> values; // logical order

  Shape storedShape() const {
    const Shape &l = logical;
    switch (layout) {
    case Layout::BHSD: return l;
    case Layout::BSHD: return {l[0], l[2], l[1], l[3]};
    case Layout::BHDS: return {l[0], l[1], l[3], l[2]};
    }
    return l;
  }
  /// Element strides of the logical [B, H, S, D] view into the stored tensor.
  std::vector<int64_t> strides() const {
    Shape s = storedShape();
    std::vector<int64_t> st(4);
    int64_t acc = 1;
    for (int i = 3; i >= 0; --i) st[i] = acc, acc *= s[i];
    switch (layout) {
    case Layout::BHSD: return st;
    case Layout::BSHD: return {st[0], st[2], st[1], st[3]};
    case Layout::BHDS: return {st[0], st[1], st[3], st[2]};
    }
    return st;
  }
  HostTensor stored() const {
    std::vector<double> out(values.size());
    std::vector<int64_t> st = strides();
    const Shape &l = logical;
    for (int64_t b = 0, i = 0; b < l[0]; ++b)
      for (int64_t h = 0; h < l[1]; ++h)
        for (int64_t s = 0; s < l[2]; ++s)
          for (int64_t d = 0; d < l[3]; ++d, ++i)
            out[b * st[0] + h * st[1] + s * st[2] + d * st[3]] = values[i];
    return HostTensor::of(plan::F32, storedShape(), out);
  }
  double at(int64_t b, int64_t h, int64_t s, int64_t d) const {
    const Shape &l = logical;
    return values[((b * l[1] + h) * l[2] + s) * l[3] + d];
  }
};

struct Case {
  int64_t b, hq, hkv, sq, sk, d, dv;
  Layout ql, kl, vl;
  bool bshd = false, zeroNan = false;
  Shape maskShape; // empty: no mask
  std::vector<double> mask;
  double scale = 0.125;
  std::optional<double> fill; // the mask is bool and selects `fill` (masked_fill)
};

std::vector<double> reference(const Case &c, const Operand &q, const Operand &k,
                              const Operand &v);

void checkAttention(BackendCts &t, const Case &c, unsigned seed) {
  Operand q{{c.b, c.hq, c.sq, c.d}, c.ql, sample(c.b * c.hq * c.sq * c.d, -2, 2, seed)};
  Operand k{{c.b, c.hkv, c.sk, c.d}, c.kl, sample(c.b * c.hkv * c.sk * c.d, -2, 2, seed + 1)};
  Operand v{{c.b, c.hkv, c.sk, c.dv}, c.vl, sample(c.b * c.hkv * c.sk * c.dv, -2, 2, seed + 2)};
  Step step("attention");
  auto ints = [&](const char *name, const std::vector<int64_t> &x) { step.ints(name, x); };
  ints("query_shape", q.logical), ints("query_strides", q.strides());
  ints("key_shape", k.logical), ints("key_strides", k.strides());
  ints("value_shape", v.logical), ints("value_strides", v.strides());
  step.f("scale", c.scale);
  if (c.bshd) step.i("result_bshd", 1);
  if (c.zeroNan) step.i("zero_nan_rows", 1);
  std::vector<HostTensor> ins{q.stored(), k.stored(), v.stored()};
  if (!c.maskShape.empty()) {
    step.i("mask", 1);
    if (c.fill) step.f("mask_fill", *c.fill);
    ins.push_back(HostTensor::of(c.fill ? plan::BOOL : plan::F32, c.maskShape, c.mask));
  }
  Shape os = c.bshd ? Shape{c.b, c.sq, c.hq, c.dv} : Shape{c.b, c.hq, c.sq, c.dv};
  std::vector<HostTensor> outs{HostTensor::result(plan::F32, os)};
  ASSERT_TRUE(t.run(step, ins, outs).ok());
  expectClose(outs[0].values(), reference(c, q, k, v), 1e-4, 1e-5,
              "attention B" + std::to_string(c.b) + " H" + std::to_string(c.hq) + "/" +
                  std::to_string(c.hkv) + " S" + std::to_string(c.sq) + "x" + std::to_string(c.sk) +
                  (c.bshd ? " bshd" : "") + (c.maskShape.empty() ? "" : " mask"));
}

/// Materialized scores, softmax in double.
std::vector<double> reference(const Case &c, const Operand &q, const Operand &k,
                              const Operand &v) {
  Shape os = c.bshd ? Shape{c.b, c.sq, c.hq, c.dv} : Shape{c.b, c.hq, c.sq, c.dv};
  std::vector<double> want(numel(os));
  Shape ms = c.maskShape;
  while (!ms.empty() && ms.size() < 4) ms.insert(ms.begin(), 1);
  for (int64_t b = 0; b < c.b; ++b)
    for (int64_t h = 0; h < c.hq; ++h)
      for (int64_t i = 0; i < c.sq; ++i) {
        const int64_t g = h / (c.hq / c.hkv);
        std::vector<double> s(c.sk);
        double mx = -INFINITY;
        bool nan = false;
        for (int64_t j = 0; j < c.sk; ++j) {
          double dot = 0;
          for (int64_t e = 0; e < c.d; ++e) dot += q.at(b, h, i, e) * k.at(b, g, j, e);
          s[j] = c.scale * dot;
          if (!ms.empty()) {
            int64_t idx[4] = {b, h, i, j}, off = 0;
            for (int a = 0; a < 4; ++a) off = off * ms[a] + (ms[a] == 1 ? 0 : idx[a]);
            if (c.fill) s[j] = c.mask[off] != 0 ? *c.fill : s[j];
            else s[j] += c.mask[off];
          }
          nan |= std::isnan(s[j]);
          mx = std::max(mx, s[j]);
        }
        double sum = 0;
        for (double &x : s) sum += (x = std::exp(x - mx));
        for (int64_t e = 0; e < c.dv; ++e) {
          double o = 0;
          for (int64_t j = 0; j < c.sk; ++j) o += s[j] / sum * v.at(b, g, j, e);
          if (nan || mx == -INFINITY) o = c.zeroNan ? 0 : NAN;
          int64_t at = c.bshd ? ((b * c.sq + i) * c.hq + h) * c.dv + e
                              : ((b * c.hq + h) * c.sq + i) * c.dv + e;
          want[at] = o;
        }
      }
  return want;
}

std::vector<double> causal(int64_t sq, int64_t sk) {
  std::vector<double> m(sq * sk);
  for (int64_t i = 0; i < sq; ++i)
    for (int64_t j = 0; j < sk; ++j) m[i * sk + j] = j <= i + (sk - sq) ? 0.0 : -INFINITY;
  return m;
}

} // namespace

CTS_TEST(AttentionLayouts, "attention") {
  using L = Layout;
  // Multi-head, every layout of q, k (k^T too), v, and both result layouts.
  for (L ql : {L::BHSD, L::BSHD})
    for (L kl : {L::BHSD, L::BSHD, L::BHDS})
      for (L vl : {L::BHSD, L::BSHD})
        for (bool bshd : {false, true})
          checkAttention(*this, Case{2, 3, 3, 5, 7, 8, 6, ql, kl, vl, bshd}, 40);
  // Grouped-query heads (4 query heads per key/value head), a causal mask
  // broadcast over batch and heads, more query rows than one block.
  Case gqa{1, 8, 2, 70, 70, 16, 16, L::BSHD, L::BHDS, L::BHSD, true};
  gqa.maskShape = {1, 1, 70, 70};
  gqa.mask = causal(70, 70);
  checkAttention(*this, gqa, 41);
  // Keys across several blocks of the online softmax, a per-batch padding
  // mask [B, 1, 1, Sk].
  Case longKeys{2, 2, 1, 3, 1100, 8, 4, L::BHSD, L::BHSD, L::BSHD, false};
  longKeys.maskShape = {2, 1, 1, 1100};
  longKeys.mask.assign(2 * 1100, 0.0);
  for (int64_t j = 1000; j < 1100; ++j) longKeys.mask[1100 + j] = -INFINITY;
  checkAttention(*this, longKeys, 42);
  // masked_fill: a bool mask selecting -inf (causal), and a finite fill that
  // also covers a whole row (which then weighs every key alike).
  for (double fill : {-double(INFINITY), -1e4}) {
    Case sel{2, 2, 2, 6, 6, 4, 4, L::BHSD, L::BHDS, L::BHSD, false, false, {1, 1, 6, 6}};
    sel.fill = fill;
    sel.mask.assign(36, 0.0);
    for (int64_t i = 0; i < 6; ++i)
      for (int64_t j = i + 1; j < 6; ++j) sel.mask[i * 6 + j] = 1;
    if (fill > -INFINITY)
      for (int64_t j = 0; j < 6; ++j) sel.mask[0 * 6 + j] = 1;
    checkAttention(*this, sel, 45);
  }
}

CTS_TEST(AttentionLeavesOutMaskedKeys, "attention") {
  // Keys a mask removes from every row of a block of query rows are left
  // out of the block's work: a causal mask as finfo.min (Hugging Face's
  // additive form) and as a bool select of -inf, over several blocks of
  // rows; a sliding window (keys removed before and after each row's); a
  // padding mask per batch (not shared, so found per batch and head).
  using L = Layout;
  const int64_t s = 150;
  std::vector<double> window(s * s), finfoMin = causal(s, s);
  for (double &m : finfoMin) m = std::isinf(m) ? -3.4028234663852886e38 : 0.0;
  for (int64_t i = 0; i < s; ++i)
    for (int64_t j = 0; j < s; ++j) window[i * s + j] = j <= i && j > i - 40 ? 0.0 : -INFINITY;
  for (const std::vector<double> *m : {&finfoMin, &window}) {
    Case c{2, 4, 2, s, s, 8, 8, L::BSHD, L::BSHD, L::BSHD, true};
    c.maskShape = {1, 1, s, s};
    c.mask = *m;
    checkAttention(*this, c, 46);
  }
  Case sel{1, 2, 2, s, s, 8, 4, L::BHSD, L::BHSD, L::BHSD, false, false, {s, s}};
  sel.fill = -double(INFINITY);
  sel.mask = causal(s, s);
  for (double &m : sel.mask) m = std::isinf(m) ? 1.0 : 0.0;
  checkAttention(*this, sel, 47);
  Case pad{3, 2, 2, 70, 70, 8, 8, L::BHSD, L::BHSD, L::BHSD, false, false, {3, 1, 1, 70}};
  pad.mask.assign(3 * 70, 0.0);
  for (int64_t j = 20; j < 70; ++j) pad.mask[70 + j] = -INFINITY;   // batch 1: 20 keys
  for (int64_t j = 0; j < 65; ++j) pad.mask[140 + j] = -INFINITY;   // batch 2: left padding
  checkAttention(*this, pad, 48);
}

CTS_TEST(AttentionViewsAtOffsets, "attention") {
  // q, k and v as one projection [B, S, 3*H*D] wrote them: three views of
  // one operand, k and v at offsets H*D and 2*H*D.
  const int64_t b = 2, s = 5, h = 3, d = 4, row = 3 * h * d;
  std::vector<double> qkv = sample(b * s * row, -2, 2, 49);
  Operand ops[3];
  for (int which = 0; which < 3; ++which) {
    Operand &o = ops[which];
    o.logical = {b, h, s, d}, o.layout = Layout::BHSD;
    for (int64_t bi = 0; bi < b; ++bi)
      for (int64_t hi = 0; hi < h; ++hi)
        for (int64_t si = 0; si < s; ++si)
          for (int64_t di = 0; di < d; ++di)
            o.values.push_back(qkv[(bi * s + si) * row + which * h * d + hi * d + di]);
  }
  Case c{b, h, h, s, s, d, d, Layout::BHSD, Layout::BHSD, Layout::BHSD};
  const std::vector<int64_t> shape{b, h, s, d}, strides{s * row, d, row, 1};
  Step step("attention");
  step.ints("query_shape", shape).ints("query_strides", strides);
  step.ints("key_shape", shape).ints("key_strides", strides).i("key_offset", h * d);
  step.ints("value_shape", shape).ints("value_strides", strides).i("value_offset", 2 * h * d);
  step.f("scale", c.scale);
  HostTensor in = HostTensor::of(plan::F32, {b, s, row}, qkv);
  std::vector<HostTensor> outs{HostTensor::result(plan::F32, {b, h, s, d})};
  ASSERT_TRUE(run(step, {in, in, in}, outs).ok());
  expectClose(outs[0].values(), reference(c, ops[0], ops[1], ops[2]), 1e-4, 1e-5,
              "attention at offsets");
  // An offset that takes the view past its operand is refused.
  step.i("value_offset", 2 * h * d + 1);
  expectError(run(step, {in, in, in}, outs), "value view reaches past");
}

CTS_TEST(AttentionRowsWithoutANumber, "attention") {
  // A query row whose every key is masked, and one with a NaN score: NaN,
  // or 0 with zero_nan_rows (PyTorch 2's where(isnan(p), 0, p)).
  for (bool zero : {false, true}) {
    Case c{1, 2, 2, 4, 6, 4, 3, Layout::BHSD, Layout::BHSD, Layout::BHSD, false, zero};
    c.maskShape = {4, 6};
    c.mask.assign(24, 0.0);
    for (int64_t j = 0; j < 6; ++j) c.mask[1 * 6 + j] = -INFINITY; // row 1: all masked
    c.mask[2 * 6 + 3] = NAN;                                        // row 2: a NaN score
    checkAttention(*this, c, 43);
  }
}

CTS_TEST(AttentionErrors, "attention") {
  auto z = [](Shape s) { return HostTensor::of(plan::F32, s, std::vector<double>(numel(s), 1)); };
  auto base = [] {
    Step s("attention");
    s.ints("query_shape", {1, 2, 3, 4}).ints("query_strides", {24, 12, 4, 1});
    s.ints("key_shape", {1, 1, 3, 4}).ints("key_strides", {12, 12, 4, 1});
    s.ints("value_shape", {1, 1, 3, 4}).ints("value_strides", {12, 12, 4, 1});
    return s.f("scale", 0.5);
  };
  std::vector<HostTensor> ins{z({1, 2, 3, 4}), z({1, 1, 3, 4}), z({1, 1, 3, 4})};
  auto expectAttentionError = [&](Step step, const std::string &needle,
                                  std::vector<HostTensor> in = {}) {
    std::vector<HostTensor> outs{HostTensor::result(plan::F32, {1, 2, 3, 4})};
    expectError(run(step, in.empty() ? ins : in, outs), needle);
  };
  expectAttentionError(base().ints("key_strides", {12, 12, 4, 100}), "key view reaches past its operand");
  expectAttentionError(base().ints("value_strides", {0, 0, 2, 2}), "stride 1");
  expectAttentionError(base().ints("key_shape", {1, 1, 3, 5}).ints("key_strides", {0, 0, 1, 0}),
                       "views disagree");
  expectAttentionError(base().ints("query_shape", {1, 3, 2, 4}).ints("key_shape", {1, 2, 3, 4})
                           .ints("value_shape", {1, 2, 3, 4}).ints("key_strides", {0, 0, 4, 1})
                           .ints("value_strides", {0, 0, 4, 1}).ints("query_strides", {0, 8, 4, 1}),
                       "must divide");
  expectAttentionError(base().f("scale", NAN), "scale must be finite");
  expectAttentionError(base().i("result_bshd", 1), "result must have shape");
  expectAttentionError(base().i("mask", 1), "inputs");
  std::vector<HostTensor> withMask = ins;
  withMask.push_back(z({2, 5}));
  expectAttentionError(base().i("mask", 1), "does not broadcast", withMask);
  withMask.back() = z({3, 3});
  expectAttentionError(base().i("mask", 1).f("mask_fill", -1), "mask must be bool", withMask);
  expectAttentionError(base().f("mask_fill", -1), "mask_fill needs a mask");
  checkAttention(*this, Case{1, 2, 1, 3, 3, 4, 4, Layout::BHSD, Layout::BHSD, Layout::BHSD}, 44);
}

namespace {

/// One cached_attention call: rows of new tokens against caches that
/// already hold earlier tokens.
struct CachedCase {
  int64_t b, hq, hkv, t, d, dv, slots, m;
  std::vector<int64_t> pos, len, slot;
  int64_t window = 0;
  bool bshd = false;
};

/// Where key j's dimension e of cache head `head` is: tiles of 16 keys,
/// transposed ([slots, Hkv, M / 16, D, 16]).
int64_t keyAt(const CachedCase &c, int64_t head, int64_t j, int64_t e) {
  return ((head * (c.m / 16) + j / 16) * c.d + e) * 16 + j % 16;
}

/// The caches after the append and the attention result, in double.
void cachedReference(const CachedCase &c, const Operand &q, const Operand &k, const Operand &v,
                     std::vector<double> &kc, std::vector<double> &vc, std::vector<double> &out) {
  for (int64_t b = 0; b < c.b; ++b)
    for (int64_t g = 0; g < c.hkv; ++g)
      for (int64_t t = 0; t < c.len[b]; ++t) {
        const int64_t head = c.slot[b] * c.hkv + g, col = c.pos[b] + t;
        for (int64_t e = 0; e < c.d; ++e) kc[keyAt(c, head, col, e)] = k.at(b, g, t, e);
        for (int64_t e = 0; e < c.dv; ++e) vc[(head * c.m + col) * c.dv + e] = v.at(b, g, t, e);
      }
  out.assign(c.b * c.hq * c.t * c.dv, 0.0);
  for (int64_t b = 0; b < c.b; ++b)
    for (int64_t h = 0; h < c.hq; ++h)
      for (int64_t t = 0; t < c.len[b]; ++t) {
        const int64_t g = h / (c.hq / c.hkv), last = c.pos[b] + t;
        const int64_t lo = c.window ? std::max<int64_t>(0, last - c.window + 1) : 0;
        std::vector<double> s;
        double mx = -INFINITY;
        for (int64_t j = lo; j <= last; ++j) {
          double dot = 0;
          for (int64_t e = 0; e < c.d; ++e)
            dot += q.at(b, h, t, e) * kc[keyAt(c, c.slot[b] * c.hkv + g, j, e)];
          s.push_back(0.125 * dot);
          mx = std::max(mx, s.back());
        }
        double sum = 0;
        for (double &x : s) sum += (x = std::exp(x - mx));
        for (int64_t e = 0; e < c.dv; ++e) {
          double o = 0;
          for (int64_t j = lo; j <= last; ++j)
            o += s[j - lo] / sum * vc[((c.slot[b] * c.hkv + g) * c.m + j) * c.dv + e];
          const int64_t at = c.bshd ? ((b * c.t + t) * c.hq + h) * c.dv + e
                                    : ((b * c.hq + h) * c.t + t) * c.dv + e;
          out[at] = o;
        }
      }
}

Step cachedStep(const Operand &q, const Operand &k, const Operand &v, const CachedCase &c) {
  Step step("cached_attention");
  step.ints("query_shape", q.logical).ints("query_strides", q.strides());
  step.ints("key_shape", k.logical).ints("key_strides", k.strides());
  step.ints("value_shape", v.logical).ints("value_strides", v.strides());
  step.f("scale", 0.125);
  if (c.window) step.i("window", c.window);
  if (c.bshd) step.i("result_bshd", 1);
  return step;
}

void checkCached(BackendCts &t, const CachedCase &c, unsigned seed, bool inPlace) {
  Operand q{{c.b, c.hq, c.t, c.d}, Layout::BSHD, sample(c.b * c.hq * c.t * c.d, -2, 2, seed)};
  Operand k{{c.b, c.hkv, c.t, c.d}, Layout::BSHD, sample(c.b * c.hkv * c.t * c.d, -2, 2, seed + 1)};
  Operand v{{c.b, c.hkv, c.t, c.dv}, Layout::BHSD, sample(c.b * c.hkv * c.t * c.dv, -2, 2, seed + 2)};
  // The caches hold earlier tokens (and stale rows past them).
  std::vector<double> kc = sample(c.slots * c.hkv * c.m * c.d, -2, 2, seed + 3);
  std::vector<double> vc = sample(c.slots * c.hkv * c.m * c.dv, -2, 2, seed + 4);
  // Keys in tiles of 16, transposed.
  const Shape kcs{c.slots, c.hkv, c.m / 16, c.d, 16}, vcs{c.slots, c.hkv, c.m, c.dv};
  auto ids = [&](const std::vector<int64_t> &x) {
    return i64({c.b}, std::vector<double>(x.begin(), x.end()));
  };
  std::vector<HostTensor> ins{q.stored(), k.stored(), v.stored(), f32(kcs, kc), f32(vcs, vc),
                              ids(c.pos), ids(c.len), ids(c.slot)};
  Shape os = c.bshd ? Shape{c.b, c.t, c.hq, c.dv} : Shape{c.b, c.hq, c.t, c.dv};
  std::vector<HostTensor> outs{HostTensor::result(plan::F32, os),
                               HostTensor::result(plan::F32, kcs), HostTensor::result(plan::F32, vcs)};
  ASSERT_TRUE(t.run(cachedStep(q, k, v, c), ins, outs,
                    inPlace ? std::vector<int>{-1, 3, 4} : std::vector<int>{})
                  .ok());
  std::vector<double> want;
  cachedReference(c, q, k, v, kc, vc, want);
  const std::string what = "cached_attention T" + std::to_string(c.t) + " H" +
                           std::to_string(c.hq) + "/" + std::to_string(c.hkv) +
                           (c.window ? " window" : "") + (inPlace ? " in place" : "");
  expectClose(outs[0].values(), want, 1e-4, 1e-5, what);
  expectEqualValues(outs[1].values(), roundTo(plan::F32, kc), what + " key cache");
  expectEqualValues(outs[2].values(), roundTo(plan::F32, vc), what + " value cache");
}

} // namespace

CTS_TEST(CachedAttentionAppendsAndAttends, "cached_attention") {
  for (bool inPlace : {false, true}) {
    // A prefill chunk: rows at different positions and lengths (row 1 is
    // padded past its 2 tokens), slots out of order, grouped heads.
    CachedCase chunk{2, 4, 2, 3, 4, 5, 3, 16, {13, 0}, {3, 2}, {2, 0}};
    checkCached(*this, chunk, 60, inPlace);
    // Decode: one token per row, an idle row (length 0), a result in
    // [B, T, H, Dv], and a sliding window.
    CachedCase decode{3, 6, 2, 1, 8, 8, 3, 16, {9, 0, 15}, {1, 0, 1}, {1, 2, 0}, 0, true};
    checkCached(*this, decode, 61, inPlace);
    decode.window = 4;
    checkCached(*this, decode, 62, inPlace);
  }
  // More keys than one block of the online softmax, more query rows than
  // one task.
  CachedCase longer{1, 4, 1, 20, 8, 8, 1, 1312, {1200}, {20}, {0}};
  checkCached(*this, longer, 63, true);
}

CTS_TEST(CachedAttentionErrors, "cached_attention") {
  CachedCase c{2, 2, 1, 2, 4, 4, 2, 16, {0, 0}, {1, 1}, {0, 1}};
  Operand q{{2, 2, 2, 4}, Layout::BHSD, std::vector<double>(32, 0.5)};
  Operand k{{2, 1, 2, 4}, Layout::BHSD, std::vector<double>(16, 0.5)};
  auto call = [&](std::vector<int64_t> pos, std::vector<int64_t> len,
                  std::vector<int64_t> slot) {
    auto ids = [](const std::vector<int64_t> &x) {
      return i64({2}, std::vector<double>(x.begin(), x.end()));
    };
    std::vector<HostTensor> ins{q.stored(), k.stored(), k.stored(),
                                f32({2, 1, 1, 4, 16}, std::vector<double>(128, 0)),
                                f32({2, 1, 16, 4}, std::vector<double>(128, 0)), ids(pos), ids(len),
                                ids(slot)};
    std::vector<HostTensor> outs{HostTensor::result(plan::F32, {2, 2, 2, 4}),
                                 HostTensor::result(plan::F32, {2, 1, 1, 4, 16}),
                                 HostTensor::result(plan::F32, {2, 1, 16, 4})};
    return run(cachedStep(q, k, k, c).at("node7"), ins, outs);
  };
  auto try_ = [&](std::vector<int64_t> pos, std::vector<int64_t> len, std::vector<int64_t> slot,
                  const std::string &needle) { expectError(call(pos, len, slot), needle); };
  try_({15, 0}, {2, 1}, {0, 1}, "node7: row 0: positions 15..16 do not fit the cache of 16 tokens");
  try_({0, 0}, {3, 1}, {0, 1}, "length 3 outside [0, 2]");
  try_({0, 0}, {1, 1}, {1, 1}, "row 1: slot 1 is written by an earlier row too");
  try_({0, 0}, {1, 1}, {0, 2}, "slot 2 outside [0, 2)");
  try_({-1, 0}, {1, 1}, {0, 1}, "positions -1..-1");
  // An idle row's position and slot are not read.
  EXPECT_TRUE(call({99, 0}, {0, 1}, {7, 1}).ok());
}

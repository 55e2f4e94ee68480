// The geometry of sliding-window ops (convolution, pooling) as the plan
// gives it, checked against the buffers, and a convolution's fused clamp:
// what ConvKernels.cpp and QuantizedConvKernel.cpp share. Included by
// kernel files after runtime/cpu/IsaBegin.h.
#pragma once

#ifndef DS_CPU_ISA_REGION
#error "include ConvGeometry.h after runtime/cpu/IsaBegin.h"
#endif

namespace ds::rt::cpu::DS_CPU_ISA {
namespace conv {

/// a / b rounded up and down, for b > 0 and any a.
inline int64_t ceilDiv(int64_t a, int64_t b) { return a >= 0 ? (a + b - 1) / b : -((-a) / b); }
inline int64_t floorDiv(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }

/// The taps k of [0, kernel) whose coordinate first + k * dilation lies in
/// [0, extent): [lo, hi), empty when none does. Loops over these, not over
/// the whole kernel, so a window far larger than its input (a hostile or
/// odd plan's 2^62-tap kernel) costs only the taps that land.
inline std::pair<int64_t, int64_t> tapRange(int64_t first, int64_t dilation, int64_t kernel,
                                            int64_t extent) {
  int64_t lo = first >= 0 ? 0 : ceilDiv(-first, dilation);
  int64_t hi = first > extent - 1 ? 0 : floorDiv(extent - 1 - first, dilation) + 1;
  lo = std::min(lo, kernel);
  hi = std::max(lo, std::min(hi, kernel));
  return {lo, hi};
}

/// The geometry of a sliding-window op, checked against the buffers.
struct Window {
  int64_t n = 0, c = 0;                       // batch, channels (of the input)
  std::vector<int64_t> in, out, kernel, strides, dilations, padBegin;
  int64_t inSize = 1, outSize = 1, kernelSize = 1;

  /// Input coordinate (flattened spatial offset) of kernel offset `k` at
  /// output position `p`, or -1 in the padding.
  int64_t inputOffset(int64_t p, int64_t k) const {
    int64_t off = 0;
    for (size_t d = in.size(); d-- > 0;) {
      int64_t pd = p % out[d], kd = k % kernel[d];
      p /= out[d];
      k /= kernel[d];
      int64_t x = pd * strides[d] - padBegin[d] + kd * dilations[d];
      if (x < 0 || x >= in[d]) return -1;
      int64_t stride = 1;
      for (size_t e = d + 1; e < in.size(); ++e) stride *= in[e];
      off += x * stride;
    }
    return off;
  }
};

inline absl::StatusOr<Window> window(const KernelContext &c, const TensorView &x,
                              const std::vector<int64_t> &kernel, const TensorView &y) {
  if (x.rank() < 3) return c.error("input must be [N, C, spatial...]");
  size_t k = x.rank() - 2;
  DS_ASSIGN_OR_RETURN(std::vector<int64_t> strides, c.intsAttr("strides"));
  DS_ASSIGN_OR_RETURN(std::vector<int64_t> dilations, c.intsAttr("dilations"));
  DS_ASSIGN_OR_RETURN(std::vector<int64_t> pads, c.intsAttr("pads"));
  if (kernel.size() != k || strides.size() != k || dilations.size() != k || pads.size() != 2 * k ||
      y.rank() != x.rank())
    return c.error("window attributes do not match the spatial rank");
  Window w;
  w.n = x.shape[0];
  w.c = x.shape[1];
  for (size_t d = 0; d < k; ++d) {
    if (kernel[d] <= 0 || strides[d] <= 0 || dilations[d] <= 0 || pads[d] < 0 || pads[d + k] < 0)
      return c.error("kernel, strides and dilations must be positive, pads non-negative");
    w.in.push_back(x.shape[d + 2]);
    w.out.push_back(y.shape[d + 2]);
    w.kernel.push_back(kernel[d]);
    w.strides.push_back(strides[d]);
    w.dilations.push_back(dilations[d]);
    w.padBegin.push_back(pads[d]);
    w.inSize *= x.shape[d + 2];
    w.outSize *= y.shape[d + 2];
    // (Convolutions' taps are their weight's, so this fits; a pool's
    // window may be any size, and its loops visit only the taps inside.)
    if (__builtin_mul_overflow(w.kernelSize, kernel[d], &w.kernelSize))
      w.kernelSize = std::numeric_limits<int64_t>::max();
  }
  // Every window must start inside the padded input (inputOffset then
  // only ever yields in-bounds offsets or -1).
  for (size_t d = 0; d < k; ++d) {
    int64_t last, padded;
    if (w.out[d] > 0 &&
        (__builtin_mul_overflow(w.out[d] - 1, w.strides[d], &last) ||
         __builtin_add_overflow(w.in[d], pads[d], &padded) ||
         __builtin_add_overflow(padded, pads[d + k], &padded) || last >= padded ||
         (w.dilations[d] > 1 && kernel[d] > 1 &&
          (w.dilations[d] - 1) > std::numeric_limits<int64_t>::max() / (kernel[d] - 1))))
      return c.error("result extent does not fit the windows");
  }
  return w;
}

struct ConvGeometry {
  Window w;
  int64_t m, group, cg, mg, ck;
};

inline absl::StatusOr<ConvGeometry> convGeometry(const KernelContext &c, const TensorView &x,
                                          const TensorView &wt, const TensorView &y) {
  if (wt.rank() != x.rank()) return c.error("weight must have the input's rank");
  DS_ASSIGN_OR_RETURN(int64_t group, c.intAttr("group"));
  std::vector<int64_t> kernel(wt.shape.begin() + 2, wt.shape.end());
  DS_ASSIGN_OR_RETURN(Window w, window(c, x, kernel, y));
  int64_t m = wt.shape[0];
  if (group <= 0 || w.c % group || m % group || wt.shape[1] * group != w.c)
    return c.error("group does not divide the channels");
  std::vector<int64_t> want{w.n, m};
  for (size_t d = 0; d < w.in.size(); ++d) want.push_back(y.shape[d + 2]);
  DS_RETURN_IF_ERROR(c.expectShape(y, want, "result"));
  return ConvGeometry{w, m, group, w.c / group, m / group, (w.c / group) * w.kernelSize};
}

/// A fused activation (ds.conv's clip_min / clip_max): y = min(max(y, lo),
/// hi), then ds.conv's `activation` (hard_swish) of that.
struct Clamp {
  float lo = -INFINITY, hi = INFINITY;
  bool hardSwish = false;
  bool bounded() const { return lo != -INFINITY || hi != INFINITY; }
  bool active() const { return bounded() || hardSwish; }
  float operator()(float v) const {
    v = std::min(std::max(v, lo), hi);
    if (hardSwish) v *= std::min(std::max(v * (1.0f / 6.0f) + 0.5f, 0.0f), 1.0f);
    return v;
  }
  static absl::StatusOr<Clamp> fromStep(const KernelContext &c) {
    Clamp k;
    if (c.hasAttr("activation")) {
      DS_ASSIGN_OR_RETURN(std::string act, c.stringAttr("activation"));
      if (act != "hard_swish")
        return c.error("activation must be hard_swish, not '" + act + "'");
      k.hardSwish = true;
    }
    if (c.hasAttr("clip_min")) {
      DS_ASSIGN_OR_RETURN(double lo, c.floatAttr("clip_min"));
      k.lo = static_cast<float>(lo);
    }
    if (c.hasAttr("clip_max")) {
      DS_ASSIGN_OR_RETURN(double hi, c.floatAttr("clip_max"));
      k.hi = static_cast<float>(hi);
    }
    if (std::isnan(k.lo) || std::isnan(k.hi) || k.lo > k.hi)
      return c.error("clip_min must not exceed clip_max, and neither may be NaN");
    return k;
  }
};

/// [N, d..., C] <-> [N, C, d...] for `channels_last` convolutions on the
/// im2col path (oneDNN reads channels-last directly).
inline std::vector<int64_t> channelsFirstShape(std::vector<int64_t> s) {
  if (s.size() >= 3) std::rotate(s.begin() + 1, s.end() - 1, s.end());
  return s;
}
inline void toChannelsFirst(const float *x, float *y, int64_t n, int64_t spatial, int64_t ch) {
  for (int64_t b = 0; b < n; ++b)
    for (int64_t p = 0; p < spatial; ++p)
      for (int64_t c = 0; c < ch; ++c) y[(b * ch + c) * spatial + p] = x[(b * spatial + p) * ch + c];
}
inline void toChannelsLast(const float *x, float *y, int64_t n, int64_t spatial, int64_t ch) {
  for (int64_t b = 0; b < n; ++b)
    for (int64_t c = 0; c < ch; ++c)
      for (int64_t p = 0; p < spatial; ++p) y[(b * spatial + p) * ch + c] = x[(b * ch + c) * spatial + p];
}

} // namespace conv
} // namespace ds::rt::cpu::DS_CPU_ISA

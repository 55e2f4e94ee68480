// Convolution (im2col + GEMM per sample and group) and pooling, N-D over
// [N, C, spatial...], with the gradients training needs.
#include <cmath>
#include <cstring>
#include <limits>

#include "runtime/cpu/KernelRegistry.h"

namespace ds::rt::cpu {
namespace {

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

absl::StatusOr<Window> window(const KernelContext &c, const TensorView &x,
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
    w.kernelSize *= kernel[d];
  }
  // Every window must start inside the padded input (inputOffset then
  // only ever yields in-bounds offsets or -1).
  for (size_t d = 0; d < k; ++d)
    if (w.out[d] > 0 && (w.out[d] - 1) * w.strides[d] >= w.in[d] + pads[d] + pads[d + k])
      return c.error("result extent does not fit the windows");
  return w;
}

/// col[(c * K + k), p] = x[c, window position] (0 in the padding).
void im2col(const Window &w, const float *x, int64_t channels, float *col) {
  for (int64_t ch = 0; ch < channels; ++ch)
    for (int64_t k = 0; k < w.kernelSize; ++k) {
      float *row = col + (ch * w.kernelSize + k) * w.outSize;
      const float *xc = x + ch * w.inSize;
      for (int64_t p = 0; p < w.outSize; ++p) {
        int64_t off = w.inputOffset(p, k);
        row[p] = off < 0 ? 0.0f : xc[off];
      }
    }
}

void col2imAdd(const Window &w, const float *col, int64_t channels, float *dx) {
  for (int64_t ch = 0; ch < channels; ++ch)
    for (int64_t k = 0; k < w.kernelSize; ++k) {
      const float *row = col + (ch * w.kernelSize + k) * w.outSize;
      float *xc = dx + ch * w.inSize;
      for (int64_t p = 0; p < w.outSize; ++p) {
        int64_t off = w.inputOffset(p, k);
        if (off >= 0) xc[off] += row[p];
      }
    }
}

struct ConvGeometry {
  Window w;
  int64_t m, group, cg, mg, ck;
};

absl::StatusOr<ConvGeometry> convGeometry(const KernelContext &c, const TensorView &x,
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

absl::StatusOr<PreparedStep> prepareConv(const KernelContext &c) {
  DS_RETURN_IF_ERROR(c.expectArity(2, 3, 1));
  for (const auto &t : c.in) DS_RETURN_IF_ERROR(c.expectDType(t, plan::F32, "operand"));
  DS_RETURN_IF_ERROR(c.expectDType(c.out[0], plan::F32, "result"));
  DS_ASSIGN_OR_RETURN(ConvGeometry g, convGeometry(c, c.in[0], c.in[1], c.out[0]));
  if (c.in.size() == 3) DS_RETURN_IF_ERROR(c.expectShape(c.in[2], {g.m}, "bias"));
  const float *x = c.in[0].as<float>(), *wt = c.in[1].as<float>();
  const float *bias = c.in.size() == 3 ? c.in[2].as<float>() : nullptr;
  float *y = c.out[0].as<float>();
  return PreparedStep([=] {
    const Window &w = g.w;
    parallelFor(w.n * g.group, 1, [&](int64_t lo, int64_t hi) {
      std::vector<float> col(static_cast<size_t>(g.ck * w.outSize));
      for (int64_t t = lo; t < hi; ++t) {
        int64_t n = t / g.group, gi = t % g.group;
        im2col(w, x + (n * w.c + gi * g.cg) * w.inSize, g.cg, col.data());
        float *yo = y + (n * g.m + gi * g.mg) * w.outSize;
        sgemm(false, false, g.mg, w.outSize, g.ck, 1.0f, wt + gi * g.mg * g.ck, g.ck, col.data(),
              w.outSize, 0.0f, yo, w.outSize);
        if (bias)
          for (int64_t o = 0; o < g.mg; ++o)
            for (int64_t p = 0; p < w.outSize; ++p) yo[o * w.outSize + p] += bias[gi * g.mg + o];
      }
    });
    return absl::OkStatus();
  });
}

// conv_grad(x, w, dy) -> (dx, dw)
absl::StatusOr<PreparedStep> prepareConvGrad(const KernelContext &c) {
  DS_RETURN_IF_ERROR(c.expectArity(3, 3, 2));
  for (const auto &t : c.in) DS_RETURN_IF_ERROR(c.expectDType(t, plan::F32, "operand"));
  DS_ASSIGN_OR_RETURN(ConvGeometry g, convGeometry(c, c.in[0], c.in[1], c.in[2]));
  DS_RETURN_IF_ERROR(c.expectShape(c.out[0], c.in[0].shape, "d_input"));
  DS_RETURN_IF_ERROR(c.expectShape(c.out[1], c.in[1].shape, "d_weight"));
  const float *x = c.in[0].as<float>(), *wt = c.in[1].as<float>(), *dy = c.in[2].as<float>();
  float *dx = c.out[0].as<float>(), *dw = c.out[1].as<float>();
  int64_t dxSize = c.out[0].numel, dwSize = c.out[1].numel;
  return PreparedStep([=] {
    const Window &w = g.w;
    std::fill(dx, dx + dxSize, 0.0f);
    std::fill(dw, dw + dwSize, 0.0f);
    // Groups write disjoint slices of dw; samples accumulate into them, so
    // the parallel loop runs over groups, samples in order inside.
    parallelFor(g.group, 1, [&](int64_t lo, int64_t hi) {
      std::vector<float> col(static_cast<size_t>(g.ck * w.outSize));
      for (int64_t gi = lo; gi < hi; ++gi)
        for (int64_t n = 0; n < w.n; ++n) {
          const float *dyo = dy + (n * g.m + gi * g.mg) * w.outSize;
          im2col(w, x + (n * w.c + gi * g.cg) * w.inSize, g.cg, col.data());
          sgemm(false, true, g.mg, g.ck, w.outSize, 1.0f, dyo, w.outSize, col.data(), w.outSize,
                1.0f, dw + gi * g.mg * g.ck, g.ck);
          sgemm(true, false, g.ck, w.outSize, g.mg, 1.0f, wt + gi * g.mg * g.ck, g.ck, dyo,
                w.outSize, 0.0f, col.data(), w.outSize);
          col2imAdd(w, col.data(), g.cg, dx + (n * w.c + gi * g.cg) * w.inSize);
        }
    });
    return absl::OkStatus();
  });
}

absl::StatusOr<Window> poolWindow(const KernelContext &c, const TensorView &x, const TensorView &y) {
  DS_ASSIGN_OR_RETURN(std::vector<int64_t> kernel, c.intsAttr("kernel"));
  DS_ASSIGN_OR_RETURN(Window w, window(c, x, kernel, y));
  if (y.shape[0] != w.n || y.shape[1] != w.c) return c.error("result must keep N and C");
  return w;
}

/// Visits the in-bounds offsets of window p; returns the window's full
/// (padded) size for count_include_pad.
template <typename F> int64_t forWindow(const Window &w, int64_t p, F f) {
  for (int64_t k = 0; k < w.kernelSize; ++k) {
    int64_t off = w.inputOffset(p, k);
    if (off >= 0) f(off);
  }
  return w.kernelSize;
}

/// The padded window size ONNX divides by with count_include_pad: the part
/// of the window inside [-padBegin, in + padEnd), not past the end padding.
int64_t paddedCount(const Window &w, int64_t p, const std::vector<int64_t> &padEnd) {
  int64_t count = 1;
  for (size_t d = w.in.size(); d-- > 0;) {
    int64_t pd = p % w.out[d];
    p /= w.out[d];
    int64_t n = 0;
    for (int64_t k = 0; k < w.kernel[d]; ++k) {
      int64_t x = pd * w.strides[d] - w.padBegin[d] + k * w.dilations[d];
      if (x >= -w.padBegin[d] && x < w.in[d] + padEnd[d]) ++n;
    }
    count *= n;
  }
  return count;
}

/// The first maximum of window p in one channel plane: its offset, or -1
/// when the window lies wholly in the padding. NaN wins, as in PyTorch.
template <typename T> int64_t windowArgMax(const Window &w, const T *xc, int64_t p) {
  T best{};
  int64_t at = -1;
  forWindow(w, p, [&](int64_t off) {
    if (at < 0 || xc[off] > best || (xc[off] != xc[off] && best == best)) {
      best = xc[off];
      at = off;
    }
  });
  return at;
}

/// Row-major spatial offset -> the same point's column-major offset.
int64_t columnMajor(const Window &w, int64_t off) {
  int64_t r = 0, stride = 1;
  std::vector<int64_t> coord(w.in.size());
  for (size_t d = w.in.size(); d-- > 0;) {
    coord[d] = off % w.in[d];
    off /= w.in[d];
  }
  for (size_t d = 0; d < w.in.size(); ++d) {
    r += coord[d] * stride;
    stride *= w.in[d];
  }
  return r;
}

/// Max pooling of any native element type (kIndices: the flat index of each
/// window's maximum in the whole input instead, MaxPool's Indices output).
template <typename T, bool kIndices>
PreparedStep makeMaxPool(const Window &w, const T *xp, void *outp, bool colMajor) {
  return [=]() -> absl::Status {
    parallelFor(w.n * w.c, 1, [&](int64_t lo, int64_t hi) {
      for (int64_t nc = lo; nc < hi; ++nc) {
        const T *xc = xp + nc * w.inSize;
        for (int64_t p = 0; p < w.outSize; ++p) {
          int64_t at = windowArgMax(w, xc, p), idx = nc * w.outSize + p;
          if constexpr (kIndices)
            static_cast<int64_t *>(outp)[idx] =
                at < 0 ? -1 : nc * w.inSize + (colMajor ? columnMajor(w, at) : at);
          else
            static_cast<T *>(outp)[idx] =
                at >= 0 ? xc[at]
                        : (std::numeric_limits<T>::has_infinity ? -std::numeric_limits<T>::infinity()
                                                                : std::numeric_limits<T>::lowest());
        }
      }
    });
    return absl::OkStatus();
  };
}

absl::StatusOr<PreparedStep> prepareMaxPoolIndices(const KernelContext &c) {
  DS_RETURN_IF_ERROR(c.expectArity(1, 1, 1));
  DS_RETURN_IF_ERROR(c.expectDType(c.out[0], plan::I64, "result"));
  DS_ASSIGN_OR_RETURN(Window w, poolWindow(c, c.in[0], c.out[0]));
  DS_ASSIGN_OR_RETURN(int64_t colMajor, c.intAttr("column_major"));
  const TensorView x = c.in[0];
  void *out = c.out[0].data;
  return dispatchNative(c, x.dtype, [&](auto tag) -> absl::StatusOr<PreparedStep> {
    using T = decltype(tag);
    return makeMaxPool<T, true>(w, x.as<T>(), out, colMajor != 0);
  });
}

template <bool kGrad>
absl::StatusOr<PreparedStep> preparePool(const KernelContext &c) {
  if (!kGrad && c.stringAttr("kind").value_or("") == "max") {
    // Max pooling of any native type; average pooling and gradients are f32.
    DS_RETURN_IF_ERROR(c.expectArity(1, 1, 1));
    DS_RETURN_IF_ERROR(c.expectDType(c.out[0], c.in[0].dtype, "result"));
    DS_ASSIGN_OR_RETURN(Window w, poolWindow(c, c.in[0], c.out[0]));
    const TensorView x = c.in[0];
    void *out = c.out[0].data;
    return dispatchNative(c, x.dtype, [&](auto tag) -> absl::StatusOr<PreparedStep> {
      using T = decltype(tag);
      return makeMaxPool<T, false>(w, x.as<T>(), out, false);
    });
  }
  DS_RETURN_IF_ERROR(c.expectArity(kGrad ? 2 : 1, kGrad ? 2 : 1, 1));
  for (const auto &t : c.in) DS_RETURN_IF_ERROR(c.expectDType(t, plan::F32, "operand"));
  DS_RETURN_IF_ERROR(c.expectDType(c.out[0], plan::F32, "result"));
  const TensorView &x = c.in[0];
  const TensorView &y = kGrad ? c.in[1] : c.out[0];
  if (kGrad) DS_RETURN_IF_ERROR(c.expectShape(c.out[0], x.shape, "result"));
  DS_ASSIGN_OR_RETURN(Window w, poolWindow(c, x, y));
  DS_ASSIGN_OR_RETURN(std::string kind, c.stringAttr("kind"));
  if (kind != "max" && kind != "avg") return c.error("kind must be max or avg");
  bool isMax = kind == "max";
  int64_t includePad = 0;
  if (c.hasAttr("count_include_pad")) {
    DS_ASSIGN_OR_RETURN(includePad, c.intAttr("count_include_pad"));
  }
  DS_ASSIGN_OR_RETURN(std::vector<int64_t> pads, c.intsAttr("pads"));
  std::vector<int64_t> padEnd(pads.begin() + w.in.size(), pads.end());
  const float *xp = x.as<float>(), *yp = y.as<float>();
  float *out = c.out[0].as<float>();
  int64_t outNumel = c.out[0].numel;
  return PreparedStep([=] {
    if (kGrad) std::fill(out, out + outNumel, 0.0f);
    parallelFor(w.n * w.c, 1, [&](int64_t lo, int64_t hi) {
      for (int64_t nc = lo; nc < hi; ++nc) {
        const float *xc = xp + nc * w.inSize;
        for (int64_t p = 0; p < w.outSize; ++p) {
          int64_t idx = nc * w.outSize + p;
          if (isMax) { // only the gradient: the forward max is makeMaxPool
            int64_t at = windowArgMax(w, xc, p);
            if (at >= 0) out[nc * w.inSize + at] += yp[idx];
          } else {
            double sum = 0;
            int64_t inside = 0;
            forWindow(w, p, [&](int64_t off) {
              sum += xc[off];
              ++inside;
            });
            int64_t div = includePad ? paddedCount(w, p, padEnd) : inside;
            if (kGrad) {
              float share = div ? yp[idx] / static_cast<float>(div) : 0.0f;
              forWindow(w, p, [&](int64_t off) { out[nc * w.inSize + off] += share; });
            } else {
              out[idx] = div ? static_cast<float>(sum / div) : 0.0f;
            }
          }
        }
      }
    });
    return absl::OkStatus();
  });
}

} // namespace

void registerConvKernels(KernelRegistry &r) {
  r.add("conv", prepareConv);
  r.add("conv_grad", prepareConvGrad);
  r.add("pool", preparePool<false>);
  r.add("pool_grad", preparePool<true>);
  r.add("max_pool_indices", prepareMaxPoolIndices);
}

} // namespace ds::rt::cpu

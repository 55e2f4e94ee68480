//===- ResizeOps.cpp - ONNX Resize, Upsample, AffineGrid and GridSample ---===//
//
// Resize is separable: each resized axis maps every output position to a
// few input positions (taps) with fixed weights, all decided by the shapes,
// scales and attributes, so all known at compile time. ds computes the taps
// and weights here, exactly as ONNX's reference does (coordinate
// transformation, nearest rounding, linear/cubic kernels, antialiasing,
// exclude_outside, tf_crop_and_resize's extrapolation), and imports one
// axis as `sum_t gather(x, tap_t, axis) * weight_t` (nearest: one gather;
// a short last or second-last axis: one product with the taps' matrix).
// So Resize needs no gradient rule of its own: the gathers' and products'
// serve training (a U-Net's upsampling trains). Inference plans resample
// one or two f32 axes with the same tables in one ds.resample step, which
// reads the input once and works in any layout (channels-last too).
//
//===----------------------------------------------------------------------===//
#include "ImporterCore.h"

#include <cmath>

using namespace mlir;
using namespace mlir::ds;
using namespace mlir::ds::importer;

namespace {

/// How one output axis samples its input axis.
struct AxisSampling {
  int64_t taps = 0;                // per output position
  std::vector<int64_t> index;      // [out][taps], clamped into the input
  std::vector<double> weight;      // [out][taps]
  std::vector<bool> extrapolated;  // [out]: tf_crop_and_resize outside the roi
};

struct ResizeAttrs {
  std::string mode = "nearest", coordMode = "half_pixel", nearestMode = "round_prefer_floor";
  double cubicA = -0.75, extrapolation = 0.0;
  bool excludeOutside = false, antialias = false;
};

/// The weights of the taps around a source coordinate whose distance past
/// its left neighbour is `ratio` (in (0, 1]), for a scale factor `scale`.
std::vector<double> coefficients(const ResizeAttrs &a, double ratio, double scale) {
  if (a.mode == "nearest") {
    if (ratio == std::floor(ratio)) return {0, 1};
    const std::string &m = a.nearestMode;
    if (m == "round_prefer_floor") return {double(ratio <= 0.5), double(ratio > 0.5)};
    if (m == "round_prefer_ceil") return {double(ratio < 0.5), double(ratio >= 0.5)};
    if (m == "floor") return {1, 0};
    return {0, 1}; // ceil
  }
  if (a.mode == "linear" && !a.antialias) return {1 - ratio, ratio};
  const double A = a.cubicA;
  if (a.mode == "cubic" && !a.antialias) {
    double r1 = ratio + 1, q = 1 - ratio, q1 = q + 1;
    return {((A * r1 - 5 * A) * r1 + 8 * A) * r1 - 4 * A,
            ((A + 2) * ratio - (A + 3)) * ratio * ratio + 1,
            ((A + 2) * q - (A + 3)) * q * q + 1,
            ((A * q1 - 5 * A) * q1 + 8 * A) * q1 - 4 * A};
  }
  // Antialiased (downsampling widens the kernel by 1/scale), normalized.
  double s = std::min(scale, 1.0);
  std::vector<double> c;
  if (a.mode == "linear") {
    int64_t start = static_cast<int64_t>(std::floor(-1 / s) + 1), footprint = 2 - 2 * start;
    for (int64_t i = start; i < start + footprint; ++i)
      c.push_back(std::clamp(1 - std::abs((i - ratio) * s), 0.0, 1.0));
  } else {
    int64_t start = static_cast<int64_t>(std::floor(-2 / s) + 1), end = 2 - start;
    for (int64_t i = start; i < end; ++i) {
      double x = std::abs(s * (i - ratio)), x2 = x * x, x3 = x2 * x;
      c.push_back(x <= 1  ? (A + 2) * x3 - (A + 3) * x2 + 1
                  : x < 2 ? A * x3 - 5 * A * x2 + 8 * A * x - 4 * A
                          : 0.0);
    }
  }
  double sum = 0;
  for (double v : c) sum += v;
  for (double &v : c) v /= sum;
  return c;
}

/// Output position y's source coordinate (ONNX's coordinate transformation).
double sourceCoordinate(const ResizeAttrs &a, double y, double scale, int64_t in, double outF,
                        int64_t outI, double roiStart, double roiEnd) {
  const std::string &m = a.coordMode;
  if (m == "align_corners") return outF == 1 ? 0.0 : y * (in - 1) / (outF - 1);
  if (m == "asymmetric") return y / scale;
  if (m == "tf_crop_and_resize")
    return (outF == 1 ? (roiEnd - roiStart) * (in - 1) / 2
                      : y * (roiEnd - roiStart) * (in - 1) / (outF - 1)) +
           roiStart * (in - 1);
  if (m == "pytorch_half_pixel") return outF == 1 ? -0.5 : (y + 0.5) / scale - 0.5;
  if (m == "tf_half_pixel_for_nn") return (y + 0.5) / scale; // opsets 11-12
  if (m == "half_pixel_symmetric") {
    double offset = in / 2.0 * (1 - outI / outF);
    return offset + (y + 0.5) / scale - 0.5;
  }
  return (y + 0.5) / scale - 0.5; // half_pixel
}

AxisSampling sampleAxis(const ResizeAttrs &a, int64_t in, int64_t out, double scale,
                        double roiStart, double roiEnd) {
  AxisSampling s;
  double outF = scale * in;
  for (int64_t y = 0; y < out; ++y) {
    double x = sourceCoordinate(a, static_cast<double>(y), scale, in, outF, out, roiStart, roiEnd);
    s.extrapolated.push_back(a.coordMode == "tf_crop_and_resize" && (x < 0 || x > in - 1));
    double xi = std::floor(x), ratio = x == xi ? 1.0 : x - xi;
    std::vector<double> c = coefficients(a, ratio, scale);
    int64_t n = static_cast<int64_t>(c.size());
    if (!s.taps) s.taps = n;
    // The n taps nearest x, ties to the smaller index (the reference's
    // edge-padded neighbourhood), then clamped: edge padding.
    int64_t pad = (n + 1) / 2;
    double xp = x + pad, pp = std::floor(xp), frac = xp - pp;
    int64_t offset = n % 2 == 0 ? (frac == 0 ? -(n / 2) : -(n / 2) + 1)
                                : (frac <= 0.5 ? -((n - 1) / 2) : -((n - 1) / 2) + 1);
    int64_t start = static_cast<int64_t>(pp) + offset - pad;
    if (a.excludeOutside) {
      double sum = 0;
      for (int64_t t = 0; t < n; ++t) {
        if (start + t < 0 || start + t >= in) c[t] = 0;
        sum += c[t];
      }
      if (sum != 0)
        for (double &v : c) v /= sum;
    }
    for (int64_t t = 0; t < n; ++t) {
      s.index.push_back(std::clamp<int64_t>(start + t, 0, in - 1));
      s.weight.push_back(c[t]);
    }
  }
  return s;
}

class ResizeImporter : public NodeImporter {
public:
  using NodeImporter::NodeImporter;

  LogicalResult resize(const onnx::NodeProto &n);
  LogicalResult upsample(const onnx::NodeProto &n);
  LogicalResult affineGrid(const onnx::NodeProto &n);
  LogicalResult gridSample(const onnx::NodeProto &n);

private:
  LogicalResult resizeWith(const onnx::NodeProto &n, Value x, const ResizeAttrs &a,
                           ArrayRef<double> scales, ArrayRef<int64_t> outShape,
                           ArrayRef<double> roi);
  LogicalResult resizeByScales(const onnx::NodeProto &n, Value x, const ResizeAttrs &a,
                               ArrayRef<double> scales, ArrayRef<double> roi);
  FailureOr<Value> resample(Value x, ArrayRef<std::pair<int64_t, AxisSampling>> axes,
                            ArrayRef<int64_t> outShape, const ResizeAttrs &a);
  FailureOr<Value> resizeAxis(Value x, int64_t axis, const AxisSampling &s, int64_t out,
                              const ResizeAttrs &a);
  FailureOr<SmallVector<double>> constantFloats(const onnx::NodeProto &n, int i,
                                                StringRef what);
};

FailureOr<SmallVector<double>> ResizeImporter::constantFloats(const onnx::NodeProto &n, int i,
                                                              StringRef what) {
  // A float initializer imports as a parameter; scales and roi are read
  // from it (they decide shapes, so they are not trained).
  Value v = input(n, i);
  DenseElementsAttr c = literalOf(v);
  if (auto p = v ? v.getDefiningOp<ParameterOp>() : ParameterOp(); !c && p)
    c = dyn_cast<DenseElementsAttr>(p.getValue());
  if (!c || !isa<FloatType>(c.getElementType()))
    return FailureOr<SmallVector<double>>(
        nodeError(n) << "input '" << what
                     << "' must be a float tensor known at compile time (give a graph input's "
                        "value with --bind-input)");
  SmallVector<double> out;
  for (const APFloat &f : c.getValues<APFloat>()) out.push_back(f.convertToDouble());
  return out;
}

/// One axis: the taps gathered along it and summed with their weights (a
/// single gather when one tap carries all the weight, as in nearest).
FailureOr<Value> ResizeImporter::resizeAxis(Value x, int64_t axis, const AxisSampling &s,
                                            int64_t out, const ResizeAttrs &a) {
  RankedTensorType xt = typeOf(x);
  Type elem = xt.getElementType();
  int64_t rank = xt.getRank(), in = xt.getDimSize(axis);
  // Input extents up to this resize by a product with the tap-weight matrix.
  constexpr int64_t kDenseTapsUpTo = 64;
  auto gatherTap = [&](ArrayRef<int64_t> idx) {
    auto it = RankedTensorType::get({out}, b_.getI64Type());
    return build<GatherOp>({x, constant(DenseElementsAttr::get(it, idx))},
                           {i64Attr("axis", axis)});
  };
  Value y;
  if (a.mode == "nearest") {
    std::vector<int64_t> pick(out);
    for (int64_t o = 0; o < out; ++o) {
      int64_t best = 0;
      for (int64_t t = 1; t < s.taps; ++t)
        if (s.weight[o * s.taps + t] > s.weight[o * s.taps + best]) best = t;
      pick[o] = s.index[o * s.taps + best];
    }
    DS_TRY(g, gatherTap(pick));
    y = g;
  } else if (in <= kDenseTapsUpTo && (axis == rank - 1 || axis == rank - 2) &&
             isa<FloatType>(elem)) {
    // A short axis (a segmentation head's 16-64 wide feature maps) resizes
    // as one product with the [in, out] matrix of the taps' weights: a GEMM
    // reads the rows once where the gathers read them once per tap.
    SmallVector<double> m(in * out, 0.0);
    for (int64_t o = 0; o < out; ++o)
      for (int64_t t = 0; t < s.taps; ++t)
        m[s.index[o * s.taps + t] * out + o] += s.weight[o * s.taps + t];
    SmallVector<Attribute> vals;
    bool last = axis == rank - 1;
    for (int64_t r = 0; r < (last ? in : out); ++r)
      for (int64_t c = 0; c < (last ? out : in); ++c)
        vals.push_back(b_.getFloatAttr(elem, last ? m[r * out + c] : m[c * out + r]));
    auto mt = RankedTensorType::get(last ? ArrayRef<int64_t>{in, out} : ArrayRef<int64_t>{out, in},
                                    elem);
    Value mat = constant(DenseElementsAttr::get(mt, vals));
    DS_TRY(p, last ? build<MatmulOp>({x, mat}) : build<MatmulOp>({mat, x}));
    y = p;
  } else {
    SmallVector<int64_t> wShape(rank, 1);
    wShape[axis] = out;
    auto wType = RankedTensorType::get(wShape, elem);
    for (int64_t t = 0; t < s.taps; ++t) {
      std::vector<int64_t> idx(out);
      SmallVector<Attribute> w;
      bool any = false;
      for (int64_t o = 0; o < out; ++o) {
        idx[o] = s.index[o * s.taps + t];
        double v = s.weight[o * s.taps + t];
        any |= v != 0;
        w.push_back(b_.getFloatAttr(elem, v));
      }
      if (!any) continue;
      DS_TRY(g, gatherTap(idx));
      DS_TRY(term, build<MulOp>({g, constant(DenseElementsAttr::get(wType, w))}));
      if (!y) {
        y = term;
      } else {
        DS_TRY(sum, build<AddOp>({y, term}));
        y = sum;
      }
    }
    if (!y) { // every weight 0 (exclude_outside with nothing inside)
      DS_TRY(g, gatherTap(std::vector<int64_t>(out, 0)));
      DS_TRY(z, build<MulOp>({g, scalar(elem, 0.0)}));
      y = z;
    }
  }
  if (llvm::is_contained(s.extrapolated, true)) {
    SmallVector<int64_t> mShape(rank, 1);
    mShape[axis] = out;
    SmallVector<bool> mask(s.extrapolated.begin(), s.extrapolated.end());
    Value m = constant(DenseElementsAttr::get(RankedTensorType::get(mShape, b_.getI1Type()),
                                              ArrayRef<bool>(mask)));
    DS_TRY(e, build<WhereOp>({m, scalar(elem, a.extrapolation), y}));
    y = e;
  }
  return y;
}

/// One ds.resample of the axes' tap tables (nearest: the one tap of
/// weight 1, so an infinite neighbour does not become 0 * inf).
FailureOr<Value> ResizeImporter::resample(Value x,
                                          ArrayRef<std::pair<int64_t, AxisSampling>> axes,
                                          ArrayRef<int64_t> outShape, const ResizeAttrs &a) {
  SmallVector<int64_t> index, taps, axisList;
  SmallVector<float> weight;
  for (const auto &[d, s] : axes) {
    const int64_t out = outShape[d];
    const bool nearest = a.mode == "nearest";
    axisList.push_back(d);
    taps.push_back(nearest ? 1 : s.taps);
    for (int64_t o = 0; o < out; ++o) {
      if (nearest) {
        int64_t best = 0;
        for (int64_t t = 1; t < s.taps; ++t)
          if (s.weight[o * s.taps + t] > s.weight[o * s.taps + best]) best = t;
        index.push_back(s.index[o * s.taps + best]);
        weight.push_back(1.0f);
        continue;
      }
      for (int64_t t = 0; t < s.taps; ++t) {
        index.push_back(s.index[o * s.taps + t]);
        weight.push_back(static_cast<float>(s.weight[o * s.taps + t]));
      }
    }
  }
  const int64_t n = static_cast<int64_t>(index.size());
  Value idx = constant(DenseElementsAttr::get(RankedTensorType::get({n}, b_.getI64Type()),
                                              ArrayRef<int64_t>(index)));
  Value w = constant(DenseElementsAttr::get(RankedTensorType::get({n}, b_.getF32Type()),
                                            ArrayRef<float>(weight)));
  return buildTyped<ResampleOp>(RankedTensorType::get(outShape, b_.getF32Type()), {x, idx, w},
                                {b_.getNamedAttr("axes", b_.getDenseI64ArrayAttr(axisList)),
                                 b_.getNamedAttr("taps", b_.getDenseI64ArrayAttr(taps))});
}

/// Output sizes floor(scale * input), as ONNX's scales input gives them.
LogicalResult ResizeImporter::resizeByScales(const onnx::NodeProto &n, Value x,
                                             const ResizeAttrs &a, ArrayRef<double> scales,
                                             ArrayRef<double> roi) {
  ArrayRef<int64_t> in = typeOf(x).getShape();
  SmallVector<int64_t> out;
  for (size_t d = 0; d < in.size(); ++d) {
    if (!(scales[d] > 0) || !std::isfinite(scales[d]) ||
        scales[d] * in[d] > static_cast<double>(opts_.maxElements))
      return nodeError(n) << "scale " << scales[d] << " of axis " << d
                          << " must be positive and keep the output in range";
    out.push_back(static_cast<int64_t>(std::floor(scales[d] * in[d])));
  }
  return resizeWith(n, x, a, scales, out, roi);
}

LogicalResult ResizeImporter::resizeWith(const onnx::NodeProto &n, Value x,
                                         const ResizeAttrs &a, ArrayRef<double> scales,
                                         ArrayRef<int64_t> outShape, ArrayRef<double> roi) {
  RankedTensorType xt = typeOf(x);
  int64_t rank = xt.getRank();
  Type elem = xt.getElementType();
  bool isFloat = isa<FloatType>(elem);
  if (a.mode != "nearest" && a.mode != "linear" && a.mode != "cubic")
    return nodeError(n) << "mode '" << a.mode << "' is not nearest, linear or cubic";
  if (a.mode != "nearest" && !isFloat)
    return nodeError(n) << a.mode << " Resize needs a float input, not " << elem;
  static const char *coordModes[] = {"half_pixel",         "half_pixel_symmetric",
                                     "pytorch_half_pixel", "align_corners",
                                     "asymmetric",         "tf_crop_and_resize",
                                     "tf_half_pixel_for_nn"};
  if (!llvm::is_contained(coordModes, StringRef(a.coordMode)))
    return nodeError(n) << "coordinate_transformation_mode '" << a.coordMode << "' is unknown";
  static const char *nearestModes[] = {"round_prefer_floor", "round_prefer_ceil", "floor",
                                       "ceil"};
  if (!llvm::is_contained(nearestModes, StringRef(a.nearestMode)))
    return nodeError(n) << "nearest_mode '" << a.nearestMode << "' is unknown";
  if (a.antialias && a.mode == "nearest")
    return nodeError(n) << "antialias applies to linear and cubic modes only";
  if (a.coordMode == "tf_crop_and_resize" && roi.size() != static_cast<size_t>(2 * rank))
    return nodeError(n) << "tf_crop_and_resize needs a roi";
  for (int64_t d = 0; d < rank; ++d)
    if (outShape[d] < 0 || outShape[d] > opts_.maxElements)
      return nodeError(n) << "output dimension " << d << " (" << outShape[d]
                          << ") is out of range";
  // 16-bit inputs interpolate in f32 and round once.
  Value h = x;
  if (isFloat && elem.getIntOrFloatBitWidth() < 32 && a.mode != "nearest") {
    DS_TRY(w, castTo(x, b_.getF32Type()));
    h = w;
  }
  SmallVector<std::pair<int64_t, AxisSampling>> axes;
  for (int64_t d = 0; d < rank; ++d) {
    int64_t in = xt.getDimSize(d), out = outShape[d];
    double rs = roi.empty() ? 0.0 : roi[d], re = roi.empty() ? 1.0 : roi[d + rank];
    if (scales[d] == 1.0 && out == in && rs == 0.0 && re == 1.0) continue; // identity
    if (in == 0 || out == 0)
      return nodeError(n) << "axis " << d << " resizes from " << in << " to " << out
                          << " elements; both must be positive";
    axes.push_back({d, sampleAxis(a, in, out, scales[d], rs, re)});
  }
  // An inference plan resamples one or two f32 axes in one step.
  bool extrapolates = llvm::any_of(
      axes, [](const auto &ax) { return llvm::is_contained(ax.second.extrapolated, true); });
  if (!opts_.training && typeOf(h).getElementType().isF32() && !extrapolates &&
      (axes.size() == 1 || axes.size() == 2)) {
    DS_TRY(r, resample(h, axes, outShape, a));
    h = r;
    axes.clear();
  }
  for (auto &[d, s] : axes) {
    DS_TRY(r, resizeAxis(h, d, s, outShape[d], a));
    h = r;
  }
  DS_TRY(y, castTo(h, elem));
  setOutput(n, 0, y);
  return success();
}

LogicalResult ResizeImporter::resize(const onnx::NodeProto &n) {
  DS_TRY(x, required(n, 0));
  int64_t rank = typeOf(x).getRank();
  ResizeAttrs a;
  DS_TRY(mode, stringAttr(n, "mode", "nearest"));
  a.mode = mode;
  if (opset_ < 11) { // Resize-10: X and scales, Upsample's sampling
    a.coordMode = "asymmetric";
    a.nearestMode = "floor";
    DS_TRY(scales, constantFloats(n, 1, "scales"));
    if (scales.size() != static_cast<size_t>(rank))
      return nodeError(n) << "scales has " << scales.size() << " values for rank " << rank;
    return resizeByScales(n, x, a, scales, {});
  }
  DS_TRY(coord, stringAttr(n, "coordinate_transformation_mode", "half_pixel"));
  DS_TRY(nearest, stringAttr(n, "nearest_mode", "round_prefer_floor"));
  DS_TRY(cubicA, floatAttr(n, "cubic_coeff_a", -0.75f));
  DS_TRY(exclude, intAttr(n, "exclude_outside", 0));
  DS_TRY(extrapolation, floatAttr(n, "extrapolation_value", 0.0f));
  DS_TRY(antialias, intAttr(n, "antialias", 0));
  DS_TRY(policy, stringAttr(n, "keep_aspect_ratio_policy", "stretch"));
  DS_TRY(axesOpt, intsAttr(n, "axes"));
  a.coordMode = coord, a.nearestMode = nearest, a.cubicA = cubicA;
  a.excludeOutside = exclude != 0, a.extrapolation = extrapolation, a.antialias = antialias != 0;
  SmallVector<int64_t> axes;
  if (axesOpt) {
    axes = *axesOpt;
    for (int64_t &ax : axes)
      if (failed(normalizeAxis(n, ax, rank))) return failure();
  } else {
    for (int64_t d = 0; d < rank; ++d) axes.push_back(d);
  }
  int64_t k = static_cast<int64_t>(axes.size());
  // Empty scales/sizes tensors stand for absent inputs.
  auto given = [&](int i) {
    Value v = input(n, i);
    return v && typeOf(v).getNumElements() > 0;
  };
  SmallVector<double> roi;
  if (given(1) && a.coordMode == "tf_crop_and_resize") {
    DS_TRY(r, constantFloats(n, 1, "roi"));
    if (r.size() != static_cast<size_t>(2 * k))
      return nodeError(n) << "roi has " << r.size() << " values; " << 2 * k << " expected";
    roi.assign(rank, 0.0);
    roi.append(rank, 1.0);
    for (int64_t i = 0; i < k; ++i) roi[axes[i]] = r[i], roi[rank + axes[i]] = r[k + i];
  }
  ArrayRef<int64_t> inShape = typeOf(x).getShape();
  if (given(2) == given(3))
    return nodeError(n) << "exactly one of scales and sizes must be given";
  if (given(2)) {
    if (policy != "stretch" && policy != "not_larger" && policy != "not_smaller")
      return nodeError(n) << "keep_aspect_ratio_policy '" << policy << "' is unknown";
    DS_TRY(s, constantFloats(n, 2, "scales"));
    if (s.size() != static_cast<size_t>(k))
      return nodeError(n) << "scales has " << s.size() << " values for " << k << " axes";
    SmallVector<double> scales(rank, 1.0);
    for (int64_t i = 0; i < k; ++i) scales[axes[i]] = s[i];
    return resizeByScales(n, x, a, scales, roi);
  }
  DS_TRY(sz, constantInts(n, 3, "sizes"));
  if (sz.size() != static_cast<size_t>(k))
    return nodeError(n) << "sizes has " << sz.size() << " values for " << k << " axes";
  SmallVector<int64_t> sizes(inShape);
  for (int64_t i = 0; i < k; ++i) sizes[axes[i]] = sz[i];
  SmallVector<double> scales(rank, 1.0);
  for (int64_t ax : axes) {
    if (sizes[ax] < 0 || inShape[ax] == 0)
      return nodeError(n) << "sizes must be >= 0 and the input axes non-empty";
    scales[ax] = static_cast<double>(sizes[ax]) / static_cast<double>(inShape[ax]);
  }
  if (policy != "stretch") {
    // One scale for all the axes, the smallest or largest; the sizes follow
    // from it, rounded half up (ONNX's reference).
    if (policy != "not_larger" && policy != "not_smaller")
      return nodeError(n) << "keep_aspect_ratio_policy '" << policy << "' is unknown";
    double scale = policy == "not_larger" ? INFINITY : -INFINITY;
    for (int64_t ax : axes)
      scale = policy == "not_larger" ? std::min(scale, scales[ax]) : std::max(scale, scales[ax]);
    for (int64_t ax : axes) {
      scales[ax] = scale;
      sizes[ax] = static_cast<int64_t>(scale * inShape[ax] + 0.5);
    }
  }
  return resizeWith(n, x, a, scales, sizes, roi);
}

LogicalResult ResizeImporter::upsample(const onnx::NodeProto &n) {
  DS_TRY(x, required(n, 0));
  ResizeAttrs a;
  DS_TRY(mode, stringAttr(n, "mode", "nearest"));
  a.mode = mode == "bilinear" ? "linear" : mode;
  a.coordMode = "asymmetric";
  a.nearestMode = "floor";
  SmallVector<double> scales;
  if (opset_ >= 9) {
    DS_TRY(s, constantFloats(n, 1, "scales"));
    scales = s;
  } else {
    const onnx::AttributeProto *attr = findAttr(n, "scales");
    if (!attr) return nodeError(n) << "needs attribute 'scales'";
    for (float f : attr->floats()) scales.push_back(f);
  }
  if (scales.size() != static_cast<size_t>(typeOf(x).getRank()))
    return nodeError(n) << "scales has " << scales.size() << " values for rank "
                        << typeOf(x).getRank();
  return resizeByScales(n, x, a, scales, {});
}

// AffineGrid: the sampling grid of theta ([N, 2, 3] or [N, 3, 4]) over a
// size known at compile time: the normalized base grid (x, y[, z], 1), a
// constant, times theta transposed.
LogicalResult ResizeImporter::affineGrid(const onnx::NodeProto &n) {
  DS_TRY(theta, required(n, 0));
  DS_TRY(size, constantInts(n, 1, "size"));
  DS_TRY(alignCorners, intAttr(n, "align_corners", 0));
  RankedTensorType tt = typeOf(theta);
  Type elem = tt.getElementType();
  int64_t spatial = static_cast<int64_t>(size.size()) - 2;
  if ((spatial != 2 && spatial != 3) || !isa<FloatType>(elem) || tt.getRank() != 3 ||
      tt.getDimSize(1) != spatial || tt.getDimSize(2) != spatial + 1 || size[0] != tt.getDimSize(0))
    return nodeError(n) << "theta must be [N, 2, 3] with size [N, C, H, W], or [N, 3, 4] with "
                           "size [N, C, D, H, W]";
  // Axis extents, fastest first in the coordinate tuple: (W, H[, D]).
  SmallVector<int64_t> extent(size.begin() + 2, size.end());
  int64_t points = 1;
  for (int64_t e : extent) {
    if (e <= 0 || e > opts_.foldLimit) return nodeError(n) << "size values must be in [1, fold limit]";
    points *= e;
  }
  if (points * (spatial + 1) > opts_.foldLimit)
    return nodeError(n) << "a grid of " << points << " points is too large to fold";
  auto coord = [&](int64_t i, int64_t e) {
    if (e == 1) return 0.0;
    return alignCorners ? -1.0 + 2.0 * i / (e - 1) : (2.0 * i + 1) / e - 1.0;
  };
  SmallVector<Attribute> base;
  SmallVector<int64_t> idx(spatial, 0); // over (D,) H, W in row-major order
  for (int64_t p = 0; p < points; ++p) {
    int64_t rem = p;
    for (int64_t d = spatial - 1; d >= 0; --d) idx[d] = rem % extent[d], rem /= extent[d];
    for (int64_t d = spatial - 1; d >= 0; --d) // x (last axis) first
      base.push_back(b_.getFloatAttr(elem, coord(idx[d], extent[d])));
    base.push_back(b_.getFloatAttr(elem, 1.0));
  }
  Value grid = constant(DenseElementsAttr::get(
      RankedTensorType::get({points, spatial + 1}, elem), base));
  DS_TRY(thetaT, build<TransposeOp>({theta}, {arrAttr("permutation", {0, 2, 1})}));
  DS_TRY(out, build<MatmulOp>({grid, thetaT})); // [N, points, spatial]
  SmallVector<int64_t> shape{size[0]};
  shape.append(extent.begin(), extent.end());
  shape.push_back(spatial);
  DS_TRY(y, reshape(out, shape));
  setOutput(n, 0, y);
  return success();
}

// GridSample: the grid's coordinates are data, so its taps are computed by
// the plan: per spatial axis the source coordinate (denormalized, then
// clamped or reflected back inside as padding_mode says), its 1 (nearest),
// 2 (linear) or 4 (cubic) taps and their weights; every combination of taps
// is one GatherElements of the flattened input, weighted (and zeroed
// outside for padding_mode zeros), and the combinations are summed.
LogicalResult ResizeImporter::gridSample(const onnx::NodeProto &n) {
  DS_TRY(x, required(n, 0));
  DS_TRY(grid, required(n, 1));
  DS_TRY(mode0, stringAttr(n, "mode", opset_ >= 20 ? "linear" : "bilinear"));
  DS_TRY(padding, stringAttr(n, "padding_mode", "zeros"));
  DS_TRY(alignCorners, intAttr(n, "align_corners", 0));
  std::string mode = mode0 == "bilinear" ? "linear" : mode0 == "bicubic" ? "cubic" : mode0;
  if (mode != "nearest" && mode != "linear" && mode != "cubic")
    return nodeError(n) << "mode '" << mode0 << "' is not nearest, linear or cubic";
  if (padding != "zeros" && padding != "border" && padding != "reflection")
    return nodeError(n) << "padding_mode '" << padding << "' is not zeros, border or reflection";
  RankedTensorType xt = typeOf(x), gt = typeOf(grid);
  Type elem = xt.getElementType();
  int64_t k = xt.getRank() - 2;
  if (k < 1 || !isa<FloatType>(elem) || gt.getRank() != k + 2 || gt.getDimSize(0) != xt.getDimSize(0) ||
      gt.getDimSize(k + 1) != k)
    return nodeError(n) << "X must be [N, C, spatial...] (float) and grid [N, out spatial..., "
                        << "number of spatial axes]";
  int64_t batch = xt.getDimSize(0), channels = xt.getDimSize(1), points = 1, total = 1;
  for (int64_t d = 1; d <= k; ++d) points *= gt.getDimSize(d);
  SmallVector<int64_t> sizes(xt.getShape().drop_front(2));
  for (int64_t s : sizes) total *= s;
  if (total == 0) return nodeError(n) << "X has an empty spatial axis: there is nothing to sample";
  Type f = b_.getF32Type(), i64 = b_.getI64Type();
  DS_TRY(g32, castTo(grid, f));
  DS_TRY(gflat, reshape(g32, {batch, points, k}));
  auto c = [&](double v) { return scalar(f, v); };
  // reflect(v) into [lo, hi]: by the nearer border until inside.
  auto reflect = [&](Value v, double lo, double hi) -> FailureOr<Value> {
    double range = hi - lo;
    DS_TRY(below, build<LessOp>({v, c(lo)}));
    DS_TRY(above, build<GreaterOp>({v, c(hi)}));
    DS_TRY(dLo, build<SubOp>({c(lo), v}));
    DS_TRY(dHi, build<SubOp>({v, c(hi)}));
    DS_TRY(dist, build<WhereOp>({below, dLo, dHi}));
    DS_TRY(q, build<DivOp>({dist, c(range)}));
    DS_TRY(flips, buildTyped<FloorOp>(q.getType(), q));
    DS_TRY(whole, build<MulOp>({flips, c(range)}));
    DS_TRY(rest, build<SubOp>({dist, whole}));
    DS_TRY(parity, build<ModOp>({flips, c(2)}));
    DS_TRY(even, build<EqualOp>({parity, c(0)}));
    DS_TRY(loPlus, build<AddOp>({c(lo), rest}));
    DS_TRY(hiMinus, build<SubOp>({c(hi), rest}));
    DS_TRY(fromLo, build<WhereOp>({even, loPlus, hiMinus}));  // reflected off lo
    DS_TRY(fromHi, build<WhereOp>({even, hiMinus, loPlus}));  // reflected off hi
    DS_TRY(r1, build<WhereOp>({above, fromHi, v}));
    return build<WhereOp>({below, fromLo, r1});
  };
  struct Tap {
    Value index, weight; // [N, P] i64 (in range) and f32 (0 outside for zeros)
  };
  SmallVector<SmallVector<Tap>> taps(k);
  for (int64_t d = 0; d < k; ++d) {
    int64_t size = sizes[d];
    double lo = alignCorners ? 0.0 : -0.5, hi = alignCorners ? size - 1.0 : size - 0.5;
    DS_TRY(comp, sliceAxis(gflat, 2, k - 1 - d, 1, 1)); // grid lists the last axis first
    DS_TRY(g, reshape(comp, {batch, points}));
    DS_TRY(g1, build<AddOp>({g, c(1)}));
    Value coord;
    if (alignCorners) {
      DS_TRY(v, build<MulOp>({g1, c((size - 1) / 2.0)}));
      coord = v;
    } else {
      DS_TRY(v, build<MulOp>({g1, c(size / 2.0)}));
      DS_TRY(w, build<SubOp>({v, c(0.5)}));
      coord = w;
    }
    if (mode == "nearest") {
      DS_TRY(r, buildTyped<RoundOp>(coord.getType(), coord));
      coord = r;
    }
    if (padding != "zeros") {
      DS_TRY(below, build<LessOp>({coord, c(lo)}));
      DS_TRY(above, build<GreaterOp>({coord, c(hi)}));
      DS_TRY(out, build<OrOp>({below, above}));
      Value inside;
      if (padding == "border") {
        DS_TRY(a, build<MaxOp>({coord, c(0)}));
        DS_TRY(b, build<MinOp>({a, c(size - 1.0)}));
        inside = b;
      } else {
        DS_TRY(rf, reflect(coord, lo, hi));
        inside = rf;
      }
      DS_TRY(adj, build<WhereOp>({out, inside, coord}));
      coord = adj;
    }
    // Taps and weights along this axis.
    SmallVector<std::pair<Value, Value>> raw; // (position as float, weight)
    if (mode == "nearest") {
      raw.push_back({coord, c(1)});
    } else {
      DS_TRY(base, buildTyped<FloorOp>(coord.getType(), coord));
      DS_TRY(t, build<SubOp>({coord, base}));
      if (mode == "linear") {
        DS_TRY(w0, build<SubOp>({c(1), t}));
        DS_TRY(p1, build<AddOp>({base, c(1)}));
        raw.push_back({base, w0});
        raw.push_back({p1, t});
      } else {
        const double A = -0.75;
        // Keys' cubic weights at distances t+1, t, 1-t, 2-t.
        auto far = [&](Value s) -> FailureOr<Value> { // ((A s - 5A) s + 8A) s - 4A
          DS_TRY(a, build<MulOp>({s, c(A)}));
          DS_TRY(b, build<SubOp>({a, c(5 * A)}));
          DS_TRY(e, build<MulOp>({b, s}));
          DS_TRY(f2, build<AddOp>({e, c(8 * A)}));
          DS_TRY(g2, build<MulOp>({f2, s}));
          return build<SubOp>({g2, c(4 * A)});
        };
        auto near = [&](Value s) -> FailureOr<Value> { // ((A+2) s - (A+3)) s s + 1
          DS_TRY(a, build<MulOp>({s, c(A + 2)}));
          DS_TRY(b, build<SubOp>({a, c(A + 3)}));
          DS_TRY(e, build<MulOp>({b, s}));
          DS_TRY(f2, build<MulOp>({e, s}));
          return build<AddOp>({f2, c(1)});
        };
        DS_TRY(tp1, build<AddOp>({t, c(1)}));
        DS_TRY(omt, build<SubOp>({c(1), t}));
        DS_TRY(tmt, build<SubOp>({c(2), t}));
        DS_TRY(w0, far(tp1));
        DS_TRY(w1, near(t));
        DS_TRY(w2, near(omt));
        DS_TRY(w3, far(tmt));
        DS_TRY(pm1, build<SubOp>({base, c(1)}));
        DS_TRY(pp1, build<AddOp>({base, c(1)}));
        DS_TRY(pp2, build<AddOp>({base, c(2)}));
        raw.push_back({pm1, w0});
        raw.push_back({base, w1});
        raw.push_back({pp1, w2});
        raw.push_back({pp2, w3});
      }
    }
    for (auto [pos, weight] : raw) {
      Value p = pos, w = weight;
      if (padding == "zeros") { // outside contributes 0
        DS_TRY(ge, build<GreaterEqualOp>({pos, c(0)}));
        DS_TRY(lt, build<LessOp>({pos, c(static_cast<double>(size))}));
        DS_TRY(in, build<AndOp>({ge, lt}));
        DS_TRY(wz, build<WhereOp>({in, weight, c(0)}));
        w = wz;
      } else if (padding == "reflection" && mode != "nearest") {
        DS_TRY(rf, reflect(pos, lo, hi));
        p = rf;
      }
      DS_TRY(pc0, build<MaxOp>({p, c(0)}));
      DS_TRY(pc, build<MinOp>({pc0, c(size - 1.0)}));
      DS_TRY(idx, castTo(pc, i64)); // truncation of an in-range coordinate
      taps[d].push_back({idx, w});
    }
  }
  DS_TRY(flat0, castTo(x, f));
  DS_TRY(flat, reshape(flat0, {batch, channels, total}));
  Value sum;
  SmallVector<size_t> pick(k, 0);
  for (;;) {
    Value index, weight;
    int64_t stride = 1;
    for (int64_t d = k - 1; d >= 0; --d) {
      const Tap &t = taps[d][pick[d]];
      Value term = t.index;
      if (stride != 1) {
        DS_TRY(m, build<MulOp>({t.index, scalar(i64, static_cast<double>(stride))}));
        term = m;
      }
      if (!index) {
        index = term, weight = t.weight;
      } else {
        DS_TRY(a, build<AddOp>({index, term}));
        DS_TRY(w, build<MulOp>({weight, t.weight}));
        index = a, weight = w;
      }
      stride *= sizes[d];
    }
    DS_TRY(i3, reshape(index, {batch, 1, points}));
    DS_TRY(iAll, buildTyped<ExpandOp>(RankedTensorType::get({batch, channels, points}, i64), i3));
    DS_TRY(vals, buildTyped<GatherElementsOp>(RankedTensorType::get({batch, channels, points}, f),
                                              ValueRange{flat, iAll}, {i64Attr("axis", 2)}));
    DS_TRY(w3, reshape(weight, {batch, 1, points}));
    DS_TRY(term, build<MulOp>({vals, w3}));
    if (!sum) {
      sum = term;
    } else {
      DS_TRY(a, build<AddOp>({sum, term}));
      sum = a;
    }
    int64_t d = k - 1;
    while (d >= 0 && ++pick[d] == taps[d].size()) pick[d--] = 0;
    if (d < 0) break;
  }
  SmallVector<int64_t> outShape{batch, channels};
  for (int64_t d = 1; d <= k; ++d) outShape.push_back(gt.getDimSize(d));
  DS_TRY(shaped, reshape(sum, outShape));
  DS_TRY(y, castTo(shaped, elem));
  setOutput(n, 0, y);
  return success();
}

} // namespace

void mlir::ds::importer::registerResizeHandlers(HandlerTable &t) {
  using I = ResizeImporter;
  t.add<I, &I::resize>("Resize");
  t.add<I, &I::upsample>("Upsample");
  t.add<I, &I::affineGrid>("AffineGrid");
  t.add<I, &I::gridSample>("GridSample");
}

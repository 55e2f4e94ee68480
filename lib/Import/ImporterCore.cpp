//===- ImporterCore.cpp - helpers shared by the op families ---------------===//
//
// The out-of-line building blocks of NodeImporter that more than one op
// family uses; the short helpers are inline in ImporterCore.h.
//
//===----------------------------------------------------------------------===//
#include "ImporterCore.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSet.h"

using namespace mlir;
using namespace mlir::ds;
using namespace mlir::ds::importer;

/// "[2x3]", as the dialect's verifiers print shapes.
static std::string shapeText(ArrayRef<int64_t> shape) {
  return "[" + llvm::join(llvm::map_range(shape, [](int64_t d) { return std::to_string(d); }), "x") + "]";
}

/// Opset 6 and older broadcast only when `broadcast` = 1, aligning the
/// right operand's dimensions with the left's starting at `axis` (by default
/// its trailing ones). A reshape to trailing ones turns that into numpy
/// broadcasting.
FailureOr<Value> NodeImporter::legacyBroadcast(const onnx::NodeProto &n, Value a, Value c) {
  static const llvm::StringSet<> legacy = {"Add", "Sub", "Mul", "Div", "Pow", "And", "Or",
                                            "Xor", "Equal", "Less", "Greater"};
  if (opset_ >= 7 || !legacy.contains(n.op_type())) return c;
  ArrayRef<int64_t> as = typeOf(a).getShape(), cs = typeOf(c).getShape();
  DS_TRY(bcast, intAttr(n, "broadcast", 0));
  if (!bcast) {
    if (as != cs)
      return FailureOr<Value>(nodeError(n) << "operand shapes " << shapeText(as) << " and "
                                           << shapeText(cs) << " differ and broadcast is 0");
    return c;
  }
  int64_t rankA = as.size(), rankC = cs.size();
  DS_TRY(axis, intAttr(n, "axis", rankA - rankC));
  if (axis < 0) axis += rankA;
  if (axis < 0 || axis + rankC > rankA)
    return FailureOr<Value>(nodeError(n) << "axis " << axis << " does not place a "
                                         << shapeText(cs) << " operand inside " << shapeText(as));
  for (int64_t i = 0; i < rankC; ++i)
    if (cs[i] != 1 && cs[i] != as[axis + i])
      return FailureOr<Value>(nodeError(n) << "operand " << shapeText(cs) << " does not match "
                                           << shapeText(as) << " at axis " << axis);
  SmallVector<int64_t> shape(cs);
  shape.append(rankA - axis - rankC, 1);
  return reshape(c, shape);
}

FailureOr<Value> NodeImporter::sliceAxis(Value x, int64_t axis, int64_t start, int64_t step,
                                         int64_t count) {
  SmallVector<int64_t> shape(typeOf(x).getShape()), starts(shape.size(), 0),
      steps(shape.size(), 1);
  shape[axis] = count;
  starts[axis] = start;
  steps[axis] = step;
  return buildTyped<SliceOp>(RankedTensorType::get(shape, typeOf(x).getElementType()), x,
                             {arrAttr("starts", starts), arrAttr("steps", steps)});
}

LogicalResult NodeImporter::checkedShape(const onnx::NodeProto &n, ArrayRef<__int128> dims,
                                         SmallVectorImpl<int64_t> &out, StringRef what) {
  __int128 total = 1;
  for (__int128 d : dims) {
    if (d < 0) return nodeError(n) << what << " has a negative dimension";
    if (d > opts_.maxElements || (total *= d) > opts_.maxElements)
      return nodeError(n) << what << " would have more than " << opts_.maxElements
                          << " elements (ds-opt --max-elements raises the limit)";
  }
  out.clear();
  for (__int128 d : dims) out.push_back(static_cast<int64_t>(d));
  return success();
}

/// Pads (positive) or crops (negative) each axis of `x` by lo/hi.
FailureOr<Value> NodeImporter::padWith(const onnx::NodeProto &n, Value x, ArrayRef<int64_t> lo,
                                       ArrayRef<int64_t> hi, StringRef mode, Attribute fill) {
  Value y = x;
  int64_t rank = typeOf(x).getRank();
  Type elemType = typeOf(x).getElementType();
  // The result's size first, in 128 bits: pads come from the file.
  __int128 total = 1;
  for (int64_t a = 0; a < rank; ++a) {
    __int128 d = static_cast<__int128>(typeOf(x).getDimSize(a)) + lo[a] + hi[a];
    if (d < 0)
      return FailureOr<Value>(nodeError(n) << "pads crop more than the " << typeOf(x).getDimSize(a)
                                           << " elements of axis " << a);
    total *= d;
    if (total > opts_.maxElements)
      return FailureOr<Value>(nodeError(n) << "the padded result would have more than "
                                           << opts_.maxElements
                                           << " elements (ds-opt --max-elements raises the limit)");
  }
  for (int64_t a = 0; a < rank; ++a) {
    int64_t dim = typeOf(y).getDimSize(a);
    // Crop first: negative pads remove elements.
    int64_t cropLo = std::max<int64_t>(0, -lo[a]), cropHi = std::max<int64_t>(0, -hi[a]);
    if (cropLo + cropHi > dim)
      return FailureOr<Value>(nodeError(n) << "pads crop " << cropLo + cropHi
                                           << " elements from axis " << a << " of size " << dim);
    if (cropLo || cropHi) {
      DS_TRY(c, sliceAxis(y, a, cropLo, 1, dim - cropLo - cropHi));
      y = c;
      dim -= cropLo + cropHi;
    }
    int64_t before = std::max<int64_t>(0, lo[a]), after = std::max<int64_t>(0, hi[a]);
    if (!before && !after) continue;
    if (mode == "reflect" && (before >= dim || after >= dim))
      return FailureOr<Value>(nodeError(n) << "reflect pads of axis " << a
                                           << " must be smaller than its size " << dim);
    if ((mode == "edge" || mode == "wrap") && dim == 0)
      return FailureOr<Value>(nodeError(n) << mode << " padding needs a non-empty axis " << a);
    if (mode == "wrap") { // periodic: one gather of the axis at (j - before) mod dim
      SmallVector<int64_t> idx;
      for (int64_t j = 0; j < before + dim + after; ++j)
        idx.push_back(((j - before) % dim + dim) % dim);
      DS_TRY(g, build<GatherOp>({y, i64Tensor(idx)}, {i64Attr("axis", a)}));
      y = g;
      continue;
    }
    auto block = [&](int64_t count, bool atStart) -> FailureOr<Value> {
      SmallVector<int64_t> shape(typeOf(y).getShape());
      shape[a] = count;
      auto t = RankedTensorType::get(shape, elemType);
      if (mode == "constant") return constant(DenseElementsAttr::get(t, fill));
      if (mode == "reflect")
        return sliceAxis(y, a, atStart ? count : dim - 2, -1, count);
      DS_TRY(border, sliceAxis(y, a, atStart ? 0 : dim - 1, 1, 1));
      if (count == 1) return border;
      return buildTyped<ExpandOp>(t, border);
    };
    SmallVector<Value> parts;
    if (before) {
      DS_TRY(v, block(before, true));
      parts.push_back(v);
    }
    parts.push_back(y);
    if (after) {
      DS_TRY(v, block(after, false));
      parts.push_back(v);
    }
    DS_TRY(cat, build<ConcatOp>(parts, {i64Attr("axis", a)}));
    y = cat;
  }
  return y;
}

/// [0, n) laid along `axis` of a rank-`rank` tensor (other dims 1).
Value NodeImporter::iota(int64_t n, int64_t axis, int64_t rank, Type elem) {
  SmallVector<int64_t> shape(rank, 1);
  shape[axis] = n;
  SmallVector<Attribute> v;
  for (int64_t i = 0; i < n; ++i)
    v.push_back(isa<FloatType>(elem) ? Attribute(b_.getFloatAttr(elem, i))
                                     : Attribute(b_.getIntegerAttr(elem, i)));
  return constant(DenseElementsAttr::get(RankedTensorType::get(shape, elem), v));
}

/// Begin and end pads of a window op: explicit `pads`, or auto_pad's SAME
/// (output = ceil(in / stride), extra pad at the end for SAME_UPPER, at the
/// beginning for SAME_LOWER) or VALID.
FailureOr<SmallVector<int64_t>> NodeImporter::windowPads(const onnx::NodeProto &n,
                                                         ArrayRef<int64_t> in,
                                                         ArrayRef<int64_t> kernel,
                                                         ArrayRef<int64_t> strides,
                                                         ArrayRef<int64_t> dilations) {
  size_t k = in.size();
  // Bounded so the window arithmetic below (and in every kernel) cannot
  // overflow: a dilation of 2^63 - 1 made a negative extent.
  constexpr int64_t kMaxWindow = int64_t(1) << 31;
  for (size_t d = 0; d < k && d < strides.size() && d < dilations.size(); ++d)
    if (strides[d] < 1 || strides[d] > kMaxWindow || dilations[d] < 1 ||
        dilations[d] > kMaxWindow || kernel[d] < 1 || kernel[d] > kMaxWindow)
      return FailureOr<SmallVector<int64_t>>(
          nodeError(n) << "strides, dilations and kernel extents must be in [1, 2^31]; axis "
                       << d << " has stride " << strides[d] << ", dilation " << dilations[d]
                       << ", kernel " << kernel[d]);
  DS_TRY(autoPad, stringAttr(n, "auto_pad", "NOTSET"));
  SmallVector<int64_t> pads(2 * k, 0);
  if (autoPad == "NOTSET") {
    DS_TRY(p, intsAttr(n, "pads"));
    if (p) {
      if (p->size() != 2 * k)
        return FailureOr<SmallVector<int64_t>>(nodeError(n) << "pads needs " << 2 * k << " entries");
      pads = *p;
      for (int64_t v : pads)
        if (v < 0 || v > kMaxWindow)
          return FailureOr<SmallVector<int64_t>>(nodeError(n)
                                                 << "pads must be in [0, 2^31], got " << v);
    }
  } else if (autoPad == "SAME_UPPER" || autoPad == "SAME_LOWER") {
    for (size_t d = 0; d < k; ++d) {
      int64_t out = (in[d] + strides[d] - 1) / strides[d];
      int64_t total = std::max<int64_t>(0, (out - 1) * strides[d] + dilations[d] * (kernel[d] - 1) + 1 - in[d]);
      int64_t small = total / 2, big = total - small;
      pads[d] = autoPad == "SAME_UPPER" ? small : big;
      pads[d + k] = autoPad == "SAME_UPPER" ? big : small;
    }
  } else if (autoPad != "VALID") {
    return FailureOr<SmallVector<int64_t>>(nodeError(n) << "unknown auto_pad '" << autoPad << "'");
  }
  return pads;
}

/// ONNX Conv's attributes (kernel_shape, strides, dilations, group, pads
/// or auto_pad) over x, w and an optional bias: Conv, and the f32
/// convolution QLinearConv and ConvInteger are written as.
FailureOr<Value> NodeImporter::convolution(const onnx::NodeProto &n, Value x, Value w,
                                           Value bias) {
  int64_t rank = typeOf(x).getRank();
  if (rank < 3 || typeOf(w).getRank() != rank)
    return FailureOr<Value>(nodeError(n) << "input and weight must be [N, C, spatial...] and "
                                            "[M, C/group, k...]");
  size_t k = rank - 2;
  ArrayRef<int64_t> kernel = typeOf(w).getShape().drop_front(2);
  DS_TRY(ks, intsAttr(n, "kernel_shape"));
  if (ks && ArrayRef<int64_t>(*ks) != kernel)
    return FailureOr<Value>(nodeError(n) << "kernel_shape " << extents(*ks)
                                         << " disagrees with the weight's kernel "
                                         << extents(kernel));
  DS_TRY(st, intsAttr(n, "strides"));
  DS_TRY(dl, intsAttr(n, "dilations"));
  DS_TRY(group, intAttr(n, "group", 1));
  SmallVector<int64_t> strides = st ? *st : SmallVector<int64_t>(k, 1);
  SmallVector<int64_t> dilations = dl ? *dl : SmallVector<int64_t>(k, 1);
  if (strides.size() != k || dilations.size() != k)
    return FailureOr<Value>(nodeError(n)
                            << "strides and dilations need one entry per spatial dimension");
  DS_TRY(pads, windowPads(n, typeOf(x).getShape().drop_front(2), kernel, strides, dilations));
  SmallVector<int64_t> shape{typeOf(x).getDimSize(0), typeOf(w).getDimSize(0)};
  for (size_t d = 0; d < k; ++d) {
    int64_t span = dilations[d] * (kernel[d] - 1) + 1;
    int64_t padded = typeOf(x).getDimSize(d + 2) + pads[d] + pads[d + k];
    if (strides[d] <= 0 || padded < span)
      return FailureOr<Value>(nodeError(n) << "the kernel does not fit the input");
    shape.push_back((padded - span) / strides[d] + 1);
  }
  SmallVector<Value> operands{x, w};
  if (bias) operands.push_back(bias);
  return buildTyped<ConvOp>(RankedTensorType::get(shape, typeOf(x).getElementType()), operands,
                            {arrAttr("strides", strides), arrAttr("dilations", dilations),
                             arrAttr("pads", pads), i64Attr("group", group),
                             convSegments(bias != nullptr)});
}


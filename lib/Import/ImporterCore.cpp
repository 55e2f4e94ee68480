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

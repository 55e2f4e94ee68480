//===- QuantizationOps.cpp - ONNX quantization ops ------------------------===//
//
// QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear, MatMulInteger,
// QLinearMatMul, ConvInteger and QLinearConv: compositions of round, clip,
// cast, integer matmul and convolution. ds-raise-quantized-matmul turns
// the products and convolutions of these compositions into int8 kernels.
//
//===----------------------------------------------------------------------===//
#include "ImporterCore.h"

#include <cmath>

using namespace mlir;
using namespace mlir::ds;
using namespace mlir::ds::importer;

namespace {

class QuantizationImporter : public NodeImporter {
public:
  using NodeImporter::NodeImporter;

  LogicalResult quantizeLinear(const onnx::NodeProto &n);
  LogicalResult dequantizeLinear(const onnx::NodeProto &n);
  LogicalResult dynamicQuantizeLinear(const onnx::NodeProto &n);
  LogicalResult matmulInteger(const onnx::NodeProto &n);
  LogicalResult qlinearMatmul(const onnx::NodeProto &n);
  LogicalResult convInteger(const onnx::NodeProto &n);
  LogicalResult qlinearConv(const onnx::NodeProto &n);

private:
  FailureOr<Value> dequantized(const onnx::NodeProto &n, Value x, Value scale, Value zeroPoint,
                               int64_t axis, Type f, int64_t block = 0);
  FailureOr<Value> alongAxis(const onnx::NodeProto &n, Value v, Value x, int64_t axis);
  FailureOr<Value> blocked(const onnx::NodeProto &n, Value v, Value x, int64_t axis, int64_t block);
  LogicalResult divisorScale(const onnx::NodeProto &n, Value scale, StringRef name);
  LogicalResult integerOperands(const onnx::NodeProto &n, Value x, Value xz, Value w, Value wz);
  FailureOr<Value> quantize(const onnx::NodeProto &n, Value y, Value zeroPoint, Type qType,
                            bool saturate = true);
  FailureOr<Value> centered(const onnx::NodeProto &n, Value x, Value zeroPoint, bool rowwise);
};

/// A per-axis (1-D) scale or zero point laid along `axis` of x; scalars and
/// one-element tensors broadcast as they are.
FailureOr<Value> QuantizationImporter::alongAxis(const onnx::NodeProto &n, Value v, Value x,
                                                 int64_t axis) {
  RankedTensorType vt = typeOf(v);
  if (vt.getRank() == 0 || vt.getNumElements() == 1) return v;
  int64_t rank = typeOf(x).getRank();
  if (vt.getRank() != 1 || failed(normalizeAxis(n, axis, rank)) ||
      vt.getDimSize(0) != typeOf(x).getDimSize(axis))
    return FailureOr<Value>(nodeError(n) << "per-axis scales and zero points must be 1-D with "
                                         << "one entry per element of the axis");
  SmallVector<int64_t> shape(rank, 1);
  shape[axis] = vt.getDimSize(0);
  return reshape(v, shape);
}

/// A scale the node divides by (QuantizeLinear's, QLinear ops' output
/// scale), when known at compile time, must be nonzero and finite: a zero
/// would make every value the type's bound (or undefined, for NaN).
LogicalResult QuantizationImporter::divisorScale(const onnx::NodeProto &n, Value scale,
                                                 StringRef name) {
  DenseElementsAttr d = constantOf(scale);
  if (auto p = !d && scale ? scale.getDefiningOp<ParameterOp>() : ParameterOp())
    d = dyn_cast<DenseElementsAttr>(p.getValue());
  if (!d || !isa<FloatType>(d.getElementType())) return success();
  int64_t i = 0;
  for (APFloat v : d.getValues<APFloat>()) {
    if (v.isZero() || !v.isFinite())
      return nodeError(n) << name << " must be nonzero and finite; element " << i << " is "
                          << v.convertToDouble();
    ++i;
  }
  return success();
}

/// A blocked scale or zero point (`block_size` B, opset 21): x's shape but
/// ceil(D / B) along `axis`, each entry serving B consecutive elements.
/// Repeated B times along the axis and cut to D, it is x's shape.
FailureOr<Value> QuantizationImporter::blocked(const onnx::NodeProto &n, Value v, Value x,
                                               int64_t axis, int64_t block) {
  RankedTensorType vt = typeOf(v), xt = typeOf(x);
  const int64_t rank = xt.getRank();
  if (block < 0 || failed(normalizeAxis(n, axis, rank)))
    return FailureOr<Value>(nodeError(n) << "block_size must be positive");
  const int64_t d = xt.getDimSize(axis), blocks = (d + block - 1) / block;
  SmallVector<int64_t> want(xt.getShape());
  want[axis] = blocks;
  if (vt.getShape() != ArrayRef<int64_t>(want))
    return FailureOr<Value>(nodeError(n) << "a blocked scale or zero point must be "
                                         << extents(want) << " (x's shape with ceil(" << d << " / "
                                         << block << ") along axis " << axis << "), got "
                                         << extents(vt.getShape()));
  SmallVector<int64_t> split(want), repeated(want);
  split.insert(split.begin() + axis + 1, 1);
  repeated.insert(repeated.begin() + axis + 1, block);
  DS_TRY(col, reshape(v, split));
  DS_TRY(e, buildTyped<ExpandOp>(RankedTensorType::get(repeated, vt.getElementType()), col));
  SmallVector<int64_t> flat(want);
  flat[axis] = blocks * block;
  DS_TRY(whole, reshape(e, flat));
  if (blocks * block == d) return whole;
  return sliceAxis(whole, axis, 0, 1, d);
}

/// round-half-even(y) + zero point, saturated to qType (ONNX's QuantizeLinear
/// after the division by the scale).
FailureOr<Value> QuantizationImporter::quantize(const onnx::NodeProto &n, Value y, Value zeroPoint,
                                                Type qType, bool saturate) {
  Type f = typeOf(y).getElementType();
  // float8: y rounded to nearest even by the cast itself, saturating unless
  // `saturate` is 0; ONNX's reference adds no zero point (it must be 0).
  // float4 e2m1 (always saturating) adds its zero point first.
  if (isa<Float8E4M3FNType, Float8E4M3FNUZType, Float8E5M2Type, Float8E5M2FNUZType>(qType)) {
    SmallVector<NamedAttribute> attrs;
    if (!saturate) attrs.push_back(attr("saturate", b_.getBoolAttr(false)));
    return buildTyped<CastOp>(RankedTensorType::get(typeOf(y).getShape(), qType), y, attrs);
  }
  if (isa<Float4E2M1FNType>(qType)) {
    Value v = y;
    if (zeroPoint) {
      DS_TRY(zp, castTo(zeroPoint, f));
      DS_TRY(shifted, build<AddOp>({y, zp}));
      v = shifted;
    }
    return castTo(v, qType);
  }
  auto it = dyn_cast<IntegerType>(qType);
  if (!it || it.getWidth() == 1 || it.getWidth() > 16)
    return FailureOr<Value>(nodeError(n) << "quantizes to " << qType
                                         << "; 2-, 4-, 8- and 16-bit integers, float8 and "
                                         << "float4 are supported");
  DS_TRY(rounded, build<RoundOp>({y}));
  Value q = rounded;
  if (zeroPoint) {
    DS_TRY(zp, castTo(zeroPoint, f));
    DS_TRY(shifted, build<AddOp>({q, zp}));
    q = shifted;
  }
  unsigned bits = it.getWidth();
  double lo = it.isUnsigned() ? 0 : -std::ldexp(1.0, bits - 1);
  double hi = it.isUnsigned() ? std::ldexp(1.0, bits) - 1 : std::ldexp(1.0, bits - 1) - 1;
  DS_TRY(above, build<MaxOp>({q, scalar(f, lo)}));
  DS_TRY(clipped, build<MinOp>({above, scalar(f, hi)}));
  return castTo(clipped, qType);
}

LogicalResult QuantizationImporter::quantizeLinear(const onnx::NodeProto &n) {
  DS_TRY(x0, required(n, 0));
  DS_TRY(scale0, required(n, 1));
  Value zp0 = input(n, 2);
  DS_TRY(axis, intAttr(n, "axis", 1));
  DS_TRY(block, intAttr(n, "block_size", 0));
  DS_TRY(saturate, intAttr(n, "saturate", 1)); // float8 outputs only
  Type qType = zp0 ? typeOf(zp0).getElementType() : b_.getIntegerType(8, false);
  DS_TRY(outType, intAttr(n, "output_dtype", 0));
  if (outType != 0) {
    FailureOr<Type> t = elementType(static_cast<int32_t>(outType));
    if (failed(t)) return nodeError(n) << "output_dtype " << outType << " is not supported";
    qType = *t;
  }
  // The division runs in the scale's type unless `precision` (opset 23)
  // names another.
  if (failed(divisorScale(n, scale0, "y_scale"))) return failure();
  DS_TRY(f, typeAttrOr(n, "precision", typeOf(scale0).getElementType()));
  DS_TRY(x, castTo(x0, f));
  DS_TRY(scale1, castTo(scale0, f));
  auto laid = [&](Value v) { return block ? blocked(n, v, x, axis, block) : alongAxis(n, v, x, axis); };
  DS_TRY(scale, laid(scale1));
  Value zp;
  if (zp0) {
    DS_TRY(z, laid(zp0));
    zp = z;
  }
  DS_TRY(scaled, build<DivOp>({x, scale}));
  DS_TRY(y, quantize(n, scaled, zp, qType, saturate != 0));
  setOutput(n, 0, y);
  return success();
}

/// (x - zero point) * scale in `f`, the scale and zero point scalars or
/// laid along `axis` (DequantizeLinear's arithmetic).
FailureOr<Value> QuantizationImporter::dequantized(const onnx::NodeProto &n, Value x0, Value scale0,
                                                   Value zp0, int64_t axis, Type f, int64_t block) {
  DS_TRY(x, castTo(x0, f));
  DS_TRY(scale1, castTo(scale0, f));
  auto laid = [&](Value v) { return block ? blocked(n, v, x, axis, block) : alongAxis(n, v, x, axis); };
  DS_TRY(scale, laid(scale1));
  Value centeredX = x;
  if (zp0) {
    DS_TRY(z, laid(zp0));
    DS_TRY(zf, castTo(z, f));
    DS_TRY(c, build<SubOp>({x, zf}));
    centeredX = c;
  }
  return build<MulOp>({centeredX, scale});
}

LogicalResult QuantizationImporter::dequantizeLinear(const onnx::NodeProto &n) {
  DS_TRY(x0, required(n, 0));
  DS_TRY(scale0, required(n, 1));
  Value zp0 = input(n, 2);
  DS_TRY(axis, intAttr(n, "axis", 1));
  DS_TRY(block, intAttr(n, "block_size", 0));
  // The output (and the product's precision) is the scale's type unless
  // `output_dtype` (opset 23) names another.
  DS_TRY(f, typeAttrOr(n, "output_dtype", typeOf(scale0).getElementType()));
  DS_TRY(y, dequantized(n, x0, scale0, zp0, axis, f, block));
  setOutput(n, 0, y);
  return success();
}

// DynamicQuantizeLinear: uint8 with a scale and zero point that make the
// data's range, widened to include 0, span [0, 255].
LogicalResult QuantizationImporter::dynamicQuantizeLinear(const onnx::NodeProto &n) {
  DS_TRY(x, required(n, 0));
  Type f = typeOf(x).getElementType();
  if (!f.isF32()) return nodeError(n) << "input must be f32";
  // One op with its own kernel (one pass; what ds-raise-quantized-matmul
  // recognizes), unless the value is known now: then the ops below fold.
  if (!x.getDefiningOp<ConstantOp>()) {
    Type u8 = b_.getIntegerType(8, false);
    DS_TRY(r, buildAll<DynamicQuantizeOp>(TypeRange{RankedTensorType::get(typeOf(x).getShape(), u8),
                                                    RankedTensorType::get({}, f),
                                                    RankedTensorType::get({}, u8)},
                                          x));
    for (int i = 0; i < 3; ++i) setOutput(n, i, r[i]);
    return success();
  }
  SmallVector<int64_t> all;
  for (int64_t d = 0; d < typeOf(x).getRank(); ++d) all.push_back(d);
  Value zero = scalar(f, 0.0);
  DS_TRY(mn0, reduceWith<ReduceMinOp>(x, all, false));
  DS_TRY(mx0, reduceWith<ReduceMaxOp>(x, all, false));
  DS_TRY(mn, build<MinOp>({mn0, zero}));
  DS_TRY(mx, build<MaxOp>({mx0, zero}));
  DS_TRY(range, build<SubOp>({mx, mn}));
  DS_TRY(scale, build<DivOp>({range, scalar(f, 255.0)}));
  DS_TRY(minOverScale, build<DivOp>({mn, scale}));
  DS_TRY(negated, build<SubOp>({zero, minOverScale}));
  Type u8 = b_.getIntegerType(8, false);
  DS_TRY(zp, quantize(n, negated, nullptr, u8));
  DS_TRY(scaled, build<DivOp>({x, scale}));
  DS_TRY(y, quantize(n, scaled, zp, u8));
  setOutput(n, 0, y);
  setOutput(n, 1, scale);
  setOutput(n, 2, zp);
  return success();
}

/// x - zero point, widened to i32 (the integer GEMM's accumulator type). A
/// 1-D zero point of the left operand is per row (`rowwise`).
FailureOr<Value> QuantizationImporter::centered(const onnx::NodeProto &n, Value x, Value zeroPoint,
                                                bool rowwise) {
  Type elem = typeOf(x).getElementType();
  auto it = dyn_cast<IntegerType>(elem);
  if (!it || it.getWidth() != 8)
    return FailureOr<Value>(nodeError(n) << "integer matmul operands must be int8 or uint8, not "
                                         << elem);
  DS_TRY(wide, castTo(x, b_.getI32Type()));
  if (!zeroPoint) return wide;
  if (typeOf(zeroPoint).getElementType() != elem)
    return FailureOr<Value>(nodeError(n) << "zero points must have their operand's type");
  DS_TRY(zp0, castTo(zeroPoint, b_.getI32Type()));
  Value zp = zp0;
  if (rowwise && typeOf(zp).getRank() == 1 && typeOf(zp).getNumElements() > 1) {
    DS_TRY(col, reshape(zp, {typeOf(zp).getNumElements(), 1}));
    zp = col;
  }
  return build<SubOp>({wide, zp});
}

LogicalResult QuantizationImporter::matmulInteger(const onnx::NodeProto &n) {
  DS_TRY(a, required(n, 0));
  DS_TRY(bm, required(n, 1));
  DS_TRY(ac, centered(n, a, input(n, 2), true));
  DS_TRY(bc, centered(n, bm, input(n, 3), false));
  DS_TRY(y, build<MatmulOp>({ac, bc}));
  setOutput(n, 0, y);
  return success();
}

// QLinearMatMul: the exact integer product of the centered operands, then
// requantized by a_scale * b_scale / y_scale.
LogicalResult QuantizationImporter::qlinearMatmul(const onnx::NodeProto &n) {
  DS_TRY(a, required(n, 0));
  DS_TRY(aScale, required(n, 1));
  DS_TRY(bm, required(n, 3));
  DS_TRY(bScale, required(n, 4));
  DS_TRY(yScale, required(n, 6));
  DS_TRY(yZp, required(n, 7));
  if (failed(divisorScale(n, yScale, "y_scale"))) return failure();
  DS_TRY(ac, centered(n, a, input(n, 2), true));
  DS_TRY(bc, centered(n, bm, input(n, 5), false));
  DS_TRY(prod, build<MatmulOp>({ac, bc}));
  Type f = typeOf(aScale).getElementType();
  DS_TRY(pf, castTo(prod, f));
  Value as = aScale;
  if (typeOf(as).getRank() == 1 && typeOf(as).getNumElements() > 1) {
    DS_TRY(col, reshape(as, {typeOf(as).getNumElements(), 1}));
    as = col;
  }
  DS_TRY(ab, build<MulOp>({as, bScale}));
  DS_TRY(multiplier, build<DivOp>({ab, yScale}));
  DS_TRY(scaled, build<MulOp>({pf, multiplier}));
  DS_TRY(y, quantize(n, scaled, yZp, typeOf(yZp).getElementType()));
  setOutput(n, 0, y);
  return success();
}

/// ConvInteger's and QLinearConv's x and w: 8-bit integers, each zero point
/// (if given) of its operand's type.
LogicalResult QuantizationImporter::integerOperands(const onnx::NodeProto &n, Value x, Value xz,
                                                    Value w, Value wz) {
  for (auto [v, z, name] : {std::tuple{x, xz, "x"}, std::tuple{w, wz, "w"}}) {
    auto it = dyn_cast<IntegerType>(typeOf(v).getElementType());
    if (!it || it.getWidth() != 8)
      return nodeError(n) << name << " must be int8 or uint8, not " << typeOf(v).getElementType();
    if (z && typeOf(z).getElementType() != it)
      return nodeError(n) << name << "_zero_point must have " << name << "'s type";
  }
  return success();
}

// ConvInteger: the convolution of the centered integers, in i32. It is
// computed on their f32 values: exact while each sum stays within 2^24 in
// magnitude (ds.quantized_conv, which ds-raise-quantized-matmul makes of it
// for a constant weight, sums in int32 and rounds the same way past that).
LogicalResult QuantizationImporter::convInteger(const onnx::NodeProto &n) {
  DS_TRY(x, required(n, 0));
  DS_TRY(w, required(n, 1));
  Value xz = input(n, 2), wz = input(n, 3);
  if (failed(integerOperands(n, x, xz, w, wz))) return failure();
  if (xz && typeOf(xz).getNumElements() != 1)
    return nodeError(n) << "x_zero_point must be one value (per-channel input zero points are "
                           "not supported)";
  Type f = b_.getF32Type();
  Value one = scalar(f, 1.0);
  DS_TRY(xf, dequantized(n, x, one, xz, 1, f));
  DS_TRY(wf, dequantized(n, w, one, wz, 0, f));
  DS_TRY(y, convolution(n, xf, wf, nullptr));
  DS_TRY(r, castTo(y, b_.getI32Type()));
  setOutput(n, 0, r);
  return success();
}

// QLinearConv: the convolution of the dequantized input and weight (per
// output channel scales and zero points), the int32 bias at scale
// x_scale * w_scale, requantized to y's scale and zero point.
LogicalResult QuantizationImporter::qlinearConv(const onnx::NodeProto &n) {
  DS_TRY(x, required(n, 0));
  DS_TRY(xs, required(n, 1));
  DS_TRY(w, required(n, 3));
  DS_TRY(ws, required(n, 4));
  DS_TRY(ys, required(n, 6));
  Value xz = input(n, 2), wz = input(n, 5), yz = input(n, 7), bias = input(n, 8);
  if (failed(divisorScale(n, ys, "y_scale"))) return failure();
  if (failed(integerOperands(n, x, xz, w, wz))) return failure();
  Type f = typeOf(xs).getElementType();
  if (!f.isF32() || typeOf(ws).getElementType() != f || typeOf(ys).getElementType() != f)
    return nodeError(n) << "scales must be f32";
  if (typeOf(xs).getNumElements() != 1 || typeOf(ys).getNumElements() != 1 ||
      (xz && typeOf(xz).getNumElements() != 1) || (yz && typeOf(yz).getNumElements() != 1))
    return nodeError(n) << "x and y take one scale and zero point each";
  DS_TRY(xf, dequantized(n, x, xs, xz, 1, f));
  DS_TRY(wf, dequantized(n, w, ws, wz, 0, f));
  Value b;
  if (bias) {
    if (!typeOf(bias).getElementType().isInteger(32) || typeOf(bias).getRank() != 1)
      return nodeError(n) << "B must be a 1-D int32 tensor";
    DS_TRY(bscale, build<MulOp>({xs, ws}));
    DS_TRY(bs, reshape(bscale, {typeOf(bscale).getNumElements()}));
    DS_TRY(bf, castTo(bias, f));
    DS_TRY(bd, build<MulOp>({bf, bs}));
    b = bd;
  }
  DS_TRY(yf, convolution(n, xf, wf, b));
  DS_TRY(scaled, build<DivOp>({yf, ys}));
  Type qType = yz ? typeOf(yz).getElementType() : b_.getIntegerType(8, false);
  DS_TRY(y, quantize(n, scaled, yz, qType));
  setOutput(n, 0, y);
  return success();
}

} // namespace

void mlir::ds::importer::registerQuantizationHandlers(HandlerTable &t) {
  using I = QuantizationImporter;
  t.add<I, &I::convInteger>("ConvInteger");
  t.add<I, &I::qlinearConv>("QLinearConv");
  t.add<I, &I::quantizeLinear>("QuantizeLinear");
  t.add<I, &I::dequantizeLinear>("DequantizeLinear");
  t.add<I, &I::dynamicQuantizeLinear>("DynamicQuantizeLinear");
  t.add<I, &I::matmulInteger>("MatMulInteger");
  t.add<I, &I::qlinearMatmul>("QLinearMatMul");
}

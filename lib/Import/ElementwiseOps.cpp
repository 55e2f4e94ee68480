//===- ElementwiseOps.cpp - ONNX elementwise ops --------------------------===//
//
// Elementwise math, logic and comparisons, activations, casts, Where, Clip,
// Mod and BitShift. Most are one ds op through the generic unary, binary
// and variadic handlers (ImporterCore.h); activations ONNX defines by
// formula (Elu, HardSwish, LeakyRelu, PRelu, Shrink, ...) are imported as
// that formula over existing ops, so they need no kernel or gradient rule.
//
//===----------------------------------------------------------------------===//
#include "ImporterCore.h"

#include <limits>

using namespace mlir;
using namespace mlir::ds;
using namespace mlir::ds::importer;

namespace {

class ElementwiseImporter : public NodeImporter {
public:
  using NodeImporter::NodeImporter;

  LogicalResult identity(const onnx::NodeProto &n);
  LogicalResult mean(const onnx::NodeProto &n);
  LogicalResult pow(const onnx::NodeProto &n);
  LogicalResult where(const onnx::NodeProto &n);
  LogicalResult castNode(const onnx::NodeProto &n);
  LogicalResult castLike(const onnx::NodeProto &n);
  FailureOr<Value> castWithModes(const onnx::NodeProto &n, Value x, Type elem);
  LogicalResult clip(const onnx::NodeProto &n);
  LogicalResult mod(const onnx::NodeProto &n);
  LogicalResult div(const onnx::NodeProto &n);
  LogicalResult isNan(const onnx::NodeProto &n);
  LogicalResult isInf(const onnx::NodeProto &n);
  LogicalResult bitShift(const onnx::NodeProto &n);
  LogicalResult bitCast(const onnx::NodeProto &n);
  LogicalResult mish(const onnx::NodeProto &n);
  LogicalResult gelu(const onnx::NodeProto &n);
  LogicalResult leakyRelu(const onnx::NodeProto &n);
  LogicalResult prelu(const onnx::NodeProto &n);
  LogicalResult activation(const onnx::NodeProto &n);
  LogicalResult shrink(const onnx::NodeProto &n);
};

LogicalResult ElementwiseImporter::identity(const onnx::NodeProto &n) {
  DS_TRY(x, required(n, 0));
  setOutput(n, 0, x);
  return success();
}

LogicalResult ElementwiseImporter::mean(const onnx::NodeProto &n) {
  if (failed(variadic<AddOp>(n))) return failure();
  Value sum = values_[n.output(0)];
  Type elem = typeOf(sum).getElementType();
  if (!isa<FloatType>(elem)) return nodeError(n) << "Mean needs floating-point inputs";
  DS_TRY(y, build<DivOp>({sum, scalar(elem, n.input_size())}));
  setOutput(n, 0, y);
  return success();
}

LogicalResult ElementwiseImporter::pow(const onnx::NodeProto &n) {
  DS_TRY(x, required(n, 0));
  DS_TRY(e0, required(n, 1));
  DS_TRY(e, legacyBroadcast(n, x, e0));
  // ONNX lets the exponent's type differ from the base's. An integer base
  // with a float exponent is computed in f64 and truncated back (what
  // onnxruntime does): the exponent cast to the base's integer type would
  // turn x^0.5 into x^0.
  Type base = typeOf(x).getElementType(), exponent = typeOf(e).getElementType();
  if (isa<IntegerType>(base) && isa<FloatType>(exponent)) {
    auto wide = [&](Value v) {
      return buildTyped<CastOp>(RankedTensorType::get(typeOf(v).getShape(), b_.getF64Type()), v);
    };
    DS_TRY(xd, wide(x));
    DS_TRY(ed, wide(e));
    DS_TRY(yd, build<PowOp>({xd, ed}));
    DS_TRY(y, buildTyped<CastOp>(RankedTensorType::get(typeOf(yd).getShape(), base), yd));
    setOutput(n, 0, y);
    return success();
  }
  if (exponent != base) {
    auto t = RankedTensorType::get(typeOf(e).getShape(), base);
    DS_TRY(ce, buildTyped<CastOp>(t, e));
    e = ce;
  }
  DS_TRY(y, build<PowOp>({x, e}));
  setOutput(n, 0, y);
  return success();
}

LogicalResult ElementwiseImporter::where(const onnx::NodeProto &n) {
  DS_TRY(c, required(n, 0));
  DS_TRY(x, required(n, 1));
  DS_TRY(y, required(n, 2));
  DS_TRY(r, build<WhereOp>({c, x, y}));
  setOutput(n, 0, r);
  return success();
}

/// Cast and CastLike: `saturate` (opset 19, float8 results) and
/// `round_mode` (opset 24, float8e8m0 results) become ds.cast's attributes.
FailureOr<Value> ElementwiseImporter::castWithModes(const onnx::NodeProto &n, Value x, Type elem) {
  DS_TRY(saturate, intAttr(n, "saturate", 1));
  DS_TRY(mode, stringAttr(n, "round_mode", "up"));
  if (mode != "up" && mode != "down" && mode != "nearest")
    return FailureOr<Value>(nodeError(n) << "round_mode must be \"up\", \"down\" or "
                                         << "\"nearest\", got \"" << mode << "\"");
  SmallVector<NamedAttribute> attrs;
  if (!saturate) attrs.push_back(attr("saturate", b_.getBoolAttr(false)));
  if (mode != "up") attrs.push_back(attr("round_mode", b_.getStringAttr(mode)));
  return buildTyped<CastOp>(RankedTensorType::get(typeOf(x).getShape(), elem), x, attrs);
}

LogicalResult ElementwiseImporter::castNode(const onnx::NodeProto &n) {
  DS_TRY(x, required(n, 0));
  DS_TRY(to, intAttr(n, "to"));
  FailureOr<Type> elem = elementType(static_cast<int32_t>(to));
  if (failed(elem))
    return nodeError(n) << "cannot cast to " << onnxTypeName(static_cast<int32_t>(to));
  DS_TRY(y, castWithModes(n, x, *elem));
  setOutput(n, 0, y);
  return success();
}

LogicalResult ElementwiseImporter::castLike(const onnx::NodeProto &n) {
  DS_TRY(x, required(n, 0));
  DS_TRY(like, required(n, 1));
  DS_TRY(y, castWithModes(n, x, typeOf(like).getElementType()));
  setOutput(n, 0, y);
  return success();
}

LogicalResult ElementwiseImporter::clip(const onnx::NodeProto &n) {
  DS_TRY(x, required(n, 0));
  Value y = x;
  if (opset_ < 11) {
    // Clip-6: min/max attributes, defaulting to the float range.
    Type elem = typeOf(x).getElementType();
    DS_TRY(lo, floatAttr(n, "min", -std::numeric_limits<float>::max()));
    DS_TRY(hi, floatAttr(n, "max", std::numeric_limits<float>::max()));
    DS_TRY(a, build<MaxOp>({y, scalar(elem, lo)}));
    DS_TRY(c, build<MinOp>({a, scalar(elem, hi)}));
    setOutput(n, 0, c);
    return success();
  }
  if (Value lo = input(n, 1)) {
    DS_TRY(t, build<MaxOp>({y, lo}));
    y = t;
  }
  if (Value hi = input(n, 2)) {
    DS_TRY(t, build<MinOp>({y, hi}));
    y = t;
  }
  setOutput(n, 0, y);
  return success();
}

LogicalResult ElementwiseImporter::div(const onnx::NodeProto &n) {
  if (failed(checkConstantDivisor(n, 1))) return failure();
  return binary<DivOp>(n);
}

LogicalResult ElementwiseImporter::mod(const onnx::NodeProto &n) {
  DS_TRY(a, required(n, 0));
  DS_TRY(c, required(n, 1));
  DS_TRY(fmod, intAttr(n, "fmod", 0));
  bool isFloat = isa<FloatType>(typeOf(a).getElementType());
  if (failed(checkConstantDivisor(n, 1))) return failure();
  // ds.mod is fmod on floats and floored on integers: the two ONNX pairings.
  if (isFloat && !fmod) {
    // Floored remainder (opset 28 spells it out for floats): C's fmod,
    // moved by one divisor when it is non-zero and its sign differs from
    // the divisor's. fmod already gives NaN for x = ±inf or y = ±0, and
    // x for y = ±inf, which the shift turns into y when the signs differ.
    Type f = typeOf(a).getElementType();
    DS_TRY(r, build<ModOp>({a, c}));
    Value zero = scalar(f, 0.0);
    DS_TRY(rNeg, build<LessOp>({r, zero}));
    DS_TRY(cNeg, build<LessOp>({c, zero}));
    DS_TRY(differ, build<XorOp>({rNeg, cNeg}));
    DS_TRY(isZero, build<EqualOp>({r, zero}));
    DS_TRY(nonZero, build<NotOp>({isZero}));
    DS_TRY(shift, build<AndOp>({differ, nonZero}));
    DS_TRY(moved, build<AddOp>({r, c}));
    DS_TRY(y, build<WhereOp>({shift, moved, r}));
    setOutput(n, 0, y);
    return success();
  }
  if (!isFloat && fmod) {
    // C's truncated remainder, a - (a / b) * b: ds.div truncates integers.
    DS_TRY(q, build<DivOp>({a, c}));
    DS_TRY(back, build<MulOp>({q, c}));
    DS_TRY(y, build<SubOp>({a, back}));
    setOutput(n, 0, y);
    return success();
  }
  DS_TRY(y, build<ModOp>({a, c}));
  setOutput(n, 0, y);
  return success();
}

LogicalResult ElementwiseImporter::isNan(const onnx::NodeProto &n) {
  DS_TRY(x, required(n, 0));
  auto t = RankedTensorType::get(typeOf(x).getShape(), b_.getI1Type());
  DS_TRY(y, buildTyped<IsNanOp>(t, x));
  setOutput(n, 0, y);
  return success();
}

LogicalResult ElementwiseImporter::isInf(const onnx::NodeProto &n) {
  DS_TRY(x, required(n, 0));
  DS_TRY(neg, intAttr(n, "detect_negative", 1));
  DS_TRY(pos, intAttr(n, "detect_positive", 1));
  auto boolType = RankedTensorType::get(typeOf(x).getShape(), b_.getI1Type());
  DS_TRY(inf, buildTyped<IsInfOp>(boolType, x));
  Value y = inf;
  if (!neg || !pos) {
    Value zero = scalar(typeOf(x).getElementType(), 0.0);
    FailureOr<Value> side = pos ? build<GreaterOp>({x, zero}) : build<LessOp>({x, zero});
    if (failed(side)) return failure();
    DS_TRY(both, build<AndOp>({inf, *side}));
    y = both;
    if (!neg && !pos) y = constant(DenseElementsAttr::get(boolType, false));
  }
  setOutput(n, 0, y);
  return success();
}

// BitShift: ds's shifts carry ONNX's semantics (opset 28 extended them to
// signed types: arithmetic right shifts, and shifts past the width).
LogicalResult ElementwiseImporter::bitShift(const onnx::NodeProto &n) {
  DS_TRY(x, required(n, 0));
  DS_TRY(s, required(n, 1));
  DS_TRY(direction, stringAttr(n, "direction", ""));
  if (direction != "LEFT" && direction != "RIGHT")
    return nodeError(n) << "direction must be LEFT or RIGHT, not '" << direction << "'";
  Type elem = typeOf(x).getElementType();
  if (!isa<IntegerType>(elem) || elem.isInteger(1))
    return nodeError(n) << "BitShift needs integers, not " << elem;
  FailureOr<Value> y = direction == "LEFT" ? build<ShiftLeftOp>({x, s}) : build<ShiftRightOp>({x, s});
  if (failed(y)) return failure();
  setOutput(n, 0, *y);
  return success();
}

// BitCast: the same bytes as the `to` type, which must be as wide.
LogicalResult ElementwiseImporter::bitCast(const onnx::NodeProto &n) {
  DS_TRY(x, required(n, 0));
  DS_TRY(to, intAttr(n, "to"));
  FailureOr<Type> elem = elementType(static_cast<int32_t>(to));
  if (failed(elem)) return nodeError(n) << "cannot bitcast to type #" << to;
  auto width = [](Type t) { return t.isInteger(1) ? 8u : t.getIntOrFloatBitWidth(); };
  Type from = typeOf(x).getElementType();
  if (width(from) != width(*elem))
    return nodeError(n) << "cannot bitcast " << from << " to " << *elem
                        << ": their widths differ";
  DS_TRY(y, buildTyped<BitcastOp>(RankedTensorType::get(typeOf(x).getShape(), *elem), x));
  setOutput(n, 0, y);
  return success();
}

// Mish: x * tanh(softplus(x)).
LogicalResult ElementwiseImporter::mish(const onnx::NodeProto &n) {
  DS_TRY(x, required(n, 0));
  if (!isa<FloatType>(typeOf(x).getElementType())) return nodeError(n) << "needs a float input";
  DS_TRY(sp, buildTyped<SoftplusOp>(x.getType(), x));
  DS_TRY(t, buildTyped<TanhOp>(x.getType(), sp));
  DS_TRY(y, build<MulOp>({x, t}));
  setOutput(n, 0, y);
  return success();
}

LogicalResult ElementwiseImporter::gelu(const onnx::NodeProto &n) {
  DS_TRY(x, required(n, 0));
  DS_TRY(approx, stringAttr(n, "approximate", "none"));
  auto kind = symbolizeGeluApproximation(approx);
  if (!kind) return nodeError(n) << "unknown approximation '" << approx << "'";
  DS_TRY(y, buildTyped<GeluOp>(x.getType(), x,
                               {attr("approximate", GeluApproximationAttr::get(ctx_, *kind))}));
  setOutput(n, 0, y);
  return success();
}

LogicalResult ElementwiseImporter::leakyRelu(const onnx::NodeProto &n) {
  // x > 0 ? x : alpha * x: one branch's derivative at 0 (alpha, as
  // PyTorch), where max(x, 0) + alpha * min(x, 0) counted both.
  DS_TRY(x, required(n, 0));
  DS_TRY(alpha, floatAttr(n, "alpha", 0.01f));
  Type elem = typeOf(x).getElementType();
  Value zero = scalar(elem, 0.0);
  DS_TRY(pos, build<GreaterOp>({x, zero}));
  DS_TRY(scaled, build<MulOp>({x, scalar(elem, alpha)}));
  DS_TRY(y, build<WhereOp>({pos, x, scaled}));
  setOutput(n, 0, y);
  return success();
}

LogicalResult ElementwiseImporter::prelu(const onnx::NodeProto &n) {
  DS_TRY(x, required(n, 0));
  DS_TRY(slope0, required(n, 1));
  Value slope = slope0;
  // PRelu-6 applies a [C] slope per channel; later opsets broadcast as numpy.
  if (opset_ < 7 && typeOf(x).getRank() > 2 && typeOf(slope).getRank() == 1 &&
      typeOf(slope).getDimSize(0) == typeOf(x).getDimSize(1)) {
    SmallVector<int64_t> shape(typeOf(x).getRank() - 1, 1);
    shape[0] = typeOf(x).getDimSize(1);
    DS_TRY(r, reshape(slope, shape));
    slope = r;
  }
  // x > 0 ? x : slope * x: the slope's derivative at 0, as PyTorch.
  Value zero = scalar(typeOf(x).getElementType(), 0.0);
  DS_TRY(pos, build<GreaterOp>({x, zero}));
  DS_TRY(scaled, build<MulOp>({x, slope}));
  DS_TRY(y, build<WhereOp>({pos, x, scaled}));
  if (typeOf(y).getShape() != typeOf(x).getShape())
    return nodeError(n) << "slope must broadcast to the input";
  setOutput(n, 0, y);
  return success();
}

/// Activations ONNX defines by formula, imported as those formulas.
LogicalResult ElementwiseImporter::activation(const onnx::NodeProto &n) {
  DS_TRY(x, required(n, 0));
  const std::string &op = n.op_type();
  Type elem = typeOf(x).getElementType();
  // ONNX defines all of these on floating-point tensors only; on integers
  // the formulas' constants (0.2, 1/6) would truncate to 0.
  if (!isa<FloatType>(elem))
    return nodeError(n) << op << " takes a floating-point input, not " << elem;
  Type t = x.getType();
  Value zero = scalar(elem, 0.0), one = scalar(elem, 1.0);
  auto expm1Scaled = [&](double alpha, double inScale) -> FailureOr<Value> {
    // alpha * (exp(min(x, 0) * inScale) - 1): the negative branch, read only
    // where x <= 0; min keeps exp finite where x is large, so its unselected
    // gradient is 0, not 0 * inf = NaN.
    DS_TRY(in, build<MinOp>({x, zero}));
    if (inScale != 1.0) {
      DS_TRY(s, build<MulOp>({in, scalar(elem, inScale)}));
      in = s;
    }
    DS_TRY(e, buildTyped<ExpOp>(t, in));
    DS_TRY(em1, build<SubOp>({e, one}));
    return build<MulOp>({em1, scalar(elem, alpha)});
  };
  auto hardSigmoid = [&](double alpha, double beta) -> FailureOr<Value> {
    // t <= 0 ? 0 : t >= 1 ? 1 : t for t = alpha x + beta: derivative 0 at
    // the bounds, as PyTorch's hardsigmoid (max and min would pass alpha).
    DS_TRY(ax, build<MulOp>({x, scalar(elem, alpha)}));
    DS_TRY(axb, build<AddOp>({ax, scalar(elem, beta)}));
    DS_TRY(low, build<LessEqualOp>({axb, zero}));
    DS_TRY(high, build<GreaterEqualOp>({axb, one}));
    DS_TRY(upper, build<WhereOp>({high, one, axb}));
    return build<WhereOp>({low, zero, upper});
  };
  FailureOr<Value> y = failure();
  if (op == "Elu" || op == "Selu") {
    DS_TRY(alpha, floatAttr(n, "alpha", op == "Elu" ? 1.0f : 1.67326319217681884765625f));
    DS_TRY(neg, expm1Scaled(alpha, 1.0));
    DS_TRY(pos, build<GreaterOp>({x, zero}));
    DS_TRY(w, build<WhereOp>({pos, x, neg}));
    y = w;
    if (op == "Selu") {
      DS_TRY(gamma, floatAttr(n, "gamma", 1.05070102214813232421875f));
      y = build<MulOp>({w, scalar(elem, gamma)});
    }
  } else if (op == "Celu") {
    DS_TRY(alpha, floatAttr(n, "alpha", 1.0f));
    // x > 0 ? x : alpha * expm1(x / alpha): derivative 1 at 0, as PyTorch.
    DS_TRY(neg, expm1Scaled(alpha, 1.0 / alpha));
    DS_TRY(pos, build<GreaterOp>({x, zero}));
    y = build<WhereOp>({pos, x, neg});
  } else if (op == "HardSigmoid") {
    DS_TRY(alpha, floatAttr(n, "alpha", 0.2f));
    DS_TRY(beta, floatAttr(n, "beta", 0.5f));
    y = hardSigmoid(alpha, beta);
  } else if (op == "HardSwish") {
    DS_TRY(hs, hardSigmoid(1.0 / 6.0, 0.5));
    y = build<MulOp>({x, hs});
  } else if (op == "Softsign") {
    DS_TRY(a, buildTyped<AbsOp>(t, x));
    DS_TRY(d, build<AddOp>({a, one}));
    y = build<DivOp>({x, d});
  } else { // ThresholdedRelu
    DS_TRY(alpha, floatAttr(n, "alpha", 1.0f));
    DS_TRY(above, build<GreaterOp>({x, scalar(elem, alpha)}));
    y = build<WhereOp>({above, x, zero});
  }
  if (failed(y)) return failure();
  setOutput(n, 0, *y);
  return success();
}

// Shrink: x + bias below -lambd, x - bias above lambd, 0 between.
LogicalResult ElementwiseImporter::shrink(const onnx::NodeProto &n) {
  DS_TRY(x, required(n, 0));
  DS_TRY(lambd, floatAttr(n, "lambd", 0.5f));
  DS_TRY(bias, floatAttr(n, "bias", 0.0f));
  Type elem = typeOf(x).getElementType();
  DS_TRY(low, build<LessOp>({x, scalar(elem, -lambd)}));
  DS_TRY(high, build<GreaterOp>({x, scalar(elem, lambd)}));
  DS_TRY(up, build<AddOp>({x, scalar(elem, bias)}));
  DS_TRY(down, build<SubOp>({x, scalar(elem, bias)}));
  DS_TRY(hi, build<WhereOp>({high, down, scalar(elem, 0)}));
  DS_TRY(y, build<WhereOp>({low, up, hi}));
  setOutput(n, 0, y);
  return success();
}

} // namespace

void mlir::ds::importer::registerElementwiseHandlers(HandlerTable &t) {
  using I = ElementwiseImporter;
  t.add<I, &I::identity>("Identity");
  t.add<I, &I::unary<SqrtOp>>("Sqrt");
  t.add<I, &I::unary<ReciprocalOp>>("Reciprocal");
  t.add<I, &I::unary<ExpOp>>("Exp");
  t.add<I, &I::unary<LogOp>>("Log");
  t.add<I, &I::unary<ErfOp>>("Erf");
  t.add<I, &I::unary<TanhOp>>("Tanh");
  t.add<I, &I::unary<SigmoidOp>>("Sigmoid");
  t.add<I, &I::unary<ReluOp>>("Relu");
  t.add<I, &I::unary<NegOp>>("Neg");
  t.add<I, &I::unary<AbsOp>>("Abs");
  t.add<I, &I::unary<NotOp>>("Not");
  t.add<I, &I::unary<SinOp>>("Sin");
  t.add<I, &I::unary<CosOp>>("Cos");
  t.add<I, &I::unary<TanOp>>("Tan");
  t.add<I, &I::unary<AsinOp>>("Asin");
  t.add<I, &I::unary<AcosOp>>("Acos");
  t.add<I, &I::unary<AtanOp>>("Atan");
  t.add<I, &I::unary<SinhOp>>("Sinh");
  t.add<I, &I::unary<CoshOp>>("Cosh");
  t.add<I, &I::unary<AsinhOp>>("Asinh");
  t.add<I, &I::unary<AcoshOp>>("Acosh");
  t.add<I, &I::unary<AtanhOp>>("Atanh");
  t.add<I, &I::unary<FloorOp>>("Floor");
  t.add<I, &I::unary<CeilOp>>("Ceil");
  t.add<I, &I::unary<RoundOp>>("Round");
  t.add<I, &I::unary<SignOp>>("Sign");
  t.add<I, &I::unary<SoftplusOp>>("Softplus");
  t.add<I, &I::mish>("Mish");
  t.add<I, &I::binary<AddOp>>("Add");
  t.add<I, &I::binary<SubOp>>("Sub");
  t.add<I, &I::binary<MulOp>>("Mul");
  t.add<I, &I::div>("Div");
  t.add<I, &I::binary<EqualOp>>("Equal");
  t.add<I, &I::binary<LessOp>>("Less");
  t.add<I, &I::binary<GreaterOp>>("Greater");
  t.add<I, &I::binary<LessEqualOp>>("LessOrEqual");
  t.add<I, &I::binary<GreaterEqualOp>>("GreaterOrEqual");
  t.add<I, &I::binary<AndOp>>("And");
  t.add<I, &I::binary<OrOp>>("Or");
  t.add<I, &I::binary<XorOp>>("Xor");
  t.add<I, &I::variadic<MinOp>>("Min");
  t.add<I, &I::variadic<MaxOp>>("Max");
  t.add<I, &I::variadic<AddOp>>("Sum");
  t.add<I, &I::mean>("Mean");
  t.add<I, &I::pow>("Pow");
  t.add<I, &I::where>("Where");
  t.add<I, &I::castNode>("Cast");
  t.add<I, &I::castLike>("CastLike");
  t.add<I, &I::clip>("Clip");
  t.add<I, &I::mod>("Mod");
  t.add<I, &I::isNan>("IsNaN");
  t.add<I, &I::isInf>("IsInf");
  t.add<I, &I::bitShift>("BitShift");
  t.add<I, &I::bitCast>("BitCast");
  t.add<I, &I::binary<BitwiseAndOp>>("BitwiseAnd");
  t.add<I, &I::binary<BitwiseOrOp>>("BitwiseOr");
  t.add<I, &I::binary<BitwiseXorOp>>("BitwiseXor");
  t.add<I, &I::unary<BitwiseNotOp>>("BitwiseNot");
  t.add<I, &I::gelu>("Gelu");
  t.add<I, &I::leakyRelu>("LeakyRelu");
  t.add<I, &I::prelu>("PRelu");
  t.add<I, &I::activation>("Elu");
  t.add<I, &I::activation>("Selu");
  t.add<I, &I::activation>("Celu");
  t.add<I, &I::activation>("HardSigmoid");
  t.add<I, &I::activation>("HardSwish");
  t.add<I, &I::activation>("Softsign");
  t.add<I, &I::activation>("ThresholdedRelu");
  t.add<I, &I::shrink>("Shrink");
}

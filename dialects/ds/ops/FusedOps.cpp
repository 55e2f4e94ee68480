//===- FusedOps.cpp - verifiers of the fused and quantized ops -----------===//
//
// The ops the fusion and quantization passes make (fused_elementwise,
// rms_norm, sum_squares, attention, cached_attention, dynamic_quantize,
// quantized_matmul): each verifier checks the **Constraints:** list of its
// op's description in ops/FusedOps.td. (fused_matmul's and
// quantized_conv's live with the products and convolutions they share
// checks with, in LinalgOps.cpp.)
//
//===----------------------------------------------------------------------===//
#include "dialects/ds/ops/Verifiers.h"

using namespace mlir;
using namespace mlir::ds;
using namespace mlir::ds::verifiers;

LogicalResult FusedElementwiseOp::verify() {
  Block &body = getBody().front();
  if (body.getNumArguments() != getInputs().size())
    return emitOpError("body has ") << body.getNumArguments() << " arguments for "
                                    << getInputs().size() << " inputs";
  auto resultType = cast<RankedTensorType>(getResult().getType());
  // What the kernel evaluates: f32 and i1 registers, and at least one op.
  auto computable = [](Type e) { return e.isF32() || e.isInteger(1); };
  if (!computable(resultType.getElementType()))
    return emitOpError("computes in f32 and i1 only, got a result of ") << resultType;
  for (auto [i, input] : llvm::enumerate(getInputs())) {
    auto t = cast<RankedTensorType>(input.getType());
    if (!computable(t.getElementType()))
      return emitOpError("computes in f32 and i1 only, got input #") << i << " of " << t;
    auto arg = dyn_cast<RankedTensorType>(body.getArgument(i).getType());
    if (!arg || arg.getRank() != 0 || arg.getElementType() != t.getElementType())
      return emitOpError("body argument #")
             << i << " must be " << RankedTensorType::get({}, t.getElementType()) << ", got "
             << body.getArgument(i).getType();
    if (failed(broadcastShapes({t.getShape(), resultType.getShape()})) ||
        *broadcastShapes({t.getShape(), resultType.getShape()}) !=
            SmallVector<int64_t>(resultType.getShape()))
      return emitOpError("input #") << i << " of type " << t
                                    << " does not broadcast to the result " << resultType;
  }
  if (body.without_terminator().empty() && isa<YieldOp>(body.getTerminator()) &&
      cast<RankedTensorType>(body.getTerminator()->getOperand(0).getType()).getRank() == 0)
    return emitOpError("body computes nothing (it yields an argument): use the input itself");
  for (Operation &op : body.without_terminator()) {
    if (!op.hasTrait<OpTrait::ds::Elementwise>() || isa<FusedElementwiseOp>(op))
      return emitOpError("body op '") << op.getName() << "' is not an elementwise ds op";
    for (Type t : llvm::concat<Type>(op.getOperandTypes(), op.getResultTypes()))
      if (cast<RankedTensorType>(t).getRank() != 0)
        return emitOpError("body op '") << op.getName() << "' works on " << t
                                        << ", not on one element (a rank-0 tensor)";
  }
  auto yield = dyn_cast<YieldOp>(body.getTerminator());
  if (!yield) return emitOpError("body must end in ds.yield");
  auto yielded = cast<RankedTensorType>(yield.getValue().getType());
  if (yielded.getRank() != 0 || yielded.getElementType() != resultType.getElementType())
    return emitOpError("body yields ")
           << yielded << ", expected " << RankedTensorType::get({}, resultType.getElementType());
  return success();
}

LogicalResult RmsNormOp::verify() {
  RankedTensorType t = getOperand().getType();
  if (t.getRank() < 1) return emitOpError("operand must have rank >= 1");
  if (Value scale = getScale();
      scale && cast<RankedTensorType>(scale.getType()).getShape() != t.getShape().take_back())
    return emitOpError("scale must be [") << t.getShape().back() << "], got " << scale.getType();
  float eps = getEpsilon().convertToFloat();
  if (!std::isfinite(eps) || eps < 0) return emitOpError("epsilon must be finite and >= 0");
  return success();
}

LogicalResult SumSquaresOp::verify() {
  if (getOperands().empty()) return emitOpError("needs at least one operand");
  return success();
}

/// Attention's q, k and v views ([B, heads, length, dim], one of the last
/// two dimensions stepping by 1), shared by ds.attention and
/// ds.cached_attention.
struct AttentionView {
  const char *name;
  Value operand;
  ArrayRef<int64_t> shape, strides;
  std::optional<uint64_t> offset;
};
static LogicalResult verifyAttentionViews(Operation *op, ArrayRef<AttentionView> views) {
  for (const AttentionView &v : views) {
    if (v.shape.size() != 4 || v.strides.size() != 4)
      return op->emitOpError(v.name) << "_shape and " << v.name << "_strides must have 4 entries";
    // (An offset beyond int64 reads as negative: refused by the view check.)
    if (failed(verifyView(op, v.name, v.operand, v.shape, v.strides,
                          static_cast<int64_t>(v.offset.value_or(0)))))
      return failure();
    if (v.strides[2] != 1 && v.strides[3] != 1)
      return op->emitOpError(v.name) << " view needs stride 1 in one of its last two dimensions";
  }
  return success();
}

LogicalResult AttentionOp::verify() {
  if (failed(verifyAttentionViews(
          *this, {{"query", getQuery(), getQueryShape(), getQueryStrides(), getQueryOffset()},
                  {"key", getKey(), getKeyShape(), getKeyStrides(), getKeyOffset()},
                  {"value", getValue(), getValueShape(), getValueStrides(), getValueOffset()}})))
    return failure();
  ArrayRef<int64_t> q = getQueryShape(), k = getKeyShape(), v = getValueShape();
  if (k[0] != q[0] || v[0] != q[0] || v[1] != k[1] || v[2] != k[2] || k[3] != q[3])
    return emitOpError("views disagree: query [B, Hq, Sq, D], key [B, Hkv, Sk, D], value "
                       "[B, Hkv, Sk, Dv] expected");
  if (q[1] % k[1])
    return emitOpError("key/value heads (") << k[1] << ") must divide query heads (" << q[1] << ")";
  SmallVector<int64_t> want = getResultBshd() ? SmallVector<int64_t>{q[0], q[2], q[1], v[3]}
                                              : SmallVector<int64_t>{q[0], q[1], q[2], v[3]};
  if (getResult().getType().getShape() != ArrayRef<int64_t>(want))
    return emitOpError("result must be ") << shapeStr(want) << ", got " << getResult().getType();
  if (getMaskFillAttr() && !getMask()) return emitOpError("mask_fill needs a mask");
  if (Value mask = getMask()) {
    Type e = cast<RankedTensorType>(mask.getType()).getElementType();
    if (getMaskFillAttr() ? !e.isInteger(1) : !e.isF32())
      return emitOpError("mask must be ") << (getMaskFillAttr() ? "i1 with mask_fill" : "f32")
                                          << ", got " << mask.getType();
    ArrayRef<int64_t> m = cast<RankedTensorType>(mask.getType()).getShape();
    SmallVector<int64_t> scores{q[0], q[1], q[2], k[2]};
    if (m.size() > 4 || failed(broadcastShapes({m, scores})) ||
        *broadcastShapes({m, scores}) != scores)
      return emitOpError("mask ") << mask.getType() << " does not broadcast to the scores "
                                  << shapeStr(scores);
  }
  // In f32, the precision the kernel computes in (1e300 is inf there).
  if (!std::isfinite(static_cast<float>(getScale().convertToDouble())))
    return emitOpError("scale must be finite as an f32");
  return success();
}

LogicalResult CachedAttentionOp::verify() {
  if (failed(verifyAttentionViews(
          *this, {{"query", getQuery(), getQueryShape(), getQueryStrides(), getQueryOffset()},
                  {"key", getKey(), getKeyShape(), getKeyStrides(), getKeyOffset()},
                  {"value", getValue(), getValueShape(), getValueStrides(), getValueOffset()}})))
    return failure();
  ArrayRef<int64_t> q = getQueryShape(), k = getKeyShape(), v = getValueShape();
  if (k[0] != q[0] || v[0] != q[0] || v[1] != k[1] || v[2] != k[2] || k[2] != q[2] ||
      k[3] != q[3])
    return emitOpError("views disagree: query [B, Hq, T, D], key [B, Hkv, T, D], value "
                       "[B, Hkv, T, Dv] expected");
  if (q[1] % k[1])
    return emitOpError("key/value heads (") << k[1] << ") must divide query heads (" << q[1] << ")";
  ArrayRef<int64_t> kc = getKeyCache().getType().getShape(),
                    vc = getValueCache().getType().getShape();
  if (kc.size() != 5 || vc.size() != 4 || kc[1] != k[1] || kc[3] != k[3] ||
      kc[4] != kCachedKeyTile || vc[0] != kc[0] || vc[1] != k[1] ||
      vc[2] != kc[2] * kCachedKeyTile || vc[3] != v[3] || vc[2] < q[2])
    return emitOpError("caches must be key tiles [Bc, ")
           << k[1] << ", M / 16, " << k[3] << ", 16] and value [Bc, " << k[1] << ", M, " << v[3]
           << "] with M >= " << q[2] << ", got " << getKeyCache().getType() << " and "
           << getValueCache().getType();
  if (getKeyCacheOut().getType() != getKeyCache().getType() ||
      getValueCacheOut().getType() != getValueCache().getType())
    return emitOpError("updated caches must have the caches' types");
  for (auto [name, t] : {std::pair<const char *, Value>{"positions", getPositions()},
                         {"lengths", getLengths()}, {"slots", getSlots()}})
    if (cast<RankedTensorType>(t.getType()).getShape() != ArrayRef<int64_t>{q[0]})
      return emitOpError(name) << " must be [" << q[0] << "], got " << t.getType();
  SmallVector<int64_t> want = getResultBshd() ? SmallVector<int64_t>{q[0], q[2], q[1], v[3]}
                                              : SmallVector<int64_t>{q[0], q[1], q[2], v[3]};
  if (getResult().getType().getShape() != ArrayRef<int64_t>(want))
    return emitOpError("result must be ") << shapeStr(want) << ", got " << getResult().getType();
  if (!std::isfinite(static_cast<float>(getScale().convertToDouble())))
    return emitOpError("scale must be finite as an f32");
  if (getWindow() && *getWindow() < 1) return emitOpError("window must be >= 1");
  return success();
}

LogicalResult DynamicQuantizeOp::verify() {
  if (getY().getType().getShape() != getOperand().getType().getShape())
    return emitOpError("y must have the operand's shape, got ") << getY().getType();
  return success();
}

LogicalResult QuantizedMatmulOp::verify() {
  RankedTensorType x = getLhs().getType(), w = getWeight().getType(), s = getScale().getType();
  if (x.getRank() < 1) return emitOpError("lhs must have rank >= 1");
  if (w.getRank() != 2) return emitOpError("weight must be [N, K] (or [N, K / 2] for 4 bits)");
  const int64_t k = x.getShape().back(), n = w.getDimSize(0);
  const int64_t bits = getBits();
  const bool i8 = w.getElementType().isSignlessInteger(8) || w.getElementType().isSignedInteger(8);
  if (bits == 8 ? (!i8 || w.getDimSize(1) != k)
                : bits == 4 ? (!w.getElementType().isUnsignedInteger(8) || k % 2 || w.getDimSize(1) * 2 != k)
                            : true)
    return emitOpError("bits ") << bits << " needs " << (bits == 4 ? "a ui8 weight [N, K / 2] with K even"
                                                                   : "an i8 weight [N, K]")
                                << " for K = " << k << " (bits is 8 or 4), got " << w;
  const int64_t g = getGroupSize();
  if (g < 0 || (g && (k % g || (bits == 4 && g % 2))))
    return emitOpError("group_size ") << g << " must be 0 or divide K = " << k
                                      << (bits == 4 ? " (and be even for 4 bits)" : "");
  SmallVector<int64_t> want = g ? SmallVector<int64_t>{n, k / g} : SmallVector<int64_t>{n};
  if (s.getShape() != ArrayRef<int64_t>(want))
    return emitOpError("scale must be ") << shapeStr(want) << ", got " << s;
  if (Value zp = getZeroPoint()) {
    auto zt = cast<RankedTensorType>(zp.getType());
    if (zt.getShape() != ArrayRef<int64_t>(want) || zt.getElementType() != w.getElementType())
      return emitOpError("zero_point must be ") << shapeStr(want) << " of the weight's type, got "
                                                << zt;
    if (getActivationQuant() != ActivationQuant::None)
      return emitOpError("quantized activations take a weight without zero points");
  }
  SmallVector<int64_t> rs(x.getShape());
  rs.back() = n;
  if (getResult().getType().getShape() != ArrayRef<int64_t>(rs))
    return emitOpError("result must be ") << shapeStr(rs) << ", got " << getResult().getType();
  if (Value b = getBias(); b && cast<RankedTensorType>(b.getType()).getShape() != ArrayRef<int64_t>{n})
    return emitOpError("bias must be [") << n << "], got " << b.getType();
  if (Value a = getAddend(); a && a.getType() != getResult().getType())
    return emitOpError("addend must have the result's type, got ") << a.getType();
  if (getCombine() != Combine::Add && getCombine() != Combine::Mul)
    return emitOpError("combine must be add or mul");
  if (!std::isfinite(static_cast<float>(getAlpha().convertToDouble())))
    return emitOpError("alpha must be finite as an f32");
  if (static_cast<bool>(getRoundScaleAttr()) != static_cast<bool>(getRoundZeroPointAttr()))
    return emitOpError("round_scale and round_zero_point go together");
  if (getRoundScaleAttr() &&
      failed(verifyInputQuantization(*this, getRoundScaleAttr().getValueAsDouble(),
                                     getRoundZeroPointAttr().getInt(), "round_scale",
                                     "round_zero_point")))
    return failure();
  const bool isStatic = getActivationQuant() == ActivationQuant::StaticPerTensor;
  if (isStatic != (getInputScaleAttr() && getInputZeroPointAttr()) ||
      (!isStatic && (getInputScaleAttr() || getInputZeroPointAttr())))
    return emitOpError("input_scale and input_zero_point go with static_per_tensor activations, "
                       "and only with them");
  if (isStatic)
    return verifyInputQuantization(*this, getInputScaleAttr().getValueAsDouble(),
                                   getInputZeroPointAttr().getInt());
  return success();
}

//===- DSOps.cpp - ops of the ds dialect ----------------------------------===//
//
// Type inference, verifiers and folders. Each verifier checks exactly the
// **Constraints:** list of its op's description in DSOps.td.
//
//===----------------------------------------------------------------------===//
#include "dialects/ds/DSOps.h"

#include "runtime/plan/StridedViews.h"
#include <cmath>

#include "mlir/IR/Builders.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/IR/TypeUtilities.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallSet.h"

using namespace mlir;
using namespace mlir::ds;

//===----------------------------------------------------------------------===//
// Helpers
//===----------------------------------------------------------------------===//

FailureOr<SmallVector<int64_t>>
mlir::ds::broadcastShapes(ArrayRef<ArrayRef<int64_t>> shapes) {
  size_t rank = 0;
  for (auto s : shapes)
    rank = std::max(rank, s.size());
  SmallVector<int64_t> out(rank, 1);
  for (auto s : shapes) {
    for (size_t i = 0; i < s.size(); ++i) {
      int64_t &o = out[rank - s.size() + i];
      int64_t d = s[i];
      if (d == o || d == 1)
        continue;
      if (o != 1)
        return failure();
      o = d;
    }
  }
  return out;
}

// (A one-element parameter marked ds.trained, which ONNX training_info
// names for training, is not known: it changes as it trains.)
std::optional<double> mlir::ds::knownFloatSplat(Value v) {
  Attribute attr;
  if (auto c = v.getDefiningOp<ConstantOp>()) attr = c.getValue();
  else if (auto p = v.getDefiningOp<ParameterOp>();
           p && cast<RankedTensorType>(p.getType()).getNumElements() == 1 &&
           !p->hasAttr("ds.trained"))
    attr = p.getValue();
  auto value = dyn_cast_or_null<DenseFPElementsAttr>(attr);
  if (!value || !value.isSplat()) return std::nullopt;
  double x = value.getSplatValue<APFloat>().convertToDouble();
  if (std::isnan(x)) return std::nullopt;
  return x;
}

static RankedTensorType rankedType(Value v) {
  return cast<RankedTensorType>(v.getType());
}

static std::string shapeStr(ArrayRef<int64_t> shape) {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << "[";
  llvm::interleave(shape, os, "x");
  os << "]";
  return s;
}

/// Axes must be sorted, unique and in [0, bound).
static LogicalResult checkAxes(std::optional<Location> loc, ArrayRef<int64_t> axes,
                               int64_t bound, StringRef what) {
  for (size_t i = 0; i < axes.size(); ++i) {
    if (axes[i] < 0 || axes[i] >= bound)
      return emitOptionalError(loc, what, " axis ", axes[i],
                               " is out of range [0, ", bound, ")");
    if (i > 0 && axes[i] <= axes[i - 1])
      return emitOptionalError(loc, what, " axes must be sorted and unique");
  }
  return success();
}

/// `op` needs an operand of rank >= 1 and `axis` in [0, rank).
static LogicalResult verifyAxis(Operation *op, int64_t axis, int64_t rank) {
  if (rank < 1)
    return op->emitOpError("needs an operand of rank >= 1");
  if (axis < 0 || axis >= rank)
    return op->emitOpError("axis ") << axis << " is out of range [0, " << rank << ")";
  return success();
}

//===----------------------------------------------------------------------===//
// Constants and parameters
//===----------------------------------------------------------------------===//

OpFoldResult ConstantOp::fold(FoldAdaptor) { return getValue(); }

LogicalResult ParameterOp::verify() {
  if (getSymName().empty())
    return emitOpError("needs a non-empty name");
  return success();
}

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

OpFoldResult CastOp::fold(FoldAdaptor) {
  if (getOperand().getType() == getType())
    return getOperand();
  return {};
}

LogicalResult CastOp::verify() {
  if (std::optional<StringRef> mode = getRoundMode();
      mode && *mode != "up" && *mode != "down" && *mode != "nearest")
    return emitOpError("round_mode must be \"up\", \"down\" or \"nearest\", got \"")
           << *mode << "\"";
  return success();
}

static LogicalResult inferBinary(std::optional<Location> loc, ValueRange operands,
                                 bool boolResult,
                                 SmallVectorImpl<Type> &inferred) {
  auto lhs = rankedType(operands[0]), rhs = rankedType(operands[1]);
  if (lhs.getElementType() != rhs.getElementType())
    return emitOptionalError(loc, "operands have different element types: ",
                             lhs.getElementType(), " and ", rhs.getElementType());
  auto shape = broadcastShapes({lhs.getShape(), rhs.getShape()});
  if (failed(shape))
    return emitOptionalError(loc, "operand shapes ", shapeStr(lhs.getShape()),
                             " and ", shapeStr(rhs.getShape()),
                             " do not broadcast");
  Type elem = boolResult ? IntegerType::get(lhs.getContext(), 1)
                         : lhs.getElementType();
  inferred.push_back(RankedTensorType::get(*shape, elem));
  return success();
}

#define DS_INFER_BINARY(OP, BOOL_RESULT)                                       \
  LogicalResult OP::inferReturnTypes(                                          \
      MLIRContext *, std::optional<Location> loc, ValueRange operands,         \
      DictionaryAttr, OpaqueProperties, RegionRange,                           \
      SmallVectorImpl<Type> &inferred) {                                       \
    return inferBinary(loc, operands, BOOL_RESULT, inferred);                  \
  }
DS_INFER_BINARY(AddOp, false)
DS_INFER_BINARY(SubOp, false)
DS_INFER_BINARY(MulOp, false)
DS_INFER_BINARY(DivOp, false)
DS_INFER_BINARY(PowOp, false)
DS_INFER_BINARY(MinOp, false)
DS_INFER_BINARY(MaxOp, false)
DS_INFER_BINARY(ModOp, false)
DS_INFER_BINARY(EqualOp, true)
DS_INFER_BINARY(LessOp, true)
DS_INFER_BINARY(GreaterOp, true)
DS_INFER_BINARY(LessEqualOp, true)
DS_INFER_BINARY(GreaterEqualOp, true)
DS_INFER_BINARY(AndOp, true)
DS_INFER_BINARY(OrOp, true)
DS_INFER_BINARY(XorOp, true)
DS_INFER_BINARY(BitwiseAndOp, false)
DS_INFER_BINARY(BitwiseOrOp, false)
DS_INFER_BINARY(BitwiseXorOp, false)
DS_INFER_BINARY(ShiftLeftOp, false)
DS_INFER_BINARY(ShiftRightOp, false)
#undef DS_INFER_BINARY

LogicalResult WhereOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                        ValueRange operands, DictionaryAttr,
                                        OpaqueProperties, RegionRange,
                                        SmallVectorImpl<Type> &inferred) {
  auto c = rankedType(operands[0]), t = rankedType(operands[1]),
       f = rankedType(operands[2]);
  if (t.getElementType() != f.getElementType())
    return emitOptionalError(loc, "branches have different element types: ",
                             t.getElementType(), " and ", f.getElementType());
  auto shape = broadcastShapes({c.getShape(), t.getShape(), f.getShape()});
  if (failed(shape))
    return emitOptionalError(loc, "operand shapes ", shapeStr(c.getShape()), ", ",
                             shapeStr(t.getShape()), " and ",
                             shapeStr(f.getShape()), " do not broadcast");
  inferred.push_back(RankedTensorType::get(*shape, t.getElementType()));
  return success();
}

//===----------------------------------------------------------------------===//
// matmul
//===----------------------------------------------------------------------===//

/// numpy.matmul's result type for `a` x `b`, each read with its last two
/// dimensions swapped when its flag is set (shared by matmul and fused_matmul).
static FailureOr<RankedTensorType> matmulResultType(std::optional<Location> loc,
                                                    RankedTensorType a, RankedTensorType b,
                                                    bool transposeLhs, bool transposeRhs) {
  if (a.getElementType() != b.getElementType())
    return emitOptionalError(loc, "operands have different element types");
  SmallVector<int64_t> aShape(a.getShape()), bShape(b.getShape());
  for (auto [shape, transposed, what] :
       {std::tuple<SmallVector<int64_t> &, bool, const char *>{aShape, transposeLhs, "lhs"},
        {bShape, transposeRhs, "rhs"}}) {
    if (!transposed) continue;
    if (shape.size() < 2)
      return emitOptionalError(loc, "transpose_", what, " needs an operand of rank >= 2");
    if (!isa<FloatType>(a.getElementType()))
      return emitOptionalError(loc, "transpose_", what, " needs float operands");
    std::swap(shape[shape.size() - 1], shape[shape.size() - 2]);
  }
  ArrayRef<int64_t> as = aShape, bs = bShape;
  if (as.empty() || bs.empty())
    return emitOptionalError(loc, "operands must have rank >= 1");
  int64_t k = as.back();
  int64_t kb = bs.size() == 1 ? bs[0] : bs[bs.size() - 2];
  if (k != kb)
    return emitOptionalError(loc, "contraction dimensions differ: ", shapeStr(as),
                             " x ", shapeStr(bs));
  ArrayRef<int64_t> aBatch = as.size() > 2 ? as.drop_back(2) : ArrayRef<int64_t>();
  ArrayRef<int64_t> bBatch = bs.size() > 2 ? bs.drop_back(2) : ArrayRef<int64_t>();
  auto batch = broadcastShapes({aBatch, bBatch});
  if (failed(batch))
    return emitOptionalError(loc, "batch dimensions of ", shapeStr(as), " and ",
                             shapeStr(bs), " do not broadcast");
  SmallVector<int64_t> shape = *batch;
  if (as.size() >= 2)
    shape.push_back(as[as.size() - 2]);
  if (bs.size() >= 2)
    shape.push_back(bs.back());
  return RankedTensorType::get(shape, a.getElementType());
}

LogicalResult MatmulOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                         ValueRange operands, DictionaryAttr attrs,
                                         OpaqueProperties props, RegionRange,
                                         SmallVectorImpl<Type> &inferred) {
  // The flags from properties or, for generic builders, the attribute
  // dictionary; absent means false (either may be missing here).
  bool transposeLhs = false, transposeRhs = false;
  if (auto *p = props.as<Properties *>()) {
    if (p->transpose_lhs) transposeLhs = p->transpose_lhs.getValue();
    if (p->transpose_rhs) transposeRhs = p->transpose_rhs.getValue();
  }
  if (attrs) {
    if (auto v = attrs.getAs<BoolAttr>("transpose_lhs")) transposeLhs = v.getValue();
    if (auto v = attrs.getAs<BoolAttr>("transpose_rhs")) transposeRhs = v.getValue();
  }
  FailureOr<RankedTensorType> t = matmulResultType(loc, rankedType(operands[0]),
                                                   rankedType(operands[1]), transposeLhs,
                                                   transposeRhs);
  if (failed(t)) return failure();
  inferred.push_back(*t);
  return success();
}

/// A strided view of `operand` (attention's and fused_matmul's operands):
/// runtime/plan/StridedViews.h's rules, which the kernels apply too.
static LogicalResult verifyView(Operation *op, StringRef name, Value operand,
                                ArrayRef<int64_t> shape, ArrayRef<int64_t> strides,
                                int64_t offset = 0) {
  if (shape.size() != strides.size())
    return op->emitOpError(name) << "_shape and " << name << "_strides differ in length";
  const int64_t numel = cast<RankedTensorType>(operand.getType()).getNumElements();
  if (const char *problem =
          ::ds::plan::viewProblem(shape.data(), strides.data(), shape.size(), numel, offset))
    return op->emitOpError(name) << " " << problem << " " << operand.getType();
  return success();
}

static LogicalResult verifyMaskBroadcasts(Operation *op, Value mask, ArrayRef<int64_t> shape);

LogicalResult FusedMatmulOp::verify() {
  // Each operand as the product reads it: its view, or its type.
  auto operand = [&](StringRef name, Value v, std::optional<ArrayRef<int64_t>> shape,
                     std::optional<ArrayRef<int64_t>> strides, std::optional<uint64_t> offset,
                     bool transposed) -> FailureOr<RankedTensorType> {
    if (offset && !shape) return emitOpError(name) << "_offset needs a view";
    if (!shape && !strides) return cast<RankedTensorType>(v.getType());
    if (!shape || !strides)
      return emitOpError(name) << "_shape and " << name << "_strides come together";
    if (shape->size() < 2) return emitOpError(name) << " view needs rank >= 2";
    if (transposed)
      return emitOpError(name) << " view is not also transposed by transpose_" << name;
    if (failed(verifyView(*this, name, v, *shape, *strides,
                          offset ? static_cast<int64_t>(*offset) : 0)))
      return failure();
    if (!::ds::plan::gemmReadable(shape->data(), strides->data(), shape->size()))
      return emitOpError(name) << " view needs unit steps along its rows or columns, the other "
                                  "dimension's steps clear of them";
    return RankedTensorType::get(*shape, Float32Type::get(getContext()));
  };
  FailureOr<RankedTensorType> lhs = operand("lhs", getLhs(), getLhsShape(), getLhsStrides(),
                                            getLhsOffset(), getTransposeLhs());
  FailureOr<RankedTensorType> rhs = operand("rhs", getRhs(), getRhsShape(), getRhsStrides(),
                                            getRhsOffset(), getTransposeRhs());
  if (failed(lhs) || failed(rhs)) return failure();
  bool lhsView = getLhsShape().has_value(), rhsView = getRhsShape().has_value();
  if ((lhsView || rhsView || getResultShape() || getResultStrides()) &&
      (lhs->getRank() < 2 || rhs->getRank() < 2))
    return emitOpError("strided views need operands of rank >= 2 (a vector beside a view is not "
                       "a matrix the kernel reads)");
  FailureOr<RankedTensorType> product =
      matmulResultType(getLoc(), *lhs, *rhs, getTransposeLhs() && !lhsView,
                       getTransposeRhs() && !rhsView);
  if (failed(product)) return failure();
  if (rhs->getRank() < 2)
    return emitOpError("rhs must have rank >= 2, got ") << getRhs().getType();
  if (getResultShape() || getResultStrides()) {
    if (!getResultShape() || !getResultStrides())
      return emitOpError("result_shape and result_strides come together");
    ArrayRef<int64_t> shape = *getResultShape(), strides = *getResultStrides();
    if (shape != product->getShape())
      return emitOpError("result_shape must be the product's shape ")
             << shapeStr(product->getShape()) << ", got " << shapeStr(shape);
    if (product->getNumElements() != getResult().getType().getNumElements())
      return emitOpError("result_shape has ") << product->getNumElements()
                                             << " elements, the result " << getResult().getType();
    if (failed(verifyView(*this, "result", getResult(), shape, strides))) return failure();
    size_t r = shape.size();
    if (r < 2 || !::ds::plan::denseView(shape.data(), strides.data(), r) ||
        !(shape[r - 1] == 1 || strides[r - 1] == 1 || shape[r - 2] == 1 || strides[r - 2] == 1))
      return emitOpError("result view must write every element once, with unit steps along "
                         "its rows or columns");
    if (getBias() || getAddend())
      return emitOpError("a result view comes with neither bias nor addend");
  } else if (*product != getResult().getType()) {
    return emitOpError("result must be the product's type ") << *product << ", got "
                                                             << getResult().getType();
  }
  int64_t n = product->getRank() ? product->getShape().back() : 1;
  if (Value bias = getBias())
    if (cast<RankedTensorType>(bias.getType()).getShape() != ArrayRef<int64_t>{n})
      return emitOpError("bias must be [") << n << "] (the result's last dimension), got "
                                           << bias.getType();
  if (Value addend = getAddend(); addend && addend.getType() != getResult().getType())
    return emitOpError("addend must have the result's type ") << getResult().getType()
                                                              << ", got " << addend.getType();
  // In f32, the precision the kernel computes in (1e300 is inf there).
  if (!std::isfinite(static_cast<float>(getAlpha().convertToDouble())))
    return emitOpError("alpha must be finite as an f32");
  // Row epilogues normalize whole rows of the product as it is stored.
  const bool softmaxGrad = getCombine() == Combine::SoftmaxGrad;
  const bool resultView = getResultShape() || getResultStrides();
  const bool activation = getActivation() != Activation::None;
  if (getActivation() == Activation::HardSwish)
    return emitOpError("activation hard_swish is a convolution's only");
  if (getSoftmax() && (getBias() || getAddend() || activation || resultView))
    return emitOpError("softmax comes with neither bias, activation, addend nor a result view");
  if (softmaxGrad && (!getAddend() || getBias() || activation || resultView))
    return emitOpError("combine = softmax_grad needs an addend (the softmax's result) and neither "
                       "bias, activation nor a result view");
  if (Value mask = getMask()) {
    Type e = cast<RankedTensorType>(mask.getType()).getElementType();
    if (getSoftmax()) {
      if (getMaskFillAttr() ? !e.isInteger(1) : !e.isF32())
        return emitOpError("mask must be ") << (getMaskFillAttr() ? "i1 with mask_fill" : "f32")
                                            << ", got " << mask.getType();
    } else if (softmaxGrad) {
      if (!e.isInteger(1) || getMaskFillAttr())
        return emitOpError("a softmax_grad mask is i1 without mask_fill, got ") << mask.getType();
    } else {
      return emitOpError("mask comes only with softmax or combine = softmax_grad");
    }
    if (failed(verifyMaskBroadcasts(*this, mask, getResult().getType().getShape())))
      return failure();
  } else if (getMaskFillAttr()) {
    return emitOpError("mask_fill needs a mask");
  }
  if (Value pre = getPreActivation()) {
    if (pre.getType() != getResult().getType())
      return emitOpError("pre_activation must have the result's type ") << getResult().getType();
    if (!activation || getAddend() || getSoftmax() || softmaxGrad || resultView)
      return emitOpError("pre_activation comes with an activation, and with neither addend, row "
                         "epilogue nor result view");
  }
  return success();
}

namespace {
/// matmul(transpose(x) with its last two dimensions swapped, y) reads x
/// transposed instead: no copy. f32/f64 only (the BLAS kernels).
struct FoldTransposeIntoMatmul : OpRewritePattern<MatmulOp> {
  using OpRewritePattern::OpRewritePattern;
  static Value swappedSource(Value v) {
    auto t = v.getDefiningOp<TransposeOp>();
    if (!t) return nullptr;
    ArrayRef<int64_t> perm = t.getPermutation();
    int64_t r = static_cast<int64_t>(perm.size());
    if (r < 2) return nullptr;
    for (int64_t i = 0; i < r - 2; ++i)
      if (perm[i] != i) return nullptr;
    if (perm[r - 2] != r - 1 || perm[r - 1] != r - 2) return nullptr;
    return t.getOperand();
  }
  LogicalResult matchAndRewrite(MatmulOp op, PatternRewriter &rewriter) const override {
    auto et = cast<RankedTensorType>(op.getType()).getElementType();
    if (!et.isF32() && !et.isF64()) return failure();
    Value lhs = swappedSource(op.getLhs()), rhs = swappedSource(op.getRhs());
    if (!lhs && !rhs) return failure();
    bool tl = op.getTransposeLhs(), tr = op.getTransposeRhs();
    if (lhs) tl = !tl;
    if (rhs) tr = !tr;
    rewriter.replaceOpWithNewOp<MatmulOp>(op, op.getType(), lhs ? lhs : op.getLhs(),
                                          rhs ? rhs : op.getRhs(), tl, tr);
    return success();
  }
};
} // namespace

void MatmulOp::getCanonicalizationPatterns(RewritePatternSet &results, MLIRContext *context) {
  results.add<FoldTransposeIntoMatmul>(context);
}

namespace {
/// pow(x, n) with a constant integral exponent n in [1, 4] on floats is
/// x * ... * x: a few multiplies instead of one libm pow per element (GPT-2's
/// GELU writes x^3); within 2 ulp of pow. Only when the result has x's
/// type (the exponent does not broadcast x to a larger shape).
struct PowToMultiplies : OpRewritePattern<PowOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(PowOp op, PatternRewriter &rewriter) const override {
    Value x = op.getLhs();
    if (op.getType() != x.getType() || !isa<FloatType>(op.getType().getElementType()))
      return failure();
    std::optional<double> exponent = knownFloatSplat(op.getRhs());
    if (!exponent) return failure();
    double n = *exponent;
    if (n != 1.0 && n != 2.0 && n != 3.0 && n != 4.0) return failure();
    Location loc = op.getLoc();
    Value y = x;
    if (n == 2.0 || n == 3.0) y = MulOp::create(rewriter, loc, x, x);
    if (n == 3.0) y = MulOp::create(rewriter, loc, y, x);
    if (n == 4.0) {
      Value x2 = MulOp::create(rewriter, loc, x, x);
      y = MulOp::create(rewriter, loc, x2, x2);
    }
    rewriter.replaceOp(op, y);
    return success();
  }
};
} // namespace

void PowOp::getCanonicalizationPatterns(RewritePatternSet &results, MLIRContext *context) {
  results.add<PowToMultiplies>(context);
}

//===----------------------------------------------------------------------===//
// Reductions and normalization
//===----------------------------------------------------------------------===//

template <typename ReduceOp>
static LogicalResult inferReduce(std::optional<Location> loc, ValueRange operands,
                                 DictionaryAttr attrs, OpaqueProperties props,
                                 RegionRange regions, SmallVectorImpl<Type> &inferred) {
  typename ReduceOp::Adaptor adaptor(operands, attrs, props, regions);
  auto t = rankedType(operands[0]);
  ArrayRef<int64_t> axes = adaptor.getAxes();
  if (failed(checkAxes(loc, axes, t.getRank(), "reduction")))
    return failure();
  SmallVector<int64_t> shape;
  for (int64_t d = 0; d < t.getRank(); ++d) {
    if (!llvm::is_contained(axes, d))
      shape.push_back(t.getDimSize(d));
    else if (adaptor.getKeepdims())
      shape.push_back(1);
  }
  inferred.push_back(RankedTensorType::get(shape, t.getElementType()));
  return success();
}

#define DS_REDUCE(OP)                                                          \
  LogicalResult OP::inferReturnTypes(                                          \
      MLIRContext *, std::optional<Location> loc, ValueRange operands,         \
      DictionaryAttr attrs, OpaqueProperties props, RegionRange regions,       \
      SmallVectorImpl<Type> &inferred) {                                       \
    return inferReduce<OP>(loc, operands, attrs, props, regions, inferred);    \
  }                                                                            \
  OpFoldResult OP::fold(FoldAdaptor) {                                         \
    if (getAxes().empty() && getOperand().getType() == getType())              \
      return getOperand();                                                     \
    return {};                                                                 \
  }
DS_REDUCE(ReduceSumOp)
DS_REDUCE(ReduceMeanOp)
DS_REDUCE(ReduceMaxOp)
DS_REDUCE(ReduceMinOp)
DS_REDUCE(ReduceProdOp)
#undef DS_REDUCE

template <typename ArgOp> static LogicalResult verifyArg(ArgOp op) {
  auto t = op.getOperand().getType();
  if (failed(verifyAxis(op, op.getAxis(), t.getRank())))
    return failure();
  SmallVector<int64_t> shape;
  for (int64_t d = 0; d < t.getRank(); ++d) {
    if (d != op.getAxis()) shape.push_back(t.getDimSize(d));
    else if (op.getKeepdims()) shape.push_back(1);
  }
  if (op.getType().getShape() != ArrayRef<int64_t>(shape))
    return op.emitOpError("result must have shape ") << shapeStr(shape);
  return success();
}
LogicalResult ArgMaxOp::verify() { return verifyArg(*this); }
LogicalResult ArgMinOp::verify() { return verifyArg(*this); }

LogicalResult TopKOp::verify() {
  auto t = getOperand().getType();
  if (failed(verifyAxis(*this, getAxis(), t.getRank())))
    return failure();
  int64_t dim = t.getDimSize(getAxis());
  if (getK() < 0 || getK() > dim)
    return emitOpError("k = ") << getK() << " is outside [0, " << dim << "]";
  SmallVector<int64_t> shape(t.getShape());
  shape[getAxis()] = getK();
  if (getValues().getType().getShape() != ArrayRef<int64_t>(shape) ||
      getIndices().getType().getShape() != ArrayRef<int64_t>(shape))
    return emitOpError("results must have shape ") << shapeStr(shape);
  if (getValues().getType().getElementType() != t.getElementType())
    return emitOpError("values must have the operand's element type");
  return success();
}

LogicalResult SoftmaxOp::verify() {
  return verifyAxis(*this, getAxis(), getOperand().getType().getRank());
}
LogicalResult LogSoftmaxOp::verify() {
  return verifyAxis(*this, getAxis(), getOperand().getType().getRank());
}
/// `mask` broadcasts to `shape` (a mask never enlarges what it masks).
static LogicalResult verifyMaskBroadcasts(Operation *op, Value mask, ArrayRef<int64_t> shape) {
  ArrayRef<int64_t> m = cast<RankedTensorType>(mask.getType()).getShape();
  if (m.size() > shape.size() || failed(broadcastShapes({m, shape})) ||
      *broadcastShapes({m, shape}) != shape)
    return op->emitOpError("mask ") << mask.getType() << " does not broadcast to "
                                    << shapeStr(shape);
  return success();
}

LogicalResult SoftmaxGradOp::verify() {
  if (failed(verifyAxis(*this, getAxis(), getSoftmax().getType().getRank()))) return failure();
  if (Value mask = getMask())
    return verifyMaskBroadcasts(*this, mask, getSoftmax().getType().getShape());
  return success();
}

LogicalResult MaskedSoftmaxOp::verify() {
  RankedTensorType t = getOperand().getType();
  if (t.getRank() < 1 || getAxis() != t.getRank() - 1)
    return emitOpError("axis must be the last dimension (") << t.getRank() - 1 << "), got "
                                                            << getAxis();
  Type e = cast<RankedTensorType>(getMask().getType()).getElementType();
  if (getMaskFillAttr() ? !e.isInteger(1) : !e.isF32())
    return emitOpError("mask must be ") << (getMaskFillAttr() ? "i1 with mask_fill" : "f32")
                                        << ", got " << getMask().getType();
  return verifyMaskBroadcasts(*this, getMask(), t.getShape());
}

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

/// A uint8 quantization's scale and zero point (named as the op names them).
static LogicalResult verifyInputQuantization(Operation *op, double scale, int64_t zeroPoint,
                                             StringRef scaleName = "input_scale",
                                             StringRef zeroName = "input_zero_point") {
  if (!(scale > 0) || !std::isfinite(static_cast<float>(scale)))
    return op->emitOpError(scaleName) << " must be positive and finite as an f32, got " << scale;
  if (zeroPoint < 0 || zeroPoint > 255)
    return op->emitOpError(zeroName) << " must be in [0, 255], got " << zeroPoint;
  return success();
}

bool mlir::ds::isOnUint8Grid(Value v, double scale, int64_t zeroPoint) {
  while (Operation *def = v.getDefiningOp()) {
    if (auto fq = dyn_cast<FakeQuantizeOp>(def))
      return fq.getScale().convertToDouble() == scale && fq.getZeroPoint() == zeroPoint;
    if (auto q = dyn_cast<QuantizedMatmulOp>(def))
      return q.getRoundScale() && q.getRoundScale()->convertToDouble() == scale &&
             q.getRoundZeroPoint() && static_cast<int64_t>(*q.getRoundZeroPoint()) == zeroPoint;
    if (!isa<ReshapeOp, TransposeOp, SliceOp, ExpandOp>(def)) return false;
    v = def->getOperand(0);
  }
  return false;
}

// fake_quantize is idempotent: (q - z) * s divided by s is within an ulp
// of the integer q - z, which rounds back to it.
OpFoldResult FakeQuantizeOp::fold(FoldAdaptor) {
  if (isOnUint8Grid(getOperand(), getScale().convertToDouble(), getZeroPoint()))
    return getOperand();
  return {};
}

LogicalResult FakeQuantizeOp::verify() {
  return verifyInputQuantization(*this, getScale().convertToDouble(), getZeroPoint(), "scale",
                                 "zero_point");
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

LogicalResult RandomMaskOp::verify() {
  double r = getRatio().convertToDouble();
  if (!(r >= 0.0 && r < 1.0)) return emitOpError("ratio must be in [0, 1), got ") << r;
  return success();
}

LogicalResult TriluOp::verify() {
  if (getOperand().getType().getRank() < 2)
    return emitOpError("needs an operand of rank >= 2");
  return success();
}

LogicalResult CumProdOp::verify() {
  return verifyAxis(*this, getAxis(), getOperand().getType().getRank());
}

LogicalResult BitcastOp::verify() {
  auto bits = [](Type t) {
    unsigned w = t.getIntOrFloatBitWidth();
    return w == 1 ? 8u : w; // i1 occupies a byte
  };
  Type from = getOperand().getType().getElementType(), to = getType().getElementType();
  if (bits(from) != bits(to))
    return emitOpError("needs element types of one width, got ") << from << " and " << to;
  return success();
}

LogicalResult CumSumOp::verify() {
  int64_t rank = getOperand().getType().getRank();
  if (failed(verifyAxis(*this, getAxis(), rank)))
    return failure();
  return success();
}

LogicalResult LayerNormOp::verify() {
  auto t = getOperand().getType();
  int64_t rank = t.getRank();
  if (failed(verifyAxis(*this, getAxis(), rank)))
    return failure();
  ArrayRef<int64_t> norm = t.getShape().drop_front(getAxis());
  for (auto [v, name] : {std::pair<Value, StringRef>{getScale(), "scale"},
                         std::pair<Value, StringRef>{getBias(), "bias"}}) {
    if (!v)
      continue;
    auto vt = rankedType(v);
    if (vt.getShape() != norm || vt.getElementType() != t.getElementType())
      return emitOpError() << name << " must be " << shapeStr(norm) << " of "
                           << t.getElementType() << ", got " << vt;
  }
  return success();
}

//===----------------------------------------------------------------------===//
// Shape and data movement
//===----------------------------------------------------------------------===//

LogicalResult ReshapeOp::verify() {
  auto in = getOperand().getType(), out = getType();
  if (in.getElementType() != out.getElementType())
    return emitOpError("changes the element type from ")
           << in.getElementType() << " to " << out.getElementType();
  if (in.getNumElements() != out.getNumElements())
    return emitOpError("cannot reshape ")
           << in << " (" << in.getNumElements() << " elements) to " << out << " ("
           << out.getNumElements() << " elements)";
  return success();
}

OpFoldResult ReshapeOp::fold(FoldAdaptor adaptor) {
  if (getOperand().getType() == getType())
    return getOperand();
  if (auto dense = dyn_cast_or_null<DenseElementsAttr>(adaptor.getOperand()))
    return dense.reshape(getType());
  // reshape(reshape(x)) = reshape(x)
  if (auto inner = getOperand().getDefiningOp<ReshapeOp>()) {
    getOperandMutable().assign(inner.getOperand());
    return getResult();
  }
  return {};
}

static LogicalResult inferSqueezeLike(std::optional<Location> loc, RankedTensorType t,
                                      ArrayRef<int64_t> axes, bool squeeze,
                                      SmallVectorImpl<Type> &inferred) {
  SmallVector<int64_t> shape;
  if (squeeze) {
    if (failed(checkAxes(loc, axes, t.getRank(), "squeeze")))
      return failure();
    for (int64_t d = 0; d < t.getRank(); ++d) {
      bool drop = llvm::is_contained(axes, d);
      if (drop && t.getDimSize(d) != 1)
        return emitOptionalError(loc, "cannot squeeze dimension ", d, " of extent ",
                                 t.getDimSize(d));
      if (!drop)
        shape.push_back(t.getDimSize(d));
    }
  } else {
    int64_t outRank = t.getRank() + static_cast<int64_t>(axes.size());
    if (failed(checkAxes(loc, axes, outRank, "unsqueeze")))
      return failure();
    auto src = t.getShape().begin();
    for (int64_t d = 0; d < outRank; ++d)
      shape.push_back(llvm::is_contained(axes, d) ? 1 : *src++);
  }
  inferred.push_back(RankedTensorType::get(shape, t.getElementType()));
  return success();
}

LogicalResult SqueezeOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                          ValueRange operands, DictionaryAttr attrs,
                                          OpaqueProperties props, RegionRange regions,
                                          SmallVectorImpl<Type> &inferred) {
  Adaptor adaptor(operands, attrs, props, regions);
  return inferSqueezeLike(loc, rankedType(operands[0]), adaptor.getAxes(), true, inferred);
}

LogicalResult UnsqueezeOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                            ValueRange operands, DictionaryAttr attrs,
                                            OpaqueProperties props, RegionRange regions,
                                            SmallVectorImpl<Type> &inferred) {
  Adaptor adaptor(operands, attrs, props, regions);
  return inferSqueezeLike(loc, rankedType(operands[0]), adaptor.getAxes(), false,
                          inferred);
}

namespace {
/// squeeze and unsqueeze are reshapes with a checked story; after import
/// only the reshape remains, so later passes see one op.
template <typename OpTy> struct AxesReshapeToReshape : OpRewritePattern<OpTy> {
  using OpRewritePattern<OpTy>::OpRewritePattern;
  LogicalResult matchAndRewrite(OpTy op, PatternRewriter &rewriter) const override {
    rewriter.replaceOpWithNewOp<ReshapeOp>(op, op.getType(), op.getOperand());
    return success();
  }
};
} // namespace

void SqueezeOp::getCanonicalizationPatterns(RewritePatternSet &results,
                                            MLIRContext *ctx) {
  results.add<AxesReshapeToReshape<SqueezeOp>>(ctx);
}
void UnsqueezeOp::getCanonicalizationPatterns(RewritePatternSet &results,
                                              MLIRContext *ctx) {
  results.add<AxesReshapeToReshape<UnsqueezeOp>>(ctx);
}

LogicalResult TransposeOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                            ValueRange operands, DictionaryAttr attrs,
                                            OpaqueProperties props, RegionRange regions,
                                            SmallVectorImpl<Type> &inferred) {
  Adaptor adaptor(operands, attrs, props, regions);
  auto t = rankedType(operands[0]);
  ArrayRef<int64_t> perm = adaptor.getPermutation();
  if (static_cast<int64_t>(perm.size()) != t.getRank())
    return emitOptionalError(loc, "permutation has ", perm.size(),
                             " entries for an operand of rank ", t.getRank());
  SmallVector<bool> seen(perm.size(), false);
  SmallVector<int64_t> shape;
  for (int64_t p : perm) {
    if (p < 0 || p >= t.getRank() || seen[p])
      return emitOptionalError(loc, "permutation is not a permutation of [0, ",
                               t.getRank(), ")");
    seen[p] = true;
    shape.push_back(t.getDimSize(p));
  }
  inferred.push_back(RankedTensorType::get(shape, t.getElementType()));
  return success();
}

OpFoldResult TransposeOp::fold(FoldAdaptor) {
  // transpose(transpose(x, p), q) reads x with the permutation p[q[i]].
  if (auto inner = getOperand().getDefiningOp<TransposeOp>()) {
    SmallVector<int64_t> composed;
    for (int64_t q : getPermutation()) composed.push_back(inner.getPermutation()[q]);
    setPermutation(composed);
    getOperandMutable().assign(inner.getOperand());
    if (llvm::equal(composed, llvm::seq<int64_t>(0, composed.size()))) return getOperand();
    return getResult();
  }
  for (auto [i, p] : llvm::enumerate(getPermutation()))
    if (static_cast<int64_t>(i) != p)
      return {};
  return getOperand();
}

LogicalResult SliceOp::verify() {
  auto in = getOperand().getType(), out = getType();
  int64_t rank = in.getRank();
  if (static_cast<int64_t>(getStarts().size()) != rank ||
      static_cast<int64_t>(getSteps().size()) != rank)
    return emitOpError("needs one start and one step per dimension (rank ")
           << rank << ")";
  if (out.getRank() != rank || out.getElementType() != in.getElementType())
    return emitOpError("result must have the operand's rank and element type");
  for (int64_t d = 0; d < rank; ++d) {
    int64_t start = getStarts()[d], step = getSteps()[d], n = out.getDimSize(d);
    if (step == 0)
      return emitOpError("step of dimension ") << d << " is zero";
    if (n == 0)
      continue;
    int64_t last = start + (n - 1) * step;
    if (start < 0 || start >= in.getDimSize(d) || last < 0 || last >= in.getDimSize(d))
      return emitOpError("dimension ")
             << d << " reads indices " << start << " to " << last
             << ", outside [0, " << in.getDimSize(d) << ")";
  }
  return success();
}

OpFoldResult SliceOp::fold(FoldAdaptor) {
  if (getOperand().getType() != getType())
    return {};
  for (auto [start, step] : llvm::zip(getStarts(), getSteps()))
    if (start != 0 || step != 1)
      return {};
  return getOperand();
}

LogicalResult ConcatOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                         ValueRange operands, DictionaryAttr attrs,
                                         OpaqueProperties props, RegionRange regions,
                                         SmallVectorImpl<Type> &inferred) {
  Adaptor adaptor(operands, attrs, props, regions);
  if (operands.empty())
    return emitOptionalError(loc, "needs at least one operand");
  auto first = rankedType(operands[0]);
  int64_t rank = first.getRank(), axis = adaptor.getAxis();
  if (rank < 1)
    return emitOptionalError(loc, "operands must have rank >= 1");
  if (axis < 0 || axis >= rank)
    return emitOptionalError(loc, "axis ", axis, " is out of range [0, ", rank, ")");
  SmallVector<int64_t> shape(first.getShape());
  shape[axis] = 0;
  for (Value v : operands) {
    auto t = rankedType(v);
    if (t.getElementType() != first.getElementType() || t.getRank() != rank)
      return emitOptionalError(loc, "operands must share element type and rank");
    for (int64_t d = 0; d < rank; ++d)
      if (d != axis && t.getDimSize(d) != first.getDimSize(d))
        return emitOptionalError(loc, "operands ", shapeStr(first.getShape()), " and ",
                                 shapeStr(t.getShape()), " differ off axis ", axis);
    shape[axis] += t.getDimSize(axis);
  }
  inferred.push_back(RankedTensorType::get(shape, first.getElementType()));
  return success();
}

LogicalResult SplitOp::verify() {
  auto in = getOperand().getType();
  int64_t rank = in.getRank(), axis = getAxis();
  if (getNumResults() == 0)
    return emitOpError("needs at least one result");
  if (rank < 1)
    return emitOpError("needs an operand of rank >= 1");
  if (axis < 0 || axis >= rank)
    return emitOpError("axis ") << axis << " is out of range [0, " << rank << ")";
  int64_t sum = 0;
  for (Value r : getResults()) {
    auto t = rankedType(r);
    if (t.getElementType() != in.getElementType() || t.getRank() != rank)
      return emitOpError("results must share the operand's element type and rank");
    for (int64_t d = 0; d < rank; ++d)
      if (d != axis && t.getDimSize(d) != in.getDimSize(d))
        return emitOpError("result ") << t << " differs from the operand off axis " << axis;
    sum += t.getDimSize(axis);
  }
  if (sum != in.getDimSize(axis))
    return emitOpError("result extents add up to ")
           << sum << " along axis " << axis << ", not " << in.getDimSize(axis);
  return success();
}

LogicalResult GatherOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                         ValueRange operands, DictionaryAttr attrs,
                                         OpaqueProperties props, RegionRange regions,
                                         SmallVectorImpl<Type> &inferred) {
  Adaptor adaptor(operands, attrs, props, regions);
  auto data = rankedType(operands[0]), idx = rankedType(operands[1]);
  int64_t rank = data.getRank(), axis = adaptor.getAxis();
  if (rank < 1)
    return emitOptionalError(loc, "data must have rank >= 1");
  if (axis < 0 || axis >= rank)
    return emitOptionalError(loc, "axis ", axis, " is out of range [0, ", rank, ")");
  SmallVector<int64_t> shape(data.getShape().take_front(axis));
  llvm::append_range(shape, idx.getShape());
  llvm::append_range(shape, data.getShape().drop_front(axis + 1));
  inferred.push_back(RankedTensorType::get(shape, data.getElementType()));
  return success();
}

LogicalResult GatherElementsOp::verify() {
  auto data = getData().getType(), idx = getIndices().getType();
  if (failed(verifyAxis(*this, getAxis(), data.getRank())))
    return failure();
  if (idx.getRank() != data.getRank())
    return emitOpError("indices must have the data's rank");
  for (int64_t d = 0; d < data.getRank(); ++d)
    if (d != static_cast<int64_t>(getAxis()) && idx.getDimSize(d) > data.getDimSize(d))
      return emitOpError("indices are larger than the data off the axis");
  if (getType().getShape() != idx.getShape() || getType().getElementType() != data.getElementType())
    return emitOpError("result must have the indices' shape and the data's element type");
  return success();
}

LogicalResult ScatterElementsOp::verify() {
  auto data = getData().getType(), idx = getIndices().getType();
  if (failed(verifyAxis(*this, getAxis(), data.getRank())))
    return failure();
  if (idx.getRank() != data.getRank() || getUpdates().getType().getShape() != idx.getShape())
    return emitOpError("indices and updates must share one shape of the data's rank");
  for (int64_t d = 0; d < data.getRank(); ++d)
    if (d != static_cast<int64_t>(getAxis()) && idx.getDimSize(d) > data.getDimSize(d))
      return emitOpError("indices are larger than the data off the axis");
  if (getUpdates().getType().getElementType() != data.getElementType() || getType() != data)
    return emitOpError("updates and result must have the data's type");
  return success();
}

LogicalResult GatherElementsGradOp::verify() {
  auto out = getType(), idx = getIndices().getType();
  if (failed(verifyAxis(*this, getAxis(), out.getRank())))
    return failure();
  if (idx.getRank() != out.getRank() || getDy().getType().getShape() != idx.getShape() ||
      getDy().getType().getElementType() != out.getElementType())
    return emitOpError("indices and dy must share a shape of the result's rank");
  return success();
}

LogicalResult ExpandOp::verify() {
  auto in = getOperand().getType(), out = getType();
  if (in.getElementType() != out.getElementType())
    return emitOpError("changes the element type");
  auto b = broadcastShapes({in.getShape(), out.getShape()});
  if (failed(b) || ArrayRef<int64_t>(*b) != out.getShape())
    return emitOpError("cannot broadcast ") << in << " to " << out;
  return success();
}

OpFoldResult ExpandOp::fold(FoldAdaptor) {
  if (getOperand().getType() == getType())
    return getOperand();
  return {};
}

//===----------------------------------------------------------------------===//
// Convolution and pooling
//===----------------------------------------------------------------------===//

/// Spatial output extents of a window op, or failure with a diagnostic.
/// With `overhang` (pooling's ceil_mode), a window larger than the padded
/// input is no error: the extent is 0 and the result's, at least 1, says
/// how many overhanging windows there are.
static FailureOr<SmallVector<int64_t>>
windowOutput(Operation *op, ArrayRef<int64_t> in, ArrayRef<int64_t> kernel,
             ArrayRef<int64_t> strides, ArrayRef<int64_t> dilations, ArrayRef<int64_t> pads,
             bool overhang = false) {
  size_t k = in.size();
  if (kernel.size() != k || strides.size() != k || dilations.size() != k || pads.size() != 2 * k)
    return FailureOr<SmallVector<int64_t>>(
        op->emitOpError("needs one kernel, stride and dilation and two pads per spatial "
                        "dimension"));
  SmallVector<int64_t> out;
  for (size_t i = 0; i < k; ++i) {
    if (kernel[i] <= 0 || strides[i] <= 0 || dilations[i] <= 0 || pads[i] < 0 || pads[i + k] < 0)
      return FailureOr<SmallVector<int64_t>>(
          op->emitOpError("kernel, strides and dilations must be positive, pads non-negative"));
    int64_t span = dilations[i] * (kernel[i] - 1) + 1;
    int64_t padded = in[i] + pads[i] + pads[i + k];
    if (padded < span && overhang) {
      out.push_back(0);
      continue;
    }
    if (padded < span)
      return FailureOr<SmallVector<int64_t>>(
          op->emitOpError("window of ") << span << " exceeds the padded extent " << padded);
    out.push_back((padded - span) / strides[i] + 1);
  }
  return out;
}

static LogicalResult verifyConvAttrs(Operation *op, RankedTensorType x, RankedTensorType w,
                                     ArrayRef<int64_t> strides, ArrayRef<int64_t> dilations,
                                     ArrayRef<int64_t> pads, int64_t group,
                                     SmallVectorImpl<int64_t> &outShape) {
  if (x.getRank() < 3 || w.getRank() != x.getRank() || x.getElementType() != w.getElementType())
    return op->emitOpError("input and weight need one rank >= 3 and element type");
  int64_t c = x.getDimSize(1), m = w.getDimSize(0);
  if (group <= 0 || c % group || m % group || w.getDimSize(1) * group != c)
    return op->emitOpError("group ") << group << " must divide " << c << " input and " << m
                                     << " output channels, with C/group weight channels";
  auto o = windowOutput(op, x.getShape().drop_front(2), w.getShape().drop_front(2), strides,
                        dilations, pads);
  if (failed(o)) return failure();
  outShape.assign({x.getDimSize(0), m});
  llvm::append_range(outShape, *o);
  return success();
}

/// [N, d..., C] -> [N, C, d...] (a channels-last shape read channels first).
static SmallVector<int64_t> channelsFirst(ArrayRef<int64_t> s) {
  SmallVector<int64_t> r{s.front(), s.back()};
  llvm::append_range(r, s.drop_front().drop_back());
  return r;
}

/// ds.conv's geometry and epilogue, which ds.quantized_conv shares.
template <typename ConvLike> static LogicalResult verifyConvLike(ConvLike op) {
  SmallVector<int64_t> shape;
  RankedTensorType input = op.getInput().getType();
  if (op.getChannelsLast() && input.getRank() >= 3)
    input = RankedTensorType::get(channelsFirst(input.getShape()), input.getElementType());
  RankedTensorType weight = op.getWeight().getType();
  if constexpr (std::is_same_v<ConvLike, QuantizedConvOp>) // an i8 weight, f32 input
    weight = RankedTensorType::get(weight.getShape(), input.getElementType());
  if (failed(verifyConvAttrs(op, input, weight, op.getStrides(), op.getDilations(), op.getPads(),
                             op.getGroup(), shape)))
    return failure();
  if (op.getBias() && op.getBias().getType().getShape() != ArrayRef<int64_t>{shape[1]})
    return op.emitOpError("bias must be [") << shape[1] << "]";
  if (op.getChannelsLast()) {
    int64_t m = shape[1];
    shape.erase(shape.begin() + 1);
    shape.push_back(m);
  }
  if (op.getType().getShape() != ArrayRef<int64_t>(shape))
    return op.emitOpError("result must be ") << shapeStr(shape);
  if (op.getAddend() && op.getAddend().getType() != op.getType())
    return op.emitOpError("addend must have the result's type ") << op.getType();
  auto bound = [](FloatAttr a) {
    return a ? std::optional<double>(a.getValueAsDouble()) : std::nullopt;
  };
  std::optional<double> lo = bound(op.getClipMinAttr()), hi = bound(op.getClipMaxAttr());
  if ((lo && std::isnan(*lo)) || (hi && std::isnan(*hi)))
    return op.emitOpError("clip bounds must not be NaN");
  if (lo && hi && *lo > *hi)
    return op.emitOpError("clip_min ") << *lo << " exceeds clip_max " << *hi;
  if (op.getActivation() != Activation::None && op.getActivation() != Activation::HardSwish)
    return op.emitOpError("activation must be none or hard_swish, not ")
           << stringifyActivation(op.getActivation());
  return success();
}

LogicalResult ConvOp::verify() { return verifyConvLike(*this); }

LogicalResult QuantizedConvOp::verify() {
  if (failed(verifyConvLike(*this))) return failure();
  const int64_t m = getWeight().getType().getDimSize(0);
  if (getScale().getType().getShape() != ArrayRef<int64_t>{m})
    return emitOpError("scale must be [") << m << "], got " << getScale().getType();
  if (failed(verifyInputQuantization(*this, getInputScale().convertToDouble(), getInputZeroPoint())))
    return failure();
  const bool quantizedResult = getType().getElementType().isUnsignedInteger(8);
  if (quantizedResult != (getOutputScaleAttr() && getOutputZeroPointAttr()) ||
      (!quantizedResult && (getOutputScaleAttr() || getOutputZeroPointAttr())))
    return emitOpError("output_scale and output_zero_point go with a ui8 result, and only with it");
  if (!quantizedResult) return success();
  if (getAddend() || getActivation() != Activation::None)
    return emitOpError("a ui8 result takes no addend or hard_swish");
  double s = getOutputScaleAttr().getValueAsDouble();
  int64_t z = getOutputZeroPointAttr().getInt();
  if (!(s > 0) || !std::isfinite(static_cast<float>(s)) || z < 0 || z > 255)
    return emitOpError("output_scale must be positive and finite and output_zero_point in "
                       "[0, 255], got ")
           << s << " and " << z;
  return success();
}

LogicalResult ConvGradOp::verify() {
  SmallVector<int64_t> shape;
  if (failed(verifyConvAttrs(*this, getInput().getType(), getWeight().getType(), getStrides(),
                             getDilations(), getPads(), getGroup(), shape)))
    return failure();
  if (getDy().getType().getShape() != ArrayRef<int64_t>(shape))
    return emitOpError("dy must be ") << shapeStr(shape);
  if (getDInput().getType() != getInput().getType() ||
      getDWeight().getType() != getWeight().getType())
    return emitOpError("results must have the input's and the weight's types");
  return success();
}

static LogicalResult verifyPool(Operation *op, RankedTensorType x, RankedTensorType out,
                                ArrayRef<int64_t> kernel, ArrayRef<int64_t> strides,
                                ArrayRef<int64_t> dilations, ArrayRef<int64_t> pads) {
  if (x.getRank() < 3) return op->emitOpError("needs an input of rank >= 3");
  if (out.getRank() != x.getRank() || out.getDimSize(0) != x.getDimSize(0) ||
      out.getDimSize(1) != x.getDimSize(1))
    return op->emitOpError("result must keep N and C");
  size_t k = x.getRank() - 2;
  auto o = windowOutput(op, x.getShape().drop_front(2), kernel, strides, dilations, pads,
                        /*overhang=*/true);
  if (failed(o)) return failure();
  for (size_t i = 0; i < k; ++i) {
    int64_t n = out.getDimSize(i + 2);
    // A window may hang over the end padding (ceil_mode: at most the ceiling
    // of the windows that fit), not start past it.
    int64_t room = x.getDimSize(i + 2) + pads[i] + pads[i + k] - (dilations[i] * (kernel[i] - 1) + 1);
    int64_t ceilExtent = llvm::divideCeilSigned(room, strides[i]) + 1;
    if (n < (*o)[i] || n <= 0 || n > ceilExtent ||
        (n - 1) * strides[i] >= x.getDimSize(i + 2) + pads[i])
      return op->emitOpError("spatial dimension ") << i << " of the result (" << n
                                                   << ") does not fit the windows";
  }
  return success();
}

LogicalResult PoolOp::verify() {
  if (getType().getElementType() != getInput().getType().getElementType())
    return emitOpError("result must have the input's element type");
  if (getKind() == PoolKind::Avg && !isa<FloatType>(getInput().getType().getElementType()))
    return emitOpError("average pooling needs a floating-point input");
  if (getChannelsLast()) {
    auto in = getInput().getType(), out = getType();
    if (in.getRank() < 3 || out.getRank() != in.getRank() || !in.getElementType().isF32())
      return emitOpError("a channels_last pooling takes an f32 input of rank >= 3");
    return verifyPool(*this,
                      RankedTensorType::get(channelsFirst(in.getShape()), in.getElementType()),
                      RankedTensorType::get(channelsFirst(out.getShape()), out.getElementType()),
                      getKernel(), getStrides(), getDilations(), getPads());
  }
  return verifyPool(*this, getInput().getType(), getType(), getKernel(), getStrides(),
                    getDilations(), getPads());
}

LogicalResult MaxPoolIndicesOp::verify() {
  return verifyPool(*this, getInput().getType(), getType(), getKernel(), getStrides(),
                    getDilations(), getPads());
}

LogicalResult PoolGradOp::verify() {
  if (getType() != getInput().getType())
    return emitOpError("result must have the input's type");
  return verifyPool(*this, getInput().getType(), getDy().getType(), getKernel(), getStrides(),
                    getDilations(), getPads());
}

//===----------------------------------------------------------------------===//
// Training ops
//===----------------------------------------------------------------------===//

static LogicalResult checkLabels(Operation *op, RankedTensorType logits, RankedTensorType labels) {
  if (logits.getRank() < 1)
    return op->emitOpError("needs logits of rank >= 1");
  if (labels.getShape() != logits.getShape().drop_back())
    return op->emitOpError("labels must have shape ")
           << shapeStr(logits.getShape().drop_back()) << ", got " << shapeStr(labels.getShape());
  return success();
}

LogicalResult SoftmaxCrossEntropyOp::verify() {
  if (failed(checkLabels(*this, getLogits().getType(), getLabels().getType())))
    return failure();
  if (getLoss().getType().getRank() != 0 ||
      getLoss().getType().getElementType() != getLogits().getType().getElementType())
    return emitOpError("loss must be a scalar of the logits' element type");
  return success();
}

LogicalResult SoftmaxCrossEntropyGradOp::verify() {
  if (failed(checkLabels(*this, getLogits().getType(), getLabels().getType())))
    return failure();
  if (getDloss().getType().getRank() != 0)
    return emitOpError("dloss must be a scalar");
  if (getResult().getType() != getLogits().getType())
    return emitOpError("result must have the logits' type");
  if (getLoss() && (getLoss().getType().getRank() != 0 ||
                    getLoss().getType().getElementType() !=
                        getLogits().getType().getElementType()))
    return emitOpError("loss must be a scalar of the logits' element type");
  return success();
}

LogicalResult LayerNormGradOp::verify() {
  auto t = getOperand().getType();
  int64_t rank = t.getRank();
  if (failed(verifyAxis(*this, getAxis(), rank)))
    return failure();
  if (getScale().getType().getShape() != t.getShape().drop_front(getAxis()))
    return emitOpError("scale must have shape ") << shapeStr(t.getShape().drop_front(getAxis()));
  if (getDy().getType() != t || getDOperand().getType() != t)
    return emitOpError("dy and d_operand must have the operand's type");
  if (getAddend() && getAddend().getType() != t)
    return emitOpError("addend must have the operand's type");
  if (getDScale().getType() != getScale().getType() ||
      getDBias().getType() != getScale().getType())
    return emitOpError("d_scale and d_bias must have the scale's type");
  return success();
}

LogicalResult GatherGradOp::verify() {
  auto out = getType();
  int64_t rank = out.getRank(), axis = getAxis();
  if (axis < 0 || axis >= rank)
    return emitOpError("axis ") << axis << " is out of range [0, " << rank << ")";
  SmallVector<int64_t> want(out.getShape().take_front(axis));
  llvm::append_range(want, getIndices().getType().getShape());
  llvm::append_range(want, out.getShape().drop_front(axis + 1));
  if (getDy().getType().getShape() != ArrayRef<int64_t>(want) ||
      getDy().getType().getElementType() != out.getElementType())
    return emitOpError("dy must have shape ") << shapeStr(want) << " and the result's element type";
  return success();
}

LogicalResult InsertSliceOp::verify() {
  auto in = getOperand().getType(), out = getType();
  int64_t rank = out.getRank();
  if (static_cast<int64_t>(getStarts().size()) != rank ||
      static_cast<int64_t>(getSteps().size()) != rank)
    return emitOpError("needs one start and one step per dimension (rank ") << rank << ")";
  if (in.getRank() != rank || in.getElementType() != out.getElementType())
    return emitOpError("operand must have the result's rank and element type");
  for (int64_t d = 0; d < rank; ++d) {
    int64_t start = getStarts()[d], step = getSteps()[d], n = in.getDimSize(d);
    if (step == 0)
      return emitOpError("step of dimension ") << d << " is zero";
    if (n == 0)
      continue;
    int64_t last = start + (n - 1) * step;
    if (start < 0 || start >= out.getDimSize(d) || last < 0 || last >= out.getDimSize(d))
      return emitOpError("dimension ") << d << " writes indices " << start << " to " << last
                                       << ", outside [0, " << out.getDimSize(d) << ")";
  }
  return success();
}

static LogicalResult checkScalars(Operation *op, ValueRange scalars) {
  for (Value s : scalars) {
    auto t = cast<RankedTensorType>(s.getType());
    if (t.getRank() != 0 || !t.getElementType().isF32())
      return op->emitOpError("scalar operands must be tensor<f32>, got ") << t;
  }
  return success();
}

/// Adam and LAMB: a parameter, its gradient and two moments of one type,
/// their three results, f32 scalars (`extra`: Adam's cycled beta1).
template <typename Op> static LogicalResult verifyTwoMomentUpdate(Op op, Value extra) {
  Type t = op.getParam().getType();
  if (op.getGrad().getType() != t || op.getM().getType() != t || op.getV().getType() != t ||
      op.getNewParam().getType() != t || op.getNewM().getType() != t ||
      op.getNewV().getType() != t)
    return op.emitOpError("param, grad, m, v and the results must have one type");
  SmallVector<Value> scalars{op.getLr(), op.getStepSize(), op.getBias2Sqrt(), op.getGradScale()};
  if (op.getFoundInf()) scalars.push_back(op.getFoundInf());
  if (extra) scalars.push_back(extra);
  return checkScalars(op, scalars);
}
LogicalResult AdamUpdateOp::verify() { return verifyTwoMomentUpdate(*this, getBeta1Now()); }

LogicalResult SgdUpdateOp::verify() {
  Type t = getParam().getType();
  if (getGrad().getType() != t || getBuf().getType() != t || getNewParam().getType() != t ||
      getNewBuf().getType() != t)
    return emitOpError("param, grad, buf and the results must have one type");
  SmallVector<Value> scalars{getLr(), getGradScale(), getFirst()};
  if (getFoundInf()) scalars.push_back(getFoundInf());
  return checkScalars(*this, scalars);
}

/// Lion and Adagrad: a parameter, its gradient and one state of one type,
/// their two results, f32 scalars.
template <typename Op> static LogicalResult verifyOneStateUpdate(Op op, Value state) {
  Type t = op.getParam().getType();
  if (op.getGrad().getType() != t || state.getType() != t ||
      op->getResult(0).getType() != t || op->getResult(1).getType() != t)
    return op.emitOpError("param, grad, its state and the results must have one type");
  SmallVector<Value> scalars{op.getLr(), op.getGradScale()};
  if (op.getFoundInf()) scalars.push_back(op.getFoundInf());
  return checkScalars(op, scalars);
}
LogicalResult LambUpdateOp::verify() { return verifyTwoMomentUpdate(*this, Value()); }
LogicalResult LionUpdateOp::verify() { return verifyOneStateUpdate(*this, getM()); }
LogicalResult AdagradUpdateOp::verify() { return verifyOneStateUpdate(*this, getSum()); }
LogicalResult MuonUpdateOp::verify() {
  if (cast<RankedTensorType>(getParam().getType()).getRank() < 2)
    return emitOpError("orthogonalizes matrices: the parameter must have rank >= 2");
  if (getNsSteps() < 0 || getNsSteps() > 100) return emitOpError("ns_steps must be in [0, 100]");
  if (!(getScale().convertToDouble() > 0) || !std::isfinite(getScale().convertToDouble()))
    return emitOpError("scale must be finite and > 0");
  return verifyOneStateUpdate(*this, getBuf());
}

#define GET_OP_CLASSES
#include "dialects/ds/DSOps.cpp.inc"

//===- ReductionOps.cpp - facts of reductions, arg/top-k and scans --------===//
#include "dialects/ds/ops/OpFacts.h"
#include "dialects/ds/ops/Verifiers.h"

using namespace mlir;
using namespace mlir::ds;
using namespace mlir::ds::facts;

//===----------------------------------------------------------------------===//
// Sharding
//===----------------------------------------------------------------------===//

/// Dimensions that are not reduced keep their splits. A sum over a split
/// dimension leaves a partial sum over its axes (each rank sums its
/// slice); the other reductions need reduced dimensions whole.
template <typename ReduceLike>
static ShardingDecision reduceRule(ReduceLike o, ArrayRef<Sharding> in, bool sum) {
  const Sharding &x = in[0];
  if (x.isPartial()) return {};
  Sharding need = x;
  Sharding res = Sharding::replicated(rankOf(o.getResult()));
  ArrayRef<int64_t> axes = o.getAxes();
  int64_t r = 0;
  for (int64_t d = 0; d < rankOf(o.getOperand()); ++d) {
    bool reduced = llvm::is_contained(axes, d);
    if (reduced && x.dims[d].isSplit()) {
      if (sum) res.partial.append(x.dims[d].axes.begin(), x.dims[d].axes.end());
      else need.dims[d] = DimSharding();
    } else if (!reduced) {
      res.dims[r] = x.dims[d];
    }
    if (!reduced || o.getKeepdims()) ++r;
  }
  if (!res.partial.empty()) llvm::sort(res.partial);
  ShardingDecision dec;
  dec.operands.push_back(need);
  dec.results.push_back(res);
  return dec;
}

ShardingDecision ReduceSumOp::getShardingRule(ArrayRef<Sharding> in, MeshAttr) {
  return reduceRule(*this, in, /*sum=*/true);
}
ShardingDecision ReduceMeanOp::getShardingRule(ArrayRef<Sharding> in, MeshAttr) {
  return reduceRule(*this, in, /*sum=*/false);
}
ShardingDecision ReduceMaxOp::getShardingRule(ArrayRef<Sharding> in, MeshAttr) {
  return reduceRule(*this, in, /*sum=*/false);
}
ShardingDecision ReduceMinOp::getShardingRule(ArrayRef<Sharding> in, MeshAttr) {
  return reduceRule(*this, in, /*sum=*/false);
}
ShardingDecision ReduceProdOp::getShardingRule(ArrayRef<Sharding> in, MeshAttr) {
  return reduceRule(*this, in, /*sum=*/false);
}

//===----------------------------------------------------------------------===//
// Gradients
//===----------------------------------------------------------------------===//

/// The operand's shape with the reduced axes kept as 1s.
template <typename ReduceLike> static SmallVector<int64_t> keptShape(ReduceLike o) {
  SmallVector<int64_t> kept(typeOf(o.getOperand()).getShape());
  for (int64_t a : o.getAxes()) kept[a] = 1;
  return kept;
}

/// Sum and mean: the result gradient spread back over the reduced axes.
template <typename ReduceLike>
static Value spreadBack(GradientBuilder &gb, ReduceLike o, Value g) {
  return gb.expand(gb.reshape(g, keptShape(o)), typeOf(o.getOperand()));
}

LogicalResult ReduceSumOp::buildGradients(GradientBuilder &gb, ArrayRef<Value> dres,
                                          MutableArrayRef<Value> d) {
  d[0] = spreadBack(gb, *this, dres[0]);
  return success();
}

LogicalResult ReduceMeanOp::buildGradients(GradientBuilder &gb, ArrayRef<Value> dres,
                                           MutableArrayRef<Value> d) {
  int64_t count = 1;
  for (int64_t a : getAxes()) count *= typeOf(getOperand()).getDimSize(a);
  d[0] = gb.mulScalar(spreadBack(gb, *this, dres[0]), 1.0 / static_cast<double>(count));
  return success();
}

/// How many elements of each reduced slice `mask` (i1, the operand's
/// shape) holds, as the operand's element type, spread back to its shape.
template <typename ReduceLike>
static Value countBack(GradientBuilder &gb, ReduceLike o, Value mask) {
  RankedTensorType in = typeOf(o.getOperand());
  Value ones = CastOp::create(gb.b(), gb.loc(), in, mask);
  return gb.expand(gb.reduceSum(ones, o.getAxes(), /*keepdims=*/true), in);
}

LogicalResult ReduceProdOp::buildGradients(GradientBuilder &gb, ArrayRef<Value> dres,
                                           MutableArrayRef<Value> d) {
  // d prod / d x_i is the product of the other elements, as PyTorch's
  // prod_backward: prod / x_i without zeros; with one zero, the product of
  // the nonzero elements at the zero and 0 elsewhere; with more, 0.
  RankedTensorType in = typeOf(getOperand());
  Type elem = in.getElementType();
  Value x = getOperand(), zero = gb.scalar(elem, 0.0);
  Value g = spreadBack(gb, *this, dres[0]);
  Value y = gb.expand(gb.reshape(getResult(), keptShape(*this)), in);
  Value isZero = EqualOp::create(gb.b(), gb.loc(), x, zero);
  Value zeros = countBack(gb, *this, isZero);
  Value nonzero = gb.where(isZero, gb.scalar(elem, 1.0), x);
  Value others = ReduceProdOp::create(gb.b(), gb.loc(), RankedTensorType::get(keptShape(*this), elem),
                                      nonzero, getAxesAttr(), gb.b().getBoolAttr(true));
  Value atZero = gb.where(isZero, gb.expand(others, in), zero);
  Value none = EqualOp::create(gb.b(), gb.loc(), zeros, zero);
  Value one = EqualOp::create(gb.b(), gb.loc(), zeros, gb.scalar(elem, 1.0));
  // (g y / x as before where nothing is zero; a zero divides by 1, unselected.)
  Value plain = gb.div(gb.mul(g, y), nonzero);
  d[0] = gb.where(none, plain, gb.where(one, gb.mul(g, atZero), zero));
  return success();
}

/// Max and min: the gradient split evenly among the elements equal to the
/// extremum (PyTorch's amax/amin): a subgradient however many tie.
template <typename ReduceLike>
static LogicalResult extremumGradient(GradientBuilder &gb, ReduceLike o, Value g,
                                      MutableArrayRef<Value> d) {
  RankedTensorType in = typeOf(o.getOperand());
  Value y = gb.reshape(o.getResult(), keptShape(o));
  Value hit = EqualOp::create(gb.b(), gb.loc(), o.getOperand(), y);
  Value gk = gb.div(spreadBack(gb, o, g), countBack(gb, o, hit));
  d[0] = gb.where(hit, gk, gb.scalar(in.getElementType(), 0.0));
  return success();
}

LogicalResult ReduceMaxOp::buildGradients(GradientBuilder &gb, ArrayRef<Value> dres,
                                          MutableArrayRef<Value> d) {
  return extremumGradient(gb, *this, dres[0], d);
}

LogicalResult ReduceMinOp::buildGradients(GradientBuilder &gb, ArrayRef<Value> dres,
                                          MutableArrayRef<Value> d) {
  return extremumGradient(gb, *this, dres[0], d);
}

LogicalResult CumSumOp::buildGradients(GradientBuilder &gb, ArrayRef<Value> dres,
                                       MutableArrayRef<Value> d) {
  // The adjoint of a running sum is the running sum the other way.
  d[0] = CumSumOp::create(gb.b(), gb.loc(), dres[0].getType(), dres[0], getAxisAttr(),
                          getExclusiveAttr(), gb.b().getBoolAttr(!getReverse()));
  return success();
}

//===----------------------------------------------------------------------===//
// Kernel steps
//===----------------------------------------------------------------------===//

void ReduceSumOp::describeKernelStep(KernelStep &s) { s.setInts("axes", getAxes()); }
void ReduceMeanOp::describeKernelStep(KernelStep &s) { s.setInts("axes", getAxes()); }
void ReduceMaxOp::describeKernelStep(KernelStep &s) { s.setInts("axes", getAxes()); }
void ReduceMinOp::describeKernelStep(KernelStep &s) { s.setInts("axes", getAxes()); }
void ReduceProdOp::describeKernelStep(KernelStep &s) { s.setInts("axes", getAxes()); }

template <typename ArgLike> static void describeArg(ArgLike o, KernelStep &s) {
  s.setInt("axis", o.getAxis());
  s.setInt("select_last_index", o.getSelectLastIndex());
}
void ArgMaxOp::describeKernelStep(KernelStep &s) { describeArg(*this, s); }
void ArgMinOp::describeKernelStep(KernelStep &s) { describeArg(*this, s); }

void TopKOp::describeKernelStep(KernelStep &s) {
  s.setInt("k", getK());
  s.setInt("axis", getAxis());
  s.setInt("largest", getLargest());
}

void CumProdOp::describeKernelStep(KernelStep &s) {
  s.setInt("axis", getAxis());
  s.setInt("exclusive", getExclusive());
  s.setInt("reverse", getReverse());
}

void CumSumOp::describeKernelStep(KernelStep &s) {
  s.setInt("axis", getAxis());
  s.setInt("exclusive", getExclusive());
  s.setInt("reverse", getReverse());
}

//===----------------------------------------------------------------------===//
// Reductions, softmax and layer norm (moved from DSOps.cpp): type inference, verifiers, folders
//===----------------------------------------------------------------------===//

using namespace mlir::ds::verifiers;

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

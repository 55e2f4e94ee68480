//===- DataMovementOps.cpp - facts of reshapes, slices, gathers, fills ----===//
//
// Ops that move, select or create elements without arithmetic on them:
// reshape-likes, transpose, slicing, concatenation and splitting, gathers
// and scatters, broadcasting (expand), triangle masks and fills.
//
//===----------------------------------------------------------------------===//
#include "dialects/ds/ops/OpFacts.h"

using namespace mlir;
using namespace mlir::ds;
using namespace mlir::ds::facts;

ShardingDecision mlir::ds::facts::keepExcept(Operation *op, const Sharding &in,
                                             ArrayRef<int64_t> unsplit) {
  Sharding s = in.withoutPartial();
  for (int64_t d : unsplit)
    if (d >= 0 && d < static_cast<int64_t>(s.dims.size())) s.dims[d] = DimSharding();
  ShardingDecision dec;
  dec.operands.push_back(s);
  for (unsigned i = 1; i < op->getNumOperands(); ++i)
    dec.operands.push_back(Sharding::replicated(rankOf(op->getOperand(i))));
  // Results of the operand's rank keep its splits (the unsplit dimensions
  // are the only ones whose extent may differ: split and slice axes).
  for (Value r : op->getResults())
    dec.results.push_back(rankOf(r) == rankOf(op->getOperand(0)) ? s
                                                                  : Sharding::replicated(rankOf(r)));
  return dec;
}

//===----------------------------------------------------------------------===//
// Reshape, squeeze, unsqueeze
//===----------------------------------------------------------------------===//

/// Reshapes keep a split when the split's rank factor (the block index, a
/// strided factor of the flat index) lies inside one result dimension; that
/// dimension gets the split, with the outer factor that places it.
static ShardingDecision reshapeRule(Operation *op, const Sharding &in, MeshAttr mesh) {
  ArrayRef<int64_t> is = shapeOf(op->getOperand(0)), os = shapeOf(op->getResult(0));
  auto strides = [](ArrayRef<int64_t> s) {
    SmallVector<int64_t> t(s.size(), 1);
    for (int64_t i = static_cast<int64_t>(s.size()) - 2; i >= 0; --i) t[i] = t[i + 1] * s[i + 1];
    return t;
  };
  SmallVector<int64_t> ti = strides(is), to = strides(os);
  Sharding req = in.withoutPartial(), res = Sharding::replicated(os.size());
  for (auto [d, ds] : llvm::enumerate(req.dims)) {
    if (!ds.isSplit()) continue;
    int64_t n = groupSizeOf(ds.axes, mesh), f = is[d] / ds.outer;
    bool placed = false;
    if (n > 0 && f % n == 0) {
      int64_t sigma = ti[d] * (f / n);
      for (size_t e = 0; e < os.size() && !placed; ++e) {
        if (sigma < to[e] || sigma % to[e] || (to[e] * os[e]) % (sigma * n) || res.dims[e].isSplit())
          continue;
        res.dims[e] = {ds.axes, to[e] * os[e] / (sigma * n)};
        placed = true;
      }
    }
    if (!placed) ds = DimSharding();
  }
  return {{req}, {res}};
}

/// Reshape-likes: the gradient is reshaped back, the kernel is a copy.
template <typename ReshapeLike>
static LogicalResult reshapeGradient(GradientBuilder &gb, ReshapeLike o, Value g,
                                     MutableArrayRef<Value> d) {
  d[0] = gb.reshape(g, shapeOf(o.getOperand()));
  return success();
}

LogicalResult ReshapeOp::buildGradients(GradientBuilder &gb, ArrayRef<Value> dres,
                                        MutableArrayRef<Value> d) {
  return reshapeGradient(gb, *this, dres[0], d);
}
LogicalResult SqueezeOp::buildGradients(GradientBuilder &gb, ArrayRef<Value> dres,
                                        MutableArrayRef<Value> d) {
  return reshapeGradient(gb, *this, dres[0], d);
}
LogicalResult UnsqueezeOp::buildGradients(GradientBuilder &gb, ArrayRef<Value> dres,
                                          MutableArrayRef<Value> d) {
  return reshapeGradient(gb, *this, dres[0], d);
}

ShardingDecision ReshapeOp::getShardingRule(ArrayRef<Sharding> in, MeshAttr mesh) {
  return reshapeRule(getOperation(), in[0], mesh);
}
ShardingDecision SqueezeOp::getShardingRule(ArrayRef<Sharding> in, MeshAttr mesh) {
  return reshapeRule(getOperation(), in[0], mesh);
}
ShardingDecision UnsqueezeOp::getShardingRule(ArrayRef<Sharding> in, MeshAttr mesh) {
  return reshapeRule(getOperation(), in[0], mesh);
}

void ReshapeOp::describeKernelStep(KernelStep &s) { s.kernel = "copy"; }
void SqueezeOp::describeKernelStep(KernelStep &s) { s.kernel = "copy"; }
void UnsqueezeOp::describeKernelStep(KernelStep &s) { s.kernel = "copy"; }
void OptimizationBarrierOp::describeKernelStep(KernelStep &s) { s.kernel = "copy"; }
/// The value passes as it is laid out, partial sums included.
ShardingDecision OptimizationBarrierOp::getShardingRule(ArrayRef<Sharding> in, MeshAttr) {
  return {{in[0]}, {in[0]}};
}

//===----------------------------------------------------------------------===//
// Transpose
//===----------------------------------------------------------------------===//

LogicalResult TransposeOp::buildGradients(GradientBuilder &gb, ArrayRef<Value> dres,
                                          MutableArrayRef<Value> d) {
  ArrayRef<int64_t> perm = getPermutation();
  SmallVector<int64_t> inv(perm.size());
  for (auto [i, p] : llvm::enumerate(perm)) inv[p] = static_cast<int64_t>(i);
  d[0] = gb.transpose(dres[0], inv);
  return success();
}

ShardingDecision TransposeOp::getShardingRule(ArrayRef<Sharding> in, MeshAttr) {
  Sharding res = Sharding::replicated(getPermutation().size());
  for (auto [i, p] : llvm::enumerate(getPermutation())) res.dims[i] = in[0].dims[p];
  return {{in[0].withoutPartial()}, {res}};
}

void TransposeOp::describeKernelStep(KernelStep &s) { s.setInts("perm", getPermutation()); }

//===----------------------------------------------------------------------===//
// Slicing, concatenation, splitting
//===----------------------------------------------------------------------===//

LogicalResult SliceOp::buildGradients(GradientBuilder &gb, ArrayRef<Value> dres,
                                      MutableArrayRef<Value> d) {
  d[0] = InsertSliceOp::create(gb.b(), gb.loc(), typeOf(getOperand()), dres[0], getStartsAttr(),
                               getStepsAttr());
  return success();
}

// Splits of the dimensions the slice leaves whole pass through.
ShardingDecision SliceOp::getShardingRule(ArrayRef<Sharding> in, MeshAttr) {
  SmallVector<int64_t> changed;
  for (auto [i, e] : llvm::enumerate(shapeOf(getOperand())))
    if (shapeOf(getResult())[i] != e) changed.push_back(i);
  return keepExcept(getOperation(), in[0], changed);
}

/// Broadcasting keeps the operand's splits on the dimensions it does not
/// widen (grouped-query attention's repeated key/value heads under tensor
/// parallelism); new leading dimensions are whole.
ShardingDecision ExpandOp::getShardingRule(ArrayRef<Sharding> in, MeshAttr) {
  ArrayRef<int64_t> from = shapeOf(getOperand()), to = shapeOf(getResult());
  const int64_t lead = static_cast<int64_t>(to.size()) - static_cast<int64_t>(from.size());
  Sharding s = in[0].withoutPartial();
  Sharding out = Sharding::replicated(static_cast<int64_t>(to.size()));
  for (int64_t i = 0; i < static_cast<int64_t>(from.size()); ++i) {
    if (from[i] != to[i + lead]) s.dims[i] = DimSharding();
    out.dims[i + lead] = s.dims[i];
  }
  return {{s}, {out}};
}

/// Slice's adjoint: the dimensions it widens must be whole; the others keep
/// their split (rotary embeddings' gradient under tensor parallelism).
ShardingDecision InsertSliceOp::getShardingRule(ArrayRef<Sharding> in, MeshAttr) {
  SmallVector<int64_t> changed;
  for (auto [i, e] : llvm::enumerate(shapeOf(getOperand())))
    if (shapeOf(getResult())[i] != e) changed.push_back(i);
  return keepExcept(getOperation(), in[0], changed);
}

template <typename SliceLike> static void describeSlice(SliceLike o, KernelStep &s) {
  s.setInts("starts", o.getStarts());
  s.setInts("steps", o.getSteps());
}
void SliceOp::describeKernelStep(KernelStep &s) { describeSlice(*this, s); }
void InsertSliceOp::describeKernelStep(KernelStep &s) { describeSlice(*this, s); }

LogicalResult ConcatOp::buildGradients(GradientBuilder &gb, ArrayRef<Value> dres,
                                       MutableArrayRef<Value> d) {
  int64_t axis = getAxis(), offset = 0;
  for (unsigned i = 0; i < getNumOperands(); ++i) {
    RankedTensorType t = typeOf(getOperand(i));
    SmallVector<int64_t> starts(t.getRank(), 0), steps(t.getRank(), 1);
    starts[axis] = offset;
    offset += t.getDimSize(axis);
    d[i] = SliceOp::create(gb.b(), gb.loc(), t, dres[0], gb.b().getDenseI64ArrayAttr(starts),
                           gb.b().getDenseI64ArrayAttr(steps));
  }
  return success();
}

/// Operands split alike, joined along a dimension none splits: each rank
/// joins its own parts (rotary embeddings' halves under tensor parallelism).
ShardingDecision ConcatOp::getShardingRule(ArrayRef<Sharding> in, MeshAttr) {
  const Sharding &first = in.front();
  const int64_t axis = getAxis();
  if (first.isPartial() || axis < 0 || axis >= static_cast<int64_t>(first.dims.size()) ||
      first.dims[axis].isSplit() ||
      !llvm::all_of(in, [&](const Sharding &s) { return s == first; }))
    return {};
  return {SmallVector<Sharding>(in.begin(), in.end()), {first}};
}

LogicalResult SplitOp::buildGradients(GradientBuilder &gb, ArrayRef<Value> dres,
                                      MutableArrayRef<Value> d) {
  SmallVector<Value> parts;
  for (auto [r, dr] : llvm::zip(getResults(), dres))
    parts.push_back(dr ? dr : gb.zeros(typeOf(r)));
  d[0] = ConcatOp::create(gb.b(), gb.loc(), ValueRange(parts),
                          {gb.b().getNamedAttr("axis", getAxisAttr())});
  return success();
}

ShardingDecision SplitOp::getShardingRule(ArrayRef<Sharding> in, MeshAttr) {
  return keepExcept(getOperation(), in[0], {static_cast<int64_t>(getAxis())});
}

void ConcatOp::describeKernelStep(KernelStep &s) { s.setInt("axis", getAxis()); }
void SplitOp::describeKernelStep(KernelStep &s) { s.setInt("axis", getAxis()); }

//===----------------------------------------------------------------------===//
// Gathers and scatters
//===----------------------------------------------------------------------===//

LogicalResult GatherOp::buildGradients(GradientBuilder &gb, ArrayRef<Value> dres,
                                       MutableArrayRef<Value> d) {
  d[0] = GatherGradOp::create(gb.b(), gb.loc(), typeOf(getOperand(0)), getIndices(), dres[0],
                              getAxisAttr(), getPaddingIdxAttr());
  return success();
}

LogicalResult GatherElementsOp::buildGradients(GradientBuilder &gb, ArrayRef<Value> dres,
                                               MutableArrayRef<Value> d) {
  d[0] = GatherElementsGradOp::create(gb.b(), gb.loc(), typeOf(getOperand(0)), getIndices(),
                                      dres[0], getAxisAttr());
  return success();
}

void GatherOp::describeKernelStep(KernelStep &s) { s.setInt("axis", getAxis()); }
void GatherGradOp::describeKernelStep(KernelStep &s) {
  s.setInt("axis", getAxis());
  if (auto p = getPaddingIdx()) s.setInt("padding_idx", *p);
}
void GatherElementsOp::describeKernelStep(KernelStep &s) { s.setInt("axis", getAxis()); }
void GatherElementsGradOp::describeKernelStep(KernelStep &s) { s.setInt("axis", getAxis()); }

void ScatterElementsOp::describeKernelStep(KernelStep &s) {
  s.setInt("axis", getAxis());
  s.setString("reduction", stringifyScatterReduction(getReduction()));
}

//===----------------------------------------------------------------------===//
// Broadcasting, masks, fills
//===----------------------------------------------------------------------===//

LogicalResult ExpandOp::buildGradients(GradientBuilder &gb, ArrayRef<Value> dres,
                                       MutableArrayRef<Value> d) {
  d[0] = gb.unbroadcast(dres[0], typeOf(getOperand()));
  return success();
}

LogicalResult TriluOp::buildGradients(GradientBuilder &gb, ArrayRef<Value> dres,
                                      MutableArrayRef<Value> d) {
  d[0] = TriluOp::create(gb.b(), gb.loc(), dres[0].getType(), dres[0], getUpperAttr(), getKAttr());
  return success();
}

void TriluOp::describeKernelStep(KernelStep &s) {
  s.setInt("upper", getUpper());
  s.setInt("k", getK());
}

void RandomMaskOp::describeKernelStep(KernelStep &s) {
  s.setFloat("ratio", getRatio().convertToDouble());
  s.setInt("stream", getStream());
}

void FillOp::describeKernelStep(KernelStep &s) { s.setFloat("value", getValue().convertToDouble()); }

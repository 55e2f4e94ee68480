//===- DataMovementOps.cpp - facts of reshapes, slices, gathers, fills ----===//
//
// Ops that move, select or create elements without arithmetic on them:
// reshape-likes, transpose, slicing, concatenation and splitting, gathers
// and scatters, broadcasting (expand), triangle masks and fills.
//
//===----------------------------------------------------------------------===//
#include "dialects/ds/ops/OpFacts.h"
#include "dialects/ds/ops/Verifiers.h"

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

void RandomOp::describeKernelStep(KernelStep &s) {
  s.setString("distribution", stringifyDistribution(getDistribution()));
  s.setFloat("a", getA().convertToDouble());
  s.setFloat("b", getB().convertToDouble());
  s.setInt("stream", getStream());
}

void ResampleOp::describeKernelStep(KernelStep &s) {
  s.setInts("axes", getAxes());
  s.setInts("taps", getTaps());
}

LogicalResult ResampleOp::verify() {
  ArrayRef<int64_t> axes = getAxes(), taps = getTaps();
  RankedTensorType in = getOperand().getType(), out = getResult().getType();
  if (axes.empty() || axes.size() > 2 || taps.size() != axes.size())
    return emitOpError("needs one or two axes, each with a tap count");
  if (in.getRank() != out.getRank())
    return emitOpError("result rank ") << out.getRank() << " differs from the operand's "
                                       << in.getRank();
  int64_t entries = 0;
  for (auto [i, a] : llvm::enumerate(axes)) {
    if (a < 0 || a >= in.getRank() || (i > 0 && a <= axes[i - 1]))
      return emitOpError("axes must be increasing and in [0, ") << in.getRank() << ")";
    if (taps[i] < 1) return emitOpError("tap counts must be positive");
    entries += out.getDimSize(a) * taps[i];
  }
  for (int64_t d = 0; d < in.getRank(); ++d)
    if (!llvm::is_contained(axes, d) && in.getDimSize(d) != out.getDimSize(d))
      return emitOpError("dimension ") << d << " is not resampled but changes from "
                                       << in.getDimSize(d) << " to " << out.getDimSize(d);
  if (getIndex().getType().getDimSize(0) != entries ||
      getWeight().getType().getDimSize(0) != entries)
    return emitOpError("index and weight need ") << entries << " entries each";
  return success();
}

void FillOp::describeKernelStep(KernelStep &s) { s.setFloat("value", getValue().convertToDouble()); }

//===----------------------------------------------------------------------===//
// Shape and data movement (moved from DSOps.cpp): type inference, verifiers, folders
//===----------------------------------------------------------------------===//

using namespace mlir::ds::verifiers;

LogicalResult TriluOp::verify() {
  if (getOperand().getType().getRank() < 2)
    return emitOpError("needs an operand of rank >= 2");
  return success();
}

LogicalResult CumProdOp::verify() {
  return verifyAxis(*this, getAxis(), getOperand().getType().getRank());
}

LogicalResult CumSumOp::verify() {
  int64_t rank = getOperand().getType().getRank();
  if (failed(verifyAxis(*this, getAxis(), rank)))
    return failure();
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

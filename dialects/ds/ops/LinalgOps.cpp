//===- LinalgOps.cpp - facts of matmul, convolution and pooling -----------===//
#include "dialects/ds/ops/OpFacts.h"
#include "dialects/ds/ops/Verifiers.h"

#include "llvm/ADT/StringSet.h"

using namespace mlir;
using namespace mlir::ds;
using namespace mlir::ds::facts;

//===----------------------------------------------------------------------===//
// Matmul
//===----------------------------------------------------------------------===//

LogicalResult MatmulOp::buildGradients(GradientBuilder &gb, ArrayRef<Value> dres,
                                       MutableArrayRef<Value> d) {
  if (getTransposeLhs() || getTransposeRhs())
    return emitError("autodiff of a matmul with transposed operands: differentiate "
                     "before canonicalization folds transposes into it");
  Value g = dres[0];
  RankedTensorType at = typeOf(getLhs()), bt = typeOf(getRhs());
  if (at.getRank() < 2 || bt.getRank() < 2) {
    // numpy's vector cases: differentiate the matrix product with the unit
    // dimensions restored, then drop them again.
    SmallVector<int64_t> as(at.getShape()), bs(bt.getShape());
    if (at.getRank() == 1) as.insert(as.begin(), 1);
    if (bt.getRank() == 1) bs.push_back(1);
    Value a2 = gb.reshape(getLhs(), as), b2 = gb.reshape(getRhs(), bs);
    Value y2 = MatmulOp::create(gb.b(), gb.loc(), a2, b2);
    Value g2 = gb.reshape(g, typeOf(y2).getShape());
    Value da = gb.unbroadcast(MatmulOp::create(gb.b(), gb.loc(), g2, gb.swapLast2(b2)),
                              typeOf(a2));
    Value db = gb.unbroadcast(MatmulOp::create(gb.b(), gb.loc(), gb.swapLast2(a2), g2),
                              typeOf(b2));
    d[0] = gb.reshape(da, at.getShape());
    d[1] = gb.reshape(db, bt.getShape());
    return success();
  }
  // dA = g B^T (B broadcast over A's batch), reduced to A.
  d[0] = gb.unbroadcast(MatmulOp::create(gb.b(), gb.loc(), g, gb.swapLast2(getRhs())), at);
  if (bt.getRank() == 2) {
    // A shared weight: one GEMM over all batch rows, [K, rows] x [rows, N],
    // not a batch of products then a sum.
    int64_t k = at.getShape().back(), n = bt.getShape().back();
    int64_t rows = 1; // (not numel / k: k may be 0)
    for (int64_t dim : at.getShape().drop_back()) rows *= dim;
    Value a2 = gb.reshape(getLhs(), {rows, k});
    Value g2 = gb.reshape(g, {rows, n});
    d[1] = MatmulOp::create(gb.b(), gb.loc(), gb.transpose(a2, {1, 0}), g2);
  } else {
    d[1] = gb.unbroadcast(MatmulOp::create(gb.b(), gb.loc(), gb.swapLast2(getLhs()), g), bt);
  }
  return success();
}

/// Row and column splits pass to the result, batch splits follow numpy
/// broadcasting, and a split contraction dimension leaves a partial sum
/// over its axes.
ShardingDecision MatmulOp::getShardingRule(ArrayRef<Sharding> in, MeshAttr) {
  ArrayRef<int64_t> as = shapeOf(getLhs()), bs = shapeOf(getRhs()), rs = shapeOf(getResult());
  int64_t ra = as.size(), rb = bs.size(), rr = rs.size();
  if (ra < 2 || rb < 2) return {};
  // Transposed operands (folded late, after partitioning) have no rule.
  if (getTransposeLhs() || getTransposeRhs()) return {};
  const Sharding &a = in[0], &b = in[1];
  Sharding res = Sharding::replicated(rr);
  llvm::StringSet<> used;
  auto take = [&](int64_t i, const DimSharding &ds) {
    if (!ds.isSplit() || res.dims[i].isSplit() ||
        llvm::any_of(ds.axes, [&](StringRef x) { return used.contains(x); }))
      return;
    res.dims[i] = ds;
    for (StringRef x : ds.axes) used.insert(x);
  };
  take(rr - 2, a.dims[ra - 2]);
  take(rr - 1, b.dims[rb - 1]);
  for (int64_t i = 0; i < rr - 2; ++i) {
    int64_t ja = i - (rr - ra), jb = i - (rr - rb);
    if (ja >= 0 && as[ja] == rs[i]) take(i, a.dims[ja]);
    if (jb >= 0 && bs[jb] == rs[i]) take(i, b.dims[jb]);
  }
  DimSharding k = a.dims[ra - 1].isSplit() ? a.dims[ra - 1] : b.dims[rb - 2];
  if (llvm::any_of(k.axes, [&](StringRef x) { return used.contains(x); })) k = DimSharding();
  res.partial = k.axes;
  auto required = [&](ArrayRef<int64_t> s, int64_t rank, int64_t kDim, int64_t keep,
                      int64_t keepRes) {
    Sharding q = Sharding::replicated(rank);
    for (int64_t j = 0; j < rank - 2; ++j) {
      int64_t i = j + rr - rank;
      if (i >= 0 && s[j] == rs[i]) q.dims[j] = res.dims[i];
    }
    q.dims[kDim] = k;
    q.dims[keep] = res.dims[keepRes];
    return q;
  };
  ShardingDecision d;
  d.operands.push_back(required(as, ra, ra - 1, ra - 2, rr - 2));
  d.operands.push_back(required(bs, rb, rb - 2, rb - 1, rr - 1));
  d.results.push_back(res);
  return d;
}

/// A value no run can change: an inference plan's constant or parameter,
/// or a tensor-parallel rank's block of one (a weight buffer of its own).
static bool isConstantWeight(Value v) {
  Operation *def = v.getDefiningOp();
  if (auto s = dyn_cast_or_null<ShardSliceOp>(def)) def = s.getOperand().getDefiningOp();
  return def && isa<ConstantOp, ParameterOp>(def);
}

/// A product's flags, shared by matmul and fused_matmul.
static void describeProduct(Value rhs, bool transposeLhs, bool transposeRhs, KernelStep &s) {
  // Only when set: plans without transposed operands stay as before.
  if (transposeLhs) s.setInt("transpose_lhs", 1);
  if (transposeRhs) s.setInt("transpose_rhs", 1);
  // A right operand that cannot change between runs (an inference plan's
  // weight) may be packed once when the plan is loaded.
  if (isConstantWeight(rhs)) s.setInt("constant_weight", 1);
}

void MatmulOp::describeKernelStep(KernelStep &s) {
  describeProduct(getRhs(), getTransposeLhs(), getTransposeRhs(), s);
}

/// The product as matmul describes it, then the epilogue: which optional
/// operands follow (`bias`, `addend`), the scale, the activation and how the
/// addend combines. Defaults are left out, as matmul leaves out its flags.
void FusedMatmulOp::describeKernelStep(KernelStep &s) {
  describeProduct(getRhs(), getTransposeLhs(), getTransposeRhs(), s);
  if (getBias()) s.setInt("bias", 1);
  if (getAddend()) {
    s.setInt("addend", 1);
    s.setString("combine", stringifyCombine(getCombine()));
  }
  if (getAlpha().convertToDouble() != 1.0) s.setFloat("alpha", getAlpha().convertToDouble());
  if (getActivation() != Activation::None)
    s.setString("activation", stringifyActivation(getActivation()));
  for (auto [name, shape, strides] :
       {std::tuple{"lhs", getLhsShape(), getLhsStrides()}, std::tuple{"rhs", getRhsShape(), getRhsStrides()},
        std::tuple{"result", getResultShape(), getResultStrides()}})
    if (shape && strides) {
      s.setInts(std::string(name) + "_shape", *shape);
      s.setInts(std::string(name) + "_strides", *strides);
    }
  if (getLhsOffset() && *getLhsOffset()) s.setInt("lhs_offset", static_cast<int64_t>(*getLhsOffset()));
  if (getRhsOffset() && *getRhsOffset()) s.setInt("rhs_offset", static_cast<int64_t>(*getRhsOffset()));
  if (getSoftmax()) s.setInt("softmax", 1);
  if (getMask()) s.setInt("mask", 1);
  if (FloatAttr fill = getMaskFillAttr()) s.setFloat("mask_fill", fill.getValueAsDouble());
}

/// Attention's views as the kernels read them (ds.attention and
/// ds.cached_attention).
template <typename AttentionLike> static void describeViews(AttentionLike op, KernelStep &s) {
  s.setInts("query_shape", op.getQueryShape());
  s.setInts("query_strides", op.getQueryStrides());
  s.setInts("key_shape", op.getKeyShape());
  s.setInts("key_strides", op.getKeyStrides());
  s.setInts("value_shape", op.getValueShape());
  s.setInts("value_strides", op.getValueStrides());
  for (auto [name, offset] : {std::pair<const char *, std::optional<uint64_t>>{"query_offset",
                                                                               op.getQueryOffset()},
                              {"key_offset", op.getKeyOffset()},
                              {"value_offset", op.getValueOffset()}})
    if (offset && *offset) s.setInt(name, static_cast<int64_t>(*offset));
  s.setFloat("scale", op.getScale().convertToDouble());
  if (op.getResultBshd()) s.setInt("result_bshd", 1);
}

/// The views, the scale and the flags, as the kernel reads them.
void AttentionOp::describeKernelStep(KernelStep &s) {
  describeViews(*this, s);
  if (getMask()) s.setInt("mask", 1);
  if (FloatAttr fill = getMaskFillAttr()) s.setFloat("mask_fill", fill.getValueAsDouble());
  if (getZeroNanRows()) s.setInt("zero_nan_rows", 1);
}

void DynamicQuantizeOp::describeKernelStep(KernelStep &) {}

/// The weight's form and the epilogue, defaults left out.
void QuantizedMatmulOp::describeKernelStep(KernelStep &s) {
  s.setInt("bits", getBits());
  // The weight and its scales (and zero points) repacked once at load,
  // when none can change (not a weight fetched from host memory).
  if (isConstantWeight(getWeight()) && isConstantWeight(getScale()) &&
      (!getZeroPoint() || isConstantWeight(getZeroPoint())))
    s.setInt("constant_weight", 1);
  if (getGroupSize()) s.setInt("group_size", getGroupSize());
  if (getActivationQuant() != ActivationQuant::None)
    s.setString("activation_quant", stringifyActivationQuant(getActivationQuant()));
  if (FloatAttr scale = getInputScaleAttr()) s.setFloat("input_scale", scale.getValueAsDouble());
  if (IntegerAttr zero = getInputZeroPointAttr()) s.setInt("input_zero_point", zero.getInt());
  if (FloatAttr rs = getRoundScaleAttr()) s.setFloat("round_scale", rs.getValueAsDouble());
  if (IntegerAttr rz = getRoundZeroPointAttr()) s.setInt("round_zero_point", rz.getInt());
  if (getZeroPoint()) s.setInt("zero_point", 1);
  if (getBias()) s.setInt("bias", 1);
  if (getAddend()) {
    s.setInt("addend", 1);
    s.setString("combine", stringifyCombine(getCombine()));
  }
  if (getAlpha().convertToDouble() != 1.0) s.setFloat("alpha", getAlpha().convertToDouble());
  if (getActivation() != Activation::None)
    s.setString("activation", stringifyActivation(getActivation()));
}

void CachedAttentionOp::describeKernelStep(KernelStep &s) {
  describeViews(*this, s);
  if (std::optional<uint64_t> w = getWindow()) s.setInt("window", static_cast<int64_t>(*w));
}

//===----------------------------------------------------------------------===//
// Convolution
//===----------------------------------------------------------------------===//

LogicalResult ConvOp::buildGradients(GradientBuilder &gb, ArrayRef<Value> dres,
                                     MutableArrayRef<Value> d) {
  if (getClipMinAttr() || getClipMaxAttr() || getAddend() || getActivation() != Activation::None)
    return emitError("autodiff of a convolution with a fused epilogue: differentiate "
                     "before ds-fuse-epilogues");
  if (getChannelsLast())
    return emitError("autodiff of a channels-last convolution: differentiate before "
                     "ds-conv-channels-last");
  Value g = dres[0];
  auto cg = ConvGradOp::create(gb.b(), gb.loc(), TypeRange{typeOf(getInput()), typeOf(getWeight())},
                               getInput(), getWeight(), g, getStridesAttr(), getDilationsAttr(),
                               getPadsAttr(), getGroupAttr());
  d[0] = cg.getDInput();
  d[1] = cg.getDWeight();
  if (getBias()) {
    SmallVector<int64_t> axes{0};
    for (int64_t i = 2; i < typeOf(g).getRank(); ++i) axes.push_back(i);
    d[2] = gb.reduceSum(g, axes, /*keepdims=*/false);
  }
  return success();
}

template <typename ConvLike> static void describeConv(ConvLike o, KernelStep &s) {
  s.setInts("strides", o.getStrides());
  s.setInts("dilations", o.getDilations());
  s.setInts("pads", o.getPads());
  s.setInt("group", o.getGroup());
}
void ConvOp::describeKernelStep(KernelStep &s) {
  describeConv(*this, s);
  // A weight that cannot change between runs (an inference plan's
  // parameter or constant) may be packed once when the plan is loaded.
  if (Operation *def = getWeight().getDefiningOp(); def && isa<ConstantOp, ParameterOp>(def))
    s.setInt("constant_weight", 1);
  if (FloatAttr lo = getClipMinAttr()) s.setFloat("clip_min", lo.getValueAsDouble());
  if (FloatAttr hi = getClipMaxAttr()) s.setFloat("clip_max", hi.getValueAsDouble());
  if (getActivation() != Activation::None)
    s.setString("activation", stringifyActivation(getActivation()));
  if (getChannelsLast()) s.setInt("channels_last", 1);
  if (getAddend()) s.setInt("addend", 1);
}
void ConvGradOp::describeKernelStep(KernelStep &s) { describeConv(*this, s); }

/// ds.conv's geometry and epilogue, the activations' quantization, and
/// whether the weight and its scales can be packed once at load.
void QuantizedConvOp::describeKernelStep(KernelStep &s) {
  describeConv(*this, s);
  s.setFloat("input_scale", getInputScale().convertToDouble());
  s.setInt("input_zero_point", getInputZeroPoint());
  if (isConstantWeight(getWeight()) && isConstantWeight(getScale())) s.setInt("constant_weight", 1);
  if (getBias()) s.setInt("bias", 1);
  if (getAddend()) s.setInt("addend", 1);
  if (FloatAttr lo = getClipMinAttr()) s.setFloat("clip_min", lo.getValueAsDouble());
  if (FloatAttr hi = getClipMaxAttr()) s.setFloat("clip_max", hi.getValueAsDouble());
  if (getActivation() != Activation::None)
    s.setString("activation", stringifyActivation(getActivation()));
  if (getChannelsLast()) s.setInt("channels_last", 1);
  if (FloatAttr os = getOutputScaleAttr()) s.setFloat("output_scale", os.getValueAsDouble());
  if (IntegerAttr oz = getOutputZeroPointAttr()) s.setInt("output_zero_point", oz.getInt());
}

//===----------------------------------------------------------------------===//
// Pooling
//===----------------------------------------------------------------------===//

LogicalResult PoolOp::buildGradients(GradientBuilder &gb, ArrayRef<Value> dres,
                                     MutableArrayRef<Value> d) {
  if (getChannelsLast())
    return emitError("autodiff of a channels-last pooling: differentiate before "
                     "ds-conv-channels-last");
  d[0] = PoolGradOp::create(gb.b(), gb.loc(), typeOf(getInput()), getInput(), dres[0],
                            getKindAttr(), getKernelAttr(), getStridesAttr(), getDilationsAttr(),
                            getPadsAttr(), getCountIncludePadAttr());
  return success();
}

/// Window geometry, shared by pooling and its indices and gradient.
template <typename PoolLike> static void describeWindow(PoolLike o, KernelStep &s) {
  s.setInts("kernel", o.getKernel());
  s.setInts("strides", o.getStrides());
  s.setInts("dilations", o.getDilations());
  s.setInts("pads", o.getPads());
}

template <typename PoolLike> static void describePool(PoolLike o, KernelStep &s) {
  s.setString("kind", stringifyPoolKind(o.getKind()));
  describeWindow(o, s);
  s.setInt("count_include_pad", o.getCountIncludePad());
}
void PoolOp::describeKernelStep(KernelStep &s) {
  describePool(*this, s);
  if (getChannelsLast()) s.setInt("channels_last", 1);
}
void PoolGradOp::describeKernelStep(KernelStep &s) { describePool(*this, s); }

void MaxPoolIndicesOp::describeKernelStep(KernelStep &s) {
  describeWindow(*this, s);
  s.setInt("column_major", getColumnMajor());
}

//===----------------------------------------------------------------------===//
// Products, convolution and pooling (moved from DSOps.cpp): type inference, verifiers, folders
//===----------------------------------------------------------------------===//

using namespace mlir::ds::verifiers;

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

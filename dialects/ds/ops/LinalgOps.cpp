//===- LinalgOps.cpp - facts of matmul, convolution and pooling -----------===//
#include "dialects/ds/ops/OpFacts.h"

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

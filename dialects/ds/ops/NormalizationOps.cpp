//===- NormalizationOps.cpp - facts of softmax and layer norm -------------===//
#include "dialects/ds/ops/OpFacts.h"

using namespace mlir;
using namespace mlir::ds;
using namespace mlir::ds::facts;

//===----------------------------------------------------------------------===//
// Softmax and log-softmax
//===----------------------------------------------------------------------===//

LogicalResult SoftmaxOp::buildGradients(GradientBuilder &gb, ArrayRef<Value> dres,
                                        MutableArrayRef<Value> d) {
  // y * (g - sum(g * y)) in one row pass (softmax_grad), not three.
  d[0] = SoftmaxGradOp::create(gb.b(), gb.loc(), getType(), getResult(), dres[0], Value(),
                               getAxisAttr());
  return success();
}

LogicalResult MaskedSoftmaxOp::buildGradients(GradientBuilder &gb, ArrayRef<Value> dres,
                                              MutableArrayRef<Value> d) {
  // A masked score's gradient is 0 (where passes none back); an additive
  // mask passes the softmax's through. The mask is data: no gradient.
  Value mask = getMaskFillAttr() ? getMask() : Value();
  d[0] = SoftmaxGradOp::create(gb.b(), gb.loc(), getType(), getResult(), dres[0], mask,
                               getAxisAttr());
  return success();
}

LogicalResult LogSoftmaxOp::buildGradients(GradientBuilder &gb, ArrayRef<Value> dres,
                                           MutableArrayRef<Value> d) {
  Value g = dres[0];
  Value p = ExpOp::create(gb.b(), gb.loc(), getType(), getResult());
  Value s = gb.reduceSum(g, {static_cast<int64_t>(getAxis())}, /*keepdims=*/true);
  d[0] = gb.sub(g, gb.mul(p, s));
  return success();
}

// Any split but the normalized axis passes through.
ShardingDecision SoftmaxOp::getShardingRule(ArrayRef<Sharding> in, MeshAttr) {
  return keepExcept(getOperation(), in[0], {static_cast<int64_t>(getAxis())});
}
ShardingDecision LogSoftmaxOp::getShardingRule(ArrayRef<Sharding> in, MeshAttr) {
  return keepExcept(getOperation(), in[0], {static_cast<int64_t>(getAxis())});
}
// The probabilities and their gradient are laid out alike.
ShardingDecision SoftmaxGradOp::getShardingRule(ArrayRef<Sharding> in, MeshAttr) {
  ShardingDecision d = keepExcept(getOperation(), in[0], {static_cast<int64_t>(getAxis())});
  d.operands[1] = d.operands[0];
  return d;
}

void SoftmaxOp::describeKernelStep(KernelStep &s) { s.setInt("axis", getAxis()); }
void LogSoftmaxOp::describeKernelStep(KernelStep &s) { s.setInt("axis", getAxis()); }
void SoftmaxGradOp::describeKernelStep(KernelStep &s) { s.setInt("axis", getAxis()); }
void MaskedSoftmaxOp::describeKernelStep(KernelStep &s) {
  s.setInt("axis", getAxis());
  if (FloatAttr fill = getMaskFillAttr()) s.setFloat("mask_fill", fill.getValueAsDouble());
}

//===----------------------------------------------------------------------===//
// Layer normalization
//===----------------------------------------------------------------------===//

LogicalResult LayerNormOp::buildGradients(GradientBuilder &gb, ArrayRef<Value> dres,
                                          MutableArrayRef<Value> d) {
  auto lg = LayerNormGradOp::create(
      gb.b(), gb.loc(), TypeRange{getType(), getScale().getType(), getScale().getType()},
      getOperand(), getScale(), dres[0], Value(), getAxisAttr(), getEpsilonAttr());
  d[0] = lg.getDOperand();
  d[1] = lg.getDScale();
  if (getBias()) d[2] = lg.getDBias();
  return success();
}

template <typename NormLike> static void describeNorm(NormLike o, KernelStep &s) {
  s.setInt("axis", o.getAxis());
  s.setFloat("epsilon", o.getEpsilon().convertToFloat());
}
void LayerNormOp::describeKernelStep(KernelStep &s) { describeNorm(*this, s); }
void LayerNormGradOp::describeKernelStep(KernelStep &s) { describeNorm(*this, s); }

void RmsNormOp::describeKernelStep(KernelStep &s) {
  s.setFloat("epsilon", getEpsilon().convertToDouble());
}

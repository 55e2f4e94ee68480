//===- TrainingOps.cpp - facts of losses, backward kernels, optimizers ----===//
#include "dialects/ds/ops/OpFacts.h"

using namespace mlir;
using namespace mlir::ds;
using namespace mlir::ds::facts;

LogicalResult SoftmaxCrossEntropyOp::buildGradients(GradientBuilder &gb, ArrayRef<Value> dres,
                                                    MutableArrayRef<Value> d) {
  d[0] = SoftmaxCrossEntropyGradOp::create(gb.b(), gb.loc(), typeOf(getLogits()), Type(),
                                           getLogits(), getLabels(), dres[0],
                                           getIgnoreIndexAttr())
             .getResult();
  return success();
}

void SoftmaxCrossEntropyOp::describeKernelStep(KernelStep &s) {
  s.setInt("ignore_index", getIgnoreIndex());
}
void SoftmaxCrossEntropyGradOp::describeKernelStep(KernelStep &s) {
  s.setInt("ignore_index", getIgnoreIndex());
}

ShardingDecision GeluGradOp::getShardingRule(ArrayRef<Sharding> in, MeshAttr) {
  return elementwiseRule(getOperation(), in);
}

void GeluGradOp::describeKernelStep(KernelStep &s) {
  s.setString("approximate", stringifyGeluApproximation(getApproximate()));
}

void AdamUpdateOp::describeKernelStep(KernelStep &s) {
  s.setFloat("beta1", getBeta1().convertToDouble());
  s.setFloat("beta2", getBeta2().convertToDouble());
  s.setFloat("eps", getEps().convertToDouble());
  s.setFloat("weight_decay", getWeightDecay().convertToDouble());
  s.setInt("decoupled", getDecoupled());
  if (getBeta1Now()) s.setInt("beta1_now", 1); // its last operand
}

// Optimizer updates are elementwise over a parameter and its state (the
// scalars replicated): a tensor-parallel slice updates as a slice.
ShardingDecision AdamUpdateOp::getShardingRule(ArrayRef<Sharding> in, MeshAttr) {
  return elementwiseRule(getOperation(), in);
}
ShardingDecision SgdUpdateOp::getShardingRule(ArrayRef<Sharding> in, MeshAttr) {
  return elementwiseRule(getOperation(), in);
}

void SgdUpdateOp::describeKernelStep(KernelStep &s) {
  s.setFloat("momentum", getMomentum().convertToDouble());
  s.setFloat("dampening", getDampening().convertToDouble());
  s.setFloat("weight_decay", getWeightDecay().convertToDouble());
  s.setInt("nesterov", getNesterov());
}

ShardingDecision LionUpdateOp::getShardingRule(ArrayRef<Sharding> in, MeshAttr) {
  return elementwiseRule(getOperation(), in);
}
void LionUpdateOp::describeKernelStep(KernelStep &s) {
  s.setFloat("beta1", getBeta1().convertToDouble());
  s.setFloat("beta2", getBeta2().convertToDouble());
  s.setFloat("weight_decay", getWeightDecay().convertToDouble());
}

ShardingDecision AdagradUpdateOp::getShardingRule(ArrayRef<Sharding> in, MeshAttr) {
  return elementwiseRule(getOperation(), in);
}
void AdagradUpdateOp::describeKernelStep(KernelStep &s) {
  s.setFloat("eps", getEps().convertToDouble());
  s.setFloat("weight_decay", getWeightDecay().convertToDouble());
  s.setInt("decay_in_sum_only", getDecayInSumOnly());
}

// LAMB's trust ratio is over the whole parameter: replicated operands only
// (ds-build-train-step refuses tensor-parallel slices).
ShardingDecision LambUpdateOp::getShardingRule(ArrayRef<Sharding> in, MeshAttr) {
  return elementwiseRule(getOperation(), in);
}
void LambUpdateOp::describeKernelStep(KernelStep &s) {
  s.setFloat("beta1", getBeta1().convertToDouble());
  s.setFloat("beta2", getBeta2().convertToDouble());
  s.setFloat("eps", getEps().convertToDouble());
  s.setFloat("weight_decay", getWeightDecay().convertToDouble());
  s.setFloat("max_coeff", getMaxCoeff().convertToDouble());
  s.setFloat("min_coeff", getMinCoeff().convertToDouble());
  s.setInt("eps_inside_sqrt", getEpsInsideSqrt());
}

ShardingDecision MuonUpdateOp::getShardingRule(ArrayRef<Sharding> in, MeshAttr) {
  return elementwiseRule(getOperation(), in);
}
void MuonUpdateOp::describeKernelStep(KernelStep &s) {
  s.setFloat("momentum", getMomentum().convertToDouble());
  s.setFloat("weight_decay", getWeightDecay().convertToDouble());
  s.setInt("nesterov", getNesterov());
  s.setInt("ns_steps", getNsSteps());
  s.setFloat("scale", getScale().convertToDouble());
}

//===- TrainingOps.cpp - facts of losses, backward kernels, optimizers ----===//
#include "dialects/ds/ops/OpFacts.h"
#include "dialects/ds/ops/Verifiers.h"

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

//===----------------------------------------------------------------------===//
// Training ops (moved from DSOps.cpp): type inference, verifiers, folders
//===----------------------------------------------------------------------===//

using namespace mlir::ds::verifiers;

LogicalResult SoftmaxGradOp::verify() {
  if (failed(verifyAxis(*this, getAxis(), getSoftmax().getType().getRank()))) return failure();
  if (Value mask = getMask())
    return verifyMaskBroadcasts(*this, mask, getSoftmax().getType().getShape());
  return success();
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

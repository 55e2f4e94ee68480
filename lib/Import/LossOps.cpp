//===- LossOps.cpp - ONNX loss functions ----------------------------------===//
//
// SoftmaxCrossEntropyLoss and NegativeLogLikelihoodLoss. The common case
// (mean over labels, no weights, no log-prob output) is one fused op with a
// fused gradient; the rest is NegativeLogLikelihoodLoss's formula.
//
//===----------------------------------------------------------------------===//
#include "ImporterCore.h"

#include <limits>

using namespace mlir;
using namespace mlir::ds;
using namespace mlir::ds::importer;

namespace {

class LossImporter : public NodeImporter {
public:
  using NodeImporter::NodeImporter;

  LogicalResult nllLossNode(const onnx::NodeProto &n);
  LogicalResult softmaxCrossEntropyLoss(const onnx::NodeProto &n);

private:
  FailureOr<Value> nllLoss(const onnx::NodeProto &n, Value logProb, Value target, Value weight,
                           StringRef reduction);
};

/// NegativeLogLikelihoodLoss over log-probabilities [N, C, d...] and
/// targets [N, d...]: pick each target's log-probability (gather_elements),
/// weight it (class weights, zero where ignored), reduce as asked; "mean"
/// divides by the total weight, as ONNX defines.
FailureOr<Value> LossImporter::nllLoss(const onnx::NodeProto &n, Value logProb, Value target,
                                       Value weight, StringRef reduction) {
  RankedTensorType lt = typeOf(logProb), tt = typeOf(target);
  Type elem = lt.getElementType();
  if (lt.getRank() < 2 || tt.getRank() != lt.getRank() - 1)
    return FailureOr<Value>(nodeError(n) << "input must be [N, C, d...] and target [N, d...]");
  Value t = target, maskF;
  if (findAttr(n, "ignore_index")) {
    DS_TRY(ignore, intAttr(n, "ignore_index"));
    Type it = tt.getElementType();
    Value ign = constant(DenseElementsAttr::get(RankedTensorType::get({}, it),
                                                b_.getIntegerAttr(it, ignore)));
    DS_TRY(eq, build<EqualOp>({target, ign}));
    DS_TRY(keep, buildTyped<NotOp>(eq.getType(), eq));
    Value zero = constant(DenseElementsAttr::get(RankedTensorType::get({}, it),
                                                 b_.getIntegerAttr(it, 0)));
    DS_TRY(safe, build<WhereOp>({keep, target, zero}));
    t = safe;
    DS_TRY(mf, buildTyped<CastOp>(RankedTensorType::get(tt.getShape(), elem), keep));
    maskF = mf;
  }
  DS_TRY(tu, build<UnsqueezeOp>({t}, {arrAttr("axes", {1})}));
  auto pickedType = RankedTensorType::get(typeOf(tu).getShape(), elem);
  DS_TRY(picked, buildTyped<GatherElementsOp>(pickedType, ValueRange{logProb, tu},
                                              {i64Attr("axis", 1)}));
  DS_TRY(flat, reshape(picked, tt.getShape()));
  DS_TRY(loss, buildTyped<NegOp>(flat.getType(), flat));
  Value w = maskF;
  if (weight) {
    DS_TRY(wg, build<GatherOp>({weight, t}, {i64Attr("axis", 0)}));
    w = wg;
    if (maskF) {
      DS_TRY(wm, build<MulOp>({wg, maskF}));
      w = wm;
    }
  }
  Value weighted = loss;
  if (w) {
    DS_TRY(lw, build<MulOp>({loss, w}));
    weighted = lw;
  }
  if (reduction == "none") return weighted;
  SmallVector<int64_t> all;
  for (int64_t d = 0; d < tt.getRank(); ++d) all.push_back(d);
  DS_TRY(sum, reduceWith<ReduceSumOp>(weighted, all, false));
  if (reduction == "sum") return sum;
  if (!w) return reduceWith<ReduceMeanOp>(weighted, all, false);
  DS_TRY(total, reduceWith<ReduceSumOp>(w, all, false));
  return build<DivOp>({sum, total});
}

LogicalResult LossImporter::nllLossNode(const onnx::NodeProto &n) {
  DS_TRY(x, required(n, 0));
  DS_TRY(target, required(n, 1));
  DS_TRY(reduction, stringAttr(n, "reduction", "mean"));
  if (reduction != "mean" && reduction != "sum" && reduction != "none")
    return nodeError(n) << "unknown reduction '" << reduction << "'";
  DS_TRY(loss, nllLoss(n, x, target, input(n, 2), reduction));
  setOutput(n, 0, loss);
  return success();
}

LogicalResult LossImporter::softmaxCrossEntropyLoss(const onnx::NodeProto &n) {
  DS_TRY(scores, required(n, 0));
  DS_TRY(labels, required(n, 1));
  DS_TRY(reduction, stringAttr(n, "reduction", "mean"));
  if (reduction != "mean" && reduction != "sum" && reduction != "none")
    return nodeError(n) << "unknown reduction '" << reduction << "'";
  int64_t rank = typeOf(scores).getRank();
  if (rank < 2) return nodeError(n) << "scores must have rank >= 2";
  bool wantLogProb = n.output_size() > 1 && !n.output(1).empty();
  Type elem = typeOf(scores).getElementType();
  if (reduction == "mean" && !input(n, 2) && !wantLogProb) {
    // The common case as one fused op (and one fused gradient): classes
    // last, mean over labels not ignored.
    DS_TRY(ignore, intAttr(n, "ignore_index", std::numeric_limits<int64_t>::min()));
    Value logits = scores;
    if (rank > 2) {
      SmallVector<int64_t> perm{0};
      for (int64_t d = 2; d < rank; ++d) perm.push_back(d);
      perm.push_back(1);
      DS_TRY(t, build<TransposeOp>({scores}, {arrAttr("permutation", perm)}));
      logits = t;
    }
    DS_TRY(loss, buildTyped<SoftmaxCrossEntropyOp>(RankedTensorType::get({}, elem),
                                                   ValueRange{logits, labels},
                                                   {i64Attr("ignore_index", ignore)}));
    setOutput(n, 0, loss);
    return success();
  }
  DS_TRY(logProb, buildTyped<LogSoftmaxOp>(scores.getType(), scores, {i64Attr("axis", 1)}));
  DS_TRY(loss, nllLoss(n, logProb, labels, input(n, 2), reduction));
  setOutput(n, 0, loss);
  if (wantLogProb) setOutput(n, 1, logProb);
  return success();
}

} // namespace

void mlir::ds::importer::registerLossHandlers(HandlerTable &t) {
  using I = LossImporter;
  t.add<I, &I::nllLossNode>("NegativeLogLikelihoodLoss");
  t.add<I, &I::softmaxCrossEntropyLoss>("SoftmaxCrossEntropyLoss");
}

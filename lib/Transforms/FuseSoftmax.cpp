//===- FuseSoftmax.cpp - a softmax's mask, into the softmax ---------------===//
//
// A decoder's causal mask is a `where(mask, -inf, scores)` (masked_fill)
// or an `add` of a mask before the softmax: a pass over attention-sized
// scores that writes a second copy of them. In training, where
// ds-fuse-attention leaves the softmax alone (the backward reads its
// probabilities), the forward's mask becomes ds.masked_softmax and the
// backward's `where(mask, 0, softmax_grad)` the mask of ds.softmax_grad:
// both become row passes that read the mask as they go.
//
//===----------------------------------------------------------------------===//
#include "dialects/ds/DSOps.h"
#include "ds/Transforms/Passes.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"

namespace mlir::ds {
#define GEN_PASS_DEF_FUSESOFTMAXPASS
#include "ds/Transforms/Passes.h.inc"
} // namespace mlir::ds

using namespace mlir;
using namespace mlir::ds;

namespace {

RankedTensorType tensorType(Value v) { return cast<RankedTensorType>(v.getType()); }

/// A known scalar: a one-element constant.
std::optional<double> scalar(Value v) {
  if (tensorType(v).getNumElements() != 1) return std::nullopt;
  return knownFloatSplat(v);
}

/// Softmax over the last axis of an f32 value.
bool rowSoftmax(Value x, int64_t axis) {
  RankedTensorType t = tensorType(x);
  return t.getElementType().isF32() && t.getRank() >= 1 && axis == t.getRank() - 1;
}

/// `cond`, or its negation (the select keeps the operand where `cond` holds).
Value maskWhere(OpBuilder &b, Location loc, Value cond, bool negate) {
  if (!negate) return cond;
  return NotOp::create(b, loc, cond.getType(), cond);
}

struct FuseSoftmaxPass : public mlir::ds::impl::FuseSoftmaxPassBase<FuseSoftmaxPass> {
  void runOnOperation() override {
    SmallVector<SoftmaxOp> softmaxes;
    getOperation().walk([&](SoftmaxOp s) { softmaxes.push_back(s); });
    for (SoftmaxOp s : softmaxes) fuseForward(s);
    // Collected after the forward fusions, which erase the wheres they take.
    SmallVector<WhereOp> wheres;
    getOperation().walk([&](WhereOp w) { wheres.push_back(w); });
    for (WhereOp w : wheres) fuseBackward(w);
    SmallVector<SoftmaxCrossEntropyGradOp> grads;
    getOperation().walk([&](SoftmaxCrossEntropyGradOp g) { grads.push_back(g); });
    for (SoftmaxCrossEntropyGradOp g : grads) fuseLoss(g);
  }

  /// softmax_cross_entropy(x, l) and its gradient softmax_cross_entropy_grad
  /// (x, l, dloss): one op with both results, placed where dloss is defined
  /// and before every reader of the loss.
  void fuseLoss(SoftmaxCrossEntropyGradOp grad) {
    if (grad.getLoss()) return;
    SoftmaxCrossEntropyOp loss;
    for (Operation *user : grad.getLogits().getUsers())
      if (auto l = dyn_cast<SoftmaxCrossEntropyOp>(user))
        if (l.getLabels() == grad.getLabels() && l.getIgnoreIndex() == grad.getIgnoreIndex() &&
            l->getBlock() == grad->getBlock())
          loss = l;
    if (!loss) return;
    Operation *at = loss;
    Value dloss = grad.getDloss();
    if (Operation *def = dloss.getDefiningOp(); def && !def->isBeforeInBlock(loss)) {
      // Later, at the gradient: only if the loss is read after it.
      if (def->getBlock() != grad->getBlock()) return;
      for (Operation *user : loss.getLoss().getUsers())
        if (user->getBlock() != grad->getBlock() || !grad->isBeforeInBlock(user)) return;
      at = grad;
    }
    OpBuilder b(at);
    auto fused = SoftmaxCrossEntropyGradOp::create(
        b, grad.getLoc(), grad.getResult().getType(), loss.getLoss().getType(),
        grad.getLogits(), grad.getLabels(), dloss, grad.getIgnoreIndexAttr());
    // The op marking where the forward ends (wall_clock_breakdown).
    if (loss->hasAttr("ds.loss")) fused->setAttr("ds.loss", loss->getAttr("ds.loss"));
    loss.getLoss().replaceAllUsesWith(fused.getLoss());
    grad.getResult().replaceAllUsesWith(fused.getResult());
    loss->erase();
    grad->erase();
    ++numLoss;
  }

  /// softmax(where(m, fill, x)), softmax(where(m, x, fill)) or
  /// softmax(x + mask): the mask's op read only by the softmax.
  void fuseForward(SoftmaxOp softmax) {
    Value in = softmax.getOperand();
    if (!rowSoftmax(in, softmax.getAxis()) || !in.hasOneUse()) return;
    Operation *def = in.getDefiningOp();
    if (!def || def->getBlock() != softmax->getBlock()) return;
    OpBuilder b(softmax);
    Location loc = softmax.getLoc();
    Value x, mask;
    FloatAttr fill;
    if (auto w = dyn_cast<WhereOp>(def)) {
      // One branch a known scalar, the other the scores at full shape.
      std::optional<double> onTrue = scalar(w.getOnTrue()), onFalse = scalar(w.getOnFalse());
      bool fillOnTrue = onTrue && w.getOnFalse().getType() == in.getType();
      bool fillOnFalse = !fillOnTrue && onFalse && w.getOnTrue().getType() == in.getType();
      if (!fillOnTrue && !fillOnFalse) return;
      x = fillOnTrue ? w.getOnFalse() : w.getOnTrue();
      mask = maskWhere(b, loc, w.getCondition(), /*negate=*/fillOnFalse);
      fill = b.getF64FloatAttr(fillOnTrue ? *onTrue : *onFalse);
    } else if (auto add = dyn_cast<AddOp>(def)) {
      // The scores at full shape plus a smaller (broadcast) f32 mask.
      Value l = add.getLhs(), r = add.getRhs();
      if (l.getType() == in.getType() && r.getType() != in.getType()) x = l, mask = r;
      else if (r.getType() == in.getType() && l.getType() != in.getType()) x = r, mask = l;
      else return;
      if (!tensorType(mask).getElementType().isF32()) return;
    } else {
      return;
    }
    auto fused = MaskedSoftmaxOp::create(b, loc, softmax.getType(), x, mask, fill,
                                         softmax.getAxisAttr());
    softmax.getResult().replaceAllUsesWith(fused.getResult());
    softmax->erase();
    def->erase();
    ++numForward;
  }

  /// where(m, 0, softmax_grad(y, g)) (or where(m, softmax_grad, 0)), the
  /// gradient read only by the where: the mask of the softmax_grad.
  void fuseBackward(WhereOp w) {
    RankedTensorType t = tensorType(w.getResult());
    bool zeroOnTrue = scalar(w.getOnTrue()) == 0.0 && w.getOnFalse().getType() == t;
    bool zeroOnFalse = !zeroOnTrue && scalar(w.getOnFalse()) == 0.0 && w.getOnTrue().getType() == t;
    if (!zeroOnTrue && !zeroOnFalse) return;
    Value g = zeroOnTrue ? w.getOnFalse() : w.getOnTrue();
    auto grad = g.getDefiningOp<SoftmaxGradOp>();
    if (!grad || grad.getMask() || !g.hasOneUse() || grad->getBlock() != w->getBlock() ||
        !rowSoftmax(grad.getSoftmax(), grad.getAxis()))
      return;
    OpBuilder b(w);
    Value mask = maskWhere(b, w.getLoc(), w.getCondition(), /*negate=*/zeroOnFalse);
    auto fused = SoftmaxGradOp::create(b, w.getLoc(), t, grad.getSoftmax(), grad.getDy(), mask,
                                       grad.getAxisAttr());
    w.getResult().replaceAllUsesWith(fused.getResult());
    w->erase();
    grad->erase();
    ++numBackward;
  }
};

} // namespace

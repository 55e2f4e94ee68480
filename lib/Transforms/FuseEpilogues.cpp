//===- FuseEpilogues.cpp - activations into their producer ----------------===//
//
// An activation, and before it a residual add, that only post-process one
// convolution's result are done by the convolution's kernel as it writes
// (ds.conv's `addend`, `clip_min` / `clip_max`: oneDNN post-ops); so is
// the residual add after a layer norm's input gradient (its `addend`). Matching asks traits and values, so the
// pass stays correct as ops are added: the candidate must be the only user
// of the result, and the bound a constant scalar that broadcasts to
// nothing larger than the result.
//
//===----------------------------------------------------------------------===//
#include "dialects/ds/DSOps.h"
#include "ds/Transforms/Passes.h"
#include "mlir/IR/BuiltinOps.h"

#include <cmath>

namespace mlir::ds {
#define GEN_PASS_DEF_FUSEEPILOGUESPASS
#include "ds/Transforms/Passes.h.inc"
} // namespace mlir::ds

using namespace mlir;
using namespace mlir::ds;

namespace {

/// Folds `add` (the only user of `conv`'s result) into a new convolution
/// with it as the addend, when the other operand has the result's type and
/// nothing (no clamp, no addend) comes after the product yet; the new
/// convolution, or null.
ConvOp fuseResidual(ConvOp conv, AddOp add) {
  Value other = add.getLhs() == conv.getResult() ? add.getRhs() : add.getLhs();
  if (other == conv.getResult() || other.getType() != conv.getType() ||
      add.getType() != conv.getType() || conv.getAddend() || conv.getClipMinAttr() ||
      conv.getClipMaxAttr())
    return nullptr;
  // The addend must be defined before the convolution that now reads it.
  if (Operation *def = other.getDefiningOp(); def && !def->isBeforeInBlock(conv)) {
    if (def->getBlock() != conv->getBlock()) return nullptr;
    conv->moveAfter(def);
  }
  OpBuilder b(conv);
  auto fused = ConvOp::create(b, conv.getLoc(), conv.getType(), conv.getInput(), conv.getWeight(),
                              conv.getBias(), other, conv.getStridesAttr(),
                              conv.getDilationsAttr(), conv.getPadsAttr(), conv.getGroupAttr(),
                              FloatAttr(), FloatAttr(), conv.getChannelsLastAttr());
  add.getResult().replaceAllUsesWith(fused.getResult());
  add->erase();
  conv->erase();
  return fused;
}

/// Folds `user` (the only user of `conv`'s result) into `conv` when it is a
/// clamp; true when it did.
bool fuseInto(ConvOp conv, Operation *user) {
  if (user->getNumResults() != 1 || user->getResult(0).getType() != conv.getType()) return false;
  double lo = conv.getClipMinAttr() ? conv.getClipMinAttr().getValueAsDouble() : -INFINITY;
  double hi = conv.getClipMaxAttr() ? conv.getClipMaxAttr().getValueAsDouble() : INFINITY;
  if (isa<ReluOp>(user)) {
    lo = std::max(lo, 0.0);
  } else if (isa<MaxOp, MinOp>(user)) {
    Value other = user->getOperand(0) == conv.getResult() ? user->getOperand(1)
                                                          : user->getOperand(0);
    std::optional<double> bound = knownFloatSplat(other);
    if (!bound) return false;
    if (isa<MaxOp>(user)) lo = std::max(lo, *bound);
    else hi = std::min(hi, *bound);
  } else {
    return false;
  }
  if (lo > hi) return false; // min/max in that order are not one clamp
  Builder b(conv.getContext());
  if (lo != -INFINITY) conv.setClipMinAttr(b.getF64FloatAttr(lo));
  if (hi != INFINITY) conv.setClipMaxAttr(b.getF64FloatAttr(hi));
  user->getResult(0).replaceAllUsesWith(conv.getResult());
  user->erase();
  return true;
}

/// Folds `add` (the only user of `grad`'s input gradient) into a new
/// layer_norm_grad with the add's other operand as its addend: the
/// residual stream's gradient plus the norm's, summed as the kernel writes.
/// The new op goes where all its operands are defined and before every
/// user of its results; false when no such place exists.
bool fuseResidual(LayerNormGradOp grad, AddOp add) {
  Value dx = grad.getDOperand();
  Value other = add.getLhs() == dx ? add.getRhs() : add.getLhs();
  if (other == dx || other.getType() != dx.getType() || add.getType() != dx.getType() ||
      grad.getAddend())
    return false;
  Operation *at = grad;
  if (Operation *def = other.getDefiningOp(); def && !def->isBeforeInBlock(grad)) {
    // Later, at the add: only if d_scale / d_bias are read after it.
    if (def->getBlock() != grad->getBlock() || add->getBlock() != grad->getBlock())
      return false;
    for (Value r : {grad.getDScale(), grad.getDBias()})
      for (Operation *user : r.getUsers())
        if (user->getBlock() != add->getBlock() || !add->isBeforeInBlock(user)) return false;
    at = add;
  }
  OpBuilder b(at);
  auto fused = LayerNormGradOp::create(b, grad.getLoc(), grad->getResultTypes(),
                                       grad.getOperand(), grad.getScale(), grad.getDy(), other,
                                       grad.getAxisAttr(), grad.getEpsilonAttr());
  add.getResult().replaceAllUsesWith(fused.getDOperand());
  grad.getDScale().replaceAllUsesWith(fused.getDScale());
  grad.getDBias().replaceAllUsesWith(fused.getDBias());
  add->erase();
  grad->erase();
  return true;
}

struct FuseEpiloguesPass : public mlir::ds::impl::FuseEpiloguesPassBase<FuseEpiloguesPass> {
  void runOnOperation() override {
    SmallVector<LayerNormGradOp> norms;
    getOperation().walk([&](LayerNormGradOp g) { norms.push_back(g); });
    for (LayerNormGradOp grad : norms)
      if (grad.getDOperand().hasOneUse())
        if (auto add = dyn_cast<AddOp>(*grad.getDOperand().getUsers().begin()))
          if (fuseResidual(grad, add)) ++numNormResiduals;
    SmallVector<ConvOp> convs;
    getOperation().walk([&](ConvOp c) { convs.push_back(c); });
    for (ConvOp conv : convs) {
      // A residual add first (it comes before the activation: ResNet's
      // relu(conv(x) + identity)), then clamps.
      if (conv.getResult().hasOneUse())
        if (auto add = dyn_cast<AddOp>(*conv.getResult().getUsers().begin()))
          if (ConvOp fused = fuseResidual(conv, add)) {
            conv = fused;
            ++numResiduals;
          }
      while (conv.getResult().hasOneUse() && fuseInto(conv, *conv.getResult().getUsers().begin()))
        ++numFused;
    }
  }
};

} // namespace

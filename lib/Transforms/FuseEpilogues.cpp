//===- FuseEpilogues.cpp - activations into their producer ----------------===//
//
// The first of the fusions: an activation that only post-processes one
// convolution's result is done by the convolution's kernel as it writes
// (ds.conv's clip_min / clip_max). Matching asks traits and values, so the
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

struct FuseEpiloguesPass : public mlir::ds::impl::FuseEpiloguesPassBase<FuseEpiloguesPass> {
  void runOnOperation() override {
    SmallVector<ConvOp> convs;
    getOperation().walk([&](ConvOp c) { convs.push_back(c); });
    for (ConvOp conv : convs)
      while (conv.getResult().hasOneUse() && fuseInto(conv, *conv.getResult().getUsers().begin()))
        ++numFused;
  }
};

} // namespace

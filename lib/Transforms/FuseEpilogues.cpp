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
      conv.getClipMaxAttr() || conv.getActivation() != Activation::None)
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
                              FloatAttr(), FloatAttr(), conv.getChannelsLastAttr(),
                              conv.getActivationAttr());
  add.getResult().replaceAllUsesWith(fused.getResult());
  add->erase();
  conv->erase();
  return fused;
}

/// The bounds `op` puts on its operand `v` when it is a ReLU or a max/min
/// with a constant scalar, keeping v's type; nothing otherwise.
std::optional<std::pair<double, double>> boundsOf(Operation *op, Value v) {
  if (op->getNumResults() != 1 || op->getResult(0).getType() != v.getType()) return std::nullopt;
  if (isa<ReluOp>(op)) return std::pair{0.0, double(INFINITY)};
  if (!isa<MaxOp, MinOp>(op)) return std::nullopt;
  Value other = op->getOperand(0) == v ? op->getOperand(1) : op->getOperand(0);
  std::optional<double> bound = knownFloatSplat(other);
  if (!bound || other == v) return std::nullopt;
  return isa<MaxOp>(op) ? std::pair{*bound, double(INFINITY)} : std::pair{-double(INFINITY), *bound};
}

/// Folds `user` (the only user of `conv`'s result) into `conv` when it is a
/// clamp, with the max after it when it bounds only from above (min then
/// max); true when it did.
bool fuseInto(ConvOp conv, Operation *user) {
  if (conv.getActivation() != Activation::None) return false;
  auto bounds = boundsOf(user, conv.getResult());
  if (!bounds) return false;
  double lo = conv.getClipMinAttr() ? conv.getClipMinAttr().getValueAsDouble() : -INFINITY;
  double hi = conv.getClipMaxAttr() ? conv.getClipMaxAttr().getValueAsDouble() : INFINITY;
  lo = std::max(lo, bounds->first);
  hi = std::min(hi, bounds->second);
  SmallVector<Operation *> folded{user};
  // A NaN reaching a fused clamp becomes its lower bound (oneDNN's max, as
  // onnxruntime's fused activations); with none it would become -inf, so a
  // clamp from above alone stays an op of its own.
  if (lo == -INFINITY) {
    Value r = user->getResult(0);
    if (!r.hasOneUse()) return false;
    Operation *next = *r.getUsers().begin();
    auto more = boundsOf(next, r);
    if (!more || more->first == -INFINITY) return false;
    lo = more->first;
    hi = std::min(hi, more->second);
    folded.push_back(next);
  }
  if (lo > hi) return false; // max(min(x, hi), lo) with lo above hi is lo: no clamp
  Builder b(conv.getContext());
  conv.setClipMinAttr(b.getF64FloatAttr(lo));
  if (hi != INFINITY) conv.setClipMaxAttr(b.getF64FloatAttr(hi));
  folded.back()->getResult(0).replaceAllUsesWith(conv.getResult());
  for (Operation *op : llvm::reverse(folded)) op->erase();
  return true;
}

/// Whether `v` is a constant splat of exactly `want` in f32.
bool isSplat(Value v, float want) {
  std::optional<double> got = knownFloatSplat(v);
  return got && static_cast<float>(*got) == want;
}

/// The single user of `v` of type Op, or null.
template <typename Op> Op onlyUser(Value v) {
  return v.hasOneUse() ? dyn_cast<Op>(*v.getUsers().begin()) : Op();
}

/// The importer's HardSwish of `x`, y = x * where(t <= 0, 0, where(t >= 1,
/// 1, t)) with t = x * (1/6) + 1/2, when its ops read nothing else and
/// only y is read outside: the ops from the first to y, or empty.
SmallVector<Operation *> matchHardSwish(Value x) {
  auto type = x.getType();
  if (!llvm::hasNItems(x.getUsers(), 2)) return {};
  MulOp scale, product;
  for (Operation *u : x.getUsers()) {
    auto mul = dyn_cast<MulOp>(u);
    if (!mul || mul.getType() != type) return {};
    Value other = mul.getLhs() == x ? mul.getRhs() : mul.getLhs();
    if (other != x && isSplat(other, 1.0f / 6.0f)) scale = mul;
    else product = mul;
  }
  if (!scale || !product) return {};
  auto shift = onlyUser<AddOp>(scale.getResult());
  if (!shift || shift.getType() != type) return {};
  Value t = shift.getResult();
  if (!isSplat(shift.getLhs() == scale.getResult() ? shift.getRhs() : shift.getLhs(), 0.5f))
    return {};
  // t's users: t <= 0, t >= 1 and where(t >= 1, 1, t).
  LessEqualOp low;
  GreaterEqualOp high;
  WhereOp upper;
  for (Operation *u : t.getUsers()) {
    if (auto le = dyn_cast<LessEqualOp>(u); le && le.getLhs() == t && isSplat(le.getRhs(), 0.0f))
      low = le;
    else if (auto ge = dyn_cast<GreaterEqualOp>(u);
             ge && ge.getLhs() == t && isSplat(ge.getRhs(), 1.0f))
      high = ge;
    else if (auto w = dyn_cast<WhereOp>(u); w && w.getOperand(2) == t)
      upper = w;
    else
      return {};
  }
  if (!low || !high || !upper || !llvm::hasNItems(t.getUsers(), 3) ||
      upper.getOperand(0) != high.getResult() || !isSplat(upper.getOperand(1), 1.0f) ||
      !high.getResult().hasOneUse() || !low.getResult().hasOneUse() ||
      upper.getType() != type)
    return {};
  auto gate = onlyUser<WhereOp>(upper.getResult());
  if (!gate || gate.getOperand(0) != low.getResult() || gate.getOperand(2) != upper.getResult() ||
      !isSplat(gate.getOperand(1), 0.0f) || gate.getType() != type ||
      !gate.getResult().hasOneUse() || *gate.getResult().getUsers().begin() != product)
    return {};
  return {scale, shift, low, high, upper, gate, product};
}

/// Makes a HardSwish of `conv`'s result (and nothing else reading it) the
/// convolution's activation; true when it did.
bool fuseHardSwish(ConvOp conv) {
  if (conv.getActivation() != Activation::None || !conv.getType().getElementType().isF32())
    return false;
  SmallVector<Operation *> ops = matchHardSwish(conv.getResult());
  if (ops.empty()) return false;
  Operation *product = ops.back();
  conv.setActivation(Activation::HardSwish);
  product->getResult(0).replaceAllUsesWith(conv.getResult());
  for (Operation *op : llvm::reverse(ops)) op->erase();
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
      if (fuseHardSwish(conv)) ++numFused;
    }
  }
};

} // namespace

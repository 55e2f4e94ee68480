//===- ConvChannelsLast.cpp - convolutions in [N, spatial..., C] ----------===//
//
// oneDNN's CPU convolution kernels compute in channels-last layouts; a plan
// whose activations are [N, C, H, W] pays a reorder into that layout before
// every convolution and one back after it (MobileNetV2 spent more time in
// those reorders than in its 52 convolutions). This pass gives inference
// convolutions `channels_last`, with explicit transposes around them, then
// moves the transposes down through elementwise ops (a residual add of two
// channels-last values is a channels-last add) and poolings until they meet the
// transposes of the next convolution and cancel (TransposeOp's folder
// composes them). What remains are transposes where the network enters and
// leaves the convolutions: the input image, a pooling, the classifier.
//
//===----------------------------------------------------------------------===//
#include "dialects/ds/DSOps.h"
#include "ds/Transforms/Passes.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"

namespace mlir::ds {
#define GEN_PASS_DEF_CONVCHANNELSLASTPASS
#include "ds/Transforms/Passes.h.inc"
} // namespace mlir::ds

using namespace mlir;
using namespace mlir::ds;

namespace {

/// [0, 2, ..., r-1, 1]: channels-first to channels-last.
SmallVector<int64_t> toLast(int64_t rank) {
  SmallVector<int64_t> p{0};
  for (int64_t i = 2; i < rank; ++i) p.push_back(i);
  p.push_back(1);
  return p;
}
/// [0, r-1, 1, ..., r-2]: channels-last back to channels-first.
SmallVector<int64_t> toFirst(int64_t rank) {
  SmallVector<int64_t> p{0, rank - 1};
  for (int64_t i = 1; i < rank - 1; ++i) p.push_back(i);
  return p;
}

Value transpose(OpBuilder &b, Location loc, Value v, ArrayRef<int64_t> perm) {
  auto t = cast<RankedTensorType>(v.getType());
  SmallVector<int64_t> shape;
  for (int64_t p : perm) shape.push_back(t.getDimSize(p));
  return TransposeOp::create(b, loc, RankedTensorType::get(shape, t.getElementType()), v,
                             b.getDenseI64ArrayAttr(perm));
}

/// An inference convolution: f32, 1 to 3 spatial dimensions, weights known
/// before the run (a training forward's weights are loaded state).
bool eligible(ConvOp conv) {
  Operation *w = conv.getWeight().getDefiningOp();
  int64_t rank = conv.getInput().getType().getRank();
  return !conv.getChannelsLast() && rank >= 3 && rank <= 5 &&
         conv.getInput().getType().getElementType().isF32() && w &&
         isa<ConstantOp, ParameterOp>(w);
}

struct ConvChannelsLastPass
    : public mlir::ds::impl::ConvChannelsLastPassBase<ConvChannelsLastPass> {
  void runOnOperation() override {
    SmallVector<ConvOp> convs;
    getOperation().walk([&](ConvOp c) {
      if (eligible(c)) convs.push_back(c);
    });
    for (ConvOp conv : convs) toChannelsLast(conv);
    if (convs.empty()) return;
    // Sink transposes through elementwise users until nothing moves.
    bool changed = true;
    while (changed) {
      changed = false;
      SmallVector<Operation *> candidates;
      getOperation().walk([&](Operation *op) {
        if (op->hasTrait<OpTrait::ds::Elementwise>() && !isa<FusedElementwiseOp>(op) &&
            op->getNumResults() == 1)
          candidates.push_back(op);
      });
      for (Operation *op : candidates) changed |= sinkThrough(op);
      SmallVector<PoolOp> pools;
      getOperation().walk([&](PoolOp p) { pools.push_back(p); });
      for (PoolOp p : pools) changed |= sinkThroughPool(p);
    }
    // Compose and cancel the transposes that met (TransposeOp's folder),
    // then drop dead ones.
    SmallVector<TransposeOp> transposes;
    getOperation().walk([&](TransposeOp t) { transposes.push_back(t); });
    for (TransposeOp t : transposes) {
      SmallVector<OpFoldResult> folded;
      if (succeeded(t->fold(folded)) && folded.size() == 1)
        if (auto v = dyn_cast<Value>(folded[0]); v && v != t.getResult())
          t.getResult().replaceAllUsesWith(v);
    }
    for (TransposeOp t : llvm::reverse(transposes))
      if (t->use_empty()) t->erase();
  }

  void toChannelsLast(ConvOp conv) {
    OpBuilder b(conv);
    int64_t rank = conv.getInput().getType().getRank();
    Value x = transpose(b, conv.getLoc(), conv.getInput(), toLast(rank));
    auto resultType = conv.getType();
    SmallVector<int64_t> shape;
    for (int64_t p : toLast(rank)) shape.push_back(resultType.getDimSize(p));
    Operation *cl = b.clone(*conv);
    cl->setOperand(0, x);
    // A residual folded in already is read in the result's layout.
    if (Value addend = conv.getAddend())
      cl->setOperand(cl->getNumOperands() - 1, transpose(b, conv.getLoc(), addend, toLast(rank)));
    cl->getResult(0).setType(RankedTensorType::get(shape, resultType.getElementType()));
    cast<ConvOp>(cl).setChannelsLast(true);
    Value back = transpose(b, conv.getLoc(), cl->getResult(0), toFirst(rank));
    conv.getResult().replaceAllUsesWith(back);
    conv.erase();
    ++numConvs;
  }

  /// pool(transpose(x, to-first)) -> transpose(pool{channels_last}(x), to-first):
  /// a pooling between channels-last convolutions (ResNet's stem) pools
  /// channels-last instead of breaking the chain.
  bool sinkThroughPool(PoolOp pool) {
    auto tr = pool.getInput().getDefiningOp<TransposeOp>();
    auto type = pool.getInput().getType();
    if (pool.getChannelsLast() || !tr || !type.getElementType().isF32() ||
        tr.getPermutation() != ArrayRef<int64_t>(toFirst(type.getRank())))
      return false;
    OpBuilder b(pool);
    Operation *moved = b.clone(*pool);
    moved->setOperand(0, tr.getOperand());
    SmallVector<int64_t> shape;
    for (int64_t p : toLast(type.getRank())) shape.push_back(pool.getType().getDimSize(p));
    moved->getResult(0).setType(RankedTensorType::get(shape, pool.getType().getElementType()));
    cast<PoolOp>(moved).setChannelsLast(true);
    pool.getResult().replaceAllUsesWith(
        transpose(b, pool.getLoc(), moved->getResult(0), toFirst(type.getRank())));
    pool.erase();
    return true;
  }

  /// op(transpose(a, p), transpose(b, p), scalar) -> transpose(op(a, b, scalar), p)
  /// when every operand that is not a scalar is a transpose by the same p of
  /// a value with op's (unbroadcast) shape.
  bool sinkThrough(Operation *op) {
    auto resultType = cast<RankedTensorType>(op->getResult(0).getType());
    std::optional<ArrayRef<int64_t>> perm;
    ArrayRef<int64_t> innerShape;
    SmallVector<Value> operands;
    for (Value v : op->getOperands()) {
      auto t = cast<RankedTensorType>(v.getType());
      if (t.getRank() == 0) {
        operands.push_back(v);
        continue;
      }
      auto tr = v.getDefiningOp<TransposeOp>();
      if (!tr || t.getShape() != resultType.getShape()) return false;
      if (perm && *perm != tr.getPermutation()) return false;
      perm = tr.getPermutation();
      innerShape = tr.getOperand().getType().getShape();
      operands.push_back(tr.getOperand());
    }
    if (!perm) return false;
    OpBuilder b(op);
    Operation *moved = b.clone(*op);
    moved->setOperands(operands);
    moved->getResult(0).setType(RankedTensorType::get(innerShape, resultType.getElementType()));
    op->getResult(0).replaceAllUsesWith(transpose(b, op->getLoc(), moved->getResult(0), *perm));
    op->erase();
    return true;
  }
};

} // namespace

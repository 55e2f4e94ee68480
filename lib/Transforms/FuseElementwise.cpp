//===- FuseElementwise.cpp - elementwise chains into one op ---------------===//
//
// Elementwise ops are memory-bound: each reads and writes whole tensors for
// a few flops per element. A chain of them (GELU's tanh form is 9 ops,
// attention masks are is_nan/where pairs) becomes one ds.fused_elementwise
// whose kernel keeps the intermediates in cache-sized tiles.
//
// Grouping goes from a chain's last op up through its producers. A
// producer joins when it is a supported elementwise op on f32/i1 values,
// its result has the chain's shape (a smaller, broadcast result would be
// recomputed per element; it stays outside as an input), and every user of
// its result is already in the chain, so nothing outside needs the value.
// Membership only grows, so the grouping reaches a fixed point.
//
//===----------------------------------------------------------------------===//
#include "dialects/ds/DSOps.h"
#include "ds/Transforms/Passes.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/SetVector.h"

namespace mlir::ds {
#define GEN_PASS_DEF_FUSEELEMENTWISEPASS
#include "ds/Transforms/Passes.h.inc"
} // namespace mlir::ds

using namespace mlir;
using namespace mlir::ds;

namespace {

/// Element types the fused kernel computes in (i1 as 0/1).
bool isFusedElementType(Type t) {
  Type e = cast<RankedTensorType>(t).getElementType();
  return e.isF32() || e.isInteger(1);
}

/// Ops the CPU kernel's element functions cover (runtime/cpu/
/// FusedElementwiseKernel.cpp), on f32 and i1 values only.
bool isFusible(Operation *op) {
  if (!isa<AddOp, SubOp, MulOp, DivOp, PowOp, MinOp, MaxOp, EqualOp, LessOp, GreaterOp,
           LessEqualOp, GreaterEqualOp, AndOp, OrOp, XorOp, NotOp, WhereOp, CastOp, IsNanOp,
           IsInfOp, GeluOp, SqrtOp, ReciprocalOp, ExpOp, LogOp, ErfOp, TanhOp, SigmoidOp, ReluOp,
           NegOp, AbsOp, SinOp, CosOp, TanOp, AsinOp, AcosOp, AtanOp, SinhOp, CoshOp, AsinhOp,
           AcoshOp, AtanhOp, FloorOp, CeilOp, RoundOp, SignOp, SoftplusOp, FakeQuantizeOp>(op))
    return false;
  return llvm::all_of(op->getOperandTypes(), isFusedElementType) &&
         llvm::all_of(op->getResultTypes(), isFusedElementType);
}

struct FuseElementwisePass
    : public mlir::ds::impl::FuseElementwisePassBase<FuseElementwisePass> {
  using Base::Base;

  void runOnOperation() override {
    SmallVector<Block *> blocks;
    getOperation().walk([&](func::FuncOp f) {
      for (Block &b : f.getBody()) blocks.push_back(&b);
    });
    for (Block *b : blocks) fuseBlock(*b);
  }

  /// Chains in `block`, last ops first so each chain is grown from its end.
  void fuseBlock(Block &block) {
    SmallVector<Operation *> ops;
    for (Operation &op : llvm::reverse(block)) ops.push_back(&op);
    llvm::DenseSet<Operation *> done;
    for (Operation *root : ops) {
      if (done.contains(root) || !isFusible(root)) continue;
      llvm::SetVector<Operation *> chain = grow(root);
      for (Operation *op : chain) done.insert(op);
      if (chain.size() >= 2) replace(root, chain);
    }
  }

  /// The chain ending at `root`.
  llvm::SetVector<Operation *> grow(Operation *root) {
    llvm::SetVector<Operation *> chain;
    chain.insert(root);
    Type shape = root->getResult(0).getType();
    ArrayRef<int64_t> rootShape = cast<RankedTensorType>(shape).getShape();
    bool grew = true;
    while (grew && static_cast<int64_t>(chain.size()) < maxOps) {
      grew = false;
      for (size_t i = 0; i < chain.size() && static_cast<int64_t>(chain.size()) < maxOps; ++i) {
        for (Value v : chain[i]->getOperands()) {
          Operation *def = v.getDefiningOp();
          if (!def || chain.contains(def) || def->getBlock() != root->getBlock() ||
              !isFusible(def) ||
              cast<RankedTensorType>(v.getType()).getShape() != rootShape ||
              !llvm::all_of(v.getUsers(), [&](Operation *u) { return chain.contains(u); }))
            continue;
          chain.insert(def);
          if (countInputs(chain) > maxInputs) {
            chain.pop_back();
            continue;
          }
          grew = true;
        }
      }
    }
    return chain;
  }

  /// Values the chain reads from outside it, in first-use order.
  static llvm::SetVector<Value> inputsOf(ArrayRef<Operation *> ops) {
    llvm::SmallPtrSet<Operation *, 16> in(ops.begin(), ops.end());
    llvm::SetVector<Value> inputs;
    for (Operation *op : ops)
      for (Value v : op->getOperands())
        if (!in.contains(v.getDefiningOp())) inputs.insert(v);
    return inputs;
  }
  static int64_t countInputs(const llvm::SetVector<Operation *> &chain) {
    return static_cast<int64_t>(inputsOf(chain.getArrayRef()).size());
  }

  /// Replaces the chain by one fused op at the root's place.
  void replace(Operation *root, const llvm::SetVector<Operation *> &chain) {
    SmallVector<Operation *> order(chain.begin(), chain.end());
    llvm::sort(order, [](Operation *a, Operation *b) { return a->isBeforeInBlock(b); });
    llvm::SetVector<Value> inputs = inputsOf(order);

    OpBuilder b(root);
    auto fused = FusedElementwiseOp::create(b, root->getLoc(), root->getResult(0).getType(),
                                            inputs.getArrayRef());
    Block *body = b.createBlock(&fused.getBody());
    IRMapping map;
    auto scalar = [](Value v) {
      return RankedTensorType::get({}, cast<RankedTensorType>(v.getType()).getElementType());
    };
    for (Value v : inputs) map.map(v, body->addArgument(scalar(v), v.getLoc()));
    for (Operation *op : order) {
      OperationState state(op->getLoc(), op->getName());
      for (Value v : op->getOperands()) state.operands.push_back(map.lookup(v));
      state.types.push_back(scalar(op->getResult(0)));
      state.attributes = op->getAttrDictionary();
      map.map(op->getResult(0), b.create(state)->getResult(0));
    }
    YieldOp::create(b, root->getLoc(), map.lookup(root->getResult(0)));

    root->getResult(0).replaceAllUsesWith(fused.getResult());
    for (Operation *op : llvm::reverse(order)) op->erase();
    ++numChains;
    numOpsFused += order.size();
  }
};

} // namespace

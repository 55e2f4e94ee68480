//===- FuseOptimizer.cpp - the optimizer step in fewer passes over memory -===//
//
// The optimizer step ds-build-train-step (and ds-data-parallel, per block)
// builds reads every gradient three times besides the update itself: a
// square, a reduction to its share of the norm, and after the update a
// zero fill copied into the accumulator. Fused: one ds.sum_squares reads
// all gradients once for the norm, the update kernel reads each once, and
// each accumulator is zeroed by a fill written straight into it (no copy
// of a shared zero tensor).
//
//===----------------------------------------------------------------------===//
#include "dialects/ds/DSOps.h"
#include "ds/Transforms/Passes.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"

namespace mlir::ds {
#define GEN_PASS_DEF_FUSEOPTIMIZERPASS
#include "ds/Transforms/Passes.h.inc"
} // namespace mlir::ds

using namespace mlir;
using namespace mlir::ds;

namespace {

RankedTensorType tensorType(Value v) { return cast<RankedTensorType>(v.getType()); }

/// x when `v` is sum(x * x) over every axis of an f32 x (a rank-0 square
/// of a scalar too), the square read only by the reduction; else null.
/// Records the ops making it.
Value squaredTerm(Value v, SmallVectorImpl<Operation *> &ops) {
  Operation *def = v.getDefiningOp();
  Value sq = v;
  if (auto r = dyn_cast_or_null<ReduceSumOp>(def)) {
    if (tensorType(r.getResult()).getNumElements() != 1 ||
        static_cast<int64_t>(r.getAxes().size()) != tensorType(r.getOperand()).getRank() ||
        !r.getOperand().hasOneUse())
      return nullptr;
    sq = r.getOperand();
    ops.push_back(r);
  } else if (tensorType(v).getRank() != 0) {
    return nullptr;
  }
  auto mul = sq.getDefiningOp<MulOp>();
  if (!mul || mul.getLhs() != mul.getRhs() || !tensorType(mul.getLhs()).getElementType().isF32())
    return nullptr;
  ops.push_back(mul);
  return mul.getLhs();
}

/// Gathers the squared terms of the add tree rooted at `v` (each inner add
/// read only by its parent); false when a leaf is something else.
bool gatherTerms(Value v, bool root, SmallVectorImpl<Value> &terms,
                 SmallVectorImpl<Operation *> &ops) {
  if (!root && !v.hasOneUse()) return false;
  if (auto add = v.getDefiningOp<AddOp>(); add && tensorType(v).getRank() == 0) {
    ops.push_back(add);
    return gatherTerms(add.getLhs(), false, terms, ops) &&
           gatherTerms(add.getRhs(), false, terms, ops);
  }
  Value x = squaredTerm(v, ops);
  if (!x) return false;
  terms.push_back(x);
  return true;
}

struct FuseOptimizerPass : public mlir::ds::impl::FuseOptimizerPassBase<FuseOptimizerPass> {
  void runOnOperation() override {
    // Sums of squares: largest trees first (their roots come last).
    SmallVector<Operation *> candidates;
    getOperation().walk([&](Operation *op) {
      if (isa<AddOp, ReduceSumOp>(op) && tensorType(op->getResult(0)).getRank() == 0 &&
          tensorType(op->getResult(0)).getElementType().isF32())
        candidates.push_back(op);
    });
    llvm::DenseSet<Operation *> erased;
    for (Operation *root : llvm::reverse(candidates)) {
      if (erased.contains(root)) continue;
      SmallVector<Value> terms;
      SmallVector<Operation *> ops;
      if (!gatherTerms(root->getResult(0), true, terms, ops)) continue;
      OpBuilder b(root);
      Value sum = SumSquaresOp::create(b, root->getLoc(), root->getResult(0).getType(), terms);
      root->getResult(0).replaceAllUsesWith(sum);
      // Users first: the tree was gathered root to leaves.
      for (Operation *op : ops) {
        erased.insert(op);
        op->erase();
      }
      ++numNorms;
      numTerms += terms.size();
    }
    // Zeroing: a fill shared by several stores becomes one fill per store,
    // which ds-plan-memory writes into the stored global's buffer.
    SmallVector<FillOp> fills;
    getOperation().walk([&](FillOp f) { fills.push_back(f); });
    for (FillOp f : fills) {
      SmallVector<OpOperand *> stores;
      for (OpOperand &use : f.getResult().getUses())
        if (isa<ml_program::GlobalStoreOp>(use.getOwner())) stores.push_back(&use);
      if (f.getResult().hasOneUse()) continue;
      for (OpOperand *use : stores) {
        OpBuilder b(use->getOwner());
        use->set(b.clone(*f)->getResult(0));
        ++numFills;
      }
      if (f.getResult().use_empty()) f.erase();
    }
  }
};

} // namespace

//===- Autodiff.cpp - reverse-mode differentiation of ds IR ---------------===//
//
// The reverse sweep: which ops carry adjoints, in which order, and how the
// adjoints of a value's uses add up. The gradient rule of each op is the
// op's own (GradientOpInterface, implemented per op family in
// dialects/ds/ops/).
//
//===----------------------------------------------------------------------===//
#include "ds/Transforms/Autodiff.h"

#include "dialects/ds/DSOps.h"
#include "dialects/ds/GradientBuilder.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/ADT/SetVector.h"

using namespace mlir;
using namespace mlir::ds;

FailureOr<SmallVector<Value>> mlir::ds::differentiate(OpBuilder &b, Value loss, Value seed,
                                                      ArrayRef<Value> wrt) {
  // Values that depend on a differentiated value ...
  llvm::SetVector<Value> forward(wrt.begin(), wrt.end());
  Block *block = loss.getParentBlock();
  for (Operation &op : *block)
    if (llvm::any_of(op.getOperands(), [&](Value v) { return forward.contains(v); }))
      for (Value r : op.getResults()) forward.insert(r);
  // ... and that the loss depends on: only these carry adjoints.
  llvm::DenseSet<Value> needed;
  needed.insert(loss);
  SmallVector<Operation *> order;
  for (Operation &op : llvm::reverse(*block)) {
    if (!llvm::any_of(op.getResults(), [&](Value r) { return needed.contains(r); })) continue;
    // Leaves (the ops defining `wrt` values) have no differentiated operand.
    if (!llvm::any_of(op.getOperands(), [&](Value v) { return forward.contains(v); })) continue;
    order.push_back(&op);
    for (Value v : op.getOperands())
      if (forward.contains(v)) needed.insert(v);
  }

  llvm::DenseMap<Value, Value> adjoint;
  adjoint[loss] = seed;
  for (Operation *op : order) {
    SmallVector<Value> dres;
    bool any = false;
    for (Value r : op->getResults()) {
      Value a = adjoint.lookup(r);
      dres.push_back(a);
      any |= static_cast<bool>(a);
    }
    if (!any) continue;
    auto rule = dyn_cast<GradientOpInterface>(op);
    if (!rule)
      return op->emitError("no gradient rule for '")
             << op->getName() << "' on the path from the parameters to the loss";
    GradientBuilder gb(b, op->getLoc());
    SmallVector<Value> d(op->getNumOperands());
    if (failed(rule.buildGradients(gb, dres, d))) return failure();
    for (auto [operand, g] : llvm::zip(op->getOperands(), d)) {
      if (!g || !needed.contains(operand)) continue;
      Value &slot = adjoint[operand];
      slot = slot ? Value(AddOp::create(b, op->getLoc(), slot, g)) : g;
    }
  }
  SmallVector<Value> grads;
  for (Value v : wrt) grads.push_back(adjoint.lookup(v));
  return grads;
}

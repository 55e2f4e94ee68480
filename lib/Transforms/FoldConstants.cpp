//===- FoldConstants.cpp - fold ops on constants with the CPU kernels -----===//
#include "dialects/ds/DSOps.h"
#include "ds/Plan/HostEvaluator.h"
#include "ds/Plan/KernelBridge.h"
#include "ds/Transforms/Passes.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"

namespace mlir::ds {
#define GEN_PASS_DEF_FOLDCONSTANTSPASS
#include "ds/Transforms/Passes.h.inc"
} // namespace mlir::ds

using namespace mlir;
using namespace mlir::ds;

std::optional<SmallVector<Value>> mlir::ds::tryFoldWithKernels(Operation *op,
                                                               int64_t maxElements) {
  // Ops without operands (ds.fill) stay kernels: folding would store their
  // result in the plan.
  // Collectives depend on the rank that runs them: never folded.
  if (isa<ConstantOp, ParameterOp>(op) || !isa_and_nonnull<DSDialect>(op->getDialect()) ||
      isCollective(op) ||
      op->getNumResults() == 0 || op->getNumOperands() == 0)
    return std::nullopt;
  SmallVector<Attribute> values;
  for (Value v : op->getOperands()) {
    auto c = v.getDefiningOp<ConstantOp>();
    if (!c)
      return std::nullopt;
    values.push_back(c.getValue());
  }
  int64_t elements = 0;
  for (Value r : op->getResults())
    elements += cast<RankedTensorType>(r.getType()).getNumElements();
  if (elements > maxElements)
    return std::nullopt;
  // A failed evaluation (say, an index out of range) is left for ds-run to
  // report with its run-time message; folding is only an optimization.
  ScopedDiagnosticHandler silence(op->getContext(), [](Diagnostic &) { return success(); });
  FailureOr<SmallVector<DenseElementsAttr>> results = evaluateOnHost(op, values);
  if (failed(results))
    return std::nullopt;
  OpBuilder b(op);
  SmallVector<Value> constants;
  for (auto [r, attr] : llvm::zip(op->getResults(), *results)) {
    constants.push_back(ConstantOp::create(b, op->getLoc(), attr).getResult());
    r.replaceAllUsesWith(constants.back());
  }
  op->erase();
  return constants;
}

namespace {
class FoldConstantsPass : public mlir::ds::impl::FoldConstantsPassBase<FoldConstantsPass> {
public:
  using FoldConstantsPassBase::FoldConstantsPassBase;
  void runOnOperation() override {
    SmallVector<Operation *> ops;
    getOperation().walk([&](Operation *op) { ops.push_back(op); });
    // Program order: each fold exposes its users to the next ones.
    for (Operation *op : ops)
      if (tryFoldWithKernels(op, maxElements))
        ++numFolded;
    // Constants nobody reads any more.
    SmallVector<Operation *> dead;
    getOperation().walk([&](ConstantOp c) {
      if (c->use_empty()) dead.push_back(c);
    });
    for (Operation *op : dead) op->erase();
  }
};
} // namespace

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

/// Ops that only rearrange a weight's elements (a gate reorder written as
/// slices and a concat, a transposed matrix).
bool rearrangesWeights(Operation *op) { return isa<SliceOp, ConcatOp, TransposeOp>(op); }

/// A weight rearranged before the run: `op` rearranges constants or
/// parameters each of which only such ops read, so once they are folded the
/// inputs die and the plan holds the rearranged bytes instead, however
/// large (an LSTM's gate-reordered matrices; the products then see a
/// constant weight they can pack at load). Inference parameters are
/// constants of the plan; a training step reads its trained parameters as
/// globals, which this never touches.
bool foldRearrangedWeight(Operation *op) {
  if (!rearrangesWeights(op) || op->getNumResults() != 1) return false;
  int64_t in = 0;
  SmallVector<Attribute> values;
  for (Value v : op->getOperands()) {
    Operation *def = v.getDefiningOp();
    if (!def || !isa<ConstantOp, ParameterOp>(def) ||
        !llvm::all_of(v.getUsers(), rearrangesWeights))
      return false;
    in += cast<RankedTensorType>(v.getType()).getNumElements();
    FailureOr<std::vector<uint8_t>> bytes =
        constantBytes(isa<ConstantOp>(def) ? cast<ConstantOp>(def).getValue()
                                           : cast<ParameterOp>(def).getValue(),
                      def->getLoc());
    if (failed(bytes)) return false;
    values.push_back(denseFromBytes(cast<RankedTensorType>(v.getType()), *bytes));
  }
  if (cast<RankedTensorType>(op->getResult(0).getType()).getNumElements() > in) return false;
  ScopedDiagnosticHandler silence(op->getContext(), [](Diagnostic &) { return success(); });
  FailureOr<SmallVector<DenseElementsAttr>> results = evaluateOnHost(op, values);
  if (failed(results)) return false;
  OpBuilder b(op);
  op->getResult(0).replaceAllUsesWith(ConstantOp::create(b, op->getLoc(), (*results)[0]).getResult());
  op->erase();
  return true;
}

class FoldConstantsPass : public mlir::ds::impl::FoldConstantsPassBase<FoldConstantsPass> {
public:
  using FoldConstantsPassBase::FoldConstantsPassBase;
  void runOnOperation() override {
    SmallVector<Operation *> ops;
    getOperation().walk([&](Operation *op) { ops.push_back(op); });
    SmallVector<ParameterOp> read;
    getOperation().walk([&](ParameterOp p) {
      if (!p->use_empty()) read.push_back(p);
    });
    // Program order: each fold exposes its users to the next ones.
    for (Operation *op : ops)
      if (tryFoldWithKernels(op, maxElements) || foldRearrangedWeight(op))
        ++numFolded;
    // Constants nobody reads any more, and parameters whose readers were
    // folded (an inference plan holds what its program reads).
    SmallVector<Operation *> dead;
    getOperation().walk([&](Operation *op) {
      if (isa<ConstantOp>(op) && op->use_empty()) dead.push_back(op);
    });
    for (ParameterOp p : read)
      if (p->use_empty()) dead.push_back(p);
    for (Operation *op : dead) op->erase();
  }
};
} // namespace

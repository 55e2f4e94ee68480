//===- HostEvaluator.h - run ds ops at compile time --------------*- C++ -*-===//
//
// Constant folding and import-time shape arithmetic run an op by handing its
// plan step (KernelBridge.h) to the runtime's CPU backend through the
// Backend interface, so a folded constant is bit-identical to what ds-run
// computes; the compiler sees no kernel internals.
//
//===----------------------------------------------------------------------===//
#ifndef DS_PLAN_HOSTEVALUATOR_H
#define DS_PLAN_HOSTEVALUATOR_H

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Operation.h"

namespace mlir::ds {

/// Runs `op` on the CPU backend with constant operands and returns one
/// value per result.
FailureOr<SmallVector<DenseElementsAttr>>
evaluateOnHost(Operation *op, ArrayRef<Attribute> operands);

} // namespace mlir::ds

#endif // DS_PLAN_HOSTEVALUATOR_H

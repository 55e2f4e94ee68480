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

/// The value of `v` when it depends on nothing but constants and
/// parameters: its ops evaluated on the host, results memoized in `memo`.
/// Failure (with a diagnostic only if evaluation itself failed) when `v`
/// reads a function argument or a global.
FailureOr<DenseElementsAttr> evaluateConstantValue(Value v,
                                                   DenseMap<Value, DenseElementsAttr> &memo);

} // namespace mlir::ds

#endif // DS_PLAN_HOSTEVALUATOR_H

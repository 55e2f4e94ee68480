//===- EmitPlan.h - ds IR to a .dsplan --------------------------*- C++ -*-===//
//
// Serializes a memory-planned module (after ds-plan-memory) into the plan
// schema of runtime/proto/plan.proto: buffers, the "forward" program's
// steps, and the weights with their checksums.
//
//===----------------------------------------------------------------------===//
#ifndef DS_PLAN_EMITPLAN_H
#define DS_PLAN_EMITPLAN_H

#include "mlir/IR/BuiltinOps.h"
#include "runtime/plan/PlanFile.h"

namespace mlir::ds {

struct EmitPlanOptions {
  std::string producer = "ds-opt";
  std::string source;
  /// modelFingerprint() of the module before any pass ran (0: none).
  uint64_t modelFingerprint = 0;
  /// Device bytes a rank may use (--device-memory); 0: unbounded.
  uint64_t deviceMemoryBudget = 0;
};

/// A hash of `module`'s IR with large constants elided: its structure,
/// for the plan's model_fingerprint (ds-opt takes it before any pass).
uint64_t modelFingerprint(ModuleOp module);

/// Fills `writer` from `module`'s entry function (`main`, or its only
/// function). Fails with a diagnostic at the offending op.
LogicalResult emitPlan(ModuleOp module, const EmitPlanOptions &options,
                       ::ds::rt::PlanWriter &writer);

} // namespace mlir::ds

#endif // DS_PLAN_EMITPLAN_H

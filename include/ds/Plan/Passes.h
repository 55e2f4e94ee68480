//===- Passes.h - plan-level passes -----------------------------*- C++ -*-===//
#ifndef DS_PLAN_PASSES_H
#define DS_PLAN_PASSES_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/Pass.h"

namespace mlir::ds {

/// Discardable attributes the memory planner leaves for the plan emitter.
constexpr llvm::StringLiteral kArenaOffsetsAttr = "ds.arena_offsets";
constexpr llvm::StringLiteral kArenaBytesAttr = "ds.arena_bytes";
/// On a reshape-like op whose result ds-plan-memory placed on its operand's
/// bytes: the plan gets a view buffer (Buffer.alias_of) and no copy step.
constexpr llvm::StringLiteral kArenaViewAttr = "ds.arena_view";

#define GEN_PASS_DECL
#include "ds/Plan/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "ds/Plan/Passes.h.inc"

} // namespace mlir::ds

#endif // DS_PLAN_PASSES_H

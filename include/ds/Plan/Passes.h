//===- Passes.h - plan-level passes -----------------------------*- C++ -*-===//
#ifndef DS_PLAN_PASSES_H
#define DS_PLAN_PASSES_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/Pass.h"

namespace mlir::ds {

/// Discardable attributes the memory planner leaves for the plan emitter.
constexpr llvm::StringLiteral kArenaOffsetsAttr = "ds.arena_offsets";
constexpr llvm::StringLiteral kArenaBytesAttr = "ds.arena_bytes";

#define GEN_PASS_DECL
#include "ds/Plan/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "ds/Plan/Passes.h.inc"

} // namespace mlir::ds

#endif // DS_PLAN_PASSES_H

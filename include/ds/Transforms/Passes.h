//===- Passes.h - tensor-level ds passes ------------------------*- C++ -*-===//
#ifndef DS_TRANSFORMS_PASSES_H
#define DS_TRANSFORMS_PASSES_H

#include "dialects/ds/DSDialect.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MLProgram/IR/MLProgram.h"
#include "mlir/Pass/Pass.h"

namespace mlir::ds {

#define GEN_PASS_DECL
#include "ds/Transforms/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "ds/Transforms/Passes.h.inc"

/// Marks the ds.sqrt whose result is the global gradient norm in the
/// optimizer step ds-build-train-step builds: clipping reads it, and
/// ds-data-parallel adds each rank's share of the squared norm before it.
constexpr llvm::StringLiteral kGradNormAttr = "ds.grad_norm";

/// Replaces `op` by constants when all its operands are ds.constant and its
/// results hold at most `maxElements` elements; returns the constants (the
/// op is erased) or nullopt when it was left alone.
std::optional<SmallVector<Value>> tryFoldWithKernels(Operation *op, int64_t maxElements);

} // namespace mlir::ds

#endif // DS_TRANSFORMS_PASSES_H

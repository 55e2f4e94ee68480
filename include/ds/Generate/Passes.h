//===- Passes.h - generation passes -----------------------------*- C++ -*-===//
#ifndef DS_GENERATE_PASSES_H
#define DS_GENERATE_PASSES_H

#include "dialects/ds/DSDialect.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MLProgram/IR/MLProgram.h"
#include "mlir/Pass/Pass.h"

namespace mlir::ds {

#define GEN_PASS_DECL
#include "ds/Generate/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "ds/Generate/Passes.h.inc"

/// The module attribute ds-derive-generation records for the plan:
/// {batch, max_tokens, chunk, vocab, input}.
constexpr llvm::StringLiteral kGenerationAttr = "ds.generation";

} // namespace mlir::ds

#endif // DS_GENERATE_PASSES_H

//===- Passes.h - partitioning passes ---------------------------*- C++ -*-===//
#ifndef DS_PARTITION_PASSES_H
#define DS_PARTITION_PASSES_H

#include "dialects/ds/DSDialect.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/Pass.h"

namespace mlir::ds {

#define GEN_PASS_DECL
#include "ds/Partition/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "ds/Partition/Passes.h.inc"

} // namespace mlir::ds

#endif // DS_PARTITION_PASSES_H

//===- InitAll.h - register everything ds provides --------------*- C++ -*-===//
#ifndef DS_INITALL_H
#define DS_INITALL_H

#include "mlir/IR/DialectRegistry.h"

namespace mlir::ds {
/// Dialects ds-opt can parse: ds, func, and what passes create.
void registerAllDialects(DialectRegistry &registry);
/// ds passes, the upstream passes ds pipelines use, and the pipelines.
void registerAllPasses();
} // namespace mlir::ds

#endif // DS_INITALL_H

//===- DSDialect.h - the ds dialect -----------------------------*- C++ -*-===//
#ifndef DS_DIALECTS_DS_DSDIALECT_H
#define DS_DIALECTS_DS_DSDIALECT_H

#include "mlir/IR/Dialect.h"

#include "dialects/ds/DSDialect.h.inc"

#endif // DS_DIALECTS_DS_DSDIALECT_H

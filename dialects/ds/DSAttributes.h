//===- DSAttributes.h - enums and attributes of the ds dialect --*- C++ -*-===//
#ifndef DS_DIALECTS_DS_DSATTRIBUTES_H
#define DS_DIALECTS_DS_DSATTRIBUTES_H

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/OpImplementation.h"

#include "dialects/ds/DSDialect.h"
#include "dialects/ds/DSEnums.h.inc"

#define GET_ATTRDEF_CLASSES
#include "dialects/ds/DSAttrs.h.inc"

#endif // DS_DIALECTS_DS_DSATTRIBUTES_H

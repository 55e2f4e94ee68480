//===- DSDialect.cpp - the ds dialect -------------------------------------===//
#include "dialects/ds/DSDialect.h"

#include "dialects/ds/DSOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mlir::ds;

#include "dialects/ds/DSDialect.cpp.inc"
#include "dialects/ds/DSEnums.cpp.inc"
#define GET_ATTRDEF_CLASSES
#include "dialects/ds/DSAttrs.cpp.inc"

void DSDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "dialects/ds/DSOps.cpp.inc"
      >();
  addAttributes<
#define GET_ATTRDEF_LIST
#include "dialects/ds/DSAttrs.cpp.inc"
      >();
}

Operation *DSDialect::materializeConstant(OpBuilder &builder, Attribute value,
                                          Type type, Location loc) {
  auto typed = dyn_cast<TypedAttr>(value);
  if (!typed || typed.getType() != type || !isa<ElementsAttr>(value))
    return nullptr;
  return ConstantOp::create(builder, loc, typed);
}

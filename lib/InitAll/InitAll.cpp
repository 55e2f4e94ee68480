//===- InitAll.cpp - register everything ds provides ----------------------===//
#include "ds/InitAll.h"

#include "dialects/ds/DSDialect.h"
#include "ds/Generate/Passes.h"
#include "ds/Partition/Passes.h"
#include "ds/Plan/Passes.h"
#include "ds/Pipelines/Pipelines.h"
#include "ds/Transforms/Passes.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MLProgram/IR/MLProgram.h"
#include "mlir/Transforms/Passes.h"

void mlir::ds::registerAllDialects(DialectRegistry &registry) {
  registry.insert<DSDialect, func::FuncDialect, ml_program::MLProgramDialect>();
}

void mlir::ds::registerAllPasses() {
  registerDSTransformsPasses();
  registerDSGeneratePasses();
  registerDSPartitionPasses();
  registerDSPlanPasses();
  registerTransformsPasses(); // canonicalize, cse, ...
  registerPipelines();
}

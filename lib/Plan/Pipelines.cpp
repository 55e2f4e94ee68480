//===- Pipelines.cpp - pass pipelines -------------------------------------===//
#include "ds/Plan/Pipelines.h"

#include "ds/Plan/Passes.h"
#include "ds/Transforms/Passes.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;

void mlir::ds::buildInferencePipeline(OpPassManager &pm,
                                      const InferencePipelineOptions &options) {
  FoldConstantsPassOptions fold;
  fold.maxElements = options.foldMaxElements;
  pm.addPass(createFoldConstantsPass(fold));
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
  pm.addPass(createPlanMemoryPass());
}

void mlir::ds::registerPipelines() {
  PassPipelineRegistration<>(
      "ds-inference-pipeline",
      "ds IR to a memory-planned module ready for plan emission",
      [](OpPassManager &pm) { buildInferencePipeline(pm, InferencePipelineOptions()); });
}

//===- Pipelines.h - pass pipelines -----------------------------*- C++ -*-===//
//
// Pipelines are built by functions so that a DeepSpeed config (--config)
// and an explicit pass list are two spellings of the same thing.
//
//===----------------------------------------------------------------------===//
#ifndef DS_PLAN_PIPELINES_H
#define DS_PLAN_PIPELINES_H

#include "mlir/Pass/PassManager.h"

namespace mlir::ds {

struct InferencePipelineOptions {
  int64_t foldMaxElements = 65536;
};

/// Imported ds IR -> memory-planned IR ready for plan emission:
/// fold constants, canonicalize, CSE, plan the arena.
void buildInferencePipeline(OpPassManager &pm, const InferencePipelineOptions &options);

/// Registers "ds-inference-pipeline" for --pass-pipeline and ds-opt flags.
void registerPipelines();

} // namespace mlir::ds

#endif // DS_PLAN_PIPELINES_H

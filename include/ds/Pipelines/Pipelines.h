//===- Pipelines.h - pass pipelines -----------------------------*- C++ -*-===//
//
// Pipelines are built by functions so that a DeepSpeed config (--config)
// and an explicit pass list are two spellings of the same thing.
//
//===----------------------------------------------------------------------===//
#ifndef DS_PIPELINES_PIPELINES_H
#define DS_PIPELINES_PIPELINES_H

#include <string>
#include <vector>

#include "mlir/Pass/PassManager.h"

namespace mlir::ds {

struct InferencePipelineOptions {
  int64_t foldMaxElements = 65536;
  /// Ranks of the `tp` mesh axis (DeepSpeed-Inference's tp_size); 1: none.
  int64_t tensorParallel = 1;
  /// Fusions left out (names from fusionNames()), to compare with and without.
  std::vector<std::string> disabledFusions;
  /// "fp32", or "bf16" / "fp16": matrix products in 16 bits
  /// (ds-mixed-precision), from DeepSpeed's bf16/fp16 sections or dtype.
  std::string precision = "fp32";
  /// Data-parallel gradient reductions in "fp32", "bf16" or "fp16"
  /// (communication_data_type).
  std::string communication = "fp32";
  /// > 0: a generation plan (ds-derive-generation after attention fusion):
  /// prefill steps of this many tokens, and one-token decode steps.
  int64_t generateChunk = 0;
  /// Non-empty: ds-quantize with this scheme (int8-dynamic, int8-weight,
  /// int4-weight), its group size (-1: the scheme's default), the products
  /// it leaves.
  std::string quantize;
  int64_t quantizeGroupSize = -1;
  std::vector<std::string> quantizeSkip;
  bool quantizeKeepFirst = false, quantizeKeepLast = false;
  /// "cpu": ZeRO-Inference, the weights in host memory fetched a layer
  /// ahead of their use (ds-offload weights=cpu); "none": on the device.
  std::string offloadWeights = "none";
  int64_t offloadWeightsThreshold = 100000; // smaller weights stay on the device
};

/// The fusions ds-opt --disable-fusion=NAME can turn off, each a pass:
/// "epilogues" (ds-fuse-epilogues).
const std::vector<std::string> &fusionNames();

/// Imported ds IR -> memory-planned IR ready for plan emission: with
/// tensor parallelism, ds-tensor-parallel, ds-propagate-sharding,
/// ds-insert-collectives and ds-global-to-local first; then fold constants,
/// canonicalize, CSE, the fusions, plan the arena.
void buildInferencePipeline(OpPassManager &pm, const InferencePipelineOptions &options);

struct TrainingPipelineOptions {
  std::string configPath;
  std::vector<std::string> configOverrides; // ds-opt --set KEY=VALUE
  int64_t worldSize = 1;     // every rank: tensorParallel x data-parallel
  int64_t tensorParallel = 1; // ranks of a `tp` group (the config's autotp_size or --tensor-parallel)
  std::string loss = "softmax-cross-entropy";
  std::string labels = "labels";
  std::string lossOutput;
  int64_t ignoreIndex = -100;
  std::vector<std::string> frozen;
  std::vector<std::string> trainOnly; // --parameters: exactly these are trained
  std::vector<std::string> gradInputs;
  /// Activation checkpointing (ds-recompute): "" follows the config's
  /// activation_checkpointing section; none, layers, sqrt or budget.
  std::string recompute;
  int64_t recomputeCheckpoints = -1; // layers kept (-1: number_checkpoints / all)
  int64_t recomputeBudget = -1;      // budget: activation bytes
  InferencePipelineOptions inference;
};

/// Imported ds IR -> training module (train_step, optimizer_step, forward)
/// ready for plan emission: ds-build-train-step, then the inference pipeline.
void buildTrainingPipeline(OpPassManager &pm, const TrainingPipelineOptions &options);

/// Registers "ds-inference-pipeline" for --pass-pipeline and ds-opt flags.
void registerPipelines();

} // namespace mlir::ds

#endif // DS_PIPELINES_PIPELINES_H

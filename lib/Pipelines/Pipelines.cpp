//===- Pipelines.cpp - pass pipelines -------------------------------------===//
#include "ds/Pipelines/Pipelines.h"

#include "ds/Generate/Passes.h"
#include "ds/Partition/Passes.h"
#include "ds/Plan/Passes.h"
#include "ds/Transforms/Passes.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;

void mlir::ds::buildInferencePipeline(OpPassManager &pm,
                                      const InferencePipelineOptions &options) {
  if (options.tensorParallel > 1) {
    TensorParallelPassOptions tp;
    tp.size = options.tensorParallel;
    pm.addPass(createTensorParallelPass(tp));
    pm.addPass(createPropagateShardingPass());
    pm.addPass(createInsertCollectivesPass());
    pm.addPass(createGlobalToLocalPass());
  }
  FoldConstantsPassOptions fold;
  fold.maxElements = options.foldMaxElements;
  pm.addPass(createFoldConstantsPass(fold));
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
  auto addMixedPrecision = [&] {
    if (options.precision == "fp32" && options.communication == "fp32") return;
    MixedPrecisionPassOptions mp;
    mp.dtype = options.precision;
    mp.commDtype = options.communication;
    pm.addPass(createMixedPrecisionPass(mp));
  };
  // Generation derives its programs from the f32 attention it finds; the
  // weight products go to 16 bits after (the KV cache stays f32).
  const bool generating = options.generateChunk > 0;
  if (!generating) addMixedPrecision();
  auto enabled = [&](const char *name) {
    return llvm::find(options.disabledFusions, name) == options.disabledFusions.end();
  };
  // An int8 model's integer products (onnxruntime's quantize_dynamic) as
  // ds.quantized_matmul, before the fusions that take their epilogues.
  pm.addPass(createRaiseQuantizedMatmulPass());
  if (enabled("batch-norm")) pm.addPass(createFoldBatchNormPass());
  if (enabled("channels-last")) pm.addPass(createConvChannelsLastPass());
  if (enabled("epilogues")) pm.addPass(createFuseEpiloguesPass());
  if (enabled("quantized-activations")) pm.addPass(createKeepActivationsQuantizedPass());
  if (enabled("activations")) pm.addPass(createRaiseActivationsPass());
  if (enabled("norms")) pm.addPass(createFuseNormsPass());
  if (enabled("attention")) pm.addPass(createFuseAttentionPass());
  // Generation: the fused attentions become cached ones, the programs are
  // derived, and the fusions below run on each of them.
  if (options.generateChunk > 0) {
    DeriveGenerationPassOptions gen;
    gen.chunk = options.generateChunk;
    pm.addPass(createDeriveGenerationPass(gen));
    pm.addPass(createCanonicalizerPass());
    pm.addPass(createCSEPass());
    addMixedPrecision();
  }
  if (enabled("softmax")) pm.addPass(createFuseSoftmaxPass());
  if (enabled("matmul-epilogues")) {
    FuseMatmulEpiloguesPassOptions epilogues;
    epilogues.rowEpilogues = enabled("product-softmax");
    pm.addPass(createFuseMatmulEpiloguesPass(epilogues));
  }
  // Quantization takes the fused products whole (their epilogues come
  // along), before layouts give them views it does not read through.
  if (!options.quantize.empty()) {
    QuantizePassOptions q;
    q.scheme = options.quantize;
    q.groupSize = options.quantizeGroupSize;
    q.skip.assign(options.quantizeSkip.begin(), options.quantizeSkip.end());
    q.keepFirst = options.quantizeKeepFirst;
    q.keepLast = options.quantizeKeepLast;
    pm.addPass(createQuantizePass(q));
  }
  if (enabled("layouts")) pm.addPass(createFoldMatmulLayoutsPass());
  if (enabled("optimizer")) pm.addPass(createFuseOptimizerPass());
  if (enabled("elementwise")) pm.addPass(createFuseElementwisePass());
  // ZeRO-Offload (a no-op unless ds.training asks for it): after fusion,
  // so that fused ops are placed whole.
  OffloadPassOptions offload;
  offload.weights = options.offloadWeights;
  offload.weightsThreshold = options.offloadWeightsThreshold;
  pm.addPass(createOffloadPass(offload));
  pm.addPass(createPlanMemoryPass());
}

const std::vector<std::string> &mlir::ds::fusionNames() {
  static const std::vector<std::string> names = {"batch-norm", "channels-last", "epilogues",
                                                 "activations", "norms", "attention",
                                                 "softmax", "matmul-epilogues", "product-softmax",
                                                 "layouts", "optimizer",
                                                 "elementwise", "quantized-activations"};
  return names;
}

void mlir::ds::buildTrainingPipeline(OpPassManager &pm, const TrainingPipelineOptions &o) {
  BuildTrainStepPassOptions t;
  t.configPath = o.configPath;
  t.overrides.assign(o.configOverrides.begin(), o.configOverrides.end());
  t.worldSize = o.worldSize;
  t.lossKind = o.loss;
  t.labelsName = o.labels;
  t.lossOutput = o.lossOutput;
  t.ignoreIndex = o.ignoreIndex;
  t.frozen.assign(o.frozen.begin(), o.frozen.end());
  t.trainOnly.assign(o.trainOnly.begin(), o.trainOnly.end());
  t.gradInputs.assign(o.gradInputs.begin(), o.gradInputs.end());
  t.tensorParallel = o.tensorParallel;
  // GELU as one op before autodiff: one gradient op instead of a chain's.
  if (!llvm::is_contained(o.inference.disabledFusions, "activations")) {
    RaiseActivationsPassOptions raise;
    raise.trained.assign(o.trainOnly.begin(), o.trainOnly.end());
    pm.addPass(createRaiseActivationsPass(raise));
  }
  // Tensor parallelism: the pairs are found on the forward and constrained
  // (weights, biases); the training step is built from it and partitioned
  // whole below, backward and optimizer included.
  if (o.tensorParallel > 1) {
    TensorParallelPassOptions tp;
    tp.size = o.tensorParallel;
    tp.training = true;
    pm.addPass(createTensorParallelPass(tp));
  }
  pm.addPass(createBuildTrainStepPass(t));
  // Recomputation right after autodiff: data parallelism then gathers
  // (ZeRO-3) and fusion fuses the copied segments like any backward op.
  RecomputePassOptions r;
  r.policy = o.recompute;
  r.checkpoints = o.recomputeCheckpoints;
  r.budget = o.recomputeBudget;
  pm.addPass(createRecomputePass(r));
  // bf16/fp16: 16-bit parameters and gradients, fp32 masters (a no-op in fp32).
  pm.addPass(createHalfModelStatesPass());
  if (o.tensorParallel > 1) {
    pm.addPass(createPropagateShardingPass());
    pm.addPass(createInsertCollectivesPass());
    pm.addPass(createGlobalToLocalPass());
  }
  const int64_t dataParallel = o.worldSize / std::max<int64_t>(1, o.tensorParallel);
  if (dataParallel > 1) {
    DataParallelPassOptions dp;
    dp.worldSize = dataParallel;
    pm.addPass(createDataParallelPass(dp));
    pm.addPass(createZeroSchedulePass());
  }
  buildInferencePipeline(pm, o.inference);
}

void mlir::ds::registerPipelines() {
  PassPipelineRegistration<>(
      "ds-inference-pipeline",
      "ds IR to a memory-planned module ready for plan emission",
      [](OpPassManager &pm) { buildInferencePipeline(pm, InferencePipelineOptions()); });
}

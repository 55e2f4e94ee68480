//===- Report.h - what a plan will hold, before it runs ---------*- C++ -*-===//
#ifndef DS_PLAN_REPORT_H
#define DS_PLAN_REPORT_H

#include <map>
#include <string>
#include <vector>

#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/raw_ostream.h"

namespace mlir::ds {

/// Bytes per rank by category, computed from a memory-planned module.
struct MemoryReport {
  int64_t parameters = 0, parameterBytes = 0;
  int64_t largestParameterBytes = 0;
  int64_t constantBytes = 0;
  int64_t gradientBytes = 0;       // training: gradient accumulators
  int64_t optimizerStateBytes = 0; // training: Adam moments / SGD momentum
  bool training = false;
  int64_t activationArenaBytes = 0; // peak of intermediates (ds-plan-memory)
  int64_t inputBytes = 0, outputBytes = 0;
  int64_t steps = 0;
  int64_t worldSize = 1;
  std::string mesh;                            // "tp=2", empty for one rank
  int64_t splitParameterBytes = 0;             // of parameterBytes: this rank's slices
  std::map<std::string, int64_t> collectiveBytes; // per kind, per forward run, this rank sends
  llvm::StringMap<int64_t> collectiveCounts;      // how many collectives of each kind
  // Training: the initializers trained (name, full shape) and the float
  // initializers held constant (literals, frozen, not in --parameters).
  std::vector<std::pair<std::string, std::vector<int64_t>>> trained;
  std::vector<std::string> heldConstant;
  // Training: "fp32", "bf16" or "fp16", the ZeRO stage, and the type of
  // gradient reductions.
  std::string precision = "fp32", communication = "fp32", gradientAccum = "fp32";
  int64_t zeroStage = 0;
  // ZeRO-Offload: state and intermediates in host memory (they are also in
  // the rows above), and the bytes ds.offload / ds.fetch move per program
  // run ("train_step: device->host").
  std::string offload = "none";
  int64_t hostStateBytes = 0, hostArenaBytes = 0, nvmeStateBytes = 0;
  // ZeRO-Inference: weights kept in host memory or on NVMe (--offload-weights)
  int64_t hostWeightBytes = 0, nvmeWeightBytes = 0;
  std::map<std::string, int64_t> transferBytes;
  // Generation plans: the KV caches (state shared by prefill and decode),
  // for `kvSequences` sequences of up to `kvTokens` tokens each.
  int64_t kvCacheBytes = 0, kvSequences = 0, kvTokens = 0;
  // Activation checkpointing (ds-recompute): the policy ("" when off), the
  // checkpoints kept and their bytes, what the backward recomputes, and the
  // pass's own estimates of the activation peak without and with it.
  std::string recomputePolicy;
  int64_t checkpoints = 0, recomputedSegments = 0, checkpointBytes = 0, recomputedOps = 0;
  double recomputeFlops = 0, forwardFlops = 0;
  bool cpuCheckpointing = false;
  int64_t partitionedCheckpoints = 0, checkpointPartitions = 1; // partition_activations
  // The batch arithmetic (training), and the data-parallel sizes an
  // elasticity section's global batch trains with (empty without one).
  int64_t trainBatch = 0, microBatch = 0, accumulation = 0, dataParallel = 0;
  std::vector<int64_t> elasticSizes;
  std::vector<std::string> filledAuto; // Hugging Face "auto" keys ds filled
  int64_t total() const {
    return parameterBytes + constantBytes + gradientBytes + optimizerStateBytes +
           activationArenaBytes + inputBytes + outputBytes + kvCacheBytes;
  }
  /// The emitted plan's own per-space bytes (runtime/plan/PlanFile.h's
  /// spaceBytes, what ds-run checks --device-memory against), when the
  /// caller emitted one; -1 otherwise.
  int64_t planDeviceBytes = -1, planHostBytes = -1;
  /// What the device holds: the plan's count when known, else everything
  /// but the offloaded state.
  int64_t deviceBytes() const {
    return planDeviceBytes >= 0 ? planDeviceBytes : total() - hostStateBytes - nvmeStateBytes;
  }
  int64_t hostBytes() const {
    return planHostBytes >= 0 ? planHostBytes : hostStateBytes + hostArenaBytes;
  }
};

/// DeepSpeed's estimate_zero2/3_model_states_mem_needs_all_cold, same
/// arithmetic and table: per-CPU and per-GPU bytes of the model states for
/// each offload option, for `params` parameters (and, for ZeRO-3, the
/// largest layer's), `gpusPerNode` x `nodes` GPUs, and the 1.5 buffer factor.
void printZeroEstimate(int stage, int64_t params, int64_t largestLayer, int64_t gpusPerNode,
                       int64_t nodes, llvm::raw_ostream &os);

/// Fails (with a diagnostic) when the module has no memory plan.
FailureOr<MemoryReport> computeMemoryReport(ModuleOp module);
void printMemoryReport(const MemoryReport &report, llvm::raw_ostream &os);

} // namespace mlir::ds

#endif // DS_PLAN_REPORT_H

//===- DeepSpeedConfig.h - reading ds_config.json ---------------*- C++ -*-===//
//
// A user's DeepSpeed config, checked strictly: unknown keys and bad values
// are errors naming the key; keys ds will implement later (zero stages > 0,
// fp16, ...) are errors that say so, never silently ignored. Defaults follow
// DeepSpeed's code and are listed in docs/training.md.
//
//===----------------------------------------------------------------------===//
#ifndef DS_CONFIG_DEEPSPEEDCONFIG_H
#define DS_CONFIG_DEEPSPEEDCONFIG_H

#include <cstdint>
#include <optional>
#include <set>
#include <string>

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"
#include "ds/Config/Elasticity.h"

#include <vector>

namespace mlir::ds {

struct OptimizerConfig {
  /// Muon: DeepSpeed's MuonWithAuxAdam (Muon for 2-D hidden weights, Adam
  /// with this config's lr/betas/eps for the rest).
  /// OneBitAdam: DeepSpeed's 1-bit Adam (Adam warm-up until freezeStep,
  /// then momentum averaged by an error-compensated 1-bit all-reduce).
  /// ZeroOneAdam: DeepSpeed's 0/1 Adam (variance updated at doubling
  /// intervals with 1-bit-averaged gradients between, then frozen after
  /// varFreezeStep with local steps synced by the 1-bit all-reduce).
  /// OneBitLamb: DeepSpeed's 1-bit LAMB (LAMB warm-up until freezeStep,
  /// then all momenta in one 1-bit all-reduce, the trust ratio from the
  /// frozen coefficient and a fresh variance).
  enum class Kind {
    Adam, AdamW, SGD, Lion, Adagrad, Lamb, Muon, OneBitAdam, ZeroOneAdam, OneBitLamb
  };
  Kind kind = Kind::AdamW;
  double lr = 1e-3;
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;
  double weightDecay = 0.0;
  /// Decoupled weight decay (AdamW). DeepSpeed's "Adam" defaults to it too
  /// (adam_w_mode: true); "adam_w_mode": false gives L2-style decay.
  bool decoupledWeightDecay = true;
  bool biasCorrection = true;
  double momentum = 0.0, dampening = 0.0; // SGD
  bool nesterov = false;
  double maxCoeff = 10.0, minCoeff = 0.01; // Lamb's trust-ratio clamp (FusedLamb)
  bool epsInsideSqrt = false;
  // Muon's half (MuonWithAuxAdam's defaults): lr, momentum, Newton-Schulz.
  double muonLr = 0.02, muonMomentum = 0.95;
  int64_t freezeStep = 100000; // OneBitAdam's warm-up steps (the first is init-only)
  // ZeroOneAdam's policy (zoadam.py's defaults).
  int64_t varFreezeStep = 100000, varUpdateScaler = 16, localStepScaler = 32678,
          localStepClipper = 16;
  // OneBitLamb's (lamb.py's defaults).
  double coeffBeta = 0.9, factorMax = 4.0, factorMin = 0.5, factorThreshold = 0.1;
};

struct SchedulerConfig {
  enum class Kind { Constant, WarmupLR, WarmupDecayLR, WarmupCosineLR, OneCycle, LRRangeTest };
  Kind kind = Kind::Constant;
  double warmupMinLr = 0.0, warmupMaxLr = 1e-3;
  int64_t warmupNumSteps = 1000;
  bool warmupLinear = false; // warmup_type "linear" (default "log")
  int64_t totalNumSteps = 0;
  double warmupMinRatio = 0.0, cosMinRatio = 1e-4; // WarmupCosineLR
  // OneCycle (DeepSpeed's lr_schedules.py defaults).
  double cycleMinLr = 0, cycleMaxLr = 0, decayLrRate = 0;
  double cycleFirstStepSize = 2000, cycleSecondStepSize = -1; // -1: the first's
  int64_t cycleFirstStairCount = 0, cycleSecondStairCount = -1; // -1: the first's
  double decayStepSize = 0;
  bool cycleMomentum = true;
  double cycleMinMom = 0.8, cycleMaxMom = 0.9, decayMomRate = 0;
  // LRRangeTest.
  double rangeMinLr = 1e-3, rangeStepRate = 1.0;
  int64_t rangeStepSize = 2000;
  bool rangeStaircase = false;
};

/// Mixed precision: DeepSpeed's "bf16" / "fp16" sections. Master weights
/// and optimizer state stay fp32 either way; fp16 adds a loss scaler
/// (DeepSpeed's DynamicLossScaler unless `lossScale` > 0 makes it static).
struct PrecisionConfig {
  enum class Kind { FP32, BF16, FP16 };
  Kind kind = Kind::FP32;
  double lossScale = 0; // 0: dynamic
  int64_t initialScalePower = 16, lossScaleWindow = 1000, hysteresis = 2;
  bool consecutiveHysteresis = false;
  double minLossScale = 1;
  /// communication_data_type: the type gradients are reduced in across
  /// data-parallel ranks. DeepSpeed's default is the training type (fp16
  /// or bf16 when enabled, else fp32).
  Kind communication = Kind::FP32;
  /// data_types.grad_accum_dtype: the gradient accumulators' type (the
  /// training type by default, or fp32).
  Kind gradAccum = Kind::FP32;
};
/// "fp32", "bf16" or "fp16".
const char *precisionName(PrecisionConfig::Kind k);

/// A DeepSpeed monitor section (deepspeed/monitor/config.py): enabled,
/// output_path, job_name.
struct MonitorConfig {
  bool enabled = false;
  std::string outputPath, jobName = "DeepSpeedJobName";
};

/// DeepSpeed's activation_checkpointing section (ds-recompute). DeepSpeed
/// applies it where the model calls deepspeed.checkpointing.checkpoint;
/// ds sees the whole step, so the section's presence turns recomputation
/// on, one checkpoint per layer unless number_checkpoints says otherwise.
struct ActivationCheckpointingConfig {
  bool enabled = false; // the section is present
  /// Checkpoints split over the model-parallel (tp) ranks; with no tp a
  /// no-op, as in DeepSpeed.
  bool partitionActivations = false;
  /// Checkpoints held in host memory between the forward and the backward.
  bool cpuCheckpointing = false;
  /// A static arena already places checkpoints contiguously: accepted.
  bool contiguousMemoryOptimization = false;
  bool synchronizeCheckpointBoundary = false, profile = false;
  /// How many checkpoints the forward keeps (0: null, one per layer).
  int64_t numberCheckpoints = 0;
};

struct TrainingConfig {
  /// Data-parallel ranks (the world divided by tensorParallel).
  int64_t worldSize = 1;
  /// Tensor-parallel ranks per model replica (tensor_parallel.autotp_size).
  int64_t tensorParallel = 1;
  int64_t trainBatchSize = 0, microBatchSize = 0, gradientAccumulationSteps = 0;
  /// Global-norm clipping threshold; 0 disables. DeepSpeed's code default.
  double gradientClipping = 1.0;
  /// ds-run prints a progress line every this many optimizer steps.
  int64_t stepsPerPrint = 10;
  /// wall_clock_breakdown: with each progress line, the time of forward,
  /// backward, optimizer step and collectives.
  bool wallClockBreakdown = false;
  /// csv_monitor and tensorboard: DeepSpeed's CSV files / TensorBoard
  /// event file of loss, lr (and loss scale) per step under
  /// output_path/job_name.
  MonitorConfig csvMonitor, tensorboard;
  /// flops_profiler: at `profileStep`, a table of FLOPs, MACs and latency
  /// per kernel and per module (ONNX node path), to stdout or outputFile.
  bool flopsProfiler = false;
  int64_t profileStep = 1, moduleDepth = -1, topModules = 1;
  bool profileDetailed = true;
  std::string profileOutputFile;
  /// comms_logger (deepspeed/comm/config.py): rank 0 prints a table of the
  /// collectives (count, size, latency, algorithmic and bus bandwidth) with
  /// each progress line; `verbose` prints each collective as it ends;
  /// `prof_all` (else only `prof_ops`) selects them; `debug` names the
  /// ONNX node each serves.
  struct CommsLogger {
    bool enabled = false, verbose = false, profAll = true, debug = false;
    std::vector<std::string> profOps;
  } commsLogger;
  /// checkpoint.tag_validation: whether ranks saving a checkpoint check
  /// that they agree on its tag ("ignore", "warn": DeepSpeed's default,
  /// "fail").
  std::string checkpointTagValidation = "warn";
  /// zero_optimization.stage: 0 replicated, 1 optimizer state and 2 also
  /// gradients partitioned over the data-parallel ranks.
  int64_t zeroStage = 0;
  /// ZeRO-3 keeps parameters with fewer elements than this whole on every
  /// rank (no gathers for biases and norms). DeepSpeed's default.
  int64_t stage3ParamPersistenceThreshold = 100000;
  /// How the ZeRO collectives are bucketed and scheduled (ds-schedule-zero);
  /// DeepSpeed's code defaults, in elements. overlapComm -1: on at stage 3.
  int64_t reduceBucketSize = 500000000, allgatherBucketSize = 500000000;
  int64_t overlapComm = -1;
  bool contiguousGradients = true;
  int64_t stage3PrefetchBucketSize = 50000000, stage3MaxLiveParameters = 1000000000,
          stage3MaxReuseDistance = 1000000000;
  /// ZeRO++'s qwZ (zero_optimization.zero_quantized_weights, stage 3): the
  /// parameter all-gathers send int8 blocks with a scale each, not f32.
  bool zeroQuantizedWeights = false;
  /// qgZ (zero_quantized_gradients, stage 3): the gradient reduce-scatters
  /// send int8 blocks in one all-to-all and sum in f32.
  bool zeroQuantizedGradients = false;
  /// zero_optimization.offload_optimizer: "cpu" puts optimizer state and
  /// gradient accumulators in host memory (ZeRO-Offload); "nvme" swaps the
  /// optimizer state to files under nvme_path (ZeRO-Infinity), gradient
  /// accumulators in host memory; "none" (or no section) keeps them on the
  /// device. `offloadRatio` of the parameters
  /// (by elements) are offloaded (DeepSpeed's partial offload, "ratio").
  std::string offloadOptimizer = "none";
  std::string offloadNvmePath; // "nvme": where each rank's swap file goes
  double offloadRatio = 1.0;
  bool offloadPinMemory = false;
  int64_t offloadBufferCount = 4;
  /// zero_optimization.offload_param (stage 3, ZeRO-Infinity): "cpu" or
  /// "nvme" keeps the partitioned parameters in host memory or on NVMe,
  /// each fetched before its gather; "none" keeps them on the device.
  std::string offloadParam = "none";
  std::string offloadParamNvmePath;
  /// offload_param's staging (elements, DeepSpeed's defaults): with "nvme",
  /// the first `max_in_cpu` elements of partitions stay in host memory;
  /// `buffer_count` swap-ins of at most `buffer_size` elements each are in
  /// host memory at once.
  int64_t offloadParamBufferCount = 5, offloadParamBufferSize = 100000000,
          offloadParamMaxInCpu = 1000000000;
  /// zero_optimization.sub_group_size: the elements of optimizer state one
  /// host step swaps and updates (consecutive parameters, DeepSpeed's rule).
  int64_t subGroupSize = 1000000000;
  /// The `aio` section (NVMe swapping's I/O): validated and kept.
  int64_t aioBlockSize = 1048576, aioQueueDepth = 8, aioThreadCount = 1;
  bool aioSingleSubmit = false, aioOverlapEvents = true;
  OptimizerConfig optimizer;
  SchedulerConfig scheduler;
  PrecisionConfig precision;
  ActivationCheckpointingConfig activationCheckpointing;
  /// elasticity: when enabled, the batch sizes above are its choice for
  /// this run's data-parallel size, and these the sizes its global batch
  /// trains with.
  ElasticityConfig elasticity;
  std::vector<int64_t> elasticValidWorldSizes;
  /// Hugging Face "auto" values ds filled in (their keys), for the report.
  std::vector<std::string> filledAuto;
};

/// A DeepSpeed-Inference config (deepspeed.init_inference): tensor_parallel
/// .tp_size (or the older mp_size), dtype fp32, replace_with_kernel_inject.
struct InferenceConfig {
  int64_t tpSize = 1;
  /// "dtype": fp32, or bf16/fp16 for 16-bit matrix products.
  PrecisionConfig::Kind dtype = PrecisionConfig::Kind::FP32;
  /// max_out_tokens (alias max_tokens): the tokens a generated sequence
  /// may hold, prompt included (0: not given; DeepSpeed's default is 1024).
  int64_t maxOutTokens = 0;
};
/// DeepSpeed's dtype spellings ("bf16", "bfloat16", "torch.bfloat16", ...);
/// nullopt for anything else (int8 included: quantization is its own issue).
std::optional<PrecisionConfig::Kind> parseDtypeName(llvm::StringRef name);
/// The inference config in `path` when it is one (a tensor_parallel or
/// mp_size section and no training keys); nullopt otherwise. A malformed
/// one sets `error` (naming the key).
std::optional<InferenceConfig> asInferenceConfig(const std::string &path, std::string &error);

/// Parses and checks `path` for a run on `worldSize` ranks, `tensorParallel`
/// of them per tensor-parallel group (0: the config's
/// tensor_parallel.autotp_size, else 1). The result's worldSize is the
/// data-parallel size, world / tp, which the batch sizes count.
/// `overrides` (ds-opt --set KEY=VALUE, KEY a dotted path such as
/// optimizer.params.lr, VALUE JSON or else a string) replace or add keys
/// before anything is read. Hugging Face's "auto" values are then filled
/// where ds can know them (DeepSpeed's and the Trainer's defaults, the
/// batch arithmetic, the micro batch from `modelMicroBatch` when > 0: the
/// batch dimension the model's inputs have, or --input-shape gives); any
/// other is an error naming the key and --set.
llvm::Expected<TrainingConfig> readDeepSpeedConfig(const std::string &path, int64_t worldSize,
                                                   int64_t tensorParallel = 0,
                                                   llvm::ArrayRef<std::string> overrides = {},
                                                   int64_t modelMicroBatch = 0);
llvm::Expected<TrainingConfig> parseDeepSpeedConfig(llvm::StringRef json, llvm::StringRef name,
                                                    int64_t worldSize, int64_t tensorParallel = 0,
                                                    llvm::ArrayRef<std::string> overrides = {},
                                                    int64_t modelMicroBatch = 0);

/// The dotted paths of every key the reader asks for while reading `json`
/// (whether present or not): what ConfigKeys.h's table is checked against.
/// `error` gets the parse's error ("" when it succeeds). Not reentrant.
std::set<std::string> configKeysRead(llvm::StringRef json, int64_t worldSize,
                                     std::string *error = nullptr);

} // namespace mlir::ds

#endif // DS_CONFIG_DEEPSPEEDCONFIG_H

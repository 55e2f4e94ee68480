//===- ds-opt.cpp - the ds compiler driver --------------------------------===//
//
//   ds-opt model.onnx -o model.dsplan            import, default pipeline, plan
//   ds-opt model.onnx --emit=mlir                imported ds IR
//   ds-opt model.onnx --mlir-print-ir-after-all -o m.dsplan
//   ds-opt some.mlir --ds-plan-memory            mlir-opt behaviour for .mlir
//
//===----------------------------------------------------------------------===//
#include "ds/Config/DeepSpeedConfig.h"
#include "ds/Import/OnnxImporter.h"
#include "ds/Import/OnnxModelFile.h"
#include "ds/Import/TorchParameters.h"
#include "llvm/Support/Path.h"
#include <set>
#include "ds/InitAll.h"
#include "ds/Plan/EmitPlan.h"
#include "ds/Pipelines/Pipelines.h"
#include "ds/Plan/Report.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/AsmState.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Support/Timing.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "ds/Config/ConfigKeys.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "ds/BuildInfo.h"
#include "ds/Support/TextLimits.h"
#include "tools/OutOfMemory.h"
#include "runtime/cpu/CpuFeatures.h"
#include "llvm/Support/ErrorHandling.h"
#include <csignal>
#include <cstdio>
#include <optional>
#include <tuple>
#include <unistd.h>
#include <sys/stat.h>
#include "runtime/io/Files.h"
#include "runtime/plan/PlanFile.h"
#include "runtime/exec/DryPrepare.h"
#include "runtime/backend/AllBackends.h"
#include "runtime/backend/BackendRegistry.h"
#include "llvm/ADT/SmallPtrSet.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/ToolOutputFile.h"

using namespace mlir;

static llvm::cl::OptionCategory dsCategory("ds-opt options");

static llvm::cl::opt<std::string>
    emitKind("emit",
             llvm::cl::desc("what to write: 'mlir' (IR) or 'plan' (.dsplan); default: "
                            "plan when the output ends in .dsplan, else mlir"),
             llvm::cl::init(""), llvm::cl::cat(dsCategory));

static llvm::cl::list<std::string>
    inputShapes("input-shape",
                llvm::cl::desc("fix a graph input's shape at compile time: NAME=d0,d1,... "
                               "(repeatable)"),
                llvm::cl::cat(dsCategory));

static llvm::cl::opt<std::string> sampleInputs(
    "inputs",
    llvm::cl::desc("inference: dynamic input dimensions take the shapes of these arrays (the "
                   ".npz or .npy ds-run --inputs reads)"),
    llvm::cl::init(""), llvm::cl::cat(dsCategory));

static llvm::cl::list<std::string>
    bindInputs("bind-input",
               llvm::cl::desc("fix a graph input to a value at compile time: NAME=FILE.npy "
                              "(inputs that decide shapes must be; repeatable)"),
               llvm::cl::cat(dsCategory));

static llvm::cl::opt<bool>
    report("report",
           llvm::cl::desc("print per-rank memory (parameters, constants, activation arena, "
                          "inputs, outputs) after the pipeline"),
           llvm::cl::init(false), llvm::cl::cat(dsCategory));

static llvm::cl::opt<int64_t>
    tensorParallel("tensor-parallel",
                   llvm::cl::desc("split the model Megatron-style over N ranks (a `tp` mesh axis); "
                                  "inference: run the plan with mpirun -np N; training: groups "
                                  "of N of the --world-size ranks"),
                   llvm::cl::init(1), llvm::cl::cat(dsCategory));

static llvm::cl::opt<std::string>
    dtypeName("dtype",
              llvm::cl::desc("inference precision: fp32 (default), bf16 or fp16 (matrix products "
                             "in 16 bits with fp32 sums; DeepSpeed-Inference's dtype). Training "
                             "takes it from the config's bf16/fp16 sections"),
              llvm::cl::init(""), llvm::cl::cat(dsCategory));

static llvm::cl::opt<std::string>
    maxMemory("max-memory",
              llvm::cl::desc("cap ds-opt's memory (address space), e.g. 8GiB, 512MiB, 2e9: "
                             "past it compilation ends with an out-of-memory error naming the "
                             "allocation, instead of the machine swapping"),
              llvm::cl::value_desc("SIZE"), llvm::cl::init(""), llvm::cl::cat(dsCategory));

static llvm::cl::opt<std::string>
    deviceMemory("device-memory",
                 llvm::cl::desc("device memory a rank may use, e.g. 2GiB: recorded in the plan "
                                "(ds-run enforces it; the cpu backend bounds its device pool to "
                                "it) and checked now: a plan needing more is an error naming "
                                "what it holds (offload_optimizer moves optimizer state to the "
                                "host)"),
                 llvm::cl::value_desc("SIZE"), llvm::cl::init(""), llvm::cl::cat(dsCategory));

static llvm::cl::opt<std::string>
    offloadWeights("offload-weights",
                   llvm::cl::desc("ZeRO-Inference: keep an inference (or --generate) plan's "
                                  "weights in host memory (cpu) or on NVMe (nvme; ds-run "
                                  "--nvme-path), each fetched to the device a layer ahead of "
                                  "its use; none (default): on the device"),
                   llvm::cl::value_desc("cpu|nvme|none"), llvm::cl::init(""), llvm::cl::cat(dsCategory));

static llvm::cl::opt<int64_t> offloadWeightsThreshold(
    "offload-weights-threshold",
    llvm::cl::desc("--offload-weights: weights with fewer elements stay on the device "
                   "(DeepSpeed's stage3_param_persistence_threshold)"),
    llvm::cl::init(100000), llvm::cl::cat(dsCategory));

static llvm::cl::opt<int64_t>
    maxNodes("max-nodes",
             llvm::cl::desc("refuse ONNX graphs with more nodes (a bound for untrusted files; "
                            "docs/security.md)"),
             llvm::cl::init(1000000), llvm::cl::cat(dsCategory));
static llvm::cl::opt<int64_t>
    maxElements("max-elements",
                llvm::cl::desc("refuse tensors with more elements (inputs, initializers, every "
                               "node's results; default 2^40)"),
                llvm::cl::init(int64_t(1) << 40), llvm::cl::cat(dsCategory));
static llvm::cl::list<std::string> configSet(
    "set",
    llvm::cl::desc("override a key of the --config file: KEY=VALUE, KEY a dotted path such as "
                   "optimizer.params.lr, VALUE JSON or else a string (repeatable); fills "
                   "Hugging Face's \"auto\" values"),
    llvm::cl::value_desc("KEY=VALUE"), llvm::cl::cat(dsCategory));
static llvm::cl::opt<bool> shapesOnly(
    "shapes-only",
    llvm::cl::desc("import initializers stored as external data as placeholders of their shape, "
                   "without reading them: --report on a model whose weights are elsewhere or too "
                   "large to load (what-if at scale); no plan is written"),
    llvm::cl::init(false), llvm::cl::cat(dsCategory));
static llvm::cl::opt<int64_t>
    maxConfigBytes("max-config-bytes",
                   llvm::cl::desc("refuse a ds_config.json larger than this (default 16 MiB)"),
                   llvm::cl::init(int64_t(16) << 20), llvm::cl::cat(dsCategory));
static llvm::cl::opt<int64_t>
    maxNesting("max-nesting",
               llvm::cl::desc("refuse ONNX text, JSON models and configs nested deeper (the "
                              "parsers recurse per level)"),
               llvm::cl::init(256), llvm::cl::cat(dsCategory));

static llvm::cl::OptionCategory quantizeCategory("ds-opt quantization options");
static llvm::cl::opt<std::string>
    quantizeScheme("quantize",
                   llvm::cl::desc("quantize products with constant weights: int8-dynamic (int8 "
                                  "weights per output channel, activations per row at run time), "
                                  "int8-weight or int4-weight (weights only, activations stay "
                                  "f32), int4-dynamic (int4 weights, int8 activations per row)"),
                   llvm::cl::init(""), llvm::cl::cat(quantizeCategory));
static llvm::cl::opt<int64_t>
    quantizeGroupSize("group-size",
                      llvm::cl::desc("--quantize: values of K per scale (0: one per output "
                                     "channel; default 128 for int4, 0 for int8)"),
                      llvm::cl::init(-1), llvm::cl::cat(quantizeCategory));
static llvm::cl::list<std::string>
    quantizeSkip("quantize-skip",
                 llvm::cl::desc("--quantize: leave products whose weight name or node contains "
                                "this (repeatable, comma-separated)"),
                 llvm::cl::CommaSeparated, llvm::cl::cat(quantizeCategory));
static llvm::cl::opt<bool>
    quantizeKeepFirst("quantize-keep-first",
                      llvm::cl::desc("--quantize: leave each program's first product in f32"),
                      llvm::cl::init(false), llvm::cl::cat(quantizeCategory));
static llvm::cl::opt<bool>
    quantizeKeepLast("quantize-keep-last",
                     llvm::cl::desc("--quantize: leave each program's last product in f32 (an "
                                    "LM head)"),
                     llvm::cl::init(false), llvm::cl::cat(quantizeCategory));

static llvm::cl::OptionCategory generateCategory("ds-opt generation options (causal LMs)");
static llvm::cl::opt<bool>
    generate("generate",
             llvm::cl::desc("compile a causal LM for generation: prefill and one-token decode "
                            "programs sharing a KV cache (ds-run --prompt)"),
             llvm::cl::init(false), llvm::cl::cat(generateCategory));
static llvm::cl::opt<int64_t>
    maxTokens("max-tokens",
              llvm::cl::desc("--generate: tokens a sequence may hold, prompt and generated "
                             "(the KV cache's length; default: the config's max_out_tokens, "
                             "a model's fixed sequence length, else 1024 as DeepSpeed)"),
              llvm::cl::init(0), llvm::cl::cat(generateCategory));
static llvm::cl::opt<int64_t>
    generateBatch("batch",
                  llvm::cl::desc("--generate: sequences generated at once (rows of the batch)"),
                  llvm::cl::init(1), llvm::cl::cat(generateCategory));
static llvm::cl::opt<int64_t>
    prefillChunk("prefill-chunk",
                 llvm::cl::desc("--generate: prompt tokens per row in one prefill step"),
                 llvm::cl::init(128), llvm::cl::cat(generateCategory));

static llvm::cl::OptionCategory estimateCategory(
    "ds-opt ZeRO memory estimator (DeepSpeed's estimate_zero2/3_model_states_mem_needs)");
static llvm::cl::opt<int> estimateZero(
    "estimate-zero", llvm::cl::desc("print DeepSpeed's model-state memory table for ZeRO stage 2 or 3 "
                                    "and exit (no model needed)"),
    llvm::cl::init(0), llvm::cl::cat(estimateCategory));
static llvm::cl::opt<int64_t> estimateParams("params", llvm::cl::desc("total parameters"),
                                             llvm::cl::init(0), llvm::cl::cat(estimateCategory));
static llvm::cl::opt<int64_t> estimateLargest("largest-layer",
                                              llvm::cl::desc("largest layer's parameters (ZeRO-3)"),
                                              llvm::cl::init(0), llvm::cl::cat(estimateCategory));
static llvm::cl::opt<int64_t> estimateGpus("gpus-per-node", llvm::cl::init(1),
                                           llvm::cl::desc("GPUs per node"),
                                           llvm::cl::cat(estimateCategory));
static llvm::cl::opt<int64_t> estimateNodes("nodes", llvm::cl::init(1), llvm::cl::desc("nodes"),
                                            llvm::cl::cat(estimateCategory));

static llvm::cl::OptionCategory trainCategory("ds-opt training options");
static llvm::cl::opt<bool> printConfigKeys(
    "print-config-keys",
    llvm::cl::desc("print every DeepSpeed config key ds reads and what it does with it "
                   "(markdown: docs/generated/config-keys.md) and exit"),
    llvm::cl::init(false), llvm::cl::cat(trainCategory));
static llvm::cl::opt<bool> checkConfigKeyTable(
    "check-config-keys",
    llvm::cl::desc("check the config key table against the config reader (a self-test) and "
                   "exit"),
    llvm::cl::init(false), llvm::cl::Hidden, llvm::cl::cat(trainCategory));

static llvm::cl::opt<std::string>
    configPath("config", llvm::cl::desc("DeepSpeed config (ds_config.json): compile a training plan"),
               llvm::cl::init(""), llvm::cl::cat(trainCategory));
static llvm::cl::opt<std::string>
    lossKind("loss",
             llvm::cl::desc("softmax-cross-entropy | mse | graph (the graph's --loss-output is "
                            "the loss): compile a training plan"),
             llvm::cl::init(""), llvm::cl::cat(trainCategory));
static llvm::cl::opt<std::string> trainData(
    "data",
    llvm::cl::desc("training: dynamic input dimensions after the batch take the per-sample "
                   "shapes of this .npz (the file ds-run --data reads)"),
    llvm::cl::init(""), llvm::cl::cat(trainCategory));
static llvm::cl::opt<std::string> labelsName("labels", llvm::cl::desc("name of the labels input"),
                                             llvm::cl::init("labels"), llvm::cl::cat(trainCategory));
static llvm::cl::opt<std::string>
    lossOutput("loss-output", llvm::cl::desc("model output the loss uses (default: the first)"),
               llvm::cl::init(""), llvm::cl::cat(trainCategory));
static llvm::cl::opt<int64_t> ignoreIndex("ignore-index",
                                          llvm::cl::desc("label softmax-cross-entropy ignores"),
                                          llvm::cl::init(-100), llvm::cl::cat(trainCategory));
static llvm::cl::list<std::string> freeze("freeze", llvm::cl::desc("parameter not to train (repeatable)"),
                                          llvm::cl::cat(trainCategory));
static llvm::cl::opt<std::string> parametersFile(
    "parameters",
    llvm::cl::desc("train exactly the initializers named in FILE, one a line (as PyTorch's "
                   "named_parameters() prints them; '#' starts a comment); default: every float "
                   "initializer with more than one element"),
    llvm::cl::value_desc("FILE"), llvm::cl::init(""), llvm::cl::cat(trainCategory));
static llvm::cl::list<std::string>
    tieNames("tie",
             llvm::cl::desc("keep an initializer that several layers read as one parameter "
                            "(by default an exporter's merge of equal scales or biases is "
                            "untied; repeatable)"),
             llvm::cl::value_desc("NAME"), llvm::cl::cat(trainCategory));
static llvm::cl::list<std::string>
    untieNames("untie",
               llvm::cl::desc("train an initializer that several nodes read as one parameter "
                              "per node, and never tie it to an equal one (repeatable)"),
               llvm::cl::value_desc("NAME"), llvm::cl::cat(trainCategory));
static llvm::cl::list<std::string>
    gradInputs("grad-input",
               llvm::cl::desc("graph input whose gradient train_step also returns (repeatable)"),
               llvm::cl::cat(trainCategory));
static llvm::cl::opt<std::string> recompute(
    "recompute",
    llvm::cl::desc("activation checkpointing: none, layers (a checkpoint per layer), sqrt "
                   "(Chen et al.'s sqrt(n) checkpoints) or budget (--recompute-budget); default: "
                   "layers when the config has an activation_checkpointing section, else none"),
    llvm::cl::value_desc("POLICY"), llvm::cl::init(""), llvm::cl::cat(trainCategory));
static llvm::cl::opt<int64_t> recomputeCheckpoints(
    "recompute-checkpoints",
    llvm::cl::desc("--recompute layers: keep this many layer outputs, evenly spread (default: "
                   "the config's number_checkpoints, else every layer's)"),
    llvm::cl::init(-1), llvm::cl::cat(trainCategory));
static llvm::cl::opt<std::string> recomputeBudget(
    "recompute-budget",
    llvm::cl::desc("recompute the fewest layers whose activations fit SIZE (e.g. 2GiB; "
                   "estimated before fusion; implies --recompute budget)"),
    llvm::cl::value_desc("SIZE"), llvm::cl::init(""), llvm::cl::cat(trainCategory));
static llvm::cl::opt<int64_t> worldSize("world-size",
                                        llvm::cl::desc("ranks of a training run: data-parallel "
                                                       "x tensor-parallel (--tensor-parallel or "
                                                       "tensor_parallel.autotp_size)"),
                                        llvm::cl::init(1), llvm::cl::cat(trainCategory));
static llvm::cl::list<std::string>
    disableFusion("disable-fusion",
                  llvm::cl::desc("leave out an optimization of the default pipelines, to "
                                 "compare: epilogues, channels-last, elementwise"),
                  llvm::cl::CommaSeparated, llvm::cl::cat(dsCategory));

static bool isOnnxFile(llvm::StringRef path) {
  return path.ends_with(".onnx") || path.ends_with(".onnxtxt") ||
         path.ends_with(".onnxtext") || path.ends_with(".json");
}

/// "where: error: message" for diagnostics from the importer and passes run
/// on ONNX input, where locations are node names rather than source lines.
static void printDiagnostic(Diagnostic &diag) {
  std::string where;
  llvm::raw_string_ostream os(where);
  Location loc = diag.getLocation();
  if (auto name = dyn_cast<NameLoc>(loc))
    os << name.getName().getValue();
  else if (auto file = dyn_cast<FileLineColLoc>(loc))
    os << file.getFilename().getValue()
       << (file.getLine() ? ":" + std::to_string(file.getLine()) : std::string());
  else
    loc.print(os);
  const char *kind = diag.getSeverity() == DiagnosticSeverity::Error     ? "error"
                     : diag.getSeverity() == DiagnosticSeverity::Warning ? "warning"
                                                                         : "note";
  llvm::errs() << where << ": " << kind << ": " << diag.str() << "\n";
  for (Diagnostic &note : diag.getNotes()) printDiagnostic(note);
}

static int fail(const llvm::Twine &msg) {
  llvm::errs() << "ds-opt: error: " << msg << "\n";
  return 1;
}

/// fp16 where this CPU widens 16-bit products to f32 (no AMX-FP16) runs
/// slower than fp32: say so, and name bf16 (as DeepSpeed's docs do for
/// hardware without fast fp16).
static void noteHalfPrecisionSpeed(const std::string &precision, bool training) {
  if (precision != "fp16" || ::ds::rt::cpu::native16BitProducts(/*fp16=*/true)) return;
  const bool bf16 = ::ds::rt::cpu::native16BitProducts(/*fp16=*/false);
  llvm::errs() << "ds-opt: note: this CPU has no AMX-FP16: fp16 matrix products (beyond a few "
                  "rows) run as fp32 ones on converted copies, no faster than fp32 and slower by "
                  "the conversions; "
               << (bf16 ? "bf16 runs natively here and keeps fp32's range"
                        : "bf16 keeps fp32's range (its products are widened here too)")
               << " (" << (training ? "the config's \"bf16\": {\"enabled\": true}" : "--dtype bf16")
               << ")\n";
}

/// ds-run's load-time kernel checks (runtime/exec/DryPrepare.h) on the
/// CPU backend.
static absl::Status dryPrepareOnHost(const ::ds::plan::Plan &plan) {
  DS_RETURN_IF_ERROR(::ds::rt::registerAllBackends());
  DS_ASSIGN_OR_RETURN(std::unique_ptr<::ds::rt::Backend> backend,
                      ::ds::rt::createBackend("cpu", ::ds::rt::BackendOptions{}));
  return ::ds::rt::dryPrepare(plan, *backend);
}

/// --estimate-zero: DeepSpeed's model-state estimators, no model needed.
static int runEstimateZero() {
  if (estimateZero != 2 && estimateZero != 3)
    return fail("--estimate-zero takes 2 or 3");
  if (estimateParams <= 0 || estimateGpus <= 0 || estimateNodes <= 0 ||
      (estimateZero == 3 && estimateLargest <= 0))
    return fail("--estimate-zero needs --params > 0, --gpus-per-node and --nodes > 0"
                " (and --largest-layer > 0 for stage 3)");
  // The GPU count (and the byte counts made from it) must not wrap.
  int64_t gpus = 0;
  if (__builtin_mul_overflow(static_cast<int64_t>(estimateGpus), static_cast<int64_t>(estimateNodes),
                             &gpus) ||
      gpus > (int64_t{1} << 40))
    return fail("--estimate-zero: --gpus-per-node " + std::to_string(estimateGpus) + " x --nodes " +
                std::to_string(estimateNodes) + " is more than 2^40 GPUs");
  mlir::ds::printZeroEstimate(estimateZero, estimateParams, estimateLargest, estimateGpus,
                              estimateNodes, llvm::outs());
  return 0;
}

/// --generate with an inference config's max_out_tokens (set by
/// checkGenerateFlags).
static bool generateTokensFromConfig = false;

/// --generate's flags, checked before the import; the config's
/// max_out_tokens fills --max-tokens. Non-zero: exit code.
static int checkGenerateFlags(bool onnx) {
  const bool any = maxTokens.getNumOccurrences() || generateBatch.getNumOccurrences() ||
                   prefillChunk.getNumOccurrences();
  if (!generate) {
    if (any) return fail("--max-tokens, --batch and --prefill-chunk apply to --generate");
    return 0;
  }
  if (!onnx) return fail("--generate compiles an ONNX model (.onnx, .onnxtxt, .json)");
  if (!lossKind.empty()) return fail("--generate compiles an inference plan; it excludes --loss");
  if (!configPath.empty()) {
    std::string error;
    auto inference = mlir::ds::asInferenceConfig(configPath, error);
    if (!error.empty()) return fail(error);
    if (!inference)
      return fail("--generate takes a DeepSpeed-Inference config (dtype, tensor_parallel, "
                  "max_out_tokens), not a training one: " + configPath);
    if (inference->maxOutTokens) {
      if (maxTokens.getNumOccurrences() && maxTokens != inference->maxOutTokens)
        return fail("--max-tokens " + llvm::Twine(maxTokens.getValue()) +
                    " disagrees with the config's max_out_tokens " +
                    llvm::Twine(inference->maxOutTokens));
      maxTokens = inference->maxOutTokens;
      generateTokensFromConfig = true;
    }
  }
  if (maxTokens.getNumOccurrences() && (maxTokens < 2 || maxTokens > (int64_t(1) << 24)))
    return fail("--max-tokens must be in [2, 2^24], got " + llvm::Twine(maxTokens.getValue()));
  if (generateBatch < 1 || generateBatch > 4096)
    return fail("--batch must be in [1, 4096], got " + llvm::Twine(generateBatch.getValue()));
  if (prefillChunk < 1)
    return fail("--prefill-chunk must be >= 1, got " + llvm::Twine(prefillChunk.getValue()));
  if (!inputShapes.empty() || !sampleInputs.empty())
    return fail("--generate fixes the model's input shapes itself (--batch, --max-tokens); "
                "--input-shape and --inputs do not apply");
  if (llvm::is_contained(disableFusion, "attention"))
    return fail("--generate needs attention fusion (the cache is appended by the fused "
                "attention); --disable-fusion=attention excludes it");
  return 0;
}

/// Hugging Face's "auto" micro batch: the batch the model's inputs have,
/// from --input-shape or the exported graph's first input (0: neither
/// fixes one, or the config does not ask).
static int64_t modelMicroBatch(const std::string &inputFilename,
                               const mlir::ds::ImportOptions &options) {
  // Only a config the reader would read: a regular file within the size
  // and nesting limits (it reports the others).
  llvm::sys::fs::file_status st;
  if (llvm::sys::fs::status(configPath, st) || !llvm::sys::fs::is_regular_file(st) ||
      st.getSize() > static_cast<uint64_t>(mlir::ds::maxConfigBytes()))
    return 0;
  auto text = llvm::MemoryBuffer::getFile(configPath);
  if (!text || !mlir::ds::checkNesting((*text)->getBuffer()).empty()) return 0;
  llvm::Expected<llvm::json::Value> cfg = llvm::json::parse((*text)->getBuffer());
  if (!cfg) {
    llvm::consumeError(cfg.takeError());
    return 0;
  }
  const llvm::json::Object *root = cfg->getAsObject();
  const llvm::json::Value *mbs = root ? root->get("train_micro_batch_size_per_gpu") : nullptr;
  if (!mbs || mbs->getAsString() != std::optional<llvm::StringRef>("auto")) return 0;
  for (const std::string &set : configSet)
    if (llvm::StringRef(set).starts_with("train_micro_batch_size_per_gpu=")) return 0;
  if (!inputShapes.empty()) { // the first --input-shape given
    llvm::StringRef name = llvm::StringRef(inputShapes.front()).split('=').first;
    auto it = options.inputShapes.find(name);
    return it != options.inputShapes.end() && !it->second.empty() ? it->second.front() : 0;
  }
  auto model = mlir::ds::readModelWithoutData(inputFilename, [](const std::string &) { return true; });
  if (!model) {
    llvm::consumeError(model.takeError());
    return 0;
  }
  std::set<std::string> initializers;
  for (const auto &t : model->graph().initializer()) initializers.insert(t.name());
  for (const auto &in : model->graph().input()) {
    if (initializers.count(in.name())) continue;
    const auto &tt = in.type().tensor_type();
    if (tt.has_shape() && tt.shape().dim_size() > 0 && tt.shape().dim(0).has_dim_value())
      return tt.shape().dim(0).dim_value();
    return 0;
  }
  return 0;
}

/// The module to compile: an ONNX model imported (errors name its nodes) or
/// ds IR parsed. Null after printing the error.
static OwningOpRef<ModuleOp> loadModule(MLIRContext &context, const std::string &inputFilename,
                                        bool onnx) {
  if (onnx) {
    context.getDiagEngine().registerHandler([](Diagnostic &diag) {
      printDiagnostic(diag);
      return success();
    });
    mlir::ds::ImportOptions options;
    options.maxNodes = maxNodes;
    options.maxElements = maxElements;
    options.shapesOnly = shapesOnly;
    for (const std::string &spec : inputShapes) {
      std::string error;
      if (!mlir::ds::parseInputShapeSpec(spec, options, error)) return fail(error), nullptr;
    }
    for (const std::string &spec : bindInputs) {
      std::string error;
      if (!mlir::ds::parseBindInputSpec(spec, options, error)) return fail(error), nullptr;
    }
    // Training: a dynamic batch dimension is the config's micro batch, as
    // DeepSpeed feeds it. A config that does not read is reported now,
    // naming its key (the import would otherwise stop first, at a dynamic
    // dimension the config was meant to fix).
    if (!configPath.empty()) {
      std::string error;
      bool inference = mlir::ds::asInferenceConfig(configPath, error).has_value();
      if (!inference || !lossKind.empty()) {
        options.training = true;
        auto cfg = mlir::ds::readDeepSpeedConfig(configPath, worldSize,
                                                 tensorParallel > 1 ? tensorParallel : 0,
                                                 configSet, modelMicroBatch(inputFilename, options));
        if (!cfg) return fail(llvm::toString(cfg.takeError())), nullptr;
        if (cfg->microBatchSize > 0) {
          options.batchSize = cfg->microBatchSize;
          options.batchSource = "train_micro_batch_size_per_gpu";
        }
      }
    }
    if (!sampleInputs.empty() && !trainData.empty())
      return fail("--inputs (inference) and --data (training) exclude each other"), nullptr;
    if (!trainData.empty() && configPath.empty() && lossKind.empty())
      return fail("--data shapes a training plan: give --config or --loss (inference: --inputs)"),
             nullptr;
    if (!sampleInputs.empty() || !trainData.empty()) {
      std::string error;
      bool training = !trainData.empty();
      if (!mlir::ds::readDataShapes(training ? trainData : sampleInputs, training, options,
                                    error))
        return fail(error), nullptr;
    }
    if (!lossKind.empty()) options.training = true;
    if (generate) {
      options.generateBatch = generateBatch;
      options.generateTokens = maxTokens;
      options.generateTokensGiven = maxTokens.getNumOccurrences() > 0 || generateTokensFromConfig;
      if (options.generateTokens == 0) options.generateTokens = 1024; // DeepSpeed's max_out_tokens
    }
    options.tie.assign(tieNames.begin(), tieNames.end());
    options.untie.assign(untieNames.begin(), untieNames.end());
    OwningOpRef<ModuleOp> module = mlir::ds::importOnnxFile(&context, inputFilename, options);
    if (!module) fail("cannot import " + inputFilename);
    return module;
  }
  if (!inputShapes.empty() || !sampleInputs.empty() || !trainData.empty())
    return fail("--input-shape, --inputs and --data apply to ONNX inputs only"), nullptr;
  llvm::SourceMgr sourceMgr;
  SourceMgrDiagnosticHandler handler(sourceMgr, &context);
  std::string error;
  auto file = openInputFile(inputFilename, &error);
  if (!file) return fail(error), nullptr;
  sourceMgr.AddNewSourceBuffer(std::move(file), llvm::SMLoc());
  OwningOpRef<ModuleOp> module = parseSourceFile<ModuleOp>(sourceMgr, &context);
  if (!module) return nullptr;
  // The ONNX importer's element limit, for IR written by hand: a type of
  // 2^63 elements or more would wrap where constant folding counts them.
  bool tooBig = false;
  auto check = [&](Type t, Operation *op) {
    auto rt = dyn_cast<RankedTensorType>(t);
    if (!rt || tooBig) return;
    uint64_t n = 1;
    for (int64_t d : rt.getShape()) {
      if (d < 0) return; // dynamic
      if (__builtin_mul_overflow(n, static_cast<uint64_t>(d), &n)) n = UINT64_MAX;
    }
    if (n > static_cast<uint64_t>(maxElements.getValue())) {
      op->emitError() << "type " << rt << " has "
                      << (n == UINT64_MAX ? std::string("more than 2^64") : std::to_string(n))
                      << " elements, over the limit of "
                      << std::to_string(static_cast<long long>(maxElements.getValue()))
                      << " (ds-opt --max-elements raises it)";
      tooBig = true;
    }
  };
  module->walk([&](Operation *op) {
    for (Type t : op->getResultTypes()) check(t, op);
    for (Region &r : op->getRegions())
      for (Block &b : r)
        for (BlockArgument a : b.getArguments()) check(a.getType(), op);
  });
  if (tooBig) return nullptr;
  return module;
}

/// Every file ds-opt reads must be a regular file: a FIFO would block the
/// open and a device (/dev/zero) never ends (docs/security.md). A text IR
/// input is also checked for nesting before MLIR's recursive parser runs.
static int checkInputFiles(const std::string &inputFilename, const std::string &outputFilename,
                           bool onnx) {
  std::vector<std::pair<std::string, std::string>> files = {
      {"input", inputFilename}, {"--config", configPath}, {"--parameters", parametersFile},
      {"--inputs", sampleInputs}, {"--data", trainData}};
  for (const std::string &spec : bindInputs)
    files.push_back({"--bind-input", llvm::StringRef(spec).split('=').second.str()});
  for (const auto &[what, path] : files) {
    if (path.empty() || path == "-") continue;
    struct stat st;
    if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode))
      return fail(what + " " + path + " is not a regular file");
  }
  // MLIR text goes to its output directly (not renamed over it), so
  // /dev/null is fine for it; a plan is written aside and renamed.
  const bool planOut = emitKind == "plan" ||
                       (emitKind.empty() && llvm::StringRef(outputFilename).ends_with(".dsplan"));
  if (outputFilename != "-" && (planOut || outputFilename != "/dev/null")) {
    // The output replaces its file (written aside, renamed): never a
    // device or FIFO, never the input.
    if (auto st = ::ds::rt::checkOutputFile(outputFilename, "-o"); !st.ok())
      return fail(std::string(st.message()));
    // Nor any file the compilation reads (it would be gone for the next).
    for (const auto &[what, path] : files)
      if (!path.empty() && path != "-" && ::ds::rt::sameFile(outputFilename, path))
        return fail("-o " + outputFilename + " is the " + what + " file; name another file");
  }
  if (onnx || inputFilename == "-") return 0;
  auto text = ::ds::rt::readRegularFile(inputFilename, uint64_t(1) << 32);
  if (!text.ok()) return 0; // MLIR's reader reports a missing file itself
  std::string deep =
      mlir::ds::checkNesting(*text, mlir::ds::maxTextNesting(), mlir::ds::TextSyntax::Mlir);
  if (!deep.empty()) return fail(inputFilename + ": " + deep);
  return 0;
}

/// --parameters FILE: one initializer name a line; blank lines and text
/// after '#' are ignored.
static llvm::Expected<std::vector<std::string>> readParameterNames(const std::string &path) {
  auto buf = llvm::MemoryBuffer::getFile(path, /*IsText=*/true);
  if (!buf)
    return llvm::createStringError("--parameters: cannot read " + path + ": " +
                                       buf.getError().message(),
                                   buf.getError());
  std::vector<std::string> names;
  llvm::SmallVector<llvm::StringRef> lines;
  (*buf)->getBuffer().split(lines, '\n');
  for (llvm::StringRef line : lines) {
    llvm::StringRef name = line.split('#').first.trim();
    if (!name.empty()) names.push_back(name.str());
  }
  if (names.empty())
    return llvm::createStringError("--parameters: " + path + " names no parameter",
                                   std::make_error_code(std::errc::invalid_argument));
  return names;
}

/// The passes to run when the user named none: the training pipeline for
/// --config/--loss, the inference pipeline when a plan or report is wanted.
/// A DeepSpeed-Inference config (tensor_parallel.tp_size) compiles an
/// inference plan; any other --config a training one. Non-zero: exit code.
static int addDefaultPipeline(PassManager &pm, const std::string &emit, int64_t modelBatch) {
  for (const std::string &name : disableFusion)
    if (llvm::find(mlir::ds::fusionNames(), name) == mlir::ds::fusionNames().end())
      return fail("--disable-fusion: unknown fusion '" + name + "' (known: " +
                  llvm::join(mlir::ds::fusionNames(), ", ") + ")");
  if (!configPath.empty() && lossKind.empty()) {
    std::string error;
    if (auto inference = mlir::ds::asInferenceConfig(configPath, error)) {
      if (!error.empty()) return fail(error);
      if (tensorParallel > 1 && tensorParallel != inference->tpSize)
        return fail("--tensor-parallel " + llvm::Twine(tensorParallel.getValue()) +
                    " disagrees with the config's tp_size " + llvm::Twine(inference->tpSize));
      tensorParallel = inference->tpSize;
      if (inference->dtype != mlir::ds::PrecisionConfig::Kind::FP32) {
        std::string fromConfig = mlir::ds::precisionName(inference->dtype);
        if (!dtypeName.empty() && dtypeName != fromConfig)
          return fail("--dtype " + dtypeName + " disagrees with the config's dtype " + fromConfig);
        dtypeName = fromConfig;
      }
      configPath.setValue("");
    }
  }
  std::string precision = "fp32";
  if (!dtypeName.empty()) {
    auto kind = mlir::ds::parseDtypeName(dtypeName);
    if (!kind) return fail("--dtype: expected fp32, bf16 or fp16, got '" + dtypeName + "'");
    precision = mlir::ds::precisionName(*kind);
  }
  noteHalfPrecisionSpeed(precision, /*training=*/false);
  bool training = !configPath.empty() || !lossKind.empty();
  // Training flags on an inference plan would be ignored silently.
  if (!training)
    for (const auto &[name, given] : std::vector<std::pair<const char *, bool>>{
             {"--labels", labelsName.getNumOccurrences() > 0},
             {"--loss-output", lossOutput.getNumOccurrences() > 0},
             {"--ignore-index", ignoreIndex.getNumOccurrences() > 0},
             {"--freeze", freeze.getNumOccurrences() > 0},
             {"--parameters", parametersFile.getNumOccurrences() > 0},
             {"--grad-input", gradInputs.getNumOccurrences() > 0},
             {"--tie", tieNames.getNumOccurrences() > 0},
             {"--untie", untieNames.getNumOccurrences() > 0},
             {"--recompute", recompute.getNumOccurrences() > 0},
             {"--recompute-checkpoints", recomputeCheckpoints.getNumOccurrences() > 0},
             {"--recompute-budget", recomputeBudget.getNumOccurrences() > 0}})
      if (given)
        return fail(std::string(name) + " applies to training plans (--config/--loss); this "
                                        "compiles an inference plan");
  // Only the cross-entropy ds builds has labels to ignore.
  if (training && ignoreIndex.getNumOccurrences() > 0 && !lossKind.empty() &&
      lossKind != "softmax-cross-entropy")
    return fail("--ignore-index applies to --loss softmax-cross-entropy; --loss " + lossKind +
                " has no ignored labels");
  if (!training && worldSize != 1)
    return fail("--world-size applies to training plans (--config/--loss); an inference plan "
                "over several ranks is --tensor-parallel N");
  if (tensorParallel < 1 || tensorParallel > 4096)
    return fail("--tensor-parallel must be in [1, 4096], got " + llvm::Twine(tensorParallel));
  if (training && worldSize % tensorParallel)
    return fail("--tensor-parallel " + llvm::Twine(tensorParallel.getValue()) +
                " does not divide --world-size " + llvm::Twine(worldSize.getValue()) +
                " (every rank is in one tensor-parallel group of that size)");
  if (!quantizeScheme.empty() && quantizeScheme != "int8-dynamic" &&
      quantizeScheme != "int8-weight" && quantizeScheme != "int4-weight" &&
      quantizeScheme != "int4-dynamic")
    return fail("--quantize: expected int8-dynamic, int8-weight, int4-weight or int4-dynamic, got '" +
                quantizeScheme + "'");
  if (quantizeScheme.empty() &&
      (quantizeGroupSize.getNumOccurrences() || quantizeSkip.getNumOccurrences() ||
       quantizeKeepFirst || quantizeKeepLast))
    return fail("--group-size, --quantize-skip and --quantize-keep-first/last apply to --quantize");
  if (quantizeGroupSize.getNumOccurrences() && quantizeGroupSize < 0)
    return fail("--group-size must be >= 0, got " + llvm::Twine(quantizeGroupSize.getValue()));
  if (!quantizeScheme.empty() && quantizeScheme == "int8-dynamic" && quantizeGroupSize > 0)
    return fail("--quantize int8-dynamic quantizes weights per output channel; --group-size "
                "applies to int8-weight and int4-weight");
  if (!offloadWeights.empty() && offloadWeights != "cpu" && offloadWeights != "nvme" &&
      offloadWeights != "none")
    return fail("--offload-weights: expected cpu, nvme or none, got '" + offloadWeights + "'");
  if (offloadWeightsThreshold.getNumOccurrences() && offloadWeights != "cpu" &&
      offloadWeights != "nvme")
    return fail("--offload-weights-threshold applies to --offload-weights cpu or nvme");
  if (offloadWeightsThreshold < 0)
    return fail("--offload-weights-threshold must be >= 0");
  if (training && !offloadWeights.empty())
    return fail("--offload-weights places an inference plan's weights; a training plan offloads "
                "its parameters with the config's zero_optimization.offload_param");
  if (training && !quantizeScheme.empty())
    return fail("--quantize compiles inference plans (quantization-aware training is the "
                "config's compression_training)");
  if (training && !dtypeName.empty())
    return fail("--dtype is for inference; training takes its precision from the config's "
                "bf16 / fp16 sections");
  if (training && pm.size() == 0) {
    mlir::ds::TrainingPipelineOptions t;
    t.configPath = configPath;
    t.configOverrides.assign(configSet.begin(), configSet.end());
    t.worldSize = worldSize;
    if (!lossKind.empty()) t.loss = lossKind;
    t.labels = labelsName;
    t.lossOutput = lossOutput;
    t.ignoreIndex = ignoreIndex;
    t.frozen.assign(freeze.begin(), freeze.end());
    if (!parametersFile.empty()) {
      auto names = readParameterNames(parametersFile);
      if (!names) return fail(llvm::toString(names.takeError()));
      t.trainOnly = std::move(*names);
      for (const std::string &f : freeze)
        if (llvm::is_contained(t.trainOnly, f))
          return fail("--freeze " + f + " names a parameter " + parametersFile +
                      " (--parameters) lists to train: drop one of the two");
    }
    t.gradInputs.assign(gradInputs.begin(), gradInputs.end());
    t.recompute = recompute;
    if (!t.recompute.empty() && t.recompute != "none" && t.recompute != "layers" &&
        t.recompute != "sqrt" && t.recompute != "budget")
      return fail("--recompute: expected none, layers, sqrt or budget, got '" + t.recompute + "'");
    if (recomputeCheckpoints.getNumOccurrences() && recomputeCheckpoints < 1)
      return fail("--recompute-checkpoints must be >= 1, got " +
                  llvm::Twine(recomputeCheckpoints.getValue()));
    t.recomputeCheckpoints = recomputeCheckpoints;
    if (!recomputeBudget.empty()) {
      std::optional<unsigned long long> bytes = ::ds::tools::parseByteSize(recomputeBudget);
      if (!bytes || *bytes == 0 || *bytes > (1ull << 62))
        return fail("--recompute-budget: expected a size such as 2GiB, 512MiB or 2e9, got '" +
                    recomputeBudget + "'");
      if (!t.recompute.empty() && t.recompute != "budget")
        return fail("--recompute-budget goes with --recompute budget, not --recompute " +
                    t.recompute);
      t.recompute = "budget";
      t.recomputeBudget = static_cast<int64_t>(*bytes);
    } else if (t.recompute == "budget") {
      return fail("--recompute budget needs --recompute-budget SIZE");
    }
    t.inference.disabledFusions.assign(disableFusion.begin(), disableFusion.end());
    // The config's precision and tensor parallelism (a config that does
    // not read fails in the pipeline, naming its key).
    t.tensorParallel = tensorParallel;
    if (!configPath.empty()) {
      if (auto cfg = mlir::ds::readDeepSpeedConfig(configPath, worldSize,
                                                   tensorParallel > 1 ? tensorParallel : 0,
                                                   configSet, modelBatch)) {
        t.inference.precision = mlir::ds::precisionName(cfg->precision.kind);
        noteHalfPrecisionSpeed(t.inference.precision, /*training=*/true);
        t.tensorParallel = cfg->tensorParallel;
        if (worldSize > 1)
          t.inference.communication = mlir::ds::precisionName(cfg->precision.communication);
      } else
        llvm::consumeError(cfg.takeError());
    }
    mlir::ds::buildTrainingPipeline(pm, t);
  } else if ((emit == "plan" || report || tensorParallel > 1 || generate ||
              !quantizeScheme.empty() || !offloadWeights.empty()) &&
             pm.size() == 0) {
    mlir::ds::InferencePipelineOptions inference;
    if (generate) inference.generateChunk = prefillChunk;
    inference.quantize = quantizeScheme;
    inference.quantizeGroupSize = quantizeGroupSize;
    inference.quantizeSkip.assign(quantizeSkip.begin(), quantizeSkip.end());
    inference.quantizeKeepFirst = quantizeKeepFirst;
    inference.quantizeKeepLast = quantizeKeepLast;
    inference.tensorParallel = tensorParallel;
    inference.disabledFusions.assign(disableFusion.begin(), disableFusion.end());
    inference.precision = precision;
    if (!offloadWeights.empty()) inference.offloadWeights = offloadWeights;
    inference.offloadWeightsThreshold = offloadWeightsThreshold;
    mlir::ds::buildInferencePipeline(pm, inference);
  }
  return 0;
}

/// Training plans carry the source model (trained weights stripped) so
/// ds-run --export-onnx can write it back with the trained values: the
/// model as imported, so the parameters recovered from the exporter's
/// records (TorchParameters.h) are recovered again on this copy.
static int attachSourceModel(ModuleOp module, ::ds::rt::PlanWriter &writer,
                             const std::string &inputFilename) {
  std::set<std::string> bound;
  for (const auto &b : writer.plan().training().export_bindings()) bound.insert(b.initializer());
  llvm::StringMap<std::string> renamed;
  if (auto r = module->getAttrOfType<DictionaryAttr>("ds.renamed_initializers"))
    for (NamedAttribute a : r)
      if (auto to = dyn_cast<StringAttr>(a.getValue())) renamed[a.getName()] = to.str();
  auto model = mlir::ds::readModelWithoutData(inputFilename, [&](const std::string &name) {
    auto it = renamed.find(name);
    return bound.count(name) > 0 || (it != renamed.end() && bound.count(it->second) > 0);
  });
  if (!model) return fail(llvm::toString(model.takeError()));
  mlir::ds::ParameterRecoveryOptions recovery;
  recovery.edit = true;
  recovery.tie.assign(tieNames.begin(), tieNames.end());
  recovery.untie.assign(untieNames.begin(), untieNames.end());
  recovery.modelDir = llvm::sys::path::parent_path(inputFilename).str();
  if (recovery.modelDir.empty()) recovery.modelDir = ".";
  if (auto r = mlir::ds::recoverParameters(*model, recovery); !r)
    return fail(llvm::toString(r.takeError()));
  std::string bytes;
  if (!model->SerializeToString(&bytes)) return fail("cannot serialize the source model");
  writer.plan().set_onnx_graph(bytes);
  return 0;
}

/// Writes the compiled module as ds IR or as a plan.
static int writeOutput(ModuleOp module, const std::string &emit, const std::string &inputFilename,
                       const std::string &outputFilename, bool onnx, uint64_t fingerprint,
                       uint64_t deviceBudget) {
  if (outputFilename != "-" && mlir::ds::isExternalDataFile(outputFilename))
    return fail("-o " + outputFilename + " is a file the model's external data was read from; "
                "name another file");
  if (emit == "mlir") {
    std::string error;
    auto out = openOutputFile(outputFilename, &error);
    if (!out) return fail(error);
    module.print(out->os());
    out->os() << "\n";
    out->os().flush();
    // Reported here, naming the file (raw_fd_ostream would otherwise end
    // the process with LLVM's "IO failure on output stream"); the partial
    // file is removed.
    if (std::error_code ec = out->os().error()) {
      out->os().clear_error();
      return fail("writing " + (outputFilename == "-" ? std::string("standard output")
                                                      : "-o " + outputFilename) +
                  ": " + ec.message());
    }
    out->keep();
    return 0;
  }
  ::ds::rt::PlanWriter writer;
  mlir::ds::EmitPlanOptions emitOptions;
  emitOptions.source = inputFilename;
  emitOptions.modelFingerprint = fingerprint;
  emitOptions.deviceMemoryBudget = deviceBudget;
  if (failed(mlir::ds::emitPlan(module, emitOptions, writer)))
    return 1;
  // What ds-run would refuse at load, refused now (the same arithmetic).
  if (absl::Status st =
          ::ds::rt::checkDeviceBudget(::ds::rt::spaceBytes(writer.plan()), deviceBudget);
      !st.ok())
    return fail("--device-memory: " + std::string(st.message()));
  // And every kernel's own checks, on the CPU backend ds-run's are those of.
  if (absl::Status st = dryPrepareOnHost(writer.plan()); !st.ok())
    return fail("the plan would not load: " + std::string(st.message()));
  if (onnx && writer.plan().has_training())
    if (int rc = attachSourceModel(module, writer, inputFilename)) return rc;
  absl::Status st = writer.write(outputFilename);
  if (!st.ok()) return fail(std::string(st.message()));
  return 0;
}


/// LLVM expands `@FILE` arguments (response files), recursively: a file
/// naming itself is reported and then ignored (exit 0, nothing written), a
/// FIFO blocks, /dev/zero never ends. ds-opt takes regular files of at
/// most 1 MiB that name no further response file.
static int checkResponseFiles(int argc, char **argv) {
  for (int i = 1; i < argc; ++i) {
    if (argv[i][0] != '@') continue;
    std::string path = argv[i] + 1;
    auto text = ::ds::rt::readRegularFile(path, 1 << 20);
    if (!text.ok()) return fail("response file " + path + ": " + std::string(text.status().message()));
    llvm::SmallVector<llvm::StringRef> words;
    llvm::SplitString(*text, words);
    for (llvm::StringRef w : words)
      if (w.starts_with("@") || w.starts_with("\"@") || w.starts_with("'@"))
        return fail("response file " + path + " names another response file (" + w.str() +
                    "); ds-opt reads one level");
  }
  return 0;
}

static int runMain(int argc, char **argv);

// The --report table and --estimate-zero go to stdout: a full disk or a
// file size limit there is an error naming it (LLVM's stream would end the
// process with "IO failure on output stream" at exit).
int main(int argc, char **argv) {
  int rc = runMain(argc, argv);
  llvm::outs().flush();
  if (std::error_code ec = llvm::outs().error()) {
    llvm::outs().clear_error();
    llvm::errs() << "ds-opt: error: writing standard output: " << ec.message() << "\n";
    return rc ? rc : 1;
  }
  return rc;
}

static int runMain(int argc, char **argv) {
  ::ds::tools::setOutOfMemoryTool("ds-opt");
  if (int rc = checkResponseFiles(argc, argv)) return rc;
  llvm::InitLLVM init(argc, argv);
  ::ds::tools::armCrashWatchdog(10);
  // ulimit -f: a write fails with EFBIG (reported naming the file) instead
  // of SIGXFSZ killing the process.
  ::signal(SIGXFSZ, SIG_IGN);
  // LLVM's own allocations (safe_malloc) report here rather than abort.
  llvm::install_bad_alloc_error_handler([](void *, const char *reason, bool) {
    ::ds::tools::reportOutOfMemory(reason ? reason : "an allocation failed");
  });
  // LLVM's fatal errors under an address-space limit (--max-memory, ulimit
  // -v) are resources running out (its thread pool's "pthread_create
  // failed"): said as such, exit 1. Otherwise LLVM's own behaviour.
  llvm::install_fatal_error_handler([](void *, const char *reason, bool crashDiag) {
    ::ds::tools::reportFatalError(reason, crashDiag);
  });
  // libLLVM's own options (code generation, profiling: hundreds) are
  // registered by now and mean nothing here; MLIR's (IR printing, pass
  // pipelines) are registered below and stay in --help.
  llvm::cl::HideUnrelatedOptions(
      {&dsCategory, &trainCategory, &quantizeCategory, &generateCategory, &estimateCategory});
  llvm::cl::AddExtraVersionPrinter([](llvm::raw_ostream &os) {
    os << "ds-opt " << DS_VERSION << " (ds dialect; plans for backends: " << DS_BACKENDS_BUILT
       << ")\n";
  });
  DialectRegistry registry;
  mlir::ds::registerAllDialects(registry);
  mlir::ds::registerAllPasses();
  auto [inputFilename, outputFilename] = registerAndParseCLIOptions(
      argc, argv, "ds-opt: ONNX and ds IR to per-rank plans\n", registry);

  // A single-valued option given twice would silently keep the last value
  // (-o a.dsplan -o b.dsplan writes b only); repeatable ones are lists.
  {
    llvm::SmallPtrSet<llvm::cl::Option *, 16> seen;
    for (auto &entry : llvm::cl::getRegisteredOptions()) {
      llvm::cl::Option *o = entry.second;
      if (!seen.insert(o).second || o->getNumOccurrences() < 2 || o->isPositional() ||
          o->getNumOccurrencesFlag() != llvm::cl::Optional)
        continue;
      return fail((o->ArgStr.size() == 1 ? "-" : "--") + o->ArgStr.str() + " given " +
                  std::to_string(o->getNumOccurrences()) +
                  " times: it takes one value (give it once)");
    }
  }
  // An option given an empty value (an unset shell variable) would
  // silently mean "not given" (--config '': an inference plan); say so.
  for (llvm::cl::opt<std::string> *o :
       {&emitKind, &sampleInputs, &dtypeName, &maxMemory, &deviceMemory, &configPath, &lossKind,
        &quantizeScheme, &offloadWeights,
        &trainData, &labelsName, &lossOutput, &parametersFile})
    if (o->getNumOccurrences() > 0 && o->getValue().empty())
      return fail("--" + o->ArgStr.str() + ": given an empty value");
  if (outputFilename.empty()) return fail("-o: given an empty file name");
  if (estimateZero != 0) return runEstimateZero();
  if (printConfigKeys) {
    llvm::outs() << mlir::ds::configKeysMarkdown();
    return 0;
  }
  if (checkConfigKeyTable) {
    std::vector<std::string> problems = mlir::ds::checkConfigKeys();
    for (const std::string &p : problems) llvm::errs() << "ds-opt: config key table: " << p << "\n";
    if (!problems.empty()) return 1;
    llvm::outs() << "config key table: " << mlir::ds::deepSpeedConfigKeys().size()
                 << " keys, each read as listed; every key the reader asks for is listed\n";
    return 0;
  }
  if (maxNodes < 1 || maxNesting < 1 || maxElements < 1 || maxConfigBytes < 1)
    return fail("--max-nodes, --max-nesting, --max-elements and --max-config-bytes must be >= 1");
  mlir::ds::maxTextNesting() = maxNesting;
  mlir::ds::maxConfigBytes() = maxConfigBytes;
  uint64_t deviceBudget = 0;
  if (!deviceMemory.empty()) {
    std::optional<unsigned long long> bytes = ::ds::tools::parseByteSize(deviceMemory);
    if (!bytes || *bytes > (1ull << 62))
      return fail("--device-memory: expected a size such as 2GiB, 512MiB or 2e9, got '" +
                  deviceMemory + "'");
    deviceBudget = *bytes;
  }
  if (!maxMemory.empty()) {
    std::optional<unsigned long long> bytes = ::ds::tools::parseByteSize(maxMemory);
    if (!bytes)
      return fail("--max-memory: expected a size such as 8GiB, 512MiB or 2e9, got '" +
                  maxMemory + "'");
    if (std::string why = ::ds::tools::limitMemory(*bytes); !why.empty())
      return fail("--max-memory: " + why);
  }
  std::string emit = emitKind;
  if (emit.empty())
    emit = llvm::StringRef(outputFilename).ends_with(".dsplan") ? "plan" : "mlir";
  if (emit != "mlir" && emit != "plan")
    return fail("--emit must be 'mlir' or 'plan', not '" + emit + "'");
  bool onnx = isOnnxFile(inputFilename);
  if (int rc = checkInputFiles(inputFilename, outputFilename, onnx)) return rc;
  if (int rc = checkGenerateFlags(onnx)) return rc;

  // With --report and no output named, report only.
  bool reportOnly = report && outputFilename == "-" && emitKind.empty();
  // .mlir in, IR out: exactly mlir-opt (split-input-file, verify-diagnostics...).
  if (!onnx && emit == "mlir" && !report && configPath.empty() && lossKind.empty())
    return asMainReturnCode(MlirOptMain(argc, argv, inputFilename, outputFilename, registry));

  if (emit == "plan" && outputFilename == "-")
    return fail("a plan is binary: name the output with -o FILE.dsplan");
  if (!configSet.empty() && configPath.empty())
    return fail("--set overrides keys of the --config file: give one");
  if (shapesOnly && !reportOnly)
    return fail("--shapes-only compiles without the weights, for --report alone: leave out -o "
                "and --emit");

  MLIRContext context(registry);
  // Under --max-memory no thread pool: its threads' stacks count against the
  // limit, and a thread that cannot start is LLVM's fatal error.
  if (!maxMemory.empty()) context.disableMultithreading();
  context.loadAllAvailableDialects();
  // Errors name ONNX nodes; a dump of the whole op would bury them.
  context.printOpOnDiagnostic(false);
  OwningOpRef<ModuleOp> module = loadModule(context, inputFilename, onnx);
  if (!module) return 1;
  // The model's identity, before passes change it (checkpoints record it).
  // An ONNX model's is its graph, which a training plan carries; ds IR
  // has none, so its structure as written stands for it.
  const uint64_t fingerprint = emit == "plan" && !onnx ? mlir::ds::modelFingerprint(*module) : 0;

  MlirOptMainConfig config = MlirOptMainConfig::createFromCLOptions();
  PassManager pm(&context, ModuleOp::getOperationName());
  if (failed(applyPassManagerCLOptions(pm)))
    return fail("bad pass manager options");
  DefaultTimingManager tm;
  applyDefaultTimingManagerCLOptions(tm);
  TimingScope timing = tm.getRootScope();
  pm.enableTiming(timing);
  if (failed(config.setupPassPipeline(pm)))
    return fail("bad pass pipeline");
  // The imported model's batch (its first batched input): what an "auto"
  // micro batch becomes, as ds-build-train-step reads it.
  int64_t modelBatch = 0;
  if (auto main = module->lookupSymbol<mlir::func::FuncOp>("main"))
    for (Type t : main.getArgumentTypes())
      if (auto rt = dyn_cast<RankedTensorType>(t); rt && rt.getRank() > 0) {
        modelBatch = rt.getDimSize(0);
        break;
      }
  if (int rc = addDefaultPipeline(pm, emit, modelBatch)) return rc;
  if (failed(pm.run(*module)))
    return 1;

  if (report) {
    FailureOr<mlir::ds::MemoryReport> r = mlir::ds::computeMemoryReport(*module);
    if (failed(r)) return 1;
    // The per-space rows from the plan itself: the same count ds-run checks
    // a device budget against.
    {
      // Quietly: a module that cannot become a plan is reported on as is
      // (writing it, if asked, says why).
      mlir::ScopedDiagnosticHandler quiet(module->getContext(),
                                          [](mlir::Diagnostic &) { return success(); });
      ::ds::rt::PlanWriter w;
      // (not from placeholders: a plan would hold every weight's bytes)
      if (!shapesOnly && succeeded(mlir::ds::emitPlan(*module, mlir::ds::EmitPlanOptions(), w))) {
        ::ds::rt::SpaceBytes sb = ::ds::rt::spaceBytes(w.plan());
        r->planDeviceBytes = static_cast<int64_t>(sb.device);
        r->planHostBytes = static_cast<int64_t>(sb.host);
      }
    }
    mlir::ds::printMemoryReport(*r, reportOnly || emit == "plan" ? llvm::outs() : llvm::errs());
    if (reportOnly) {
      if (deviceBudget && static_cast<uint64_t>(r->deviceBytes()) > deviceBudget)
        return fail("--device-memory: the plan needs " + std::to_string(r->deviceBytes()) +
                    " bytes of device memory per rank, over the budget of " +
                    std::to_string(deviceBudget) +
                    " bytes; offload more (training: zero_optimization.offload_optimizer, "
                    "offload_param; inference: --offload-weights cpu) or raise --device-memory");
      return 0;
    }
  }
  return writeOutput(*module, emit, inputFilename, outputFilename, onnx, fingerprint,
                     deviceBudget);
}

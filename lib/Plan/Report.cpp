//===- Report.cpp - what a plan will hold, before it runs -----------------===//
#include "ds/Plan/Report.h"
#include "ds/Generate/Passes.h"

#include "dialects/ds/DSOps.h"
#include "ds/Plan/KernelBridge.h"
#include "ds/Plan/MemorySpaces.h"
#include "ds/Plan/Passes.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MLProgram/IR/MLProgram.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"

#include <cmath>

using namespace mlir;
using namespace mlir::ds;

static int64_t bytesOf(Type t) {
  auto rt = cast<RankedTensorType>(t);
  Type e = rt.getElementType();
  return rt.getNumElements() * (e.isInteger(1) ? 1 : (e.getIntOrFloatBitWidth() + 7) / 8);
}

FailureOr<MemoryReport> mlir::ds::computeMemoryReport(ModuleOp module) {
  func::FuncOp entry = module.lookupSymbol<func::FuncOp>("main");
  // A generation plan: its prefill program holds every weight.
  auto generation = module->getAttrOfType<DictionaryAttr>(kGenerationAttr);
  if (!entry && generation) entry = module.lookupSymbol<func::FuncOp>("prefill");
  if (!entry)
    return module.emitError("no entry function 'main' to report on");
  auto arena = entry->getAttrOfType<IntegerAttr>(kArenaBytesAttr);
  if (!arena)
    return entry.emitError("has no memory plan; run ds-plan-memory before --report");
  MemoryReport r;
  if (MeshAttr mesh = MeshAttr::lookup(module)) {
    r.worldSize = mesh.getNumRanks();
    for (MeshAxisAttr a : mesh.getAxes())
      r.mesh += (r.mesh.empty() ? "" : ", ") + a.getName().str() + "=" + std::to_string(a.getSize());
  }
  // Activations: the largest arena of any program (training: train_step).
  for (auto f : module.getOps<func::FuncOp>())
    if (auto a = f->getAttrOfType<IntegerAttr>(kArenaBytesAttr))
      r.activationArenaBytes = std::max(r.activationArenaBytes, a.getInt());
  if (auto list = module->getAttrOfType<ArrayAttr>("ds.trained_parameters"))
    for (auto d : list.getAsRange<DictionaryAttr>()) {
      auto name = d.getAs<StringAttr>("name");
      auto shape = d.getAs<DenseI64ArrayAttr>("shape");
      if (name && shape) r.trained.push_back({name.str(), std::vector<int64_t>(shape.asArrayRef())});
    }
  if (auto t = module->getAttrOfType<DictionaryAttr>("ds.training")) {
    if (auto p = t.getAs<StringAttr>("precision")) r.precision = p.str();
    if (auto c = t.getAs<StringAttr>("communication_data_type")) r.communication = c.str();
    if (auto a = t.getAs<StringAttr>("grad_accum_dtype")) r.gradientAccum = a.str();
    if (auto z = t.getAs<IntegerAttr>("zero_stage")) r.zeroStage = z.getInt();
    auto count = [&](StringRef k) {
      auto a = t.getAs<IntegerAttr>(k);
      return a ? a.getInt() : 0;
    };
    r.trainBatch = count("train_batch_size");
    r.microBatch = count("micro_batch_size");
    r.accumulation = count("gradient_accumulation_steps");
    r.dataParallel = count("world_size");
    if (auto f = t.getAs<ArrayAttr>("filled_auto"))
      for (auto k : f.getAsRange<StringAttr>()) r.filledAuto.push_back(k.str());
    if (auto e = t.getAs<DenseI64ArrayAttr>("elastic_valid_world_sizes"))
      r.elasticSizes.assign(e.asArrayRef().begin(), e.asArrayRef().end());
  }
  if (auto rc = module->getAttrOfType<DictionaryAttr>("ds.recompute")) {
    auto i64 = [&](StringRef k) {
      auto a = rc.getAs<IntegerAttr>(k);
      return a ? a.getInt() : 0;
    };
    auto f64 = [&](StringRef k) {
      auto a = rc.getAs<FloatAttr>(k);
      return a ? a.getValueAsDouble() : 0.0;
    };
    if (auto p = rc.getAs<StringAttr>("policy")) r.recomputePolicy = p.str();
    r.checkpoints = i64("checkpoints");
    r.recomputedSegments = i64("recomputed_segments");
    r.checkpointBytes = i64("checkpoint_bytes");
    r.recomputedOps = i64("recomputed_ops");
    r.recomputeFlops = f64("recompute_flops");
    r.forwardFlops = f64("forward_flops");
    if (auto c = rc.getAs<BoolAttr>("cpu_checkpointing")) r.cpuCheckpointing = c.getValue();
    if (auto c = rc.getAs<IntegerAttr>("partitioned_checkpoints"))
      r.partitionedCheckpoints = c.getInt();
    if (auto c = rc.getAs<IntegerAttr>("partitions")) r.checkpointPartitions = c.getInt();
  }
  if (generation) {
    auto i64 = [&](StringRef k) {
      auto a = generation.getAs<IntegerAttr>(k);
      return a ? a.getInt() : 0;
    };
    r.kvSequences = i64("batch");
    r.kvTokens = i64("max_tokens");
  }
  if (auto list = module->getAttrOfType<ArrayAttr>("ds.constant_initializers"))
    for (auto n : list.getAsRange<StringAttr>()) r.heldConstant.push_back(n.str());
  MemorySpaces spaces(module);
  for (auto f : module.getOps<func::FuncOp>()) {
    if (auto a = f->getAttrOfType<IntegerAttr>(kHostArenaBytesAttr))
      r.hostArenaBytes = std::max(r.hostArenaBytes, a.getInt());
    f.walk([&](Operation *op) {
      if (!isa<OffloadOp, FetchOp>(op)) return;
      std::string key = (f.getSymName() == "main" ? std::string("forward") : f.getSymName().str()) +
                        ": " + memorySpaceName(spaces.of(op->getOperand(0))).str() + "->" +
                        memorySpaceName(spaces.of(op->getResult(0))).str();
      r.transferBytes[key] += bytesOf(op->getResult(0).getType());
    });
  }
  if (auto t = module->getAttrOfType<DictionaryAttr>("ds.training"))
    if (auto o = t.getAs<StringAttr>("offload_optimizer")) r.offload = o.str();
  for (auto g : module.getOps<ml_program::GlobalOp>()) {
    int64_t b = bytesOf(g.getType());
    StringRef name = g.getSymName();
    if (generation && name.starts_with("kv.")) {
      r.kvCacheBytes += b;
      continue;
    }
    if (name.starts_with("weight:")) { // ZeRO-Inference's weights on NVMe
      r.nvmeWeightBytes += b;
      continue;
    }
    r.training = true;
    if (spaces.ofGlobal(name) == MemorySpace::Host) r.hostStateBytes += b;
    if (spaces.ofGlobal(name) == MemorySpace::Nvme) r.nvmeStateBytes += b;
    if (name.starts_with("param:")) {
      ++r.parameters;
      r.parameterBytes += b;
      r.largestParameterBytes = std::max(r.largestParameterBytes, b);
    } else if (name.starts_with("grad:")) {
      r.gradientBytes += b;
    } else {
      r.optimizerStateBytes += b;
    }
  }
  // Traffic of every program (forward; training: per micro-step and per
  // optimizer step) as the ZeRO paper counts it: the whole tensor for a
  // reduce-scatter or all-gather, twice it for an all-reduce (a
  // reduce-scatter plus an all-gather). Stage 0 moves 2 Psi per step,
  // stages 1-2 Psi + Psi, stage 3 3 Psi. 1-bit Adam's all-reduce sends a
  // bit per element of the padded tensor twice (the workers' all-to-all,
  // the servers' all-gather): 1/32 of an fp32 all-reduce. ZeRO++'s
  // quantized all-gather (qwZ) and reduce-scatter (qgZ) send a byte per
  // element and a 4-byte scale per block of each rank's piece.
  auto quantizedGather = [](Operation *op) -> int64_t {
    std::optional<uint64_t> block;
    int64_t whole = 0, piece = 0;
    auto count = [](Value v) { return cast<RankedTensorType>(v.getType()).getNumElements(); };
    if (auto g = dyn_cast<AllGatherOp>(op)) {
      block = g.getQuantizeBlock(), whole = count(g.getResult()), piece = count(g.getOperand());
    } else if (auto r = dyn_cast<ReduceScatterOp>(op)) {
      block = r.getQuantizeBlock(), whole = count(r.getOperand()), piece = count(r.getResult());
    }
    if (!block || *block == 0 || piece == 0) return -1;
    const int64_t b = static_cast<int64_t>(*block);
    return whole + 4 * (whole / piece) * ((piece + b - 1) / b);
  };
  for (auto f : module.getOps<func::FuncOp>())
    f.walk([&](Operation *op) {
      if (!isCollective(op) || isa<ShardSliceOp>(op)) return;
      int64_t whole = isa<CompressedAllReduceOp>(op)
                          ? 2 * (bytesOf(op->getOperand(1).getType()) / 32)
                      : quantizedGather(op) >= 0 ? quantizedGather(op)
                      : isa<AllGatherOp>(op) ? bytesOf(op->getResult(0).getType())
                      : isa<AllReduceOp>(op) ? 2 * bytesOf(op->getOperand(0).getType())
                                             : bytesOf(op->getOperand(0).getType());
      std::string key = (f.getSymName() == "main" ? std::string("forward") : f.getSymName().str()) +
                        ": " + op->getName().stripDialect().str();
      r.collectiveBytes[key] += whole;
      ++r.collectiveCounts[key];
    });
  for (Type t : entry.getArgumentTypes()) r.inputBytes += bytesOf(t);
  for (Type t : entry.getResultTypes()) r.outputBytes += bytesOf(t);
  entry.walk([&](Operation *op) {
    // A parameter sliced per rank counts as its slice (what the rank holds).
    if (isOnlySharded(op)) return;
    if (isWeightShard(op)) {
      int64_t b = bytesOf(op->getResult(0).getType());
      if (isa<ParameterOp>(op->getOperand(0).getDefiningOp())) {
        ++r.parameters;
        r.parameterBytes += b;
        r.splitParameterBytes += b;
        r.largestParameterBytes = std::max(r.largestParameterBytes, b);
      } else {
        r.constantBytes += b;
      }
      return;
    }
    if (isCollective(op)) {
      ++r.steps;
      return; // counted per program below
    }
    if (isa<ParameterOp, ConstantOp>(op) && MemorySpaces::placement(op) == MemorySpace::Host)
      r.hostWeightBytes += bytesOf(op->getResult(0).getType());
    if (auto p = dyn_cast<ParameterOp>(op); p && !(r.training && p->hasAttr("ds.buffer"))) {
      ++r.parameters;
      int64_t b = bytesOf(p.getType());
      r.parameterBytes += b;
      r.largestParameterBytes = std::max(r.largestParameterBytes, b);
    } else if (p) { // training: an initializer held constant is no model state
      r.constantBytes += bytesOf(p.getType());
    } else if (auto c = dyn_cast<ConstantOp>(op)) {
      r.constantBytes += bytesOf(c.getType());
    } else if (isa<DSDialect>(op->getDialect())) {
      ++r.steps;
    }
  });
  return r;
}

void mlir::ds::printZeroEstimate(int stage, int64_t params, int64_t largestLayer,
                                 int64_t gpusPerNode, int64_t nodes, llvm::raw_ostream &os) {
  const double factor = 1.5; // additional_buffer_factor
  const int64_t gpus = gpusPerNode * nodes;
  auto gb = [](double bytes) { return bytes / (1024.0 * 1024 * 1024); };
  os << "Estimated memory needed for params, optim states and gradients for a:\n"
     << "HW: Setup with " << nodes << " node" << (nodes == 1 ? "" : "s") << ", " << gpusPerNode
     << " GPU" << (gpusPerNode == 1 ? "" : "s") << " per node.\n"
     << "SW: Model with " << static_cast<int64_t>(params / 1e6) << "M total params";
  if (stage == 3) os << ", " << static_cast<int64_t>(largestLayer / 1e6) << "M largest layer params";
  os << ".\n  per CPU  |  per GPU |   Options\n";
  auto row = [&](double cpu, double gpu, StringRef options) {
    os << llvm::format("  %7.2fGB | %6.2fGB | ", gb(std::floor(cpu)), gb(std::floor(gpu)))
       << options << "\n";
  };
  double p = static_cast<double>(params);
  if (stage == 2) {
    // deepspeed/runtime/zero/stage_1_and_2.py
    row(p * std::max<int64_t>(4 * gpus, 16) * factor, 2 * p, "offload_optimizer=cpu ");
    row(p * 4 * gpusPerNode * factor, 4 * p + std::floor(16 * p / gpus), "offload_optimizer=none");
    return;
  }
  // deepspeed/runtime/zero/stage3.py (zero_init as the cold estimate does)
  double largest = 4.0 * static_cast<double>(largestLayer), perNode = 1.0 / nodes;
  for (bool zeroInit : {true, false}) {
    std::string zi = zeroInit ? ", zero_init=1" : ", zero_init=0";
    row(zeroInit ? p * 18 * perNode * factor
                 : p * std::max<double>(4 * gpusPerNode, 18 * perNode) * factor,
        largest, "offload_param=cpu , offload_optimizer=cpu " + zi);
    row(zeroInit ? p * 16 * perNode * factor
                 : p * std::max<double>(4 * gpusPerNode, 16 * perNode) * factor,
        largest + std::floor(2 * p / gpus), "offload_param=none, offload_optimizer=cpu " + zi);
    row(zeroInit ? static_cast<double>(largestLayer) * 4 * gpusPerNode * factor
                 : p * 4 * gpusPerNode * factor,
        largest + std::floor(18 * p / gpus), "offload_param=none, offload_optimizer=none" + zi);
  }
}

void mlir::ds::printMemoryReport(const MemoryReport &r, llvm::raw_ostream &os) {
  auto row = [&](StringRef what, int64_t bytes, StringRef note = "") {
    os << llvm::format("  %-24s %14lld B %10.3f MiB", what.str().c_str(),
                       static_cast<long long>(bytes), bytes / 1048576.0);
    if (!note.empty()) os << "  " << note;
    os << "\n";
  };
  os << "memory per rank (world size " << r.worldSize
     << (r.mesh.empty() ? std::string() : ", mesh " + r.mesh) << "):\n";
  row("parameters", r.parameterBytes,
      (std::to_string(r.parameters) + " tensors, largest " +
       std::to_string(r.largestParameterBytes) + " B" +
       (r.splitParameterBytes ? ", " + std::to_string(r.splitParameterBytes) + " B of it this rank's slices"
                              : std::string())).c_str());
  row("constants", r.constantBytes);
  if (r.training && r.trainBatch) {
    os << "  batch: train_batch_size " << r.trainBatch << " = micro " << r.microBatch
       << " x accumulation " << r.accumulation << " x data-parallel " << r.dataParallel;
    if (!r.elasticSizes.empty()) {
      os << " (elasticity; the same global batch trains at data-parallel sizes";
      for (int64_t s : r.elasticSizes) os << " " << s;
      os << ")";
    }
    os << "\n";
    if (!r.filledAuto.empty()) {
      os << "  \"auto\" filled by ds:";
      for (size_t i = 0; i < r.filledAuto.size(); ++i)
        os << (i ? ", " : " ") << r.filledAuto[i];
      os << "\n";
    }
  }
  if (r.training) {
    row("gradients", r.gradientBytes,
        (r.gradientAccum + " accumulators").c_str());
    row("optimizer state", r.optimizerStateBytes,
        r.precision == "fp32" ? "Adam m and v, or SGD momentum"
                              : "fp32 master weights + Adam m and v (or SGD momentum)");
  }
  if (r.kvSequences > 0)
    row("kv cache", r.kvCacheBytes,
        (std::to_string(r.kvSequences) + " sequences of up to " + std::to_string(r.kvTokens) +
         " tokens: " + std::to_string(r.kvCacheBytes / r.kvSequences) + " B per sequence")
            .c_str());
  row("activations (arena)", r.activationArenaBytes, "peak of intermediates, static");
  if (!r.recomputePolicy.empty())
    row("  of which checkpoints", r.checkpointBytes,
        llvm::formatv("activation checkpointing ({0}): {1} checkpoints{2}, {3} of {1} segments "
                      "recomputed in the backward ({4} ops, +{5:f0}% of the forward's product "
                      "flops)",
                      r.recomputePolicy, r.checkpoints,
                      (r.partitionedCheckpoints
                           ? llvm::formatv(" ({0} split over {1} tensor-parallel ranks)",
                                           r.partitionedCheckpoints, r.checkpointPartitions)
                                 .str()
                           : std::string()) +
                          (r.cpuCheckpointing ? " in host memory" : ""),
                      r.recomputedSegments, r.recomputedOps,
                      r.forwardFlops > 0 ? 100.0 * r.recomputeFlops / r.forwardFlops : 0.0)
            .str());
  row("inputs", r.inputBytes);
  row("outputs", r.outputBytes);
  row("total", r.total());
  os << "  steps: " << r.steps << "\n";
  if (r.hostBytes() || !r.transferBytes.empty()) {
    os << "memory spaces per rank ("
       << (r.nvmeWeightBytes ? std::string("weights on NVMe, read two layers ahead")
           : r.hostWeightBytes ? std::string("weights in host memory, fetched a layer ahead")
                               : "offload_optimizer " + r.offload)
       << "):\n";
    row("device", r.deviceBytes(),
        "arena, weights, device state, inputs and outputs (what --device-memory bounds)");
    row("host", r.hostBytes(),
        ((r.hostWeightBytes ? "weights " + std::to_string(r.hostWeightBytes) + " B + " : "") +
         "offloaded state " + std::to_string(r.hostStateBytes) + " B + host arena " +
         std::to_string(r.hostArenaBytes) + " B")
            .c_str());
    if (r.nvmeStateBytes) row("nvme", r.nvmeStateBytes, "swapped optimizer state");
    if (r.nvmeWeightBytes) row("nvme", r.nvmeWeightBytes, "weights, staged to the drive at start");
    os << "transfers per program run:\n";
    for (const auto &[key, bytes] : r.transferBytes) row(key, bytes);
  }
  if (!r.trained.empty()) {
    // What a user compares with sum(p.numel() for p in model.parameters()).
    int64_t total = 0;
    for (const auto &[name, shape] : r.trained) {
      int64_t n = 1;
      for (int64_t d : shape) n *= d;
      total += n;
    }
    os << "trained parameters: " << r.trained.size() << " tensors, " << total << " elements\n";
    // Names as long as PyTorch's module paths: the column fits the longest.
    size_t width = 24;
    for (const auto &[name, shape] : r.trained) width = std::max(width, name.size());
    for (const auto &[name, shape] : r.trained) {
      int64_t n = 1;
      std::string dims;
      for (int64_t d : shape) {
        n *= d;
        dims += (dims.empty() ? "" : "x") + std::to_string(d);
      }
      os << "  " << name << std::string(width - name.size() + 1, ' ')
         << llvm::format("%-16s %12lld\n", dims.c_str(), static_cast<long long>(n));
    }
    if (r.precision != "fp32") {
      // DeepSpeed's mixed-precision accounting (ZeRO paper): 16-bit
      // parameters and gradients, 12 bytes of fp32 master weights and Adam
      // moments per parameter, each partitioned from its stage on.
      // Under tensor parallelism P is this rank's share (its slices and the
      // replicated tensors, as its 16-bit parameters hold them) and N the
      // data-parallel ranks.
      const int64_t dp = r.dataParallel > 0 ? r.dataParallel : r.worldSize;
      const bool sliced = dp != r.worldSize;
      const int s = static_cast<int>(r.zeroStage);
      const double psi = sliced ? r.parameterBytes / 2.0 : static_cast<double>(total),
                   n = static_cast<double>(dp);
      double formula = (s >= 3 ? 2 * psi / n : 2 * psi) + (s >= 2 ? 2 * psi / n : 2 * psi) +
                       (s >= 1 ? 12 * psi / n : 12 * psi);
      int64_t held = r.parameterBytes + r.gradientBytes + r.optimizerStateBytes;
      os << "mixed precision: " << r.precision << " products, gradients reduced in "
         << r.communication << "\n";
      if (!sliced)
        os << llvm::format("  model states per rank: ds %lld B; DeepSpeed's 2P + 2P + 12P "
                           "(ZeRO-%d over %lld ranks, P = %lld) %.0f B\n",
                           static_cast<long long>(held), s, static_cast<long long>(r.worldSize),
                           static_cast<long long>(total), formula);
      else if (s < 3)
        os << llvm::format("  model states per rank: ds %lld B; DeepSpeed's 2P + 2P + 12P "
                           "(ZeRO-%d over %lld data-parallel ranks, P = %.0f: this rank's "
                           "tensor-parallel share) %.0f B\n",
                           static_cast<long long>(held), s, static_cast<long long>(dp), psi,
                           formula);
      os << "  (" << r.precision << " parameters, " << r.gradientAccum
         << " gradients, fp32 master weights and moments; ZeRO partitions them as DeepSpeed "
            "does, except that stage 3 keeps parameters under "
            "stage3_param_persistence_threshold whole, and blocks are padded to N equal "
            "parts)\n";
    }
    if (!r.heldConstant.empty()) {
      os << "held constant: " << r.heldConstant.size()
         << " float initializers (literals of at most one element, buffers, no gradient "
            "from the loss, --freeze, or not in --parameters):";
      for (size_t i = 0; i < r.heldConstant.size(); ++i)
        os << (i ? ", " : " ") << r.heldConstant[i];
      os << "\n";
    }
  }
  if (!r.collectiveBytes.empty()) {
    os << "communication volume per program run (ZeRO paper's count; all_reduce = 2x):\n";
    for (const auto &[kind, bytes] : r.collectiveBytes) {
      int64_t n = r.collectiveCounts.lookup(kind);
      row(kind, bytes, (std::to_string(n) + (n == 1 ? " collective" : " collectives")).c_str());
    }
  }
}

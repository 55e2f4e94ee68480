//===- Report.cpp - what a plan will hold, before it runs -----------------===//
#include "ds/Plan/Report.h"

#include "dialects/ds/DSOps.h"
#include "ds/Plan/KernelBridge.h"
#include "ds/Plan/Passes.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MLProgram/IR/MLProgram.h"
#include "llvm/Support/Format.h"

using namespace mlir;
using namespace mlir::ds;

static int64_t bytesOf(Type t) {
  auto rt = cast<RankedTensorType>(t);
  Type e = rt.getElementType();
  return rt.getNumElements() * (e.isInteger(1) ? 1 : (e.getIntOrFloatBitWidth() + 7) / 8);
}

FailureOr<MemoryReport> mlir::ds::computeMemoryReport(ModuleOp module) {
  func::FuncOp entry = module.lookupSymbol<func::FuncOp>("main");
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
  for (auto g : module.getOps<ml_program::GlobalOp>()) {
    r.training = true;
    int64_t b = bytesOf(g.getType());
    StringRef name = g.getSymName();
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
  // optimizer step), what this rank sends into each kind of collective.
  for (auto f : module.getOps<func::FuncOp>())
    f.walk([&](Operation *op) {
      if (isCollective(op) && !isWeightShard(op) && !isa<ShardSliceOp>(op))
        r.collectiveBytes[(f.getSymName() == "main" ? std::string("forward") : f.getSymName().str()) +
                          ": " + op->getName().stripDialect().str()] +=
            bytesOf(op->getOperand(0).getType());
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
    if (auto p = dyn_cast<ParameterOp>(op)) {
      ++r.parameters;
      int64_t b = bytesOf(p.getType());
      r.parameterBytes += b;
      r.largestParameterBytes = std::max(r.largestParameterBytes, b);
    } else if (auto c = dyn_cast<ConstantOp>(op)) {
      r.constantBytes += bytesOf(c.getType());
    } else if (isa<DSDialect>(op->getDialect())) {
      ++r.steps;
    }
  });
  return r;
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
  if (r.training) {
    row("gradients", r.gradientBytes, "fp32 accumulators");
    row("optimizer state", r.optimizerStateBytes, "Adam m and v, or SGD momentum");
  }
  row("activations (arena)", r.activationArenaBytes, "peak of intermediates, static");
  row("inputs", r.inputBytes);
  row("outputs", r.outputBytes);
  row("total", r.total());
  os << "  steps: " << r.steps << "\n";
  if (!r.collectiveBytes.empty()) {
    os << "communication per rank and program run:\n";
    for (const auto &[kind, bytes] : r.collectiveBytes) row(kind, bytes);
  }
}

//===- MemorySpaces.cpp - where buffers live and ops run ------------------===//
#include "ds/Plan/MemorySpaces.h"

#include "ds/Plan/KernelBridge.h"
#include "mlir/Dialect/MLProgram/IR/MLProgram.h"

using namespace mlir;
using namespace mlir::ds;

StringRef mlir::ds::memorySpaceName(MemorySpace space) { return stringifyMemorySpace(space); }

MemorySpaces::MemorySpaces(ModuleOp module) {
  for (auto g : module.getOps<ml_program::GlobalOp>())
    if (auto a = g->getAttrOfType<MemorySpaceAttr>(kMemorySpaceAttr)) {
      globals_[g.getSymName()] = a.getValue();
      offDevice_ |= a.getValue() != MemorySpace::Device;
    }
  module.walk([&](Operation *op) {
    if (isa<OffloadOp>(op) || op->hasAttr(kMemorySpaceAttr)) offDevice_ = true;
  });
}

MemorySpace MemorySpaces::ofGlobal(StringRef sym) const {
  auto it = globals_.find(sym);
  return it == globals_.end() ? MemorySpace::Device : it->second;
}

MemorySpace MemorySpaces::placement(Operation *op) {
  if (isa<OffloadOp>(op)) return MemorySpace::Host;
  if (isa<FetchOp>(op)) return MemorySpace::Device;
  if (auto a = op->getAttrOfType<MemorySpaceAttr>(kMemorySpaceAttr)) return a.getValue();
  return MemorySpace::Device;
}

void MemorySpaces::place(Operation *op, MemorySpace space) {
  if (space == MemorySpace::Device)
    op->removeAttr(kMemorySpaceAttr);
  else
    op->setAttr(kMemorySpaceAttr, MemorySpaceAttr::get(op->getContext(), space));
}

MemorySpace MemorySpaces::of(Value v) const {
  Operation *def = v.getDefiningOp();
  if (!def) return MemorySpace::Device; // program inputs are device buffers
  if (auto load = dyn_cast<ml_program::GlobalLoadOp>(def))
    return ofGlobal(load.getGlobal().getLeafReference());
  return placement(def);
}

LogicalResult MemorySpaces::verify(func::FuncOp f) const {
  if (f.isExternal()) return success();
  for (Operation &op : f.getBody().front()) {
    if (auto load = dyn_cast<ml_program::GlobalLoadOp>(op)) {
      if (ofGlobal(load.getGlobal().getLeafReference()) == MemorySpace::Nvme)
        return op.emitOpError("reads the NVMe global ")
               << load.getGlobal() << " directly; NVMe state is swapped in through host buffers";
      continue;
    }
    if (auto store = dyn_cast<ml_program::GlobalStoreOp>(op)) {
      MemorySpace g = ofGlobal(store.getGlobal().getLeafReference()), v = of(store.getValue());
      if (g != v)
        return op.emitOpError("stores a value in ") << memorySpaceName(v) << " memory into the "
               << memorySpaceName(g) << " global " << store.getGlobal();
      continue;
    }
    MemorySpace runsOn = placement(&op);
    if (isa<OffloadOp>(op)) runsOn = MemorySpace::Device; // reads device memory
    if (isa<FetchOp>(op)) runsOn = MemorySpace::Host;     // reads host memory
    if (runsOn == MemorySpace::Nvme)
      return op.emitOpError("is placed in NVMe memory; ops run on the device or the host");
    if (runsOn != MemorySpace::Device && (isCollective(&op) || isa<func::ReturnOp>(op)))
      return op.emitOpError(isa<func::ReturnOp>(op) ? "returns" : "is a collective placed")
             << " on the " << memorySpaceName(runsOn) << "; collectives and program outputs are "
                                                         "device memory";
    for (OpOperand &use : op.getOpOperands()) {
      MemorySpace s = of(use.get());
      if (s == runsOn) continue;
      return op.emitOpError() << (isa<func::ReturnOp>(op) ? "returns" : "runs on the ")
                            << (isa<func::ReturnOp>(op) ? "" : memorySpaceName(runsOn))
                            << (isa<func::ReturnOp>(op) ? "" : " but reads")
                            << " operand #" << use.getOperandNumber() << " from "
                            << memorySpaceName(s) << " memory (a ds."
                            << (s == MemorySpace::Host ? "fetch" : "offload")
                            << " must move it first)";
    }
  }
  return success();
}

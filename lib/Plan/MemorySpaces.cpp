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
  if (auto a = op->getAttrOfType<MemorySpaceAttr>(kMemorySpaceAttr)) return a.getValue();
  return MemorySpace::Device;
}

/// The spaces are a hierarchy, device < host < nvme: ds.offload moves a
/// value one level away from the compute, ds.fetch one level closer.
static MemorySpace farther(MemorySpace s) {
  return s == MemorySpace::Device ? MemorySpace::Host : MemorySpace::Nvme;
}
static MemorySpace nearer(MemorySpace s) {
  return s == MemorySpace::Nvme ? MemorySpace::Host : MemorySpace::Device;
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
  if (isa<OffloadOp>(def)) return farther(of(def->getOperand(0)));
  if (isa<FetchOp>(def)) return nearer(of(def->getOperand(0)));
  return placement(def);
}

LogicalResult MemorySpaces::verify(func::FuncOp f) const {
  if (f.isExternal()) return success();
  for (Operation &op : f.getBody().front()) {
    if (isa<ml_program::GlobalLoadOp>(op)) continue;
    // A transfer reads its operand where it is: offloading an NVMe value or
    // fetching a device one goes nowhere.
    if (isa<OffloadOp, FetchOp>(op)) {
      MemorySpace s = of(op.getOperand(0));
      if (isa<OffloadOp>(op) ? s == MemorySpace::Nvme : s == MemorySpace::Device)
        return op.emitOpError("moves a value in ") << memorySpaceName(s) << " memory "
               << (isa<OffloadOp>(op) ? "farther" : "nearer") << ", where there is no space";
      // NVMe bytes are a swap file's: only a transfer reads them, and a
      // value offloaded there is a global's (stored, in place).
      if (isa<OffloadOp>(op) && of(op.getResult(0)) == MemorySpace::Nvme)
        for (Operation *u : op.getResult(0).getUsers())
          if (!isa<ml_program::GlobalStoreOp>(u))
            return u->emitOpError("reads a value offloaded to NVMe; fetch it first");
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

//===- MemorySpaces.h - where buffers live and ops run ----------*- C++ -*-===//
//
// ZeRO-Offload places state globals in host memory (`ds.memory_space` on
// an ml_program.global) and runs the ops that update them on the host (the
// same attribute on the op). A value lives where its producer runs; a
// global's load lives in the global's space; ds.offload / ds.fetch are the
// only ops that cross. The offload pass establishes this, the memory
// planner gives each space its own arena, and the plan emitter records each
// buffer's space. docs/offload.md has the rationale.
//
//===----------------------------------------------------------------------===//
#ifndef DS_PLAN_MEMORYSPACES_H
#define DS_PLAN_MEMORYSPACES_H

#include "dialects/ds/DSOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/StringMap.h"

namespace mlir::ds {

constexpr llvm::StringLiteral kMemorySpaceAttr = "ds.memory_space";
/// On a function: the bytes of its host arena (ds-plan-memory).
constexpr llvm::StringLiteral kHostArenaBytesAttr = "ds.host_arena_bytes";

/// The spaces of one module's globals, and through them of every value.
class MemorySpaces {
public:
  explicit MemorySpaces(ModuleOp module);

  /// Where the global `sym` lives (device when it has no attribute).
  MemorySpace ofGlobal(StringRef sym) const;
  /// Where `v`'s bytes live.
  MemorySpace of(Value v) const;
  /// Where `op` runs: its `ds.memory_space`, device otherwise. (A
  /// transfer's result is one level from its operand, device < host < nvme:
  /// of() knows that.)
  static MemorySpace placement(Operation *op);
  /// Sets (or, for device, removes) `op`'s placement.
  static void place(Operation *op, MemorySpace space);
  /// Whether any global or op of the module is off the device.
  bool anyOffDevice() const { return offDevice_; }

  /// Every op of `f` reads operands from the space it runs in, every store
  /// writes a value of its global's space, collectives and returned values
  /// are on the device, transfers move one level within device < host <
  /// nvme, and NVMe values are only fetched or stored. Errors name the op
  /// and the operand.
  LogicalResult verify(func::FuncOp f) const;

private:
  llvm::StringMap<MemorySpace> globals_;
  bool offDevice_ = false;
};

/// "device", "host" or "nvme".
StringRef memorySpaceName(MemorySpace space);

} // namespace mlir::ds

#endif // DS_PLAN_MEMORYSPACES_H

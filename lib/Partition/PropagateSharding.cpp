//===- PropagateSharding.cpp - shardings for every value ------------------===//
#include "ds/Partition/Passes.h"
#include "ds/Partition/Sharding.h"
#include "mlir/Dialect/MLProgram/IR/MLProgram.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/StringSet.h"

namespace mlir::ds {
#define GEN_PASS_DEF_PROPAGATESHARDINGPASS
#include "ds/Partition/Passes.h.inc"
} // namespace mlir::ds

using namespace mlir;
using namespace mlir::ds;

namespace {

/// The state globals that shadow a parameter `param:X` (its gradient
/// accumulator, optimizer moments, fp32 master): laid out as it is.
constexpr StringRef kShadowPrefixes[] = {"param:", "master:", "grad:", "adam_m:", "adam_v:",
                                         "momentum:"};

struct PropagateShardingPass
    : public mlir::ds::impl::PropagateShardingPassBase<PropagateShardingPass> {
  /// Training: a ds.shard on a parameter's load (tensor parallelism's
  /// constraint) lays out the parameter's global, and with it every state
  /// global of that parameter, so each rank stores and updates its slice.
  /// A parameter constrained two ways stays whole (its loads are resharded
  /// where read).
  LogicalResult shardStates(ModuleOp module) {
    llvm::StringMap<ShardingAttr> chosen;
    llvm::StringSet<> conflicting;
    module.walk([&](ShardOp s) {
      // The parameter as loaded, or widened from its 16-bit working copy.
      Value v = s.getOperand();
      if (auto c = v.getDefiningOp<CastOp>()) v = c.getOperand();
      auto l = v.getDefiningOp<ml_program::GlobalLoadOp>();
      if (!l) return;
      StringRef name = l.getGlobal().getLeafReference();
      auto [it, fresh] = chosen.try_emplace(name, s.getSharding());
      if (!fresh && it->second != s.getSharding()) conflicting.insert(name);
    });
    for (auto &[name, sharding] : chosen) {
      if (conflicting.contains(name)) continue;
      StringRef base = name;
      for (StringRef p : kShadowPrefixes)
        if (base.consume_front(p)) break;
      for (StringRef p : kShadowPrefixes) {
        auto g = module.lookupSymbol<ml_program::GlobalOp>((p + base).str());
        auto t = g ? dyn_cast<RankedTensorType>(g.getType()) : RankedTensorType();
        if (!t || t.getRank() != sharding.getRank()) continue;
        if (auto old = g->getAttrOfType<ShardingAttr>(kStateShardingAttr); old && old != sharding)
          return g.emitError("state '") << g.getSymName() << "' is laid out as " << old
                                        << " and constrained to " << sharding;
        g->setAttr(kStateShardingAttr, sharding);
      }
    }
    return success();
  }

  void runOnOperation() override {
    ModuleOp module = getOperation();
    MeshAttr mesh = MeshAttr::lookup(module);
    if (!mesh) return; // one rank: nothing to place
    if (failed(shardStates(module))) return signalPassFailure();
    for (auto func : module.getOps<func::FuncOp>()) {
      if (func.isExternal()) continue;
      // Dead values first (autodiff leaves gradients of constants): a
      // collective made for one would never be removed.
      for (bool changed = true; changed;) {
        SmallVector<Operation *> dead;
        func.walk([&](Operation *op) {
          if (op != func && isOpTriviallyDead(op)) dead.push_back(op);
        });
        for (Operation *op : llvm::reverse(dead)) op->erase();
        changed = !dead.empty();
      }
      func.walk([&](Operation *op) {
        if (op->getNumResults() == 0 || isa<func::FuncOp>(op)) return;
        if (!llvm::all_of(op->getResultTypes(), [](Type t) { return isa<RankedTensorType>(t); }))
          return;
        if (auto shard = dyn_cast<ShardOp>(op)) {
          setSharding(shard.getResult(), Sharding::fromAttr(shard.getSharding()));
          return;
        }
        if (auto load = dyn_cast<ml_program::GlobalLoadOp>(op)) {
          setSharding(load.getResult(), stateSharding(load));
          return;
        }
        SmallVector<Sharding> in;
        for (Value v : op->getOperands()) in.push_back(shardingOf(v));
        ShardingDecision d = decideSharding(op, in, mesh);
        for (auto [r, s] : llvm::zip(op->getResults(), d.results)) setSharding(r, s);
      });
    }
  }
};

} // namespace

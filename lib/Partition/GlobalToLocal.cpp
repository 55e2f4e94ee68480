//===- GlobalToLocal.cpp - per-rank types ---------------------------------===//
#include "ds/Partition/Passes.h"
#include "ds/Partition/Sharding.h"
#include "mlir/Dialect/MLProgram/IR/MLProgram.h"
#include "mlir/IR/Builders.h"

namespace mlir::ds {
#define GEN_PASS_DEF_GLOBALTOLOCALPASS
#include "ds/Partition/Passes.h.inc"
} // namespace mlir::ds

using namespace mlir;
using namespace mlir::ds;

namespace {

struct GlobalToLocalPass : public mlir::ds::impl::GlobalToLocalPassBase<GlobalToLocalPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    MeshAttr mesh = MeshAttr::lookup(module);
    if (!mesh) return;
    // Laid-out state holds one rank's slice; its whole initial value moves
    // to ds.full_value, which the plan cuts into each rank's slice.
    for (auto g : module.getOps<ml_program::GlobalOp>()) {
      auto a = g->getAttrOfType<ShardingAttr>(kStateShardingAttr);
      auto t = dyn_cast<RankedTensorType>(g.getType());
      if (!a || !t || g->hasAttr("ds.spmd_state")) continue;
      FailureOr<SmallVector<int64_t>> shape = localShape(t, Sharding::fromAttr(a), mesh);
      if (failed(shape)) {
        g.emitError("state '") << g.getSymName() << "' of type " << t << " does not split as "
                               << a << " over the mesh";
        return signalPassFailure();
      }
      if (Attribute init = g.getValueAttr()) {
        g->setAttr("ds.full_value", init);
        g.removeValueAttr();
      }
      g->setAttr("ds.whole_shape", DenseI64ArrayAttr::get(&getContext(), t.getShape()));
      g.setType(RankedTensorType::get(*shape, t.getElementType()));
      g->setAttr("ds.spmd_state", UnitAttr::get(&getContext()));
    }
    for (auto func : module.getOps<func::FuncOp>()) {
      if (func.isExternal() || func->hasAttr("ds.spmd")) continue;
      auto localize = [&](Value v, Operation *where) -> LogicalResult {
        auto t = dyn_cast<RankedTensorType>(v.getType());
        if (!t) return success();
        Sharding s = shardingOf(v);
        FailureOr<SmallVector<int64_t>> shape = localShape(t, s, mesh);
        if (failed(shape))
          return where->emitError("a split of ") << t << " does not divide over its mesh axes";
        v.setType(RankedTensorType::get(*shape, t.getElementType()));
        return success();
      };
      for (BlockArgument a : func.getArguments())
        if (failed(localize(a, func))) return signalPassFailure();
      WalkResult r = func.walk([&](Operation *op) {
        if (isa<func::FuncOp>(op)) return WalkResult::advance();
        for (Value v : op->getResults())
          if (failed(localize(v, op))) return WalkResult::interrupt();
        return WalkResult::advance();
      });
      if (r.wasInterrupted()) return signalPassFailure();
      Operation *ret = func.getBody().front().getTerminator();
      func.setType(FunctionType::get(&getContext(), func.getBody().front().getArgumentTypes(),
                                     ret->getOperandTypes()));
      func->setAttr("ds.spmd", UnitAttr::get(&getContext()));
    }
  }
};

} // namespace

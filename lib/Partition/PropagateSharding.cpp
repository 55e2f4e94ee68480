//===- PropagateSharding.cpp - shardings for every value ------------------===//
#include "ds/Partition/Passes.h"
#include "ds/Partition/Sharding.h"

namespace mlir::ds {
#define GEN_PASS_DEF_PROPAGATESHARDINGPASS
#include "ds/Partition/Passes.h.inc"
} // namespace mlir::ds

using namespace mlir;
using namespace mlir::ds;

namespace {

struct PropagateShardingPass
    : public mlir::ds::impl::PropagateShardingPassBase<PropagateShardingPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    MeshAttr mesh = MeshAttr::lookup(module);
    if (!mesh) return; // one rank: nothing to place
    for (auto func : module.getOps<func::FuncOp>()) {
      if (func.isExternal()) continue;
      func.walk([&](Operation *op) {
        if (op->getNumResults() == 0 || isa<func::FuncOp>(op)) return;
        if (!llvm::all_of(op->getResultTypes(), [](Type t) { return isa<RankedTensorType>(t); }))
          return;
        if (auto shard = dyn_cast<ShardOp>(op)) {
          setSharding(shard.getResult(), Sharding::fromAttr(shard.getSharding()));
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

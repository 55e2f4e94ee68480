//===- InsertCollectives.cpp - sharding disagreements to collectives ------===//
#include "ds/Partition/Passes.h"
#include "ds/Partition/Sharding.h"
#include "mlir/Dialect/MLProgram/IR/MLProgram.h"
#include "mlir/IR/Builders.h"

namespace mlir::ds {
#define GEN_PASS_DEF_INSERTCOLLECTIVESPASS
#include "ds/Partition/Passes.h.inc"
} // namespace mlir::ds

using namespace mlir;
using namespace mlir::ds;

namespace {

ArrayAttr axesAttr(MLIRContext *ctx, ArrayRef<StringRef> axes) {
  SmallVector<Attribute> v;
  for (StringRef a : axes) v.push_back(StringAttr::get(ctx, a));
  return ArrayAttr::get(ctx, v);
}

struct InsertCollectivesPass
    : public mlir::ds::impl::InsertCollectivesPassBase<InsertCollectivesPass> {
  MeshAttr mesh;

  /// Moves `v` from sharding `from` to `to` with collectives built before
  /// `at`; returns the moved value.
  FailureOr<Value> convert(Value v, Sharding from, const Sharding &to, Operation *at) {
    if (from == to) return v;
    OpBuilder b(at);
    MLIRContext *ctx = at->getContext();
    Location loc = at->getLoc();
    Type type = v.getType();
    auto i64 = [&](int64_t x) { return b.getI64IntegerAttr(x); };
    auto done = [&](Value r, const Sharding &s) {
      setSharding(r, s);
      from = s;
      v = r;
    };
    if (from.isPartial() && from.partial != to.partial) {
      if (to.isPartial())
        return FailureOr<Value>(at->emitError("cannot move a partial sum to other partial axes"));
      // A whole value split on the partial axes: reduce_scatter, half the
      // traffic of all_reduce followed by a slice.
      std::optional<int64_t> scatterDim;
      for (auto [d, ds] : llvm::enumerate(to.dims))
        if (ds.axes == from.partial && !from.dims[d].isSplit()) scatterDim = d;
      Sharding next = from.withoutPartial();
      if (scatterDim) {
        next.dims[*scatterDim] = to.dims[*scatterDim];
        auto rs = ReduceScatterOp::create(b, loc, type, v, axesAttr(ctx, from.partial),
                                          i64(*scatterDim), i64(to.dims[*scatterDim].outer),
                                          CollectiveReductionAttr::get(ctx, CollectiveReduction::Sum),
                                          /*quantize_block=*/nullptr);
        done(rs, next);
      } else {
        auto ar = AllReduceOp::create(b, loc, type, v, axesAttr(ctx, from.partial),
                                      CollectiveReductionAttr::get(ctx, CollectiveReduction::Sum));
        done(ar, next);
      }
      ++numCollectives;
    }
    if (!from.isPartial() && to.isPartial())
      return FailureOr<Value>(at->emitError("cannot make a partial sum of a whole value"));
    for (size_t d = 0; d < to.dims.size(); ++d) {
      if (from.dims[d] == to.dims[d]) continue;
      if (from.dims[d].isSplit()) {
        Sharding next = from;
        next.dims[d] = DimSharding();
        auto g = AllGatherOp::create(b, loc, type, v, axesAttr(ctx, from.dims[d].axes), i64(d),
                                     i64(from.dims[d].outer), /*quantize_block=*/nullptr);
        done(g, next);
        ++numCollectives;
      }
      if (to.dims[d].isSplit()) {
        Sharding next = from;
        next.dims[d] = to.dims[d];
        auto s = ShardSliceOp::create(b, loc, type, v, axesAttr(ctx, to.dims[d].axes), i64(d),
                                      i64(to.dims[d].outer));
        done(s, next);
        ++numSlices;
      }
    }
    return v;
  }

  void runOnOperation() override {
    ModuleOp module = getOperation();
    mesh = MeshAttr::lookup(module);
    if (!mesh) return;
    for (auto func : module.getOps<func::FuncOp>()) {
      if (func.isExternal()) continue;
      SmallVector<Operation *> ops;
      func.walk([&](Operation *op) {
        if (!isa<func::FuncOp>(op)) ops.push_back(op);
      });
      for (Operation *op : ops) {
        if (auto shard = dyn_cast<ShardOp>(op)) {
          FailureOr<Value> moved = convert(shard.getOperand(), shardingOf(shard.getOperand()),
                                           Sharding::fromAttr(shard.getSharding()), op);
          if (failed(moved)) return signalPassFailure();
          shard.getResult().replaceAllUsesWith(*moved);
          shard->erase();
          continue;
        }
        if (op->hasTrait<OpTrait::IsTerminator>()) {
          // Function results leave whole: outputs are replicated.
          for (OpOperand &o : op->getOpOperands()) {
            auto t = dyn_cast<RankedTensorType>(o.get().getType());
            if (!t) continue;
            FailureOr<Value> moved =
                convert(o.get(), shardingOf(o.get()), Sharding::replicated(t.getRank()), op);
            if (failed(moved)) return signalPassFailure();
            o.set(*moved);
          }
          continue;
        }
        // State keeps its layout: a load reads it as it is laid out, and a
        // store writes a value moved to that layout.
        if (isa<ml_program::GlobalLoadOp>(op)) continue;
        if (auto store = dyn_cast<ml_program::GlobalStoreOp>(op)) {
          // A fill stored alone (zeroed accumulators) is made in the
          // global's sharding: nothing to slice.
          if (auto fill = store.getValue().getDefiningOp<FillOp>();
              fill && fill->hasOneUse() && !stateSharding(store).isReplicated()) {
            setSharding(fill.getResult(), stateSharding(store));
            continue;
          }
          FailureOr<Value> moved = convert(store.getValue(), shardingOf(store.getValue()),
                                           stateSharding(store), op);
          if (failed(moved)) return signalPassFailure();
          store.getValueMutable().assign(*moved);
          continue;
        }
        if (op->getNumResults() == 0 ||
            !llvm::all_of(op->getOperandTypes(), [](Type t) { return isa<RankedTensorType>(t); }))
          continue;
        SmallVector<Sharding> in;
        for (Value v : op->getOperands()) in.push_back(shardingOf(v));
        ShardingDecision d = decideSharding(op, in, mesh);
        for (auto [i, o] : llvm::enumerate(op->getOpOperands())) {
          FailureOr<Value> moved = convert(o.get(), in[i], d.operands[i], op);
          if (failed(moved)) return signalPassFailure();
          o.set(*moved);
        }
        for (auto [r, s] : llvm::zip(op->getResults(), d.results)) setSharding(r, s);
      }
    }
  }
};

} // namespace

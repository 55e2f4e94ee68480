//===- Sharding.cpp - shardings recorded on values -------------------------===//
#include "ds/Partition/Sharding.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MLProgram/IR/MLProgram.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/SymbolTable.h"

using namespace mlir;
using namespace mlir::ds;

static int64_t rankOf(Value v) { return cast<RankedTensorType>(v.getType()).getRank(); }

Sharding mlir::ds::shardingOf(Value v) {
  ShardingAttr a;
  if (auto arg = dyn_cast<BlockArgument>(v)) {
    if (auto f = dyn_cast<func::FuncOp>(arg.getOwner()->getParentOp()))
      a = f.getArgAttrOfType<ShardingAttr>(arg.getArgNumber(), "ds.sharding");
  } else if (Operation *op = v.getDefiningOp()) {
    unsigned i = cast<OpResult>(v).getResultNumber();
    if (op->getNumResults() == 1) {
      a = op->getAttrOfType<ShardingAttr>("ds.sharding");
    } else if (auto all = op->getAttrOfType<ArrayAttr>("ds.shardings")) {
      if (i < all.size()) a = dyn_cast<ShardingAttr>(all[i]);
    }
  }
  if (a && a.getRank() == rankOf(v)) return Sharding::fromAttr(a);
  return Sharding::replicated(rankOf(v));
}

void mlir::ds::setSharding(Value v, const Sharding &s) {
  MLIRContext *ctx = v.getContext();
  ShardingAttr a = s.toAttr(ctx);
  if (auto arg = dyn_cast<BlockArgument>(v)) {
    if (auto f = dyn_cast<func::FuncOp>(arg.getOwner()->getParentOp()))
      f.setArgAttr(arg.getArgNumber(), "ds.sharding", a);
    return;
  }
  Operation *op = v.getDefiningOp();
  if (op->getNumResults() == 1) {
    op->setAttr("ds.sharding", a);
    return;
  }
  SmallVector<Attribute> all;
  if (auto old = op->getAttrOfType<ArrayAttr>("ds.shardings")) all.assign(old.begin(), old.end());
  for (Value r : op->getResults())
    if (all.size() <= cast<OpResult>(r).getResultNumber())
      all.push_back(Sharding::replicated(rankOf(r)).toAttr(ctx));
  all[cast<OpResult>(v).getResultNumber()] = a;
  op->setAttr("ds.shardings", ArrayAttr::get(ctx, all));
}

FailureOr<SmallVector<int64_t>> mlir::ds::localShape(RankedTensorType type, const Sharding &s,
                                                     MeshAttr mesh) {
  SmallVector<int64_t> shape(type.getShape());
  for (auto [d, ds] : llvm::enumerate(s.dims)) {
    if (!ds.isSplit()) continue;
    int64_t n = groupSizeOf(ds.axes, mesh);
    if (shape[d] % (n * ds.outer)) return failure();
    shape[d] /= n;
  }
  return shape;
}

ShardingDecision mlir::ds::decideSharding(Operation *op, ArrayRef<Sharding> in, MeshAttr mesh) {
  ShardingDecision d;
  if (auto rule = dyn_cast<ShardingRuleOpInterface>(op)) d = rule.getShardingRule(in, mesh);
  if (d.results.empty()) { // no rule: compute on replicated values
    d = {};
    for (Value v : op->getOperands()) d.operands.push_back(Sharding::replicated(rankOf(v)));
    for (Value v : op->getResults()) d.results.push_back(Sharding::replicated(rankOf(v)));
  }
  return d;
}

Sharding mlir::ds::stateSharding(Operation *op) {
  SymbolRefAttr sym;
  Type type;
  if (auto l = dyn_cast<ml_program::GlobalLoadOp>(op)) {
    sym = l.getGlobal();
    type = l.getType();
  } else if (auto s = dyn_cast<ml_program::GlobalStoreOp>(op)) {
    sym = s.getGlobal();
    type = s.getValue().getType();
  }
  int64_t rank = cast<RankedTensorType>(type).getRank();
  auto g = SymbolTable::lookupNearestSymbolFrom<ml_program::GlobalOp>(op, sym);
  auto a = g ? g->getAttrOfType<ShardingAttr>(kStateShardingAttr) : ShardingAttr();
  if (a && a.getRank() == rank) return Sharding::fromAttr(a);
  return Sharding::replicated(rank);
}

//===- Sharding.cpp - sharding values and per-op rules --------------------===//
#include "ds/Partition/Sharding.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/StringSet.h"

using namespace mlir;
using namespace mlir::ds;

Sharding Sharding::fromAttr(ShardingAttr a) {
  Sharding s;
  for (int64_t d = 0; d < a.getRank(); ++d) s.dims.push_back({a.axesOf(d), a.outerOf(d)});
  s.partial = a.partialAxes();
  return s;
}

ShardingAttr Sharding::toAttr(MLIRContext *ctx) const {
  SmallVector<SmallVector<StringRef>> axes;
  SmallVector<int64_t> outer;
  for (const DimSharding &d : dims) {
    axes.push_back(d.axes);
    outer.push_back(d.isSplit() ? d.outer : 1);
  }
  return ShardingAttr::get(ctx, axes, partial, outer);
}

bool Sharding::isReplicated() const {
  return partial.empty() && llvm::none_of(dims, [](const DimSharding &d) { return d.isSplit(); });
}

int64_t mlir::ds::groupSizeOf(ArrayRef<StringRef> axes, MeshAttr mesh) {
  int64_t n = 1;
  for (StringRef a : axes) n *= mesh ? mesh.getAxisSize(a).value_or(1) : 1;
  return n;
}

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

//===----------------------------------------------------------------------===//
// Rules
//===----------------------------------------------------------------------===//

namespace {

ArrayRef<int64_t> shapeOf(Value v) { return cast<RankedTensorType>(v.getType()).getShape(); }

/// Result sharding of `type` in which each dimension takes the sharding of
/// the first operand dimension aligned with it (numpy broadcasting) that has
/// the same extent and is split on axes not used yet.
ShardingDecision elementwise(Operation *op, ArrayRef<Sharding> in) {
  ArrayRef<int64_t> out = shapeOf(op->getResult(0));
  int64_t r = out.size();
  Sharding res = Sharding::replicated(r);
  llvm::StringSet<> used;
  for (int64_t i = 0; i < r; ++i)
    for (auto [k, v] : llvm::enumerate(op->getOperands())) {
      ArrayRef<int64_t> s = shapeOf(v);
      int64_t j = i - (r - static_cast<int64_t>(s.size()));
      if (j < 0 || s[j] != out[i]) continue;
      const DimSharding &ds = in[k].dims[j];
      if (!ds.isSplit() || llvm::any_of(ds.axes, [&](StringRef a) { return used.contains(a); }))
        continue;
      res.dims[i] = ds;
      for (StringRef a : ds.axes) used.insert(a);
      break;
    }
  ShardingDecision d;
  for (Value v : op->getOperands()) {
    ArrayRef<int64_t> s = shapeOf(v);
    Sharding req = Sharding::replicated(s.size());
    for (int64_t j = 0; j < static_cast<int64_t>(s.size()); ++j) {
      int64_t i = j + r - static_cast<int64_t>(s.size());
      if (i >= 0 && s[j] == out[i]) req.dims[j] = res.dims[i];
    }
    d.operands.push_back(req);
  }
  for (Value v : op->getResults()) {
    (void)v;
    d.results.push_back(res);
  }
  return d;
}

/// Reshapes keep a split when the split's rank factor (the block index, a
/// strided factor of the flat index) lies inside one result dimension; that
/// dimension gets the split, with the outer factor that places it.
ShardingDecision reshape(Operation *op, const Sharding &in, MeshAttr mesh) {
  ArrayRef<int64_t> is = shapeOf(op->getOperand(0)), os = shapeOf(op->getResult(0));
  auto strides = [](ArrayRef<int64_t> s) {
    SmallVector<int64_t> t(s.size(), 1);
    for (int64_t i = static_cast<int64_t>(s.size()) - 2; i >= 0; --i) t[i] = t[i + 1] * s[i + 1];
    return t;
  };
  SmallVector<int64_t> ti = strides(is), to = strides(os);
  Sharding req = in.withoutPartial(), res = Sharding::replicated(os.size());
  for (auto [d, ds] : llvm::enumerate(req.dims)) {
    if (!ds.isSplit()) continue;
    int64_t n = groupSizeOf(ds.axes, mesh), f = is[d] / ds.outer;
    bool placed = false;
    if (n > 0 && f % n == 0) {
      int64_t sigma = ti[d] * (f / n);
      for (size_t e = 0; e < os.size() && !placed; ++e) {
        if (sigma < to[e] || sigma % to[e] || (to[e] * os[e]) % (sigma * n) || res.dims[e].isSplit())
          continue;
        res.dims[e] = {ds.axes, to[e] * os[e] / (sigma * n)};
        placed = true;
      }
    }
    if (!placed) ds = DimSharding();
  }
  return {{req}, {res}};
}

ShardingDecision matmul(Operation *op, ArrayRef<Sharding> in) {
  ArrayRef<int64_t> as = shapeOf(op->getOperand(0)), bs = shapeOf(op->getOperand(1)),
                    rs = shapeOf(op->getResult(0));
  int64_t ra = as.size(), rb = bs.size(), rr = rs.size();
  if (ra < 2 || rb < 2) return {};
  // Transposed operands (folded late, after partitioning) have no rule.
  if (auto m = dyn_cast<MatmulOp>(op); m && (m.getTransposeLhs() || m.getTransposeRhs())) return {};
  const Sharding &a = in[0], &b = in[1];
  Sharding res = Sharding::replicated(rr);
  llvm::StringSet<> used;
  auto take = [&](int64_t i, const DimSharding &ds) {
    if (!ds.isSplit() || res.dims[i].isSplit() ||
        llvm::any_of(ds.axes, [&](StringRef x) { return used.contains(x); }))
      return;
    res.dims[i] = ds;
    for (StringRef x : ds.axes) used.insert(x);
  };
  take(rr - 2, a.dims[ra - 2]);
  take(rr - 1, b.dims[rb - 1]);
  for (int64_t i = 0; i < rr - 2; ++i) {
    int64_t ja = i - (rr - ra), jb = i - (rr - rb);
    if (ja >= 0 && as[ja] == rs[i]) take(i, a.dims[ja]);
    if (jb >= 0 && bs[jb] == rs[i]) take(i, b.dims[jb]);
  }
  DimSharding k = a.dims[ra - 1].isSplit() ? a.dims[ra - 1] : b.dims[rb - 2];
  if (llvm::any_of(k.axes, [&](StringRef x) { return used.contains(x); })) k = DimSharding();
  res.partial = k.axes;
  auto required = [&](ArrayRef<int64_t> s, int64_t rank, int64_t kDim, int64_t keep,
                      int64_t keepRes) {
    Sharding q = Sharding::replicated(rank);
    for (int64_t j = 0; j < rank - 2; ++j) {
      int64_t i = j + rr - rank;
      if (i >= 0 && s[j] == rs[i]) q.dims[j] = res.dims[i];
    }
    q.dims[kDim] = k;
    q.dims[keep] = res.dims[keepRes];
    return q;
  };
  ShardingDecision d;
  d.operands.push_back(required(as, ra, ra - 1, ra - 2, rr - 2));
  d.operands.push_back(required(bs, rb, rb - 2, rb - 1, rr - 1));
  d.results.push_back(res);
  return d;
}

/// The operand's sharding (without partial sums) with the given dimensions
/// unsplit, for operand 0 and every result of the same shape.
ShardingDecision keepExcept(Operation *op, const Sharding &in, ArrayRef<int64_t> unsplit) {
  Sharding s = in.withoutPartial();
  for (int64_t d : unsplit)
    if (d >= 0 && d < static_cast<int64_t>(s.dims.size())) s.dims[d] = DimSharding();
  ShardingDecision dec;
  dec.operands.push_back(s);
  for (unsigned i = 1; i < op->getNumOperands(); ++i)
    dec.operands.push_back(Sharding::replicated(rankOf(op->getOperand(i))));
  // Results of the operand's rank keep its splits (the unsplit dimensions
  // are the only ones whose extent may differ: split and slice axes).
  for (Value r : op->getResults())
    dec.results.push_back(rankOf(r) == rankOf(op->getOperand(0)) ? s
                                                                  : Sharding::replicated(rankOf(r)));
  return dec;
}

} // namespace

ShardingDecision mlir::ds::decideSharding(Operation *op, ArrayRef<Sharding> in, MeshAttr mesh) {
  ShardingDecision d;
  if (isa<AddOp, SubOp, MulOp, DivOp, PowOp, MinOp, MaxOp, ModOp, EqualOp, LessOp, GreaterOp,
          LessEqualOp, GreaterEqualOp, AndOp, OrOp, XorOp, WhereOp, CastOp, GeluOp, IsNanOp,
          IsInfOp>(op) ||
      (op->hasTrait<OpTrait::SameOperandsAndResultType>() && op->getNumOperands() == 1 &&
       isa<SqrtOp, ReciprocalOp, ExpOp, LogOp, ErfOp, TanhOp, SigmoidOp, ReluOp, NegOp, AbsOp,
           NotOp, SinOp, CosOp, TanOp, AsinOp, AcosOp, AtanOp, SinhOp, CoshOp, AsinhOp, AcoshOp,
           AtanhOp, FloorOp, CeilOp, RoundOp, SignOp, SoftplusOp>(op)))
    d = elementwise(op, in);
  else if (auto t = dyn_cast<TransposeOp>(op)) {
    Sharding res = Sharding::replicated(t.getPermutation().size());
    for (auto [i, p] : llvm::enumerate(t.getPermutation())) res.dims[i] = in[0].dims[p];
    d = {{in[0].withoutPartial()}, {res}};
  } else if (isa<ReshapeOp, SqueezeOp, UnsqueezeOp>(op)) {
    d = reshape(op, in[0], mesh);
  } else if (isa<MatmulOp>(op)) {
    d = matmul(op, in);
  } else if (auto s = dyn_cast<SoftmaxOp>(op)) {
    d = keepExcept(op, in[0], {static_cast<int64_t>(s.getAxis())});
  } else if (auto s = dyn_cast<LogSoftmaxOp>(op)) {
    d = keepExcept(op, in[0], {static_cast<int64_t>(s.getAxis())});
  } else if (auto s = dyn_cast<SplitOp>(op)) {
    d = keepExcept(op, in[0], {static_cast<int64_t>(s.getAxis())});
  } else if (auto s = dyn_cast<SliceOp>(op)) {
    SmallVector<int64_t> changed;
    for (auto [i, e] : llvm::enumerate(shapeOf(s.getOperand())))
      if (shapeOf(s.getResult())[i] != e) changed.push_back(i);
    d = keepExcept(op, in[0], changed);
  }
  if (d.results.empty()) { // no rule: compute on replicated values
    for (Value v : op->getOperands()) d.operands.push_back(Sharding::replicated(rankOf(v)));
    for (Value v : op->getResults()) d.results.push_back(Sharding::replicated(rankOf(v)));
  }
  return d;
}

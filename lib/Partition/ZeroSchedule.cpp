//===- ZeroSchedule.cpp - ZeRO buckets, overlap, prefetch and reuse -------===//
//
// ds-data-parallel places one collective per tensor where the math needs
// it; this pass decides how they are grouped and when they are issued,
// from DeepSpeed's zero_optimization knobs. Everything here is a move or a
// regrouping of collectives already in the program: the values computed do
// not change, only when bytes travel and how long gathered copies live.
//
//===----------------------------------------------------------------------===//
#include "ds/Partition/Passes.h"
#include "ds/Partition/Sharding.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MLProgram/IR/MLProgram.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SetVector.h"
#include "mlir/IR/SymbolTable.h"

namespace mlir::ds {
#define GEN_PASS_DEF_ZEROSCHEDULEPASS
#include "ds/Partition/Passes.h.inc"
} // namespace mlir::ds

using namespace mlir;
using namespace mlir::ds;

namespace {

int64_t numel(Value v) { return cast<RankedTensorType>(v.getType()).getNumElements(); }

bool overAxis(ArrayAttr axes, StringRef axis) {
  return axes.size() == 1 && cast<StringAttr>(axes[0]).getValue() == axis;
}

/// The ops of `block` that use `roots` (transitively) and sit before `at`,
/// in program order: what must move below a collective inserted at `at`.
/// Fails when one is a store that would pass a load of the same global.
FailureOr<SmallVector<Operation *>> usersBefore(ArrayRef<Value> roots, Operation *at) {
  Block *block = at->getBlock();
  llvm::SetVector<Operation *> found;
  SmallVector<Value> work(roots.begin(), roots.end());
  while (!work.empty()) {
    Value v = work.pop_back_val();
    for (Operation *u : v.getUsers()) {
      Operation *top = block->findAncestorOpInBlock(*u);
      if (!top || top == at || !top->isBeforeInBlock(at)) continue;
      if (found.insert(top))
        for (Value r : top->getResults()) work.push_back(r);
    }
  }
  SmallVector<Operation *> ops(found.begin(), found.end());
  llvm::sort(ops, [](Operation *a, Operation *b) { return a->isBeforeInBlock(b); });
  for (Operation *op : ops)
    if (auto st = dyn_cast<ml_program::GlobalStoreOp>(op))
      for (Operation *x = op->getNextNode(); x && x != at; x = x->getNextNode())
        if (auto l = dyn_cast<ml_program::GlobalLoadOp>(x); l && l.getGlobal() == st.getGlobal())
          return failure();
  return ops;
}

/// A stage-3 gather: the collective, and the value its uses read (after
/// the unpadding slice and reshape the data-parallel pass adds).
struct ParamGather {
  AllGatherOp op;
  Value whole;
  StringAttr param;
  int64_t elements;
  Operation *anchor; // the first op that reads the gather
};

/// qwZ's block: elements per int8 block and f32 scale (DeepSpeed's CUDA
/// quantizer takes groups of a few thousand; smaller blocks keep each
/// step finer, at 4 bytes of scale per 256 of codes).
constexpr int64_t kQuantizedGatherBlock = 256;

struct ZeroSchedulePass : public mlir::ds::impl::ZeroSchedulePassBase<ZeroSchedulePass> {
  using ZeroSchedulePassBase::ZeroSchedulePassBase;

  /// Option value, else the module's ds.training entry, else DeepSpeed's default.
  int64_t knob(ModuleOp module, int64_t option, StringRef key, int64_t deflt) {
    if (option >= 0) return option;
    if (auto t = module->getAttrOfType<DictionaryAttr>("ds.training"))
      if (auto v = t.getAs<IntegerAttr>(key)) return v.getInt();
    return deflt;
  }

  //===--------------------------------------------------------------------===//
  // Buckets
  //===--------------------------------------------------------------------===//

  /// Groups consecutive members (program order, same element type) into
  /// buckets of at most `limit` elements; a member larger than the limit
  /// is a bucket of its own.
  template <typename Op>
  SmallVector<SmallVector<Op>> bucketsOf(ArrayRef<Op> members, int64_t limit,
                                         function_ref<int64_t(Op)> size) {
    SmallVector<SmallVector<Op>> out;
    int64_t filled = 0;
    for (Op m : members) {
      Type et = cast<RankedTensorType>(m->getOperand(0).getType()).getElementType();
      bool fits = !out.empty() && filled + size(m) <= limit &&
                  cast<RankedTensorType>(out.back().front()->getOperand(0).getType())
                          .getElementType() == et;
      if (!fits) {
        out.emplace_back();
        filled = 0;
      }
      out.back().push_back(m);
      filled += size(m);
    }
    return out;
  }

  /// Where a reduction bucket is issued: with overlap_comm as soon as its
  /// last member's gradient exists, else right before the first use of any
  /// member's result (the end of the backward for stage 2).
  template <typename Op>
  Operation *reductionPoint(ArrayRef<Op> bucket, bool overlap) {
    Operation *last = bucket.back();
    if (overlap) return last;
    Operation *first = nullptr;
    for (Op m : bucket)
      for (Operation *u : m->getResult(0).getUsers()) {
        Operation *top = last->getBlock()->findAncestorOpInBlock(*u);
        if (top && (!first || top->isBeforeInBlock(first))) first = top;
      }
    return first && last->isBeforeInBlock(first) ? first : last;
  }

  /// Replaces the members by `build`'s per-member values (built before
  /// `at`), moving their users below it. Keeps the members when a user
  /// cannot move.
  template <typename Op>
  void regroup(ArrayRef<Op> bucket, Operation *at,
               function_ref<SmallVector<Value>(OpBuilder &)> build) {
    SmallVector<Value> results;
    for (Op m : bucket) results.push_back(m->getResult(0));
    FailureOr<SmallVector<Operation *>> movers = usersBefore(results, at);
    if (failed(movers)) return;
    // A member computed from another member's result cannot join its bucket.
    llvm::SmallPtrSet<Operation *, 16> moving(movers->begin(), movers->end());
    for (Op m : bucket) {
      Value in = m->getOperand(0);
      if (moving.contains(m) || llvm::is_contained(results, in) ||
          (in.getDefiningOp() && moving.contains(in.getDefiningOp())))
        return;
    }
    OpBuilder b(at);
    SmallVector<Value> parts = build(b);
    Block *block = at->getBlock();
    for (auto [m, part] : llvm::zip(bucket, parts)) m->getResult(0).replaceAllUsesWith(part);
    for (Operation *op : *movers) op->moveBefore(at);
    for (Op m : bucket) m->erase(); // `at` may be one of them
    // Each member's slice (and reshape) waits for the collective: place it
    // right before the member's first use, not right after the collective,
    // so the compute in between runs while the bytes travel.
    for (Value part : parts) {
      // The member's own ops: slices and reshapes back to the collective
      // (a view shared by several members stays).
      SmallVector<Operation *> chain;
      for (Operation *op = part.getDefiningOp();
           op && isa<SliceOp, ReshapeOp>(op) && (chain.empty() || op->hasOneUse());
           op = op->getOperand(0).getDefiningOp())
        chain.push_back(op);
      Operation *first = nullptr;
      for (Operation *u : part.getUsers())
        if (Operation *top = block->findAncestorOpInBlock(*u);
            top && (!first || top->isBeforeInBlock(first)))
          first = top;
      if (!first || chain.empty() || first->isBeforeInBlock(chain.front())) continue;
      for (Operation *op : llvm::reverse(chain)) op->moveBefore(first);
    }
    if (bucket.size() > 1) ++numBuckets;
  }

  /// The 1-D, dim-0 collectives of `f`'s body over the data-parallel axis.
  template <typename Op>
  SmallVector<Op> flatOverDp(func::FuncOp f) {
    SmallVector<Op> out;
    for (Operation &o : f.getBody().front())
      if (auto op = dyn_cast<Op>(o);
          op && overAxis(op.getAxes(), axis) && op.getDim() == 0 && op.getOuter() == 1 &&
          cast<RankedTensorType>(op.getOperand().getType()).getRank() == 1)
        out.push_back(op);
    return out;
  }

  /// Gradient reduce-scatters ([N * b_i] -> [b_i]): the members side by
  /// side as [N, sum b_i], one reduce-scatter, each member's block sliced.
  void bucketReduceScatters(func::FuncOp f, int64_t limit, bool overlap, int64_t ranks) {
    SmallVector<ReduceScatterOp> members = flatOverDp<ReduceScatterOp>(f);
    auto size = [](ReduceScatterOp op) { return numel(op.getOperand()); };
    for (auto &bucket : bucketsOf<ReduceScatterOp>(members, limit, size)) {
      Operation *at = reductionPoint<ReduceScatterOp>(bucket, overlap);
      if (bucket.size() == 1 && at == bucket.front().getOperation()) continue;
      regroup<ReduceScatterOp>(bucket, at, [&](OpBuilder &b) {
        ReduceScatterOp first = bucket.front();
        Location loc = first.getLoc();
        Type et = cast<RankedTensorType>(first.getOperand().getType()).getElementType();
        if (bucket.size() == 1) {
          return SmallVector<Value>{ReduceScatterOp::create(
              b, loc, first.getResult().getType(), first.getOperand(), first.getAxes(),
              first.getDimAttr(), first.getOuterAttr(), first.getReductionAttr(),
              first.getQuantizeBlockAttr())};
        }
        SmallVector<Value> pieces;
        int64_t total = 0;
        for (ReduceScatterOp m : bucket) {
          int64_t blk = numel(m.getOperand()) / ranks;
          pieces.push_back(ReshapeOp::create(b, loc, RankedTensorType::get({ranks, blk}, et),
                                             m.getOperand()));
          total += blk;
        }
        Value side = ConcatOp::create(b, loc, RankedTensorType::get({ranks, total}, et), pieces,
                                      b.getI64IntegerAttr(1));
        Value flat = ReshapeOp::create(b, loc, RankedTensorType::get({ranks * total}, et), side);
        Value mine = ReduceScatterOp::create(b, loc, RankedTensorType::get({total}, et), flat,
                                             first.getAxes(), first.getDimAttr(),
                                             first.getOuterAttr(), first.getReductionAttr(),
                                             first.getQuantizeBlockAttr());
        SmallVector<Value> out;
        int64_t off = 0;
        for (ReduceScatterOp m : bucket) {
          out.push_back(SliceOp::create(b, loc, m.getResult().getType(), mine,
                                        b.getDenseI64ArrayAttr({off}), b.getDenseI64ArrayAttr({1})));
          off += numel(m.getResult());
        }
        return out;
      });
    }
  }

  /// Stage 0's gradient all-reduces: flattened, joined, one all-reduce,
  /// sliced back.
  void bucketAllReduces(func::FuncOp f, int64_t limit, bool overlap) {
    SmallVector<AllReduceOp> members;
    f.walk([&](AllReduceOp op) {
      if (overAxis(op.getAxes(), axis) && cast<RankedTensorType>(op.getType()).getRank() >= 1 &&
          op.getReduction() == CollectiveReduction::Sum && op->getBlock() == &f.getBody().front())
        members.push_back(op);
    });
    auto size = [](AllReduceOp op) { return numel(op.getOperand()); };
    for (auto &bucket : bucketsOf<AllReduceOp>(members, limit, size)) {
      if (bucket.size() == 1 && overlap) continue; // already where it belongs
      Operation *at = reductionPoint<AllReduceOp>(bucket, overlap);
      regroup<AllReduceOp>(bucket, at, [&](OpBuilder &b) {
        AllReduceOp first = bucket.front();
        Location loc = first.getLoc();
        if (bucket.size() == 1)
          return SmallVector<Value>{AllReduceOp::create(b, loc, first.getType(), first.getOperand(),
                                                        first.getAxes(), first.getReductionAttr())};
        Type et = cast<RankedTensorType>(first.getType()).getElementType();
        SmallVector<Value> flats;
        int64_t total = 0;
        for (AllReduceOp m : bucket) {
          int64_t n = numel(m.getOperand());
          Value v = m.getOperand();
          if (cast<RankedTensorType>(v.getType()).getRank() != 1)
            v = ReshapeOp::create(b, loc, RankedTensorType::get({n}, et), v);
          flats.push_back(v);
          total += n;
        }
        Value joined = ConcatOp::create(b, loc, RankedTensorType::get({total}, et), flats,
                                        b.getI64IntegerAttr(0));
        Value sum = AllReduceOp::create(b, loc, joined.getType(), joined, first.getAxes(),
                                        first.getReductionAttr());
        SmallVector<Value> out;
        int64_t off = 0;
        for (AllReduceOp m : bucket) {
          int64_t n = numel(m.getOperand());
          Value part = SliceOp::create(b, loc, RankedTensorType::get({n}, et), sum,
                                       b.getDenseI64ArrayAttr({off}), b.getDenseI64ArrayAttr({1}));
          if (cast<RankedTensorType>(m.getType()).getRank() != 1)
            part = ReshapeOp::create(b, loc, m.getType(), part);
          out.push_back(part);
          off += n;
        }
        return out;
      });
    }
  }

  /// The optimizer's parameter all-gathers ([b_i] -> [N * b_i]): the new
  /// blocks joined, one all-gather, viewed as [N, sum b_i], each member's
  /// columns sliced. Issued once the bucket's last block is updated.
  void bucketAllGathers(func::FuncOp f, int64_t limit, int64_t ranks) {
    SmallVector<AllGatherOp> members = flatOverDp<AllGatherOp>(f);
    auto size = [](AllGatherOp op) { return numel(op.getResult()); };
    for (auto &bucket : bucketsOf<AllGatherOp>(members, limit, size)) {
      if (bucket.size() == 1) continue;
      Operation *at = bucket.back();
      regroup<AllGatherOp>(bucket, at, [&](OpBuilder &b) {
        AllGatherOp first = bucket.front();
        Location loc = first.getLoc();
        Type et = cast<RankedTensorType>(first.getOperand().getType()).getElementType();
        SmallVector<Value> blocks;
        int64_t total = 0;
        for (AllGatherOp m : bucket) {
          blocks.push_back(m.getOperand());
          total += numel(m.getOperand());
        }
        Value mine = ConcatOp::create(b, loc, RankedTensorType::get({total}, et), blocks,
                                      b.getI64IntegerAttr(0));
        Value all = AllGatherOp::create(b, loc, RankedTensorType::get({ranks * total}, et), mine,
                                        first.getAxes(), first.getDimAttr(), first.getOuterAttr(),
                                        /*quantize_block=*/nullptr);
        Value grid = ReshapeOp::create(b, loc, RankedTensorType::get({ranks, total}, et), all);
        SmallVector<Value> out;
        int64_t off = 0;
        for (AllGatherOp m : bucket) {
          int64_t blk = numel(m.getOperand());
          Value cols = SliceOp::create(b, loc, RankedTensorType::get({ranks, blk}, et), grid,
                                       b.getDenseI64ArrayAttr({0, off}),
                                       b.getDenseI64ArrayAttr({1, 1}));
          out.push_back(ReshapeOp::create(b, loc, m.getResult().getType(), cols));
          off += blk;
        }
        return out;
      });
    }
  }

  //===--------------------------------------------------------------------===//
  // Stage 3: reuse, prefetch, live bound
  //===--------------------------------------------------------------------===//

  SmallVector<ParamGather> paramGathers(func::FuncOp f) {
    SmallVector<ParamGather> out;
    Block &body = f.getBody().front();
    for (Operation &op : body) {
      auto g = dyn_cast<AllGatherOp>(op);
      if (!g || !overAxis(g.getAxes(), axis)) continue;
      auto load = g.getOperand().getDefiningOp<ml_program::GlobalLoadOp>();
      if (!load) continue;
      // Follow only what ds-data-parallel added: the unpadding slice (from
      // 0, the whole tensor's element count) and the reshape to its shape;
      // the model's own slices of a fused weight are uses, not the whole.
      auto global = SymbolTable::lookupNearestSymbolFrom<ml_program::GlobalOp>(
          load, load.getGlobalAttr());
      if (!global) continue;
      auto numelAttr = global->getAttrOfType<IntegerAttr>("ds.partition_numel");
      auto shapeAttr = global->getAttrOfType<DenseI64ArrayAttr>("ds.partition_shape");
      Value whole = g.getResult();
      if (numelAttr && whole.hasOneUse())
        if (auto s = dyn_cast<SliceOp>(*whole.getUsers().begin());
            s && s->getBlock() == &body && numel(s.getResult()) == numelAttr.getInt() &&
            llvm::all_of(s.getStarts(), [](int64_t v) { return v == 0; }))
          whole = s.getResult();
      if (shapeAttr && whole.hasOneUse())
        if (auto r = dyn_cast<ReshapeOp>(*whole.getUsers().begin());
            r && r->getBlock() == &body &&
            cast<RankedTensorType>(r.getType()).getShape() == shapeAttr.asArrayRef())
          whole = r.getResult();
      // The anchor: the first op reading the gather (a slice, reshape or
      // the use itself), which nothing here moves.
      Operation *anchor = nullptr;
      for (Operation *u : g->getUsers())
        if (Operation *top = body.findAncestorOpInBlock(*u); top && (!anchor || top->isBeforeInBlock(anchor)))
          anchor = top;
      if (!anchor) continue;
      out.push_back({g, whole, load.getGlobal().getLeafReference(), numel(whole), anchor});
    }
    return out;
  }

  /// The last op of the body that reads the gathered value.
  static Operation *lastUse(const ParamGather &g) {
    Block *body = g.op->getBlock();
    Operation *last = g.whole.getDefiningOp() ? g.whole.getDefiningOp() : const_cast<AllGatherOp &>(g.op).getOperation();
    for (Operation *u : g.whole.getUsers())
      if (Operation *top = body->findAncestorOpInBlock(*u); top && last->isBeforeInBlock(top))
        last = top;
    return last;
  }

  /// The most gathered elements live at once: each gather's copy lives
  /// from the collective to the last read of its value.
  static int64_t peakLive(ArrayRef<ParamGather> gathers) {
    if (gathers.empty()) return 0;
    DenseMap<Operation *, int64_t> index;
    int64_t i = 0;
    for (Operation &op : *gathers.front().op->getBlock()) index[&op] = i++;
    SmallVector<std::pair<int64_t, int64_t>> events; // (position, +/- elements)
    for (const ParamGather &g : gathers) {
      events.push_back({2 * index[const_cast<AllGatherOp &>(g.op).getOperation()], g.elements});
      events.push_back({2 * index[lastUse(g)] + 1, -g.elements});
    }
    llvm::sort(events);
    int64_t live = 0, peak = 0;
    for (auto [pos, d] : events) peak = std::max(peak, live += d);
    return peak;
  }

  void scheduleParamGathers(func::FuncOp f, int64_t prefetch, int64_t maxLive, int64_t reuse) {
    SmallVector<ParamGather> gathers = paramGathers(f);
    if (gathers.empty()) return;
    // Reuse: a gather whose parameter was gathered recently enough serves
    // the new use too, when the live bound allows the longer life.
    SmallVector<ParamGather> kept;
    // The bound counts every gather still in the program: those kept so
    // far and those after the one being decided.
    auto liveWithRest = [&](size_t from) {
      SmallVector<ParamGather> all(kept.begin(), kept.end());
      for (size_t i = from; i < gathers.size(); ++i)
        if (gathers[i].op) all.push_back(gathers[i]);
      return peakLive(all);
    };
    for (size_t gi = 0; gi < gathers.size(); ++gi) {
      ParamGather &g = gathers[gi];
      ParamGather *prev = nullptr;
      for (ParamGather &k : kept)
        if (k.param == g.param) prev = &k;
      if (prev) {
        Operation *from = lastUse(*prev);
        int64_t between = 0;
        for (ParamGather &o : gathers)
          if (o.param != g.param && o.op && from->isBeforeInBlock(o.op) && o.op->isBeforeInBlock(g.op))
            between += o.elements;
        if (between < reuse && prev->whole.getType() == g.whole.getType()) {
          Value mine = g.whole;
          SmallVector<OpOperand *> uses;
          for (OpOperand &u : mine.getUses()) uses.push_back(&u);
          mine.replaceAllUsesWith(prev->whole);
          if (liveWithRest(gi + 1) <= maxLive) {
            // Drop the now unused chain: reshape, slice, gather.
            for (Operation *op = mine.getDefiningOp(); op && op != g.op;) {
              Operation *next = op->getOperand(0).getDefiningOp();
              op->erase();
              op = next;
            }
            g.op->erase();
            g.op = nullptr;
            ++numReused;
            continue;
          }
          for (OpOperand *u : uses) u->set(mine); // the longer life would exceed the bound
        }
      }
      kept.push_back(g);
    }
    // Prefetch: gather j is issued right before the first use of gather k,
    // the earliest such that gathers k..j together stay within `prefetch`
    // elements: while k's parameter is in use the next ones are in flight.
    // Never beyond the live bound.
    // Loads move up with their gathers; fine unless the function also
    // stores that global (parameters are stored only by the optimizer).
    llvm::DenseSet<StringAttr> stored;
    f.walk([&](ml_program::GlobalStoreOp st) { stored.insert(st.getGlobal().getLeafReference()); });
    for (size_t j = 1; j < kept.size(); ++j) {
      ParamGather &g = kept[j];
      if (stored.contains(g.param)) continue;
      int64_t window = g.elements;
      size_t k = j;
      while (k > 0 && window + kept[k - 1].elements <= prefetch) window += kept[--k].elements;
      for (; k < j; ++k) {
        Operation *to = kept[k].anchor;
        if (!to->isBeforeInBlock(g.op)) continue;
        // The load (shared by every gather of the parameter) moves up and
        // stays there if the hoist is undone: a load earlier is harmless,
        // and moving it back could put it after another of its users.
        Operation *load = g.op.getOperand().getDefiningOp();
        if (load->getBlock() == to->getBlock() && !load->isBeforeInBlock(to)) load->moveBefore(to);
        g.op->moveBefore(to);
        if (peakLive(kept) <= maxLive) {
          ++numPrefetched;
          break;
        }
        g.op->moveBefore(g.anchor);
      }
    }
  }

  void runOnOperation() override {
    ModuleOp module = getOperation();
    MeshAttr mesh = MeshAttr::lookup(module);
    std::optional<int64_t> ranks = mesh ? mesh.getAxisSize(axis) : std::nullopt;
    if (!ranks || *ranks <= 1) return; // not data parallel: nothing to schedule
    int64_t z = knob(module, stage, "zero_stage", 0);
    int64_t reduceBucket = knob(module, reduceBucketSize, "reduce_bucket_size", 500000000);
    int64_t gatherBucket = knob(module, allgatherBucketSize, "allgather_bucket_size", 500000000);
    bool overlap = knob(module, overlapComm, "overlap_comm", z >= 3 ? 1 : 0) != 0;
    int64_t prefetch = knob(module, prefetchBucketSize, "stage3_prefetch_bucket_size", 50000000);
    int64_t maxLive = knob(module, maxLiveParameters, "stage3_max_live_parameters", 1000000000);
    int64_t reuse = knob(module, maxReuseDistance, "stage3_max_reuse_distance", 1000000000);
    const bool quantizedWeights =
        knob(module, zeroQuantizedWeights, "zero_quantized_weights", 0) != 0;
    const bool quantizedGradients =
        knob(module, zeroQuantizedGradients, "zero_quantized_gradients", 0) != 0;
    for (auto f : module.getOps<func::FuncOp>()) {
      if (f.isExternal() || !f.getBody().hasOneBlock()) continue;
      bool optimizer = f.getSymName() == "optimizer_step";
      if (z == 0) {
        bucketAllReduces(f, reduceBucket, overlap);
        continue;
      }
      bucketReduceScatters(f, reduceBucket, overlap, *ranks);
      if (optimizer) bucketAllGathers(f, gatherBucket, *ranks);
      else if (z >= 3) scheduleParamGathers(f, prefetch, maxLive, reuse);
      // ZeRO++'s qgZ: the step's gradient reductions send int8 blocks
      // (after bucketing: a bucket is one quantized all-to-all).
      if (!optimizer && z >= 3 && quantizedGradients)
        for (ReduceScatterOp rs : flatOverDp<ReduceScatterOp>(f))
          if (Type e = cast<RankedTensorType>(rs.getOperand().getType()).getElementType();
              (e.isF32() || e.isF16() || e.isBF16()) && rs.getOuter() == 1 &&
              rs.getReduction() == CollectiveReduction::Sum)
            rs.setQuantizeBlockAttr(
                IntegerAttr::get(IntegerType::get(f.getContext(), 64), kQuantizedGatherBlock));
      // ZeRO++'s qwZ: stage 3's parameter gathers send int8 blocks.
      if (!optimizer && z >= 3 && quantizedWeights)
        for (ParamGather &g : paramGathers(f))
          if (Type e = cast<RankedTensorType>(g.op.getOperand().getType()).getElementType();
              e.isF32() || e.isF16() || e.isBF16())
            g.op.setQuantizeBlockAttr(
                IntegerAttr::get(IntegerType::get(f.getContext(), 64), kQuantizedGatherBlock));
    }
  }
};

} // namespace

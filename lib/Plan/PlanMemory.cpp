//===- PlanMemory.cpp - static arena from liveness ------------------------===//
//
// Intermediates are packed into one arena: sorted by size (largest first),
// each goes to the lowest aligned offset that does not collide with an
// already placed intermediate whose live range overlaps its own. This is
// the greedy-by-size heuristic TFLite's and IREE's planners use; it is
// within a few percent of optimal on transformer graphs and linear-ish in
// practice.
//
// Values in host memory (ZeRO-Offload, MemorySpaces.h) are packed the same
// way into a host arena of their own: the device arena is what the device
// budget bounds.
//
//===----------------------------------------------------------------------===//
#include "ds/Plan/Passes.h"
#include <limits>
#include "ds/Plan/KernelBridge.h"
#include "ds/Plan/MemorySpaces.h"

#include "dialects/ds/DSOps.h"
#include "mlir/Dialect/MLProgram/IR/MLProgram.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/DenseMap.h"

namespace mlir::ds {
#define GEN_PASS_DEF_PLANMEMORYPASS
#include "ds/Plan/Passes.h.inc"
} // namespace mlir::ds

using namespace mlir;
using namespace mlir::ds;

namespace {

struct Interval {
  Value value;
  int64_t bytes;
  int64_t first, last; // op indices, inclusive
  int64_t offset = -1;
  bool host = false; // in the host arena
};

int64_t tensorBytes(Value v) {
  auto t = cast<RankedTensorType>(v.getType());
  Type e = t.getElementType();
  int64_t elemBytes = e.isInteger(1) ? 1 : (e.getIntOrFloatBitWidth() + 7) / 8;
  return t.getNumElements() * elemBytes;
}

class PlanMemoryPass : public mlir::ds::impl::PlanMemoryPassBase<PlanMemoryPass> {
public:
  using PlanMemoryPassBase::PlanMemoryPassBase;

  void runOnOperation() override {
    if (alignment <= 0 || (alignment & (alignment - 1)) != 0) {
      getOperation().emitError("ds-plan-memory: alignment must be a power of two, got ")
          << alignment.getValue();
      return signalPassFailure();
    }
    MemorySpaces spaces(getOperation());
    for (auto func : getOperation().getOps<func::FuncOp>())
      if (!func.isExternal() && failed(planFunction(func, spaces)))
        return signalPassFailure();
  }

private:
  LogicalResult planFunction(func::FuncOp func, const MemorySpaces &spaces) {
    if (!func.getBody().hasOneBlock())
      return func.emitError("ds-plan-memory needs a single-block function");
    Block &block = func.getBody().front();
    llvm::DenseMap<Operation *, int64_t> index;
    int64_t i = 0;
    for (Operation &op : block)
      index[&op] = i++;
    Operation *terminator = block.getTerminator();
    llvm::SmallPtrSet<Value, 8> returned(terminator->getOperands().begin(),
                                         terminator->getOperands().end());
    llvm::SmallPtrSet<Value, 8> inPlace = findInPlaceStores(block, index);

    // A reshape-like op (its kernel is a byte copy) whose operand and
    // result are both arena intermediates becomes a view: the result lives
    // in its operand's bytes, and the two share one interval spanning both
    // values' uses. `root` maps each view to the value owning the bytes.
    auto hasHome = [&](Operation &op) {
      return isa<ConstantOp, ParameterOp, ml_program::GlobalLoadOp, ml_program::GlobalStoreOp>(
                 op) ||
             isWeightShard(&op) || &op == terminator;
    };
    llvm::DenseMap<Value, Value> root;
    llvm::DenseMap<Value, SmallVector<Value>> members;
    for (Operation &op : block) {
      if (!isa<ReshapeOp, SqueezeOp, UnsqueezeOp, OptimizationBarrierOp>(op) || !viewsEnabled)
        continue;
      Value in = op.getOperand(0), out = op.getResult(0);
      Operation *def = in.getDefiningOp();
      if (!def || hasHome(*def) || returned.contains(in) || inPlace.contains(in) ||
          returned.contains(out) || inPlace.contains(out) || spaces.of(in) != spaces.of(out))
        continue;
      Value r = root.lookup(in) ? root.lookup(in) : in;
      root[out] = r;
      members[r].push_back(out);
      op.setAttr(kArenaViewAttr, UnitAttr::get(op.getContext()));
    }

    std::vector<Interval> intervals;
    for (Operation &op : block) {
      // Weights, state and outputs have homes of their own.
      if (hasHome(op))
        continue;
      for (Value r : op.getResults()) {
        if (returned.contains(r) || inPlace.contains(r) || root.count(r))
          continue;
        if (!isa<RankedTensorType>(r.getType()))
          return op.emitError("ds-plan-memory: result is not a ranked tensor");
        // NVMe has no arena: a value offloaded there is its global's bytes.
        if (spaces.of(r) == MemorySpace::Nvme)
          return op.emitError("ds-plan-memory: a value offloaded to NVMe must be stored to its "
                              "global and nothing else (it is written in place)");
        int64_t last = index[&op];
        SmallVector<Value> values{r};
        values.append(members.lookup(r));
        for (Value v : values) {
          for (Operation *user : v.getUsers()) {
            Operation *inBlock = block.findAncestorOpInBlock(*user);
            if (!inBlock)
              return user->emitError("ds-plan-memory: use outside the function body");
            last = std::max(last, index[inBlock]);
            // A collective runs on the communication thread and reads its
            // operand until it completes, which the first reader of its
            // result waits for at the latest: until then the operand's bytes
            // must not be handed to other values (a kernel writing them would
            // have to wait for the collective, undoing the overlap).
            if (isCollective(inBlock)) {
              int64_t done = std::numeric_limits<int64_t>::max();
              for (Value cr : inBlock->getResults())
                for (Operation *u : cr.getUsers())
                  if (Operation *top = block.findAncestorOpInBlock(*u))
                    done = std::min(done, index[top]);
              if (done != std::numeric_limits<int64_t>::max()) last = std::max(last, done);
            }
          }
        }
        intervals.push_back({r, tensorBytes(r), index[&op], last, -1,
                             spaces.of(r) == MemorySpace::Host});
      }
    }

    std::vector<Interval *> order;
    for (auto &iv : intervals)
      order.push_back(&iv);
    std::stable_sort(order.begin(), order.end(), [](Interval *a, Interval *b) {
      return a->bytes > b->bytes;
    });
    std::vector<Interval *> placed;
    int64_t arena = 0, hostArena = 0, naive = 0;
    for (Interval *iv : order) {
      // Collect the byte ranges of live-overlapping placed intervals of
      // the same arena, then take the first gap that fits.
      std::vector<std::pair<int64_t, int64_t>> busy;
      for (Interval *p : placed)
        if (p->host == iv->host && p->first <= iv->last && iv->first <= p->last)
          busy.push_back({p->offset, p->offset + p->bytes});
      std::sort(busy.begin(), busy.end());
      int64_t offset = 0;
      for (auto [lo, hi] : busy) {
        if (offset + iv->bytes <= lo)
          break;
        offset = std::max(offset, alignUp(hi));
      }
      iv->offset = offset;
      placed.push_back(iv);
      (iv->host ? hostArena : arena) = std::max(iv->host ? hostArena : arena, offset + iv->bytes);
      naive += alignUp(iv->bytes);
    }

    Builder b(func.getContext());
    for (Operation &op : block) {
      if (isa<ConstantOp, ParameterOp, ml_program::GlobalLoadOp, ml_program::GlobalStoreOp>(op) ||
          isWeightShard(&op) ||
          &op == terminator)
        continue;
      SmallVector<int64_t> offsets(op.getNumResults(), -1);
      op.setAttr(kArenaOffsetsAttr, b.getDenseI64ArrayAttr(offsets));
    }
    auto setOffset = [&](Value v, int64_t offset) {
      auto res = cast<OpResult>(v);
      Operation *op = res.getOwner();
      SmallVector<int64_t> offsets(
          cast<DenseI64ArrayAttr>(op->getAttr(kArenaOffsetsAttr)).asArrayRef());
      offsets[res.getResultNumber()] = offset;
      op->setAttr(kArenaOffsetsAttr, b.getDenseI64ArrayAttr(offsets));
    };
    for (auto &iv : intervals) {
      setOffset(iv.value, iv.offset);
      for (Value view : members.lookup(iv.value)) setOffset(view, iv.offset);
    }
    func->setAttr(kArenaBytesAttr, b.getI64IntegerAttr(arena));
    if (hostArena)
      func->setAttr(kHostArenaBytesAttr, b.getI64IntegerAttr(hostArena));
    else
      func->removeAttr(kHostArenaBytesAttr);
    arenaBytes += arena;
    naiveBytes += naive;
    return success();
  }

  int64_t alignUp(int64_t v) const { return (v + alignment - 1) / alignment * alignment; }

  /// True when `def` reads the element of `use`'s operand before it writes
  /// the same element of `result`, so the two may share bytes: elementwise
  /// producers (arithmetic, fused chains, optimizer updates) and the addend
  /// of a fused product (its kernel accumulates into it or reads it first).
  static bool readsBeforeWriting(Operation *def, OpOperand &use, Value result) {
    if (use.get().getType() != result.getType()) return false;
    if (isa<AddOp, SubOp, MulOp, DivOp, FusedElementwiseOp>(def) || isOptimizerUpdate(def))
      return true;
    // A cache's new rows are written into the cache itself, which is what
    // its attention then reads.
    if (auto cached = dyn_cast<CachedAttentionOp>(def))
      return (use.get() == cached.getKeyCache() && result == cached.getKeyCacheOut()) ||
             (use.get() == cached.getValueCache() && result == cached.getValueCacheOut());
    // Not a softmax gradient's: its rows need the whole addend row after
    // the product is stored.
    auto product = dyn_cast<FusedMatmulOp>(def);
    if (!product || !product.getAddend() || product.getCombine() == Combine::SoftmaxGrad)
      return false;
    return use.getOperandNumber() == product.getODSOperandIndexAndLength(3).first;
  }

  /// Stored values an op can write straight into their global's state
  /// buffer: the value's only use is the store, and nothing reads the
  /// global's loaded value after the producing op. An op that reads the
  /// loaded value itself must be elementwise over it (same shape), so
  /// reading and writing the same bytes is safe. Marks those stores
  /// `ds.in_place`.
  llvm::SmallPtrSet<Value, 8>
  findInPlaceStores(Block &block, const llvm::DenseMap<Operation *, int64_t> &index) {
    llvm::SmallPtrSet<Value, 8> result;
    llvm::StringMap<SmallVector<Value>> loads;
    for (Operation &op : block)
      if (auto l = dyn_cast<ml_program::GlobalLoadOp>(op))
        loads[l.getGlobal().getLeafReference()].push_back(l.getResult());
    for (Operation &op : block) {
      auto store = dyn_cast<ml_program::GlobalStoreOp>(op);
      if (!store) continue;
      Value v = store.getValue();
      Operation *def = v.getDefiningOp();
      if (!def || !v.hasOneUse() || !isa<DSDialect>(def->getDialect()) ||
          isa<ConstantOp, ParameterOp>(def))
        continue;
      bool safe = true;
      for (Value l : loads.lookup(store.getGlobal().getLeafReference())) {
        for (OpOperand &use : l.getUses()) {
          Operation *user = block.findAncestorOpInBlock(*use.getOwner());
          if (!user) { safe = false; break; }
          if (user == def) {
            if (!readsBeforeWriting(def, use, v)) safe = false;
          } else if (index.lookup(user) > index.lookup(def)) {
            safe = false; // the old value is still read after the write
          }
        }
      }
      if (!safe) continue;
      store->setAttr("ds.in_place", UnitAttr::get(store.getContext()));
      result.insert(v);
    }
    return result;
  }
};

} // namespace

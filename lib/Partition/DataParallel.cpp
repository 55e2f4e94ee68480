//===- DataParallel.cpp - data parallelism and ZeRO stages 1-3 ------------===//
//
// Stage 0 (plain data parallelism) averages gradients over the `dp` axis;
// stages 1-3 partition, per parameter, the optimizer state (1), the
// gradient accumulators (2) and the parameters themselves (3) into one
// flattened block per rank. Bucketing and placement of the collectives this
// pass inserts are ds-schedule-zero's (ZeroSchedule.cpp).
//
//===----------------------------------------------------------------------===//
#include "ds/Partition/Passes.h"
#include "ds/Partition/Sharding.h"
#include "ds/Transforms/Passes.h"
#include "mlir/Dialect/MLProgram/IR/MLProgram.h"
#include "mlir/IR/Builders.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/StringSet.h"

#include <limits>
#include <numeric>

namespace mlir::ds {
#define GEN_PASS_DEF_DATAPARALLELPASS
#include "ds/Partition/Passes.h.inc"
} // namespace mlir::ds

using namespace mlir;
using namespace mlir::ds;

namespace {

struct DataParallelPass : public mlir::ds::impl::DataParallelPassBase<DataParallelPass> {
  using DataParallelPassBase::DataParallelPassBase;

  /// all_reduce(v) / ranks, built after `v`'s definition; every other use of
  /// `v` now reads the average.
  void average(Value v, OpBuilder &b, ArrayAttr axes) {
    auto t = cast<RankedTensorType>(v.getType());
    Location loc = v.getLoc();
    Value sum = AllReduceOp::create(b, loc, t, v, axes,
                                    CollectiveReductionAttr::get(b.getContext(),
                                                                 CollectiveReduction::Sum));
    auto st = RankedTensorType::get({}, t.getElementType());
    Value inv = ConstantOp::create(
        b, loc, DenseElementsAttr::get(st, b.getFloatAttr(t.getElementType(), 1.0 / worldSize)));
    Value avg = MulOp::create(b, loc, sum, inv);
    v.replaceAllUsesExcept(avg, sum.getDefiningOp());
  }

  //===--------------------------------------------------------------------===//
  // ZeRO stages 1 and 2
  //===--------------------------------------------------------------------===//

  /// The mesh axes a tensor-parallel state global is split over (null when
  /// it is whole on every rank of a replica).
  static ArrayAttr splitAxesOf(ModuleOp module, StringRef global) {
    auto g = module.lookupSymbol<ml_program::GlobalOp>(global);
    auto a = g ? g->getAttrOfType<ShardingAttr>(kStateShardingAttr) : ShardingAttr();
    if (!a) return {};
    SmallVector<Attribute> axes;
    for (int64_t d = 0; d < a.getRank(); ++d)
      for (StringRef x : a.axesOf(d)) axes.push_back(StringAttr::get(module.getContext(), x));
    if (axes.empty()) return {};
    return ArrayAttr::get(module.getContext(), axes);
  }

  /// Elements of one rank's block of a parameter of `n` elements.
  int64_t blockOf(int64_t n) const { return (n + worldSize - 1) / worldSize; }

  /// [shape] -> [N * block]: flattened and zero-padded.
  Value flatPadded(OpBuilder &b, Location loc, Value x) {
    auto t = cast<RankedTensorType>(x.getType());
    int64_t n = t.getNumElements(), padded = blockOf(n) * worldSize;
    Value flat = x;
    if (t.getRank() != 1) flat = ReshapeOp::create(b, loc, RankedTensorType::get({n}, t.getElementType()), x);
    if (padded == n) return flat;
    Value zeros = FillOp::create(b, loc, RankedTensorType::get({padded - n}, t.getElementType()),
                                 b.getF64FloatAttr(0.0));
    return ConcatOp::create(b, loc, RankedTensorType::get({padded}, t.getElementType()),
                            ValueRange{flat, zeros}, b.getI64IntegerAttr(0));
  }

  /// This rank's averaged block of a whole (unreduced) gradient. The
  /// reduce-scatter is issued at `b`; the averaging at `late` (when given),
  /// so the collective can run while the ops in between compute.
  Value gradientBlock(OpBuilder &b, Location loc, Value g, ArrayAttr axes,
                      OpBuilder *late = nullptr) {
    auto t = cast<RankedTensorType>(g.getType());
    auto bt = RankedTensorType::get({blockOf(t.getNumElements())}, t.getElementType());
    Value rs = ReduceScatterOp::create(
        b, loc, bt, flatPadded(b, loc, g), axes, b.getI64IntegerAttr(0), b.getI64IntegerAttr(1),
        CollectiveReductionAttr::get(b.getContext(), CollectiveReduction::Sum),
        /*quantize_block=*/nullptr);
    OpBuilder &at = late ? *late : b;
    Value inv = ConstantOp::create(
        at, loc, DenseElementsAttr::get(RankedTensorType::get({}, t.getElementType()),
                                        at.getFloatAttr(t.getElementType(), 1.0 / worldSize)));
    return MulOp::create(at, loc, rs, inv);
  }

  /// Gives a state global (and every load and store of it) one block's type.
  void shrinkGlobal(ModuleOp module, StringRef name, RankedTensorType blockType) {
    auto g = module.lookupSymbol<ml_program::GlobalOp>(name);
    // The whole tensor's size, for checkpoints resharded to another world.
    if (!g->hasAttr("ds.partition_numel")) {
      auto whole = cast<RankedTensorType>(g.getType());
      g->setAttr("ds.partition_numel", IntegerAttr::get(IntegerType::get(module.getContext(), 64),
                                                        whole.getNumElements()));
      // ... and its shape, for consolidation (zero_to_fp32).
      g->setAttr("ds.partition_shape",
                 DenseI64ArrayAttr::get(module.getContext(), whole.getShape()));
      // ... and the mesh axis the blocks are spread over.
      g->setAttr("ds.partition_axis", StringAttr::get(module.getContext(), axis));
    }
    g.setType(blockType);
    module.walk([&](Operation *op) {
      if (auto l = dyn_cast<ml_program::GlobalLoadOp>(op);
          l && l.getGlobal().getLeafReference() == name)
        l.getResult().setType(blockType);
    });
  }

  /// Stage 3: every trained parameter is stored as one block per rank
  /// (its whole initial value kept in ds.full_value for the plan) and
  /// all-gathered right before each use outside the optimizer step, so the
  /// whole tensor lives only while that use needs it: one gather per use
  /// in the forward and again in the backward.
  LogicalResult partitionParameters(ModuleOp module, ArrayRef<Operation *> updates,
                                    ArrayAttr axes, llvm::SmallPtrSetImpl<Operation *> &blocked) {
    for (Operation *u : updates) {
      // Small parameters persist: whole on every rank, no gathers.
      if (cast<RankedTensorType>(u->getOperand(0).getType()).getNumElements() <
          persistenceThreshold)
        continue;
      blocked.insert(u);
      auto pl = u->getOperand(0).getDefiningOp<ml_program::GlobalLoadOp>();
      if (!pl) return u->emitError("ZeRO-3 expects the parameter read from its global");
      StringRef name = pl.getGlobal().getLeafReference();
      // Mixed precision: the update reads the fp32 master (a block from
      // stage 1 on, below); the model reads the 16-bit copy, which is what
      // stage 3 partitions and gathers, in 16 bits.
      if (std::string copy = workingCopyOf(name); !copy.empty()) name = symbolName(module, copy);
      blockGlobal(module, name, axes, /*gatherUses=*/true);
    }
    return success();
  }

  /// The 16-bit working copy `param:X` of a master weight `master:X`
  /// (ds-half-model-states), or "" for a parameter that is its own master.
  static std::string workingCopyOf(StringRef global) {
    if (!global.starts_with("master:")) return "";
    return ("param:" + global.drop_front(strlen("master:"))).str();
  }
  /// The interned name of a global (StringRefs into the symbol table stay valid).
  static StringRef symbolName(ModuleOp module, const std::string &name) {
    return module.lookupSymbol<ml_program::GlobalOp>(name).getSymName();
  }

  /// Stores a global as one block per rank (its whole initial value kept in
  /// ds.full_value for the plan); with `gatherUses`, every load outside
  /// the optimizer step is all-gathered right before each use.
  void blockGlobal(ModuleOp module, StringRef name, ArrayAttr axes, bool gatherUses) {
    MLIRContext *ctx = module.getContext();
    {
      auto g = module.lookupSymbol<ml_program::GlobalOp>(name);
      auto pt = cast<RankedTensorType>(g.getType());
      auto bt = RankedTensorType::get({blockOf(pt.getNumElements())}, pt.getElementType());
      if (Attribute init = g.getValueAttr()) {
        g->setAttr("ds.full_value", init);
        g.removeValueAttr();
      }
      SmallVector<ml_program::GlobalLoadOp> loads;
      module.walk([&](ml_program::GlobalLoadOp l) {
        if (l.getGlobal().getLeafReference() == name) loads.push_back(l);
      });
      shrinkGlobal(module, name, bt);
      if (!gatherUses) return;
      for (auto l : loads) {
        auto f = l->getParentOfType<func::FuncOp>();
        if (f.getSymName() == "optimizer_step") continue; // updates the block
        f->setAttr("ds.spmd", UnitAttr::get(ctx));
        // A 16-bit parameter widened once and read by several ops (the
        // forward's product and the backward's): one widening per reader,
        // so each gathers its own copy right before it, as fp32 parameters
        // do, instead of one gathered copy living from forward to backward.
        for (Operation *u : llvm::make_early_inc_range(l->getUsers())) {
          auto c = dyn_cast<CastOp>(u);
          if (!c || c->hasOneUse()) continue;
          SmallVector<OpOperand *> readers;
          for (OpOperand &r : c->getUses()) readers.push_back(&r);
          for (OpOperand *r : llvm::drop_begin(readers)) {
            OpBuilder cb(r->getOwner());
            r->set(cb.clone(*c)->getResult(0));
          }
        }
        SmallVector<OpOperand *> uses;
        for (OpOperand &use : l.getResult().getUses()) uses.push_back(&use);
        for (OpOperand *use : uses) {
          OpBuilder b(use->getOwner());
          Location loc = l.getLoc();
          int64_t n = pt.getNumElements(), padded = bt.getDimSize(0) * worldSize;
          Value all = AllGatherOp::create(b, loc, RankedTensorType::get({padded}, pt.getElementType()),
                                          l.getResult(), axes, b.getI64IntegerAttr(0),
                                          b.getI64IntegerAttr(1), /*quantize_block=*/nullptr);
          if (padded != n)
            all = SliceOp::create(b, loc, RankedTensorType::get({n}, pt.getElementType()), all,
                                  b.getDenseI64ArrayAttr({0}), b.getDenseI64ArrayAttr({1}));
          Value whole = pt.getRank() == 1 ? all : Value(ReshapeOp::create(b, loc, pt, all));
          use->set(whole);
        }
      }
    }
  }

  /// After a mixed-precision update on blocks: the rounded copy of the new
  /// master block is stored to the 16-bit parameter, all-gathered (in 16
  /// bits) into the whole tensor unless the parameter itself is a block.
  void storeWorkingCopies(ModuleOp module, Value newMaster, RankedTensorType whole,
                          ArrayAttr axes) {
    auto mt = cast<RankedTensorType>(newMaster.getType());
    for (Operation *user : llvm::make_early_inc_range(newMaster.getUsers())) {
      auto c = dyn_cast<CastOp>(user);
      if (!c) continue;
      Type half = cast<RankedTensorType>(c.getType()).getElementType();
      auto bt = RankedTensorType::get(mt.getShape(), half);
      c.getResult().setType(bt);
      for (Operation *su : llvm::make_early_inc_range(c->getUsers())) {
        auto s = dyn_cast<ml_program::GlobalStoreOp>(su);
        if (!s) continue;
        auto g = module.lookupSymbol<ml_program::GlobalOp>(s.getGlobal().getLeafReference());
        if (cast<RankedTensorType>(g.getType()) == bt) continue; // stage 3: a block
        OpBuilder b(s);
        Location loc = s.getLoc();
        int64_t n = whole.getNumElements(), padded = bt.getDimSize(0) * worldSize;
        Value all = AllGatherOp::create(b, loc, RankedTensorType::get({padded}, half), c.getResult(),
                                        axes, b.getI64IntegerAttr(0), b.getI64IntegerAttr(1),
                                        /*quantize_block=*/nullptr);
        if (padded != n)
          all = SliceOp::create(b, loc, RankedTensorType::get({n}, half), all,
                                b.getDenseI64ArrayAttr({0}), b.getDenseI64ArrayAttr({1}));
        auto ht = RankedTensorType::get(whole.getShape(), half);
        Value v = whole.getRank() == 1 ? all : Value(ReshapeOp::create(b, loc, ht, all));
        s.getValueMutable().assign(v);
      }
    }
  }

  LogicalResult partitionOptimizer(ModuleOp module, func::FuncOp step, func::FuncOp opt,
                                   ArrayAttr axes) {
    MLIRContext *ctx = module.getContext();
    // Stage 2: every micro-step's gradient is reduce-scattered into a
    // sharded accumulator, so no rank ever holds a whole accumulated one.
    if (stage >= 2) {
      SmallVector<ml_program::GlobalStoreOp> stores;
      // (stage 3 also partitions the parameters, after the optimizer's
      // update ops are found below)
      step.walk([&](ml_program::GlobalStoreOp s) {
        if (s.getGlobal().getLeafReference().getValue().starts_with("grad:")) stores.push_back(s);
      });
      for (auto s : stores) {
        // grad = grad + g, or with 16-bit accumulators (ds-half-model-states)
        // grad = round(widen(grad) + g).
        auto narrow = s.getValue().getDefiningOp<CastOp>();
        auto add = (narrow ? narrow.getOperand() : s.getValue()).getDefiningOp<AddOp>();
        auto widen = add ? add.getLhs().getDefiningOp<CastOp>() : nullptr;
        auto load = add ? (widen ? widen.getOperand() : add.getLhs())
                              .getDefiningOp<ml_program::GlobalLoadOp>()
                        : nullptr;
        if (!load || load.getGlobal() != s.getGlobal())
          return s.emitError("ZeRO-2 expects gradient accumulation as grad = grad + micro-step gradient");
        OpBuilder b(s);
        auto t = cast<RankedTensorType>(add.getRhs().getType());
        auto bt = RankedTensorType::get({blockOf(t.getNumElements())}, t.getElementType());
        Type accElem = cast<RankedTensorType>(load.getType()).getElementType();
        auto gbt = RankedTensorType::get({blockOf(t.getNumElements())}, accElem);
        // Reduce-scatter as soon as the backward has produced the gradient,
        // so it overlaps the rest of the backward (DeepSpeed's overlap_comm).
        OpBuilder early(s);
        if (Operation *d = add.getRhs().getDefiningOp()) early.setInsertionPointAfter(d);
        Value block = gradientBlock(early, s.getLoc(), add.getRhs(), axes, &b);
        shrinkGlobal(module, s.getGlobal().getLeafReference(), gbt);
        Value acc = load.getResult();
        if (widen) {
          widen.getResult().setType(bt);
          acc = widen.getResult();
        }
        Value sum = AddOp::create(b, s.getLoc(), acc, block);
        if (narrow) sum = CastOp::create(b, s.getLoc(), gbt, sum);
        s.getValueMutable().assign(sum);
        if (narrow && narrow->use_empty()) narrow->erase();
        if (add->use_empty()) add->erase();
      }
      step->setAttr("ds.spmd", UnitAttr::get(ctx));
    }

    // The update of each parameter, on this rank's blocks.
    SmallVector<Operation *> updates;
    opt.walk([&](Operation *op) {
      if (isOptimizerUpdate(op)) updates.push_back(op);
    });
    SmallVector<RankedTensorType> paramTypes; // before stage 3 shrinks them
    for (Operation *u : updates) paramTypes.push_back(cast<RankedTensorType>(u->getOperand(0).getType()));
    llvm::SmallPtrSet<Operation *, 16> blocked; // stage 3: parameters stored as blocks
    if (stage >= 3 && failed(partitionParameters(module, updates, axes, blocked))) return failure();
    SqrtOp sqrt;
    opt.walk([&](SqrtOp s) {
      if (!sqrt && s->hasAttr(kGradNormAttr)) sqrt = s;
    });
    if (!sqrt || updates.empty())
      return opt.emitError("ZeRO expects the optimizer step ds-build-train-step builds");
    Value sumSq;
    llvm::MapVector<ArrayAttr, Value> splitSums; // tensor-parallel slices, by their axes
    OpBuilder nb(sqrt);
    for (auto [ui, u] : llvm::enumerate(updates)) {
      Value param = u->getOperand(0), grad = u->getOperand(1);
      RankedTensorType pt = paramTypes[ui];
      auto bt = RankedTensorType::get({blockOf(pt.getNumElements())}, pt.getElementType());
      // (16-bit accumulators are read widened: ds-half-model-states)
      auto widen = grad.getDefiningOp<CastOp>();
      auto gl = (widen ? widen.getOperand() : grad).getDefiningOp<ml_program::GlobalLoadOp>();
      if (!gl) return u->emitError("ZeRO expects the gradient read from its global");
      // The gradient block: stage 2 stores it; stage 1 reduce-scatters the
      // whole accumulator right after it is read.
      Value gBlock;
      if (stage >= 2) {
        gBlock = grad; // already one averaged block (its type shrank above)
        if (widen) widen.getResult().setType(bt);
      } else {
        OpBuilder b(grad.getDefiningOp());
        b.setInsertionPointAfter(grad.getDefiningOp());
        gBlock = gradientBlock(b, gl.getLoc(), grad, axes);
      }
      // Its share of the clipping norm. A tensor-parallel slice's share
      // is summed over its tp group too (a replicated parameter's must not
      // be: every tp rank holds the same one).
      Value sq = MulOp::create(nb, sqrt.getLoc(), gBlock, gBlock);
      Value s = ReduceSumOp::create(nb, sqrt.getLoc(), ValueRange{sq},
                                    {nb.getNamedAttr("axes", nb.getDenseI64ArrayAttr({0})),
                                     nb.getNamedAttr("keepdims", nb.getBoolAttr(false))});
      if (ArrayAttr tpAxes = splitAxesOf(module, gl.getGlobal().getLeafReference())) {
        Value &sum = splitSums[tpAxes];
        sum = sum ? Value(AddOp::create(nb, sqrt.getLoc(), sum, s)) : s;
      } else {
        sumSq = sumSq ? Value(AddOp::create(nb, sqrt.getLoc(), sumSq, s)) : s;
      }

      OpBuilder b(u);
      Location loc = u->getLoc();
      // Mixed precision: the fp32 master is partitioned like the moments
      // (DeepSpeed's 12 bytes per parameter over N), at every stage >= 1.
      auto pl = param.getDefiningOp<ml_program::GlobalLoadOp>();
      const bool mixed = pl && !workingCopyOf(pl.getGlobal().getLeafReference()).empty();
      if (mixed) blockGlobal(module, pl.getGlobal().getLeafReference(), axes, /*gatherUses=*/false);
      // Stage 3 stores the parameter as this rank's block already.
      const bool isBlock = blocked.contains(u) || mixed;
      Value pBlock = isBlock ? param
                                : Value(ShardSliceOp::create(b, loc, bt, flatPadded(b, loc, param),
                                                             axes, b.getI64IntegerAttr(0),
                                                             b.getI64IntegerAttr(1)));
      SmallVector<Value> operands(u->getOperands());
      operands[0] = pBlock;
      operands[1] = gBlock;
      // The moments: one block per rank.
      unsigned states = optimizerStateCount(u);
      for (unsigned i = 0; i < states; ++i) {
        auto sl = u->getOperand(2 + i).getDefiningOp<ml_program::GlobalLoadOp>();
        if (!sl) return u->emitError("ZeRO expects optimizer state read from its global");
        shrinkGlobal(module, sl.getGlobal().getLeafReference(), bt);
        operands[2 + i] = sl.getResult();
      }
      SmallVector<Type> types(u->getNumResults(), bt);
      OperationState st(loc, u->getName(), operands, types, u->getAttrs());
      Operation *nu = b.create(st);
      if (isBlock) { // the new block is the new parameter
        for (unsigned i = 0; i < u->getNumResults(); ++i)
          u->getResult(i).replaceAllUsesWith(nu->getResult(i));
        u->erase();
        if (mixed) storeWorkingCopies(module, nu->getResult(0), pt, axes);
        continue;
      }
      // The new parameter: every rank's block, unpadded, reshaped.
      int64_t n = pt.getNumElements();
      Value all = AllGatherOp::create(
          b, loc, RankedTensorType::get({bt.getDimSize(0) * worldSize}, pt.getElementType()),
          nu->getResult(0), axes, b.getI64IntegerAttr(0), b.getI64IntegerAttr(1),
          /*quantize_block=*/nullptr);
      if (bt.getDimSize(0) * worldSize != n)
        all = SliceOp::create(b, loc, RankedTensorType::get({n}, pt.getElementType()), all,
                              b.getDenseI64ArrayAttr({0}), b.getDenseI64ArrayAttr({1}));
      Value newParam = pt.getRank() == 1 ? all : Value(ReshapeOp::create(b, loc, pt, all));
      u->getResult(0).replaceAllUsesWith(newParam);
      for (unsigned i = 1; i < u->getNumResults(); ++i)
        u->getResult(i).replaceAllUsesWith(nu->getResult(i));
      u->erase();
    }
    // The global norm: every rank's blocks together.
    for (auto &[groupAxes, sum] : splitSums) {
      Value whole = AllReduceOp::create(nb, sqrt.getLoc(), sum.getType(), sum, groupAxes,
                                        CollectiveReductionAttr::get(ctx, CollectiveReduction::Sum));
      sumSq = sumSq ? Value(AddOp::create(nb, sqrt.getLoc(), sumSq, whole)) : whole;
    }
    Value total = AllReduceOp::create(nb, sqrt.getLoc(), sumSq.getType(), sumSq, axes,
                                      CollectiveReductionAttr::get(ctx, CollectiveReduction::Sum));
    sqrt->setOperand(0, total);
    // Stage 2's zeroed accumulators are blocks too.
    if (stage >= 2)
      opt.walk([&](ml_program::GlobalStoreOp s) {
        if (!s.getGlobal().getLeafReference().getValue().starts_with("grad:")) return;
        auto g = module.lookupSymbol<ml_program::GlobalOp>(s.getGlobal().getLeafReference());
        if (auto f = s.getValue().getDefiningOp<FillOp>())
          f.getResult().setType(cast<RankedTensorType>(g.getType()));
      });
    opt->setAttr("ds.spmd", UnitAttr::get(ctx));
    // The whole-gradient norm chain (and stage 2's old accumulation) are
    // dead now, and typed for whole tensors: remove them.
    for (func::FuncOp f : {step, opt}) {
      bool changed = true;
      while (changed) {
        changed = false;
        SmallVector<Operation *> dead;
        // (An unread all-reduce is dead too: the old norm's, over the
        // tensor-parallel group.)
        f.walk([&](Operation *op) {
          if (op != f && (isOpTriviallyDead(op) || (isa<AllReduceOp>(op) && op->use_empty())))
            dead.push_back(op);
        });
        for (Operation *op : dead) op->erase();
        changed = !dead.empty();
      }
    }
    return success();
  }

  void runOnOperation() override {
    ModuleOp module = getOperation();
    MLIRContext *ctx = &getContext();
    if (worldSize < 1) {
      module.emitError("ds-data-parallel: world-size must be >= 1");
      return signalPassFailure();
    }
    if (worldSize == 1) return;
    auto step = module.lookupSymbol<func::FuncOp>("train_step");
    auto opt = module.lookupSymbol<func::FuncOp>("optimizer_step");
    if (!step || !opt) {
      module.emitError("ds-data-parallel needs a training module (run ds-build-train-step first)");
      return signalPassFailure();
    }
    SmallVector<MeshAxisAttr> meshAxes;
    if (MeshAttr mesh = MeshAttr::lookup(module)) {
      if (mesh.getAxisSize(axis)) {
        module.emitError("ds-data-parallel: the mesh already has a '") << axis << "' axis";
        return signalPassFailure();
      }
      meshAxes.assign(mesh.getAxes().begin(), mesh.getAxes().end());
    }
    // dp is the outermost axis: ranks of one model replica stay adjacent.
    meshAxes.insert(meshAxes.begin(), MeshAxisAttr::get(ctx, axis, worldSize));
    module->setAttr("ds.mesh", MeshAttr::get(ctx, meshAxes));
    ArrayAttr axes = ArrayAttr::get(ctx, {StringAttr::get(ctx, axis)});

    if (stage < 0)
      if (auto t = module->getAttrOfType<DictionaryAttr>("ds.training"))
        if (auto z = t.getAs<IntegerAttr>("zero_stage")) stage = z.getInt();
    if (stage < 0) stage = 0;
    if (persistenceThreshold < 0) {
      persistenceThreshold = 100000; // DeepSpeed's default
      if (auto t = module->getAttrOfType<DictionaryAttr>("ds.training"))
        if (auto z = t.getAs<IntegerAttr>("stage3_param_persistence_threshold"))
          persistenceThreshold = z.getInt();
    }
    if (stage > 3) {
      module.emitError("ds-data-parallel: ZeRO stage ") << stage.getValue()
          << " does not exist (0 to 3)";
      return signalPassFailure();
    }
    if (stage > 0) {
      if (failed(partitionOptimizer(module, step, opt, axes))) return signalPassFailure();
    } else {
      averageGradients(opt, axes);
      // The 1-bit optimizers' programs over each rank's own gradients.
      for (auto f : llvm::make_early_inc_range(module.getOps<func::FuncOp>()))
        if (f.getSymName().starts_with("optimizer_step_")) compressMarked(module, f, axes);
    }
    averageLoss(step, axes);
  }

  /// A 1-bit optimizer's program over each rank's own gradients
  /// (ds-build-train-step's @optimizer_step_*): every value marked
  /// `ds.onebit_compress` (1-bit Adam's momentum, 0/1 Adam's gradient or
  /// accumulated steps) is averaged by DeepSpeed's error-compensated 1-bit
  /// all-reduce, its worker and server errors kept as state; and since each
  /// rank's gradient norm is its own, the ranks agree on a non-finite one.
  void compressMarked(ModuleOp module, func::FuncOp f, ArrayAttr axes) {
    MLIRContext *ctx = module.getContext();
    SmallVector<Operation *> marked;
    f.walk([&](Operation *op) {
      if (op->hasAttr("ds.onebit_compress")) marked.push_back(op);
    });
    // DeepSpeed pads each tensor to a multiple of size * lcm(size, 8).
    const int64_t n = worldSize, unit = n * std::lcm<int64_t>(n, 8);
    OpBuilder gb(module.getBodyRegion());
    gb.setInsertionPointToStart(module.getBody());
    auto f32 = Float32Type::get(ctx);
    // States the importer stores transposed (a Gemm's transB weight): the
    // first binding of a state is its own initializer's (later ones tie
    // copies to it).
    llvm::StringSet<> transposedStates, bound;
    if (auto t = module->getAttrOfType<DictionaryAttr>("ds.training"))
      if (auto bindings = t.getAs<ArrayAttr>("export_bindings"))
        for (auto d : bindings.getAsRange<DictionaryAttr>()) {
          auto state = d.getAs<StringAttr>("state");
          auto tr = d.getAs<BoolAttr>("transpose");
          if (!state || !bound.insert(state.getValue()).second) continue;
          if (tr && tr.getValue()) transposedStates.insert(state.getValue());
        }
    for (Operation *op : marked) {
      Value m = op->getResult(0);
      Location loc = op->getLoc();
      auto t = cast<RankedTensorType>(m.getType());
      const int64_t big = (t.getNumElements() + unit - 1) / unit * unit;
      std::string name = op->getAttrOfType<StringAttr>("ds.onebit_compress").str();
      std::string param = op->getAttrOfType<StringAttr>("ds.onebit_param").str();
      op->removeAttr("ds.onebit_compress");
      op->removeAttr("ds.onebit_param");
      auto weT = RankedTensorType::get({big}, f32), seT = RankedTensorType::get({big / n}, f32);
      auto error = [&](StringRef kind, RankedTensorType type) {
        std::string symbol = (kind + name).str();
        auto g = module.lookupSymbol<ml_program::GlobalOp>(symbol);
        if (!g)
          g = ml_program::GlobalOp::create(gb, loc, symbol, type, /*is_mutable=*/true,
                                           Attribute(), gb.getStringAttr("private"));
        return SymbolRefAttr::get(g.getSymNameAttr());
      };
      SymbolRefAttr weSym = error("onebit_worker_error:", weT),
                    seSym = error("onebit_server_error:", seT);
      OpBuilder b(ctx);
      b.setInsertionPointAfterValue(m);
      Value we = ml_program::GlobalLoadOp::create(b, loc, weT, weSym);
      Value se = ml_program::GlobalLoadOp::create(b, loc, seT, seSym);
      // The chunks (and so the server scales) follow the element order:
      // compress in the ONNX initializer's layout (DeepSpeed flattens the
      // torch parameter), undoing the importer's transposed storage.
      const bool transposed = transposedStates.contains("param:" + param);
      auto flip = [&](Value v) {
        return TransposeOp::create(b, loc, ValueRange{v},
                                   {b.getNamedAttr("permutation", b.getDenseI64ArrayAttr({1, 0}))})
            .getResult();
      };
      Value in = transposed ? flip(m) : m;
      auto c = CompressedAllReduceOp::create(b, loc, TypeRange{in.getType(), weT, seT}, in, we,
                                             se, axes);
      Value avg = transposed ? flip(c.getResult()) : c.getResult();
      m.replaceUsesWithIf(avg, [&](OpOperand &u) {
        return u.getOwner() != c && u.getOwner() != in.getDefiningOp();
      });
      ml_program::GlobalStoreOp::create(b, loc, weSym, c.getNewWorkerError());
      ml_program::GlobalStoreOp::create(b, loc, seSym, c.getNewServerError());
      ++numReduced;
    }
    Operation *ret = f.getBody().front().getTerminator();
    OpBuilder b(ret);
    Location loc = ret->getLoc();
    Value norm = ret->getOperand(0);
    auto i1 = RankedTensorType::get({}, b.getI1Type());
    auto st = RankedTensorType::get({}, f32);
    Value bad = OrOp::create(b, loc, i1, IsNanOp::create(b, loc, i1, norm),
                             IsInfOp::create(b, loc, i1, norm));
    Value count = AllReduceOp::create(
        b, loc, st, CastOp::create(b, loc, st, bad), axes,
        CollectiveReductionAttr::get(ctx, CollectiveReduction::Sum));
    Value zero = ConstantOp::create(b, loc, DenseElementsAttr::get(st, b.getF32FloatAttr(0)));
    Value inf = ConstantOp::create(
        b, loc, DenseElementsAttr::get(st, b.getF32FloatAttr(std::numeric_limits<float>::infinity())));
    Value anyBad = GreaterOp::create(b, loc, i1, count, zero);
    ret->setOperand(0, WhereOp::create(b, loc, st, anyBad, inf, norm));
  }

  void averageGradients(func::FuncOp opt, ArrayAttr axes) {
    // Gradients, once per optimizer step (the accumulation boundary).
    SmallVector<ml_program::GlobalLoadOp> grads;
    opt.walk([&](ml_program::GlobalLoadOp l) {
      if (l.getGlobal().getLeafReference().getValue().starts_with("grad:")) grads.push_back(l);
    });
    for (auto l : grads) {
      // A 16-bit accumulator is averaged widened (the sum goes out in
      // communication_data_type: ds-mixed-precision).
      Value v = l.getResult();
      if (v.hasOneUse())
        if (auto widen = dyn_cast<CastOp>(*v.getUsers().begin())) v = widen.getResult();
      OpBuilder b(v.getContext());
      b.setInsertionPointAfterValue(v);
      average(v, b, axes);
      ++numReduced;
    }
  }

  void averageLoss(func::FuncOp step, ArrayAttr axes) {
    MLIRContext *ctx = step.getContext();
    // The loss each micro-step returns: the global batch's mean.
    Operation *ret = step.getBody().front().getTerminator();
    for (unsigned i = 0; i < step.getNumResults(); ++i) {
      auto n = step.getResultAttrOfType<StringAttr>(i, "ds.name");
      if (!n || n.getValue() != "loss") continue;
      OpBuilder b(ret);
      Value loss = ret->getOperand(i);
      auto t = cast<RankedTensorType>(loss.getType());
      Value sum = AllReduceOp::create(b, ret->getLoc(), t, loss, axes,
                                      CollectiveReductionAttr::get(ctx, CollectiveReduction::Sum));
      auto st = RankedTensorType::get({}, t.getElementType());
      Value inv = ConstantOp::create(
          b, ret->getLoc(),
          DenseElementsAttr::get(st, b.getFloatAttr(t.getElementType(), 1.0 / worldSize)));
      ret->setOperand(i, MulOp::create(b, ret->getLoc(), sum, inv));
    }
  }
};

} // namespace

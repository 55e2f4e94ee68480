//===- DataParallel.cpp - stage 0: gradients averaged over dp -------------===//
#include "ds/Partition/Passes.h"
#include "ds/Partition/Sharding.h"
#include "mlir/Dialect/MLProgram/IR/MLProgram.h"
#include "mlir/IR/Builders.h"

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

    // Gradients, once per optimizer step (the accumulation boundary).
    SmallVector<ml_program::GlobalLoadOp> grads;
    opt.walk([&](ml_program::GlobalLoadOp l) {
      if (l.getGlobal().getLeafReference().getValue().starts_with("grad:")) grads.push_back(l);
    });
    for (auto l : grads) {
      OpBuilder b(l);
      b.setInsertionPointAfter(l);
      average(l.getResult(), b, axes);
      ++numReduced;
    }
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

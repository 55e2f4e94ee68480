//===- HalfModelStates.cpp - 16-bit parameters, fp32 master weights -------===//
//
// Mixed-precision training keeps what DeepSpeed keeps (ZeRO paper, K = 12):
// a 16-bit working copy of each parameter (2 bytes), 16-bit gradients (2),
// and fp32 master weights beside the fp32 moments (12), so that ZeRO's
// partitioning of the optimizer's states covers the masters too. See the
// pass description in Passes.td for the IR.
//
//===----------------------------------------------------------------------===//
#include "dialects/ds/DSOps.h"
#include "ds/Plan/KernelBridge.h"
#include "ds/Transforms/Passes.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MLProgram/IR/MLProgram.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"

namespace mlir::ds {
#define GEN_PASS_DEF_HALFMODELSTATESPASS
#include "ds/Transforms/Passes.h.inc"
} // namespace mlir::ds

using namespace mlir;
using namespace mlir::ds;

namespace {

RankedTensorType withElement(Type t, Type elem) {
  auto r = cast<RankedTensorType>(t);
  return RankedTensorType::get(r.getShape(), elem);
}

bool inOptimizer(Operation *op) {
  auto f = op->getParentOfType<func::FuncOp>();
  return f && f.getSymName() == "optimizer_step";
}

struct HalfModelStatesPass : public mlir::ds::impl::HalfModelStatesPassBase<HalfModelStatesPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto training = module->getAttrOfType<DictionaryAttr>("ds.training");
    if (!training) return;
    auto precision = training.getAs<StringAttr>("precision");
    if (!precision || precision.getValue() == "fp32") return;
    MLIRContext *ctx = module.getContext();
    Type half = precision.getValue() == "bf16" ? Type(BFloat16Type::get(ctx))
                                               : Type(Float16Type::get(ctx));
    auto accum = training.getAs<StringAttr>("grad_accum_dtype");
    bool halfGradients = !accum || accum.getValue() != "fp32";

    SmallVector<ml_program::GlobalOp> params, grads;
    for (auto g : module.getOps<ml_program::GlobalOp>()) {
      auto t = dyn_cast<RankedTensorType>(g.getType());
      if (!t || !t.getElementType().isF32()) continue;
      if (g.getSymName().starts_with("param:")) params.push_back(g);
      else if (g.getSymName().starts_with("grad:") && halfGradients) grads.push_back(g);
    }
    llvm::StringMap<SmallVector<Operation *>> accesses; // global -> its loads and stores
    module.walk([&](Operation *op) {
      if (auto l = dyn_cast<ml_program::GlobalLoadOp>(op))
        accesses[l.getGlobal().getLeafReference()].push_back(op);
      else if (auto s = dyn_cast<ml_program::GlobalStoreOp>(op))
        accesses[s.getGlobal().getLeafReference()].push_back(op);
    });
    for (auto g : params) {
      // Only what the optimizer updates: a parameter the loss does not
      // reach (an attention-mask buffer stored as a float initializer)
      // is a constant with no master.
      auto &acc = accesses[g.getSymName()];
      if (llvm::none_of(acc, [](Operation *op) {
            return isa<ml_program::GlobalStoreOp>(op) && inOptimizer(op);
          }))
        continue;
      if (failed(splitParameter(module, g, half, acc))) return signalPassFailure();
    }
    for (auto g : grads) narrowGradient(g, half, accesses[g.getSymName()]);
    renameExportBindings(module, training);
  }

  /// `param:X` (f32) -> `param:X` (16-bit copy) + `master:X` (f32).
  LogicalResult splitParameter(ModuleOp module, ml_program::GlobalOp g, Type half,
                               ArrayRef<Operation *> accesses) {
    auto f32 = cast<RankedTensorType>(g.getType());
    auto h = withElement(f32, half);
    std::string name = g.getSymName().drop_front(strlen("param:")).str();
    OpBuilder mb(g);
    mb.setInsertionPointAfter(g);
    auto master = ml_program::GlobalOp::create(mb, g.getLoc(), "master:" + name, f32,
                                               /*is_mutable=*/true, g.getValueAttr(),
                                               mb.getStringAttr("private"));
    if (Attribute init = g.getValueAttr()) {
      FailureOr<TypedAttr> rounded =
          roundedTo16Bit(init, h, "param:" + name + ".16bit", g.getLoc());
      if (failed(rounded)) return failure();
      g.setValueAttr(*rounded);
    }
    g.setType(h);
    auto masterRef = SymbolRefAttr::get(master.getSymNameAttr());
    for (Operation *op : accesses) {
      OpBuilder b(op);
      if (auto l = dyn_cast<ml_program::GlobalLoadOp>(op)) {
        if (inOptimizer(op)) { // the update reads the master
          auto ml = ml_program::GlobalLoadOp::create(b, l.getLoc(), f32, masterRef);
          l.getResult().replaceAllUsesWith(ml.getResult());
          l.erase();
          continue;
        }
        l.getResult().setType(h);
        b.setInsertionPointAfter(l);
        Value wide = CastOp::create(b, l.getLoc(), f32, l.getResult());
        l.getResult().replaceAllUsesExcept(wide, wide.getDefiningOp());
        continue;
      }
      auto s = cast<ml_program::GlobalStoreOp>(op);
      if (!inOptimizer(op))
        return s.emitError("ds-half-model-states: only the optimizer step may update ")
               << g.getSymName();
      // The update goes to the master; the copy is it rounded.
      ml_program::GlobalStoreOp::create(b, s.getLoc(), masterRef, s.getValue());
      Value copy = CastOp::create(b, s.getLoc(), h, s.getValue());
      s.getValueMutable().assign(copy);
    }
    ++numParameters;
    return success();
  }

  /// `grad:X` in 16 bits: loads widened, stores rounded (a zero fill is
  /// made 16-bit directly).
  void narrowGradient(ml_program::GlobalOp g, Type half, ArrayRef<Operation *> accesses) {
    auto f32 = cast<RankedTensorType>(g.getType());
    auto h = withElement(f32, half);
    g.setType(h);
    for (Operation *op : accesses) {
      OpBuilder b(op);
      if (auto l = dyn_cast<ml_program::GlobalLoadOp>(op)) {
        l.getResult().setType(h);
        b.setInsertionPointAfter(l);
        Value wide = CastOp::create(b, l.getLoc(), f32, l.getResult());
        l.getResult().replaceAllUsesExcept(wide, wide.getDefiningOp());
        continue;
      }
      auto s = cast<ml_program::GlobalStoreOp>(op);
      auto fill = s.getValue().getDefiningOp<FillOp>();
      if (fill && fill->hasOneUse()) {
        fill.getResult().setType(h);
        continue;
      }
      s.getValueMutable().assign(CastOp::create(b, s.getLoc(), h, s.getValue()).getResult());
    }
    ++numGradients;
  }

  /// --export-onnx writes the fp32 master weights.
  void renameExportBindings(ModuleOp module, DictionaryAttr training) {
    auto bindings = training.getAs<ArrayAttr>("export_bindings");
    if (!bindings) return;
    Builder b(module.getContext());
    SmallVector<Attribute> renamed;
    for (auto d : bindings.getAsRange<DictionaryAttr>()) {
      SmallVector<NamedAttribute> entries(d.begin(), d.end());
      for (NamedAttribute &e : entries)
        if (e.getName() == "state")
          if (auto s = dyn_cast<StringAttr>(e.getValue()); s && s.getValue().starts_with("param:"))
            e.setValue(b.getStringAttr("master:" + s.getValue().drop_front(strlen("param:"))));
      renamed.push_back(b.getDictionaryAttr(entries));
    }
    NamedAttrList attrs(training);
    attrs.set("export_bindings", b.getArrayAttr(renamed));
    module->setAttr("ds.training", attrs.getDictionary(module.getContext()));
  }
};

} // namespace

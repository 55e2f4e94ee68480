//===- MixedPrecision.cpp - 16-bit matrix products ------------------------===//
//
// bf16 / fp16 as a compile-time decision: matrix products and
// convolutions, where the time goes, read 16-bit operands and keep fp32 sums; every other op computes in
// f32 (the policy of torch.autocast and DeepSpeed's fp32 master weights).
// Casts are made once per value and reused by every product reading it.
//
//===----------------------------------------------------------------------===//
#include "dialects/ds/DSOps.h"
#include "ds/Plan/KernelBridge.h"
#include "ds/Transforms/Passes.h"
#include "mlir/IR/AsmState.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/DialectResourceBlobManager.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Dialect/MLProgram/IR/MLProgram.h"
#include "llvm/ADT/DenseSet.h"
#include "runtime/kernels/ElementMath.h"

#include <cstring>

namespace mlir::ds {
#define GEN_PASS_DEF_MIXEDPRECISIONPASS
#include "ds/Transforms/Passes.h.inc"
} // namespace mlir::ds

using namespace mlir;
using namespace mlir::ds;

namespace {

/// The ops whose time is their multiply-adds: matrix products and
/// convolutions (forward and backward).
bool isProduct(Operation *op) { return isa<MatmulOp, ConvOp, ConvGradOp>(op); }

RankedTensorType withElement(Type t, Type elem) {
  auto r = cast<RankedTensorType>(t);
  return RankedTensorType::get(r.getShape(), elem);
}

class MixedPrecisionPass : public mlir::ds::impl::MixedPrecisionPassBase<MixedPrecisionPass> {
public:
  using MixedPrecisionPassBase::MixedPrecisionPassBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    MLIRContext *ctx = module.getContext();
    auto typeNamed = [&](StringRef name, StringRef option) -> FailureOr<Type> {
      if (name == "bf16") return Type(BFloat16Type::get(ctx));
      if (name == "fp16") return Type(Float16Type::get(ctx));
      if (name == "fp32") return Type(Float32Type::get(ctx));
      module.emitError("ds-mixed-precision: ") << option << " must be bf16, fp16 or fp32, got '"
                                                << name << "'";
      return failure();
    };
    FailureOr<Type> productType = typeNamed(dtype, "dtype"), comm = typeNamed(commDtype, "comm-dtype");
    if (failed(productType) || failed(comm)) return signalPassFailure();
    if (!comm->isF32()) reduceIn(module, *comm);
    if (productType->isF32()) return;
    Type half = *productType;
    SmallVector<Operation *> products;
    module.walk([&](Operation *op) {
      if (isProduct(op) && cast<RankedTensorType>(op->getOperand(0).getType()).getElementType().isF32())
        products.push_back(op);
    });
    llvm::DenseMap<Value, Value> halves; // f32 value -> its 16-bit copy
    llvm::DenseMap<void *, int> resourceUsers = countResourceUsers(module);
    for (Operation *op : products) {
      SmallVector<ParameterOp> read;
      for (Value v : op->getOperands())
        if (auto param = v.getDefiningOp<ParameterOp>()) read.push_back(param);
      OpBuilder b(op);
      IRMapping map;
      for (Value v : op->getOperands()) {
        Value h = toHalf(b, v, half, halves);
        if (!h) return signalPassFailure();
        map.map(v, h);
      }
      b.setInsertionPoint(op);
      Operation *p = b.clone(*op, map);
      for (auto [r, pr] : llvm::zip(op->getResults(), p->getResults())) {
        pr.setType(withElement(r.getType(), half));
        r.replaceAllUsesWith(CastOp::create(b, op->getLoc(), r.getType(), pr).getResult());
      }
      op->erase();
      ++numProducts;
      // An f32 weight every product now reads in 16 bits is gone, and so
      // are its bytes, at once (a resource outlives its last op otherwise,
      // and the compiler would hold the model 1.5 times at its peak).
      for (ParameterOp param : read)
        if (param->use_empty() && halves.count(param.getResult())) {
          halves.erase(param.getResult());
          if (auto res = dyn_cast<DenseResourceElementsAttr>(param.getValue()))
            if (--resourceUsers[res.getRawHandle().getResource()] == 0)
              res.getRawHandle().getResource()->setBlob(AsmResourceBlob());
          param.erase();
        }
    }
  }

private:
  /// How many ops name each dense_resource (parameters, constants,
  /// globals and their ds.full_value).
  static llvm::DenseMap<void *, int> countResourceUsers(ModuleOp module) {
    llvm::DenseMap<void *, int> users;
    module.walk([&](Operation *op) {
      Attribute v;
      if (auto p = dyn_cast<ParameterOp>(op)) v = p.getValue();
      else if (auto c = dyn_cast<ConstantOp>(op)) v = c.getValue();
      else if (auto g = dyn_cast<ml_program::GlobalOp>(op)) v = g.getValueAttr();
      for (Attribute a : {v, op->getAttr("ds.full_value")})
        if (auto res = dyn_cast_or_null<DenseResourceElementsAttr>(a))
          ++users[res.getRawHandle().getResource()];
    });
    return users;
  }

  /// Gradient reductions (sums of f32 tensors; the scalar loss and norm
  /// stay f32) send `half` values.
  void reduceIn(ModuleOp module, Type half) {
    SmallVector<Operation *> sums;
    module.walk([&](Operation *op) {
      auto reduction = op->getAttrOfType<CollectiveReductionAttr>("reduction");
      if (!isa<AllReduceOp, ReduceScatterOp>(op) || !reduction ||
          reduction.getValue() != CollectiveReduction::Sum)
        return;
      auto t = cast<RankedTensorType>(op->getOperand(0).getType());
      if (t.getElementType().isF32() && t.getRank() >= 1) sums.push_back(op);
    });
    for (Operation *op : sums) {
      OpBuilder b(op);
      Value in = CastOp::create(b, op->getLoc(), withElement(op->getOperand(0).getType(), half),
                                op->getOperand(0));
      op->setOperand(0, in);
      Type f32 = op->getResult(0).getType();
      op->getResult(0).setType(withElement(f32, half));
      b.setInsertionPointAfter(op);
      Value back = CastOp::create(b, op->getLoc(), f32, op->getResult(0));
      op->getResult(0).replaceAllUsesExcept(back, back.getDefiningOp());
      ++numCollectives;
    }
  }

  /// `v` in 16 bits: a weight converted once at compile time, anything else
  /// through one ds.cast placed right after its definition.
  Value toHalf(OpBuilder &b, Value v, Type half, llvm::DenseMap<Value, Value> &halves) {
    if (Value h = halves.lookup(v)) return h;
    // A 16-bit value widened (a parameter's working copy): the value itself.
    if (auto widened = v.getDefiningOp<CastOp>())
      if (cast<RankedTensorType>(widened.getOperand().getType()).getElementType() == half)
        return halves[v] = widened.getOperand();
    auto type = withElement(v.getType(), half);
    Value h;
    auto param = v.getDefiningOp<ParameterOp>();
    // A weight only products read is stored in 16 bits (one name, one
    // value); one other ops read too stays f32 and is cast.
    if (param && llvm::all_of(param->getUsers(), isProduct)) {
      OpBuilder pb(param);
      pb.setInsertionPointAfter(param);
      FailureOr<TypedAttr> value = convertedValue(param, type);
      if (failed(value)) return nullptr;
      h = ParameterOp::create(pb, param.getLoc(), type, param.getSymNameAttr(), *value);
      ++numWeights;
    } else {
      OpBuilder cb(b.getContext());
      if (Operation *def = v.getDefiningOp()) cb.setInsertionPointAfter(def);
      else cb.setInsertionPointToStart(cast<BlockArgument>(v).getOwner());
      h = CastOp::create(cb, v.getLoc(), type, v);
    }
    halves[v] = h;
    return h;
  }

  /// The parameter's values rounded to nearest even in `type`.
  FailureOr<TypedAttr> convertedValue(ParameterOp param, RankedTensorType type) {
    return roundedTo16Bit(param.getValue(), type, (param.getSymName() + ".16bit").str(),
                          param.getLoc());
  }
};

} // namespace

//===- RaiseQuantizedMatmul.cpp - onnxruntime's int8 products, as one op --===//
//
// onnxruntime's quantize_dynamic (the usual way to an int8 model) spells
// each product as DynamicQuantizeLinear, MatMulInteger, Cast and Mul. The
// importer keeps ONNX's exact semantics with an i32 GEMM; this pass finds
// the chain and gives it to ds.quantized_matmul, whose kernels run it on
// int8 dot products with the same uint8 activations.
//
//===----------------------------------------------------------------------===//
#include "dialects/ds/DSOps.h"
#include "ds/Plan/HostEvaluator.h"
#include "ds/Plan/KernelBridge.h"
#include "ds/Transforms/Passes.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"

namespace mlir::ds {
#define GEN_PASS_DEF_RAISEQUANTIZEDMATMULPASS
#include "ds/Transforms/Passes.h.inc"
} // namespace mlir::ds

using namespace mlir;
using namespace mlir::ds;

namespace {

RankedTensorType tensorType(Value v) { return cast<RankedTensorType>(v.getType()); }

/// `v` = cast_i32(q) or cast_i32(q) - cast_i32(z) with (q, s, z) a
/// ds.dynamic_quantize's results: that op.
DynamicQuantizeOp dynamicOperand(Value v) {
  Value q = v;
  if (auto sub = v.getDefiningOp<SubOp>()) {
    auto zc = sub.getRhs().getDefiningOp<CastOp>();
    auto dq = zc ? zc.getOperand().getDefiningOp<DynamicQuantizeOp>() : DynamicQuantizeOp();
    if (!dq || zc.getOperand() != dq.getZeroPoint()) return {};
    q = sub.getLhs();
    auto qc = q.getDefiningOp<CastOp>();
    return qc && qc.getOperand() == dq.getY() ? dq : DynamicQuantizeOp();
  }
  // Without the zero point subtracted the product is not of x's values.
  return {};
}

/// Erases `v`'s defining op and what only it read, as they lose their
/// last reader.
void eraseIfDead(Value v) {
  Operation *d = v ? v.getDefiningOp() : nullptr;
  if (!d || !d->use_empty() || !isa<DSDialect>(d->getDialect())) return;
  SmallVector<Value> operands(d->getOperands());
  d->erase();
  for (Value o : operands) eraseIfDead(o);
}

/// The bytes of a value known before the run (a constant, or constants'
/// arithmetic: the weight's cast and zero point, unfolded when it is
/// large), or none.
std::optional<std::vector<uint8_t>> bytesOf(Value v, DenseMap<Value, DenseElementsAttr> &memo) {
  ScopedDiagnosticHandler quiet(v.getContext(), [](Diagnostic &) { return success(); });
  FailureOr<DenseElementsAttr> d = evaluateConstantValue(v, memo);
  if (failed(d)) return std::nullopt;
  FailureOr<std::vector<uint8_t>> b = constantBytes(*d, v.getLoc());
  if (failed(b)) return std::nullopt;
  return std::move(*b);
}

struct RaiseQuantizedMatmulPass
    : public mlir::ds::impl::RaiseQuantizedMatmulPassBase<RaiseQuantizedMatmulPass> {
  void runOnOperation() override {
    SmallVector<MulOp> roots;
    getOperation().walk([&](MulOp m) {
      if (tensorType(m.getResult()).getElementType().isF32()) roots.push_back(m);
    });
    for (MulOp m : roots) raise(m);
  }
  DenseMap<Value, DenseElementsAttr> memo_;

  void raise(MulOp m) {
    // mul(cast_f32(p), s) with p = matmul_i32(centered x, W).
    for (auto [castSide, scaleSide] :
         {std::pair{m.getLhs(), m.getRhs()}, std::pair{m.getRhs(), m.getLhs()}}) {
      auto cast = castSide.getDefiningOp<CastOp>();
      auto p = cast ? cast.getOperand().getDefiningOp<MatmulOp>() : MatmulOp();
      if (!p || !cast->hasOneUse() || !p->hasOneUse() || p.getTransposeLhs() ||
          p.getTransposeRhs() || !tensorType(p.getResult()).getElementType().isInteger(32))
        continue;
      DynamicQuantizeOp dq = dynamicOperand(p.getLhs());
      if (!dq) continue;
      // The weight: a constant i32 [K, N] that fits int8.
      RankedTensorType wt = tensorType(p.getRhs());
      if (wt.getRank() != 2) continue;
      std::optional<std::vector<uint8_t>> wb = bytesOf(p.getRhs(), memo_);
      if (!wb) continue;
      const int64_t k = wt.getDimSize(0), n = wt.getDimSize(1);
      const int32_t *w = reinterpret_cast<const int32_t *>(wb->data());
      std::vector<int8_t> wT(static_cast<size_t>(n * k));
      bool fits = true;
      for (int64_t kk = 0; kk < k && fits; ++kk)
        for (int64_t c = 0; c < n; ++c) {
          const int32_t v = w[kk * n + c];
          if (v < -128 || v > 127) {
            fits = false;
            break;
          }
          wT[c * k + kk] = static_cast<int8_t>(v);
        }
      if (!fits) continue;
      // The scale: x's scale times the weight's (a scalar or [N] constant).
      auto smul = scaleSide.getDefiningOp<MulOp>();
      if (!smul) continue;
      Value ws = smul.getLhs() == dq.getScale() ? smul.getRhs()
                 : smul.getRhs() == dq.getScale() ? smul.getLhs()
                                                  : Value();
      if (!ws || !tensorType(ws).getElementType().isF32()) continue;
      const int64_t count = tensorType(ws).getNumElements();
      ArrayRef<int64_t> sShape = tensorType(ws).getShape();
      if (count != 1 && (sShape.empty() || sShape.back() != n || count != n)) continue;
      std::optional<std::vector<uint8_t>> sb = bytesOf(ws, memo_);
      if (!sb) continue;
      const float *sv = reinterpret_cast<const float *>(sb->data());
      std::vector<float> scales(static_cast<size_t>(n));
      for (int64_t c = 0; c < n; ++c) scales[c] = sv[count == 1 ? 0 : c];
      OpBuilder b(m);
      Location loc = p.getLoc();
      MLIRContext *ctx = b.getContext();
      Value weight = ConstantOp::create(
          b, loc,
          DenseElementsAttr::get(RankedTensorType::get({n, k}, IntegerType::get(ctx, 8)),
                                 ArrayRef<int8_t>(wT)));
      Value scale = ConstantOp::create(
          b, loc,
          DenseElementsAttr::get(RankedTensorType::get({n}, b.getF32Type()), ArrayRef<float>(scales)));
      auto q = QuantizedMatmulOp::create(
          b, loc, m.getType(), dq.getOperand(), weight, scale, Value(), Value(), Value(),
          b.getI64IntegerAttr(8), b.getI64IntegerAttr(0),
          ActivationQuantAttr::get(ctx, ActivationQuant::DynamicPerTensor), b.getF64FloatAttr(1.0),
          ActivationAttr::get(ctx, Activation::None), CombineAttr::get(ctx, Combine::Add));
      m.getResult().replaceAllUsesWith(q.getResult());
      m->erase();
      cast->erase();
      Value pw = p.getRhs(), pl = p.getLhs(), ps = scaleSide;
      p->erase();
      for (Value dead : {pw, pl, ps}) eraseIfDead(dead);
      ++numRaised;
      return;
    }
  }
};

} // namespace

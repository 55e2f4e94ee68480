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
    // Products whose weight is an int8 constant dequantized as it is read
    // (DequantizeLinear on a weight: a QDQ model's, onnxruntime's embedding
    // tied to the LM head): weight-only quantized_matmul, no dequantizing
    // (and transposing) of the whole weight on every run.
    SmallVector<MatmulOp> products;
    getOperation().walk([&](MatmulOp m) {
      if (tensorType(m.getResult()).getElementType().isF32()) products.push_back(m);
    });
    for (MatmulOp m : products) raiseDequantizedWeight(m);
  }

  /// rhs = [transpose]((cast(Q) [- zp]) * scale) in any order of transpose
  /// and cast, Q an i8 or u8 constant [K, N] (or [N, K]), the scale and zero
  /// point scalars or one per output column.
  void raiseDequantizedWeight(MatmulOp m) {
    if (m.getTransposeLhs()) return;
    Value w = m.getRhs();
    if (tensorType(w).getRank() != 2 || !w.hasOneUse()) return;
    bool transposed = m.getTransposeRhs(); // the weight as stored is [N, K]
    Value scale, zero;
    CastOp cast;
    SmallVector<Operation *> chain;
    Value v = w;
    while (true) {
      Operation *d = v.getDefiningOp();
      if (!d) return;
      if (auto t = dyn_cast<TransposeOp>(d)) {
        transposed = !transposed;
        chain.push_back(d);
        v = t.getOperand();
      } else if (auto mul = dyn_cast<MulOp>(d); mul && !scale) {
        Value other = constantOperand(mul, v);
        if (!other) return;
        scale = other;
        chain.push_back(d);
      } else if (auto sub = dyn_cast<SubOp>(d); sub && !zero && scale) {
        Value z = sub.getRhs();
        if (!bytesOf(z, memo_)) return;
        zero = z;
        chain.push_back(d);
        v = sub.getLhs();
      } else if (auto c = dyn_cast<CastOp>(d); c && !cast) {
        cast = c;
        chain.push_back(d);
        v = c.getOperand();
      } else if (cast && isa<ConstantOp, ParameterOp>(d)) {
        break; // the quantized values (read by other ops too: an embedding)
      } else {
        return;
      }
      if (!v.hasOneUse() && !(cast && isa_and_nonnull<ConstantOp, ParameterOp>(v.getDefiningOp())))
        return;
    }
    // Q: an 8-bit integer constant of the weight's element count.
    auto qt = tensorType(v);
    auto it = dyn_cast<IntegerType>(qt.getElementType());
    Operation *qdef = v.getDefiningOp();
    if (!scale || !it || it.getWidth() != 8 || qt.getRank() != 2 || !qdef ||
        !isa<ConstantOp, ParameterOp>(qdef))
      return;
    std::optional<std::vector<uint8_t>> qb = bytesOf(v, memo_);
    std::optional<std::vector<uint8_t>> sb = bytesOf(scale, memo_);
    if (!qb || !sb) return;
    // Stored [R, C]; the product's [K, N] is that or its transpose.
    const int64_t rows = qt.getDimSize(0), cols = qt.getDimSize(1);
    const int64_t n = transposed ? rows : cols, k = transposed ? cols : rows;
    auto perColumn = [&](Value s, const std::vector<uint8_t> &bytes, int elemBytes,
                         std::vector<double> &out) -> bool {
      // A scalar, or one value per output column laid along the column
      // axis of the dequantized [R, C] (before any transpose).
      RankedTensorType st = tensorType(s);
      const int64_t count = st.getNumElements();
      out.assign(static_cast<size_t>(n), 0.0);
      auto at = [&](int64_t i) -> double {
        if (elemBytes == 4) return reinterpret_cast<const float *>(bytes.data())[i];
        return it.isUnsigned() ? bytes[i] : static_cast<int8_t>(bytes[i]);
      };
      if (count == 1) {
        for (double &x : out) x = at(0);
        return true;
      }
      // Broadcast shape must vary only along the output-column axis of [R, C].
      ArrayRef<int64_t> sh = st.getShape();
      const int64_t colAxis = transposed ? 0 : 1; // N is the stored rows when transposed
      SmallVector<int64_t> padded(2 - std::min<int64_t>(2, sh.size()), 1);
      padded.append(sh.begin(), sh.end());
      if (padded.size() != 2 || padded[colAxis] != n || padded[1 - colAxis] != 1) return false;
      for (int64_t i = 0; i < n; ++i) out[i] = at(i);
      return true;
    };
    std::vector<double> scales, zeros;
    if (!perColumn(scale, *sb, 4, scales)) return;
    if (zero) {
      std::optional<std::vector<uint8_t>> zb = bytesOf(zero, memo_);
      auto zt = tensorType(zero).getElementType();
      if (!zb || !(zt.isF32() || zt.isInteger(8))) return;
      if (!perColumn(zero, *zb, zt.isF32() ? 4 : 1, zeros)) return;
    } else {
      zeros.assign(static_cast<size_t>(n), 0.0);
    }
    // [N, K] int8 (uint8 shifted by 128, its zero point with it); zero
    // points must be whole numbers in int8's range.
    const int shift = it.isUnsigned() ? 128 : 0;
    std::vector<int8_t> q(static_cast<size_t>(n * k)), z(static_cast<size_t>(n));
    bool anyZero = false;
    for (int64_t c = 0; c < n; ++c) {
      const double zc = zeros[c] - shift;
      if (zc != std::floor(zc) || zc < -128 || zc > 127) return;
      z[c] = static_cast<int8_t>(zc);
      anyZero |= z[c] != 0;
    }
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c) {
        const int raw = it.isUnsigned() ? (*qb)[r * cols + c] : static_cast<int8_t>((*qb)[r * cols + c]);
        const int64_t nn = transposed ? r : c, kk = transposed ? c : r;
        q[nn * k + kk] = static_cast<int8_t>(raw - shift);
      }
    OpBuilder b(m);
    Location loc = m.getLoc();
    MLIRContext *ctx = b.getContext();
    Type i8 = IntegerType::get(ctx, 8);
    Value weight = ConstantOp::create(
        b, loc, DenseElementsAttr::get(RankedTensorType::get({n, k}, i8), ArrayRef<int8_t>(q)));
    std::vector<float> sf(scales.begin(), scales.end());
    Value sv = ConstantOp::create(
        b, loc, DenseElementsAttr::get(RankedTensorType::get({n}, b.getF32Type()), ArrayRef<float>(sf)));
    Value zv;
    if (anyZero)
      zv = ConstantOp::create(
          b, loc, DenseElementsAttr::get(RankedTensorType::get({n}, i8), ArrayRef<int8_t>(z)));
    auto qm = QuantizedMatmulOp::create(
        b, loc, m.getType(), m.getLhs(), weight, sv, zv, Value(), Value(), b.getI64IntegerAttr(8),
        b.getI64IntegerAttr(0), ActivationQuantAttr::get(ctx, ActivationQuant::None),
        b.getF64FloatAttr(1.0), ActivationAttr::get(ctx, Activation::None),
        CombineAttr::get(ctx, Combine::Add));
    m.getResult().replaceAllUsesWith(qm.getResult());
    m->erase();
    eraseIfDead(w);
    ++numRaised;
  }

  /// Of binary `op`'s operands, the small one known before the run (a
  /// scale: a scalar or one per column) when the other is the chain's
  /// weight-sized value, which `v` becomes.
  Value constantOperand(Operation *op, Value &v) {
    Value a = op->getOperand(0), b = op->getOperand(1);
    const int64_t whole = tensorType(v).getNumElements();
    for (auto [chain, small] : {std::pair{a, b}, std::pair{b, a}})
      if (tensorType(chain).getNumElements() == whole &&
          tensorType(small).getNumElements() < whole && bytesOf(small, memo_)) {
        v = chain;
        return small;
      }
    return {};
  }
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

  DenseMap<Value, DenseElementsAttr> memo_;
};

} // namespace

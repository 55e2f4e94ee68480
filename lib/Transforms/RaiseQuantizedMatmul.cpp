//===- RaiseQuantizedMatmul.cpp - onnxruntime's int8 products, as one op --===//
//
// onnxruntime's quantize_dynamic (the usual way to an int8 model) spells
// each product as DynamicQuantizeLinear, MatMulInteger, Cast and Mul. The
// importer keeps ONNX's exact semantics with an i32 GEMM; this pass finds
// the chain and gives it to ds.quantized_matmul, whose kernels run it on
// int8 dot products with the same uint8 activations.
//
// A QDQ model (onnxruntime's quantize_static, QLinearConv and
// QLinearMatMul as the importer spells them) multiplies
// DequantizeLinear(QuantizeLinear(x)) by DequantizeLinear(int8 weight):
// the same integers, so products and convolutions whose operands are
// dequantized that way become ds.quantized_matmul with static activations
// and ds.quantized_conv.
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

/// Erases the roots' defining ops and what only they read, as they lose
/// their last reader. A worklist, not recursion: a value reached along two paths
/// (a scale both QuantizeLinear and DequantizeLinear read) is erased once.
void eraseIfDead(ArrayRef<Value> roots) {
  // The roots' ops are taken before anything is erased: one may be
  // reached from another.
  SmallVector<Operation *> work;
  for (Value v : roots)
    if (Operation *d = v ? v.getDefiningOp() : nullptr) work.push_back(d);
  llvm::SmallPtrSet<Operation *, 16> erased;
  while (!work.empty()) {
    Operation *d = work.pop_back_val();
    if (erased.contains(d) || !d->use_empty() || !isa<DSDialect>(d->getDialect())) continue;
    for (Value o : d->getOperands())
      if (Operation *def = o.getDefiningOp()) work.push_back(def);
    erased.insert(d);
    d->erase();
  }
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

/// The values of a constant holding integers of an 8-bit type: an i8 or
/// ui8 constant, or an f32 one (the importer folds a weight's cast) whose
/// values are whole numbers in [-128, 127] or [0, 255]. `isUnsigned` says
/// which range.
std::optional<std::vector<int32_t>> integerValues(Value v, DenseMap<Value, DenseElementsAttr> &memo,
                                                  bool &isUnsigned) {
  Type e = tensorType(v).getElementType();
  std::optional<std::vector<uint8_t>> b = bytesOf(v, memo);
  if (!b) return std::nullopt;
  const int64_t n = tensorType(v).getNumElements();
  std::vector<int32_t> out(static_cast<size_t>(n));
  if (auto it = dyn_cast<IntegerType>(e); it && it.getWidth() == 8) {
    isUnsigned = it.isUnsigned();
    for (int64_t i = 0; i < n; ++i)
      out[i] = isUnsigned ? (*b)[i] : static_cast<int8_t>((*b)[i]);
    return out;
  }
  if (!e.isF32()) return std::nullopt;
  const float *f = reinterpret_cast<const float *>(b->data());
  float lo = 0, hi = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (f[i] != std::floor(f[i])) return std::nullopt;
    lo = std::min(lo, f[i]), hi = std::max(hi, f[i]);
  }
  if (lo >= -128 && hi <= 127) isUnsigned = false;
  else if (lo >= 0 && hi <= 255) isUnsigned = true;
  else return std::nullopt;
  for (int64_t i = 0; i < n; ++i) out[i] = static_cast<int32_t>(f[i]);
  return out;
}

/// A one-element f32 (or integer) constant's value.
std::optional<double> scalarOf(Value v, DenseMap<Value, DenseElementsAttr> &memo) {
  if (!v || tensorType(v).getNumElements() != 1) return std::nullopt;
  std::optional<std::vector<uint8_t>> b = bytesOf(v, memo);
  if (!b) return std::nullopt;
  Type e = tensorType(v).getElementType();
  if (e.isF32()) return *reinterpret_cast<const float *>(b->data());
  if (auto it = dyn_cast<IntegerType>(e); it && it.getWidth() == 8)
    return it.isUnsigned() ? (*b)[0] : static_cast<int8_t>((*b)[0]);
  return std::nullopt;
}

/// Activations an int8 kernel can take: `source` rounded to uint8 with
/// `scale` and `zero` gives the integers the product multiplies, and the
/// product's scale is `scale * fold` times the weight's.
struct StaticActivation {
  Value source;
  double scale = 1, fold = 1;
  int64_t zero = 0;
  bool rounded = false; // `source` is the value QuantizeLinear rounded
};

/// `v` = (cast_f32(Q) [- zp]) * s, Q of an 8-bit integer type, zp and s
/// one-element constants (DequantizeLinear). When Q is x quantized with the
/// same s and zp (QuantizeLinear's division, rounding, zero point and
/// clamp), x itself with s and zp; otherwise the centered value cast(Q) -
/// zp with scale 1 (the integers as floats) and s folded into the weight's.
std::optional<StaticActivation> dequantizedActivation(Value v,
                                                      DenseMap<Value, DenseElementsAttr> &memo) {
  auto mul = v.getDefiningOp<MulOp>();
  if (!mul) return std::nullopt;
  for (auto [centered, sv] : {std::pair{mul.getLhs(), mul.getRhs()},
                              std::pair{mul.getRhs(), mul.getLhs()}}) {
    std::optional<double> s = scalarOf(sv, memo);
    if (!s || !(*s > 0) || tensorType(centered).getNumElements() == 1 ||
        !tensorType(centered).getElementType().isF32())
      continue;
    Value c = centered;
    double zp = 0;
    if (auto sub = centered.getDefiningOp<SubOp>()) {
      std::optional<double> z = scalarOf(sub.getRhs(), memo);
      if (!z) return std::nullopt;
      zp = *z;
      c = sub.getLhs();
    }
    auto cast = c.getDefiningOp<CastOp>();
    if (!cast) return std::nullopt;
    Value q = cast.getOperand();
    auto it = dyn_cast<IntegerType>(tensorType(q).getElementType());
    if (!it || it.getWidth() != 8) return std::nullopt;
    const double shift = it.isUnsigned() ? 0 : 128;
    if (zp != std::floor(zp) || zp + shift < 0 || zp + shift > 255) return std::nullopt;
    StaticActivation a{centered, 1.0, *s, static_cast<int64_t>(zp + shift)};
    // QuantizeLinear: cast_q(min(max(round(x / s) [+ zp], lo), hi)).
    const double lo = -shift, hi = 255 - shift;
    auto bound = [&](Value y, auto opTag, double want) -> Value {
      using Op = decltype(opTag);
      auto op = y.getDefiningOp<Op>();
      if (!op) return {};
      for (auto [val, b] : {std::pair{op.getLhs(), op.getRhs()}, std::pair{op.getRhs(), op.getLhs()}})
        if (std::optional<double> bv = scalarOf(b, memo); bv && *bv == want &&
                                                           tensorType(val) == tensorType(y))
          return val;
      return {};
    };
    auto qc = q.getDefiningOp<CastOp>();
    Value clamped = qc ? qc.getOperand() : Value();
    Value above = clamped ? bound(clamped, MinOp(), hi) : Value();
    Value shifted = above ? bound(above, MaxOp(), lo) : Value();
    // The zero point's add (present, or absent with zero point 0).
    Value rounded = shifted;
    if (Value r = shifted ? bound(shifted, AddOp(), zp) : Value()) rounded = r;
    else if (zp != 0) rounded = {};
    auto round = rounded ? rounded.getDefiningOp<RoundOp>() : RoundOp();
    auto div = round ? round.getOperand().getDefiningOp<DivOp>() : DivOp();
    std::optional<double> s2 = div ? scalarOf(div.getRhs(), memo) : std::nullopt;
    if (s2 && static_cast<float>(*s2) == static_cast<float>(*s) &&
        tensorType(div.getLhs()).getElementType().isF32())
      return StaticActivation{div.getLhs(), *s, 1.0, static_cast<int64_t>(zp + shift), true};
    return a;
  }
  return std::nullopt;
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
    // (The memo is keyed by values, some now erased: a new value at an
    // erased one's address must not find its constant.)
    memo_.clear();
    SmallVector<ConvOp> convs;
    getOperation().walk([&](ConvOp c) {
      if (tensorType(c.getResult()).getElementType().isF32()) convs.push_back(c);
    });
    for (ConvOp c : convs) raiseConv(c);
    memo_.clear();
    // QuantizeLinear then DequantizeLinear (a QDQ model's activations that
    // reach ops other than products: a residual add, a pooling) become one
    // ds.fake_quantize, which ds-fuse-elementwise fuses as one function
    // instead of seven ops.
    SmallVector<MulOp> pairs;
    getOperation().walk([&](MulOp m) {
      if (tensorType(m.getResult()).getElementType().isF32()) pairs.push_back(m);
    });
    for (MulOp m : pairs) {
      std::optional<StaticActivation> a = dequantizedActivation(m.getResult(), memo_);
      if (!a || !a->rounded || a->source.getType() != m.getType()) continue;
      OpBuilder b(m);
      auto fq = FakeQuantizeOp::create(b, m.getLoc(), m.getType(), a->source,
                                       b.getF64FloatAttr(a->scale), b.getI64IntegerAttr(a->zero));
      m.getResult().replaceAllUsesWith(fq.getResult());
      SmallVector<Value> chain(m->getOperands());
      m->erase();
      eraseIfDead(chain);
    }
    // A round trip of a value already on its grid (onnxruntime quantizes a
    // reshape's output again with its input's parameters) is the identity.
    // So is one whose every reader is a quantized product that rounds its
    // input to that same grid anyway (static_per_tensor with the same
    // parameters): the product rounds the unrounded value to the same
    // integers.
    SmallVector<FakeQuantizeOp> roundTrips;
    getOperation().walk([&](FakeQuantizeOp fq) { roundTrips.push_back(fq); });
    for (FakeQuantizeOp fq : roundTrips) {
      const double scale = fq.getScale().convertToDouble();
      const int64_t zero = fq.getZeroPoint();
      if (isOnUint8Grid(fq.getOperand(), scale, zero) ||
          onlyRequantized(fq.getResult(), scale, zero)) {
        fq.getResult().replaceAllUsesWith(fq.getOperand());
        fq->erase();
      }
    }
    // A gather of a dequantized table (a QDQ model's token embedding, the
    // LM head's weight tied to it) gathers the int8 rows and dequantizes
    // those: not the whole table at every run.
    SmallVector<GatherOp> gathers;
    getOperation().walk([&](GatherOp g) { gathers.push_back(g); });
    for (GatherOp g : gathers) gatherQuantized(g);
    memo_.clear();
    // Other pairs stay in f32 without their casts: the casts of integers
    // already rounded and clamped to the integer type are exact.
    SmallVector<CastOp> casts;
    getOperation().walk([&](CastOp c) { casts.push_back(c); });
    for (CastOp c : casts) elideIntegerRoundTrip(c);
  }

  /// Whether every reader of `v` (through reshapes) is the left operand
  /// of a quantized product that rounds it to the uint8 grid (scale, zero).
  static bool onlyRequantized(Value v, double scale, int64_t zero) {
    if (v.use_empty()) return false;
    for (OpOperand &use : v.getUses()) {
      Operation *u = use.getOwner();
      if (auto r = dyn_cast<ReshapeOp>(u)) {
        if (!onlyRequantized(r.getResult(), scale, zero)) return false;
        continue;
      }
      auto q = dyn_cast<QuantizedMatmulOp>(u);
      if (!q || use.getOperandNumber() != 0 ||
          q.getActivationQuant() != ActivationQuant::StaticPerTensor ||
          !q.getInputScale() || q.getInputScale()->convertToDouble() != scale ||
          !q.getInputZeroPoint() || static_cast<int64_t>(*q.getInputZeroPoint()) != zero)
        return false;
    }
    return true;
  }

  /// gather(((cast(q) [- z]) * s), idx) -> (cast(gather(q, idx)) [-
  /// gather(z)]) * gather(s), z and s one value or one per entry of the
  /// gathered axis (a scalar is used as it is).
  void gatherQuantized(GatherOp g) {
    auto mul = g.getData().getDefiningOp<MulOp>();
    if (!mul || g.getPaddingIdxAttr()) return;
    RankedTensorType table = tensorType(g.getData());
    const int64_t axis = g.getAxis(), rank = table.getRank();
    if (axis < 0 || axis >= rank) return;
    // Whether a small operand varies at most along the gathered axis.
    auto alongAxis = [&](Value v) {
      RankedTensorType t = tensorType(v);
      if (t.getNumElements() == 1) return true;
      if (t.getRank() != rank) return false;
      for (int64_t d = 0; d < rank; ++d)
        if (d != axis && t.getDimSize(d) != 1) return false;
      return t.getDimSize(axis) == table.getDimSize(axis);
    };
    for (auto [centered, scale] : {std::pair{mul.getLhs(), mul.getRhs()},
                                   std::pair{mul.getRhs(), mul.getLhs()}}) {
      if (tensorType(centered) != table || !alongAxis(scale) || !bytesOf(scale, memo_)) continue;
      Value zero, c = centered;
      if (auto sub = c.getDefiningOp<SubOp>()) {
        if (!alongAxis(sub.getRhs()) || !bytesOf(sub.getRhs(), memo_)) return;
        zero = sub.getRhs();
        c = sub.getLhs();
      }
      auto cast = c.getDefiningOp<CastOp>();
      if (!cast || tensorType(cast.getOperand()).getElementType().getIntOrFloatBitWidth() != 8 ||
          !isa<IntegerType>(tensorType(cast.getOperand()).getElementType()))
        return;
      OpBuilder b(g);
      Location loc = g.getLoc();
      auto gathered = [&](Value v) -> Value {
        RankedTensorType t = tensorType(v);
        if (t.getNumElements() == 1 && t.getRank() != rank) return v;
        if (t.getNumElements() == 1 && table.getDimSize(axis) != 1) return v;
        SmallVector<int64_t> shape(t.getShape().take_front(axis));
        llvm::append_range(shape, tensorType(g.getIndices()).getShape());
        llvm::append_range(shape, t.getShape().drop_front(axis + 1));
        return GatherOp::create(b, loc, RankedTensorType::get(shape, t.getElementType()), v,
                                g.getIndices(), g.getAxisAttr(), IntegerAttr());
      };
      Value rows = gathered(cast.getOperand());
      Type f = table.getElementType();
      Value y = CastOp::create(b, loc, RankedTensorType::get(tensorType(rows).getShape(), f), rows);
      if (zero) {
        Value z = gathered(zero);
        y = SubOp::create(b, loc, y.getType(), y, z);
      }
      y = MulOp::create(b, loc, g.getType(), y, gathered(scale));
      g.getResult().replaceAllUsesWith(y);
      Value data = g.getData();
      g->erase();
      eraseIfDead({data});
      return;
    }
  }

  /// cast_f32(cast_int8(y)) -> y, when y = clamp(round(v) [+ integer], lo,
  /// hi) with [lo, hi] inside the integer type's range.
  void elideIntegerRoundTrip(CastOp back) {
    auto there = back.getOperand().getDefiningOp<CastOp>();
    if (!there || back.getType() != there.getOperand().getType() ||
        !back.getType().getElementType().isF32())
      return;
    auto it = dyn_cast<IntegerType>(there.getType().getElementType());
    if (!it || it.getWidth() != 8) return;
    const double tlo = it.isUnsigned() ? 0 : -128, thi = it.isUnsigned() ? 255 : 127;
    Value y = there.getOperand();
    // min(max(r, lo), hi) or max(min(r, hi), lo), the bounds constants.
    auto bounded = [&](Value v, bool upper, Value &inner) {
      Operation *op = v.getDefiningOp();
      if (!op || !(upper ? isa<MinOp>(op) : isa<MaxOp>(op))) return false;
      for (int i = 0; i < 2; ++i)
        if (std::optional<double> b = scalarOf(op->getOperand(1 - i), memo_);
            b && (upper ? *b <= thi : *b >= tlo) && op->getOperand(i).getType() == v.getType()) {
          inner = op->getOperand(i);
          return true;
        }
      return false;
    };
    Value mid, r;
    if (!((bounded(y, true, mid) && bounded(mid, false, r)) ||
          (bounded(y, false, mid) && bounded(mid, true, r))))
      return;
    if (auto add = r.getDefiningOp<AddOp>()) {
      for (int i = 0; i < 2; ++i)
        if (std::optional<double> z = scalarOf(add->getOperand(1 - i), memo_);
            z && *z == std::floor(*z) && add->getOperand(i).getType() == r.getType()) {
          r = add->getOperand(i);
          break;
        }
    }
    if (!isa_and_nonnull<RoundOp, FloorOp, CeilOp>(r.getDefiningOp())) return;
    back.getResult().replaceAllUsesWith(y);
    back->erase();
    if (there->use_empty()) there->erase();
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
      } else if (!cast && scale && isa<ConstantOp>(d)) {
        break; // the quantized values, their cast to f32 folded
      } else {
        return;
      }
      if (!v.hasOneUse() && !(cast && isa_and_nonnull<ConstantOp, ParameterOp>(v.getDefiningOp())))
        return;
    }
    // Q: 8-bit integers (or their f32 cast, folded) of the weight's shape.
    auto qt = tensorType(v);
    Operation *qdef = v.getDefiningOp();
    if (!scale || qt.getRank() != 2 || !qdef || !isa<ConstantOp, ParameterOp>(qdef)) return;
    bool isUnsigned = false;
    std::optional<std::vector<int32_t>> qv = integerValues(v, memo_, isUnsigned);
    std::optional<std::vector<uint8_t>> sb = bytesOf(scale, memo_);
    if (!qv || !sb) return;
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
        return st.getElementType().isUnsignedInteger() ? bytes[i] : static_cast<int8_t>(bytes[i]);
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
    const int shift = isUnsigned ? 128 : 0;
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
        const int raw = (*qv)[r * cols + c];
        const int64_t nn = transposed ? r : c, kk = transposed ? c : r;
        q[nn * k + kk] = static_cast<int8_t>(raw - shift);
      }
    // Activations dequantized from 8-bit integers (a QDQ model's) multiply
    // as those integers: static_per_tensor (the weight symmetric).
    std::optional<StaticActivation> act;
    if (!anyZero) act = dequantizedActivation(m.getLhs(), memo_);
    if (act)
      for (double &sc : scales) sc *= act->fold;
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
    Value lhs = m.getLhs();
    auto qm = QuantizedMatmulOp::create(
        b, loc, m.getType(), act ? act->source : lhs, weight, sv, zv, Value(), Value(),
        b.getI64IntegerAttr(8), b.getI64IntegerAttr(0),
        ActivationQuantAttr::get(ctx, act ? ActivationQuant::StaticPerTensor : ActivationQuant::None),
        b.getF64FloatAttr(1.0), ActivationAttr::get(ctx, Activation::None),
        CombineAttr::get(ctx, Combine::Add), act ? b.getF64FloatAttr(act->scale) : FloatAttr(),
        act ? b.getI64IntegerAttr(act->zero) : IntegerAttr(), FloatAttr(), IntegerAttr());
    m.getResult().replaceAllUsesWith(qm.getResult());
    m->erase();
    eraseIfDead({w, lhs});
    ++numRaised;
  }

  /// conv(DequantizeLinear(Q(x)), DequantizeLinear(int8 weight)), the
  /// weight's zero points 0 and its scales one per output channel (or one):
  /// ds.quantized_conv on the integers.
  void raiseConv(ConvOp conv) {
    if (conv.getChannelsLast()) return;
    Value w = conv.getWeight();
    auto mul = w.getDefiningOp<MulOp>();
    if (!mul || !w.hasOneUse()) return;
    RankedTensorType wt = tensorType(w);
    const int64_t m = wt.getDimSize(0);
    for (auto [qs, ss] : {std::pair{mul.getLhs(), mul.getRhs()}, std::pair{mul.getRhs(), mul.getLhs()}}) {
      if (tensorType(qs) != wt) continue;
      // The scale: one value, or [M, 1, ...] along the output channels.
      RankedTensorType st = tensorType(ss);
      if (st.getNumElements() != 1 &&
          (st.getRank() != wt.getRank() || st.getDimSize(0) != m || st.getNumElements() != m))
        continue;
      std::optional<std::vector<uint8_t>> sb = bytesOf(ss, memo_);
      if (!sb || !st.getElementType().isF32()) continue;
      // The integers: cast(Q) [- 0], or their f32 constant.
      Value qv = qs;
      if (auto sub = qv.getDefiningOp<SubOp>()) {
        std::optional<double> z = scalarOf(sub.getRhs(), memo_);
        bool zu = false;
        std::optional<std::vector<int32_t>> zs =
            z ? std::nullopt : integerValues(sub.getRhs(), memo_, zu);
        if (!(z && *z == 0) && !(zs && llvm::all_of(*zs, [](int32_t v) { return v == 0; })))
          return; // an asymmetric weight: the int8 kernel takes none
        qv = sub.getLhs();
      }
      if (auto cast = qv.getDefiningOp<CastOp>()) qv = cast.getOperand();
      if (!isa_and_nonnull<ConstantOp, ParameterOp>(qv.getDefiningOp())) return;
      bool isUnsigned = false;
      std::optional<std::vector<int32_t>> ints = integerValues(qv, memo_, isUnsigned);
      if (!ints || isUnsigned) return; // uint8 weights: the kernel is u8 x s8
      std::optional<StaticActivation> act = dequantizedActivation(conv.getInput(), memo_);
      if (!act) return;
      const float *sv = reinterpret_cast<const float *>(sb->data());
      std::vector<float> scales(static_cast<size_t>(m));
      for (int64_t c = 0; c < m; ++c)
        scales[c] = static_cast<float>(sv[st.getNumElements() == 1 ? 0 : c] * act->fold);
      std::vector<int8_t> q(ints->begin(), ints->end());
        OpBuilder b(conv);
      Location loc = conv.getLoc();
      Value weight = ConstantOp::create(
          b, loc,
          DenseElementsAttr::get(RankedTensorType::get(wt.getShape(), b.getIntegerType(8)),
                                 ArrayRef<int8_t>(q)));
      Value scale = ConstantOp::create(
          b, loc,
          DenseElementsAttr::get(RankedTensorType::get({m}, b.getF32Type()), ArrayRef<float>(scales)));
      Value input = conv.getInput();
      auto qc = QuantizedConvOp::create(
          b, loc, conv.getType(), act->source, weight, scale, conv.getBias(), conv.getAddend(),
          conv.getStridesAttr(), conv.getDilationsAttr(), conv.getPadsAttr(), conv.getGroupAttr(),
          b.getF64FloatAttr(act->scale), b.getI64IntegerAttr(act->zero), conv.getClipMinAttr(),
          conv.getClipMaxAttr(), conv.getChannelsLastAttr(), conv.getActivationAttr(), FloatAttr(),
          IntegerAttr());
      conv.getResult().replaceAllUsesWith(qc.getResult());
      conv->erase();
      eraseIfDead({w, input});
      ++numRaised;
      return;
    }
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
          ActivationAttr::get(ctx, Activation::None), CombineAttr::get(ctx, Combine::Add),
          FloatAttr(), IntegerAttr(), FloatAttr(), IntegerAttr());
      m.getResult().replaceAllUsesWith(q.getResult());
      m->erase();
      cast->erase();
      Value pw = p.getRhs(), pl = p.getLhs(), ps = scaleSide;
      p->erase();
      eraseIfDead({pw, pl, ps});
      ++numRaised;
      return;
    }
  }

  DenseMap<Value, DenseElementsAttr> memo_;
};

} // namespace

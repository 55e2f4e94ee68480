//===- Autodiff.cpp - reverse-mode differentiation of ds IR ---------------===//
//
// Gradient rules, one per op. Broadcasting ops reduce their operand
// gradients back to the operand's shape (`unbroadcast`). Rules reuse forward
// values (results and operands), so the forward activations the backward
// needs stay live; ds-plan-memory accounts for that.
//
//===----------------------------------------------------------------------===//
#include "ds/Transforms/Autodiff.h"

#include "dialects/ds/DSOps.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mlir::ds;

namespace {

RankedTensorType typeOf(Value v) { return cast<RankedTensorType>(v.getType()); }

class GradientBuilder {
public:
  GradientBuilder(OpBuilder &b, Location loc) : b_(b), loc_(loc) {}

  Value scalar(Type elem, double v) {
    auto t = RankedTensorType::get({}, elem);
    return ConstantOp::create(b_, loc_, DenseElementsAttr::get(t, b_.getFloatAttr(elem, v)));
  }
  Value zeros(RankedTensorType t) {
    return FillOp::create(b_, loc_, t, b_.getF64FloatAttr(0.0));
  }
  Value add(Value a, Value c) { return AddOp::create(b_, loc_, a, c); }
  Value sub(Value a, Value c) { return SubOp::create(b_, loc_, a, c); }
  Value mul(Value a, Value c) { return MulOp::create(b_, loc_, a, c); }
  Value div(Value a, Value c) { return DivOp::create(b_, loc_, a, c); }
  Value neg(Value a) { return NegOp::create(b_, loc_, a.getType(), a); }
  Value mulScalar(Value a, double s) { return mul(a, scalar(typeOf(a).getElementType(), s)); }
  Value reshape(Value v, ArrayRef<int64_t> shape) {
    auto t = RankedTensorType::get(shape, typeOf(v).getElementType());
    if (t == v.getType()) return v;
    return ReshapeOp::create(b_, loc_, t, v);
  }
  Value transpose(Value v, ArrayRef<int64_t> perm) {
    return TransposeOp::create(b_, loc_, ValueRange{v},
                               {b_.getNamedAttr("permutation", b_.getDenseI64ArrayAttr(perm))});
  }
  Value swapLast2(Value v) {
    int64_t r = typeOf(v).getRank();
    SmallVector<int64_t> perm;
    for (int64_t i = 0; i < r; ++i) perm.push_back(i);
    std::swap(perm[r - 1], perm[r - 2]);
    return transpose(v, perm);
  }
  Value reduceSum(Value v, ArrayRef<int64_t> axes, bool keepdims) {
    if (axes.empty()) return v;
    return ReduceSumOp::create(b_, loc_, ValueRange{v},
                               {b_.getNamedAttr("axes", b_.getDenseI64ArrayAttr(axes)),
                                b_.getNamedAttr("keepdims", b_.getBoolAttr(keepdims))});
  }
  Value expand(Value v, RankedTensorType t) {
    if (v.getType() == t) return v;
    return ExpandOp::create(b_, loc_, t, v);
  }
  Value where(Value c, Value t, Value f) { return WhereOp::create(b_, loc_, c, t, f); }

  /// Sums `g` (shaped like a broadcast result) back to `target`'s shape.
  Value unbroadcast(Value g, RankedTensorType target) {
    ArrayRef<int64_t> gs = typeOf(g).getShape(), ts = target.getShape();
    if (gs == ts) return g;
    int64_t lead = static_cast<int64_t>(gs.size()) - static_cast<int64_t>(ts.size());
    SmallVector<int64_t> axes;
    for (int64_t d = 0; d < static_cast<int64_t>(gs.size()); ++d) {
      if (d < lead) axes.push_back(d);
      else if (ts[d - lead] == 1 && gs[d] != 1) axes.push_back(d);
    }
    Value r = reduceSum(g, axes, /*keepdims=*/true);
    return reshape(r, ts);
  }

  OpBuilder &b() { return b_; }
  Location loc() const { return loc_; }

private:
  OpBuilder &b_;
  Location loc_;
};

/// Operand gradients of `op` for result gradients `dres` (null where the
/// result has none). Returns one entry per operand (null: no gradient).
FailureOr<SmallVector<Value>> gradientOf(Operation *op, ArrayRef<Value> dres,
                                         GradientBuilder &gb) {
  SmallVector<Value> d(op->getNumOperands());
  Value g = dres.empty() ? Value() : dres[0];
  auto operandType = [&](unsigned i) { return typeOf(op->getOperand(i)); };
  LogicalResult ok =
      llvm::TypeSwitch<Operation *, LogicalResult>(op)
          .Case<AddOp>([&](AddOp o) {
            d[0] = gb.unbroadcast(g, operandType(0));
            d[1] = gb.unbroadcast(g, operandType(1));
            return success();
          })
          .Case<SubOp>([&](SubOp o) {
            d[0] = gb.unbroadcast(g, operandType(0));
            d[1] = gb.unbroadcast(gb.neg(g), operandType(1));
            return success();
          })
          .Case<MulOp>([&](MulOp o) {
            d[0] = gb.unbroadcast(gb.mul(g, o.getRhs()), operandType(0));
            d[1] = gb.unbroadcast(gb.mul(g, o.getLhs()), operandType(1));
            return success();
          })
          .Case<DivOp>([&](DivOp o) {
            d[0] = gb.unbroadcast(gb.div(g, o.getRhs()), operandType(0));
            // d/db (a/b) = -(a/b)/b
            d[1] = gb.unbroadcast(gb.neg(gb.div(gb.mul(g, o.getResult()), o.getRhs())),
                                  operandType(1));
            return success();
          })
          .Case<PowOp>([&](PowOp o) {
            // d/da a^e = e a^(e-1); d/de a^e = a^e ln(a) (a > 0).
            Type elem = operandType(0).getElementType();
            Value em1 = gb.sub(o.getRhs(), gb.scalar(elem, 1.0));
            Value da = gb.mul(gb.mul(g, o.getRhs()), PowOp::create(gb.b(), gb.loc(), o.getLhs(), em1));
            d[0] = gb.unbroadcast(da, operandType(0));
            Value lna = LogOp::create(gb.b(), gb.loc(), o.getLhs().getType(), o.getLhs());
            d[1] = gb.unbroadcast(gb.mul(gb.mul(g, o.getResult()), lna), operandType(1));
            return success();
          })
          .Case<MinOp, MaxOp>([&](auto o) {
            // The selected operand gets the gradient; ties go to the left.
            Value pick = isa<MaxOp>(op)
                             ? Value(GreaterEqualOp::create(gb.b(), gb.loc(), o.getLhs(), o.getRhs()))
                             : Value(LessEqualOp::create(gb.b(), gb.loc(), o.getLhs(), o.getRhs()));
            Value zero = gb.scalar(typeOf(g).getElementType(), 0.0);
            d[0] = gb.unbroadcast(gb.where(pick, g, zero), operandType(0));
            d[1] = gb.unbroadcast(gb.where(pick, zero, g), operandType(1));
            return success();
          })
          .Case<ModOp>([&](ModOp o) {
            // Float mod is fmod: a - trunc(a / b) * b.
            if (!isa<FloatType>(operandType(0).getElementType())) return success();
            Value q = gb.div(o.getLhs(), o.getRhs());
            Type t = q.getType();
            Value trunc = gb.mul(SignOp::create(gb.b(), gb.loc(), t, q),
                                 FloorOp::create(gb.b(), gb.loc(), t,
                                                 AbsOp::create(gb.b(), gb.loc(), t, q)));
            d[0] = gb.unbroadcast(g, operandType(0));
            d[1] = gb.unbroadcast(gb.neg(gb.mul(g, trunc)), operandType(1));
            return success();
          })
          .Case<NegOp>([&](NegOp) {
            d[0] = gb.neg(g);
            return success();
          })
          .Case<AbsOp>([&](AbsOp o) {
            d[0] = gb.mul(g, SignOp::create(gb.b(), gb.loc(), o.getOperand().getType(), o.getOperand()));
            return success();
          })
          .Case<ReluOp>([&](ReluOp o) {
            Type elem = typeOf(g).getElementType();
            Value pos = GreaterOp::create(gb.b(), gb.loc(), o.getOperand(), gb.scalar(elem, 0.0));
            d[0] = gb.where(pos, g, gb.scalar(elem, 0.0));
            return success();
          })
          .Case<SqrtOp>([&](SqrtOp o) {
            d[0] = gb.div(gb.mulScalar(g, 0.5), o.getResult());
            return success();
          })
          .Case<ExpOp>([&](ExpOp o) {
            d[0] = gb.mul(g, o.getResult());
            return success();
          })
          .Case<LogOp>([&](LogOp o) {
            d[0] = gb.div(g, o.getOperand());
            return success();
          })
          .Case<ReciprocalOp>([&](ReciprocalOp o) {
            d[0] = gb.neg(gb.mul(g, gb.mul(o.getResult(), o.getResult())));
            return success();
          })
          .Case<TanhOp>([&](TanhOp o) {
            Type elem = typeOf(g).getElementType();
            Value y2 = gb.mul(o.getResult(), o.getResult());
            d[0] = gb.mul(g, gb.sub(gb.scalar(elem, 1.0), y2));
            return success();
          })
          .Case<SigmoidOp>([&](SigmoidOp o) {
            Type elem = typeOf(g).getElementType();
            d[0] = gb.mul(g, gb.mul(o.getResult(), gb.sub(gb.scalar(elem, 1.0), o.getResult())));
            return success();
          })
          .Case<ErfOp>([&](ErfOp o) {
            // 2/sqrt(pi) exp(-x^2)
            Value x = o.getOperand();
            Value e = ExpOp::create(gb.b(), gb.loc(), x.getType(), gb.neg(gb.mul(x, x)));
            d[0] = gb.mul(g, gb.mulScalar(e, 1.12837916709551257390));
            return success();
          })
          .Case<SinOp>([&](SinOp o) {
            d[0] = gb.mul(g, CosOp::create(gb.b(), gb.loc(), o.getType(), o.getOperand()));
            return success();
          })
          .Case<CosOp>([&](CosOp o) {
            d[0] = gb.neg(gb.mul(g, SinOp::create(gb.b(), gb.loc(), o.getType(), o.getOperand())));
            return success();
          })
          .Case<TanOp>([&](TanOp o) { // 1 + tan^2
            Type elem = typeOf(g).getElementType();
            d[0] = gb.mul(g, gb.add(gb.scalar(elem, 1.0), gb.mul(o.getResult(), o.getResult())));
            return success();
          })
          .Case<AsinOp, AcosOp>([&](auto o) { // +-1 / sqrt(1 - x^2)
            Type elem = typeOf(g).getElementType();
            Value x = o.getOperand();
            Value r = SqrtOp::create(gb.b(), gb.loc(), x.getType(),
                                     gb.sub(gb.scalar(elem, 1.0), gb.mul(x, x)));
            Value dx = gb.div(g, r);
            d[0] = isa<AcosOp>(op) ? gb.neg(dx) : dx;
            return success();
          })
          .Case<AtanOp>([&](AtanOp o) { // 1 / (1 + x^2)
            Type elem = typeOf(g).getElementType();
            Value x = o.getOperand();
            d[0] = gb.div(g, gb.add(gb.scalar(elem, 1.0), gb.mul(x, x)));
            return success();
          })
          .Case<SinhOp>([&](SinhOp o) {
            d[0] = gb.mul(g, CoshOp::create(gb.b(), gb.loc(), o.getType(), o.getOperand()));
            return success();
          })
          .Case<CoshOp>([&](CoshOp o) {
            d[0] = gb.mul(g, SinhOp::create(gb.b(), gb.loc(), o.getType(), o.getOperand()));
            return success();
          })
          .Case<AsinhOp, AcoshOp>([&](auto o) { // 1 / sqrt(x^2 +- 1)
            Type elem = typeOf(g).getElementType();
            Value x = o.getOperand();
            Value one = gb.scalar(elem, 1.0);
            Value x2 = gb.mul(x, x);
            Value r = SqrtOp::create(gb.b(), gb.loc(), x.getType(),
                                     isa<AsinhOp>(op) ? gb.add(x2, one) : gb.sub(x2, one));
            d[0] = gb.div(g, r);
            return success();
          })
          .Case<AtanhOp>([&](AtanhOp o) { // 1 / (1 - x^2)
            Type elem = typeOf(g).getElementType();
            Value x = o.getOperand();
            d[0] = gb.div(g, gb.sub(gb.scalar(elem, 1.0), gb.mul(x, x)));
            return success();
          })
          .Case<SoftplusOp>([&](SoftplusOp o) {
            d[0] = gb.mul(g, SigmoidOp::create(gb.b(), gb.loc(), o.getType(), o.getOperand()));
            return success();
          })
          .Case<GeluOp>([&](GeluOp o) {
            d[0] = GeluGradOp::create(gb.b(), gb.loc(), o.getType(), o.getOperand(), g,
                                      o.getApproximateAttr());
            return success();
          })
          .Case<CastOp>([&](CastOp o) {
            if (!isa<FloatType>(operandType(0).getElementType())) return success();
            d[0] = CastOp::create(gb.b(), gb.loc(), operandType(0), g);
            return success();
          })
          .Case<WhereOp>([&](WhereOp o) {
            Value zero = gb.scalar(typeOf(g).getElementType(), 0.0);
            d[1] = gb.unbroadcast(gb.where(o.getCondition(), g, zero), operandType(1));
            d[2] = gb.unbroadcast(gb.where(o.getCondition(), zero, g), operandType(2));
            return success();
          })
          .Case<MatmulOp>([&](MatmulOp o) -> LogicalResult {
            if (o.getTransposeLhs() || o.getTransposeRhs())
              return o.emitError("autodiff of a matmul with transposed operands: differentiate "
                                 "before canonicalization folds transposes into it");
            RankedTensorType at = operandType(0), bt = operandType(1);
            if (at.getRank() < 2 || bt.getRank() < 2) {
              // numpy's vector cases: differentiate the matrix product with
              // the unit dimensions restored, then drop them again.
              SmallVector<int64_t> as(at.getShape()), bs(bt.getShape()), gs(typeOf(g).getShape());
              if (at.getRank() == 1) as.insert(as.begin(), 1);
              if (bt.getRank() == 1) bs.push_back(1);
              Value a2 = gb.reshape(o.getLhs(), as), b2 = gb.reshape(o.getRhs(), bs);
              Value y2 = MatmulOp::create(gb.b(), gb.loc(), a2, b2);
              Value g2 = gb.reshape(g, typeOf(y2).getShape());
              Value da = gb.unbroadcast(MatmulOp::create(gb.b(), gb.loc(), g2, gb.swapLast2(b2)),
                                        typeOf(a2));
              Value db = gb.unbroadcast(MatmulOp::create(gb.b(), gb.loc(), gb.swapLast2(a2), g2),
                                        typeOf(b2));
              d[0] = gb.reshape(da, at.getShape());
              d[1] = gb.reshape(db, bt.getShape());
              (void)gs;
              return success();
            }
            // dA = g B^T (B broadcast over A's batch), reduced to A.
            d[0] = gb.unbroadcast(MatmulOp::create(gb.b(), gb.loc(), g, gb.swapLast2(o.getRhs())), at);
            if (bt.getRank() == 2) {
              // A shared weight: one GEMM over all batch rows,
              // [K, rows] x [rows, N], not a batch of products then a sum.
              int64_t k = at.getShape().back(), n = bt.getShape().back();
              int64_t rows = at.getNumElements() / k;
              Value a2 = gb.reshape(o.getLhs(), {rows, k});
              Value g2 = gb.reshape(g, {rows, n});
              d[1] = MatmulOp::create(gb.b(), gb.loc(), gb.transpose(a2, {1, 0}), g2);
            } else {
              d[1] = gb.unbroadcast(
                  MatmulOp::create(gb.b(), gb.loc(), gb.swapLast2(o.getLhs()), g), bt);
            }
            return success();
          })
          .Case<ReduceSumOp, ReduceMeanOp>([&](auto o) {
            RankedTensorType in = operandType(0);
            SmallVector<int64_t> kept(in.getShape());
            int64_t count = 1;
            for (int64_t a : o.getAxes()) {
              kept[a] = 1;
              count *= in.getDimSize(a);
            }
            Value gk = gb.expand(gb.reshape(g, kept), in);
            if (isa<ReduceMeanOp>(op)) gk = gb.mulScalar(gk, 1.0 / static_cast<double>(count));
            d[0] = gk;
            return success();
          })
          .Case<ReduceProdOp>([&](ReduceProdOp o) {
            // d prod / d x_i = prod / x_i (defined where x_i != 0).
            RankedTensorType in = operandType(0);
            SmallVector<int64_t> kept(in.getShape());
            for (int64_t a : o.getAxes()) kept[a] = 1;
            Value y = gb.expand(gb.reshape(o.getResult(), kept), in);
            Value gk = gb.expand(gb.reshape(g, kept), in);
            d[0] = gb.div(gb.mul(gk, y), o.getOperand());
            return success();
          })
          .Case<ReduceMaxOp, ReduceMinOp>([&](auto o) {
            RankedTensorType in = operandType(0);
            SmallVector<int64_t> kept(in.getShape());
            for (int64_t a : o.getAxes()) kept[a] = 1;
            Value y = gb.reshape(o.getResult(), kept);
            Value hit = EqualOp::create(gb.b(), gb.loc(), o.getOperand(), y);
            Value gk = gb.expand(gb.reshape(g, kept), in);
            d[0] = gb.where(hit, gk, gb.scalar(in.getElementType(), 0.0));
            return success();
          })
          .Case<SoftmaxOp>([&](SoftmaxOp o) {
            Value y = o.getResult();
            Value s = gb.reduceSum(gb.mul(g, y), {o.getAxis()}, /*keepdims=*/true);
            d[0] = gb.mul(y, gb.sub(g, s));
            return success();
          })
          .Case<LogSoftmaxOp>([&](LogSoftmaxOp o) {
            Value p = ExpOp::create(gb.b(), gb.loc(), o.getType(), o.getResult());
            Value s = gb.reduceSum(g, {o.getAxis()}, /*keepdims=*/true);
            d[0] = gb.sub(g, gb.mul(p, s));
            return success();
          })
          .Case<LayerNormOp>([&](LayerNormOp o) {
            auto lg = LayerNormGradOp::create(
                gb.b(), gb.loc(),
                TypeRange{o.getType(), o.getScale().getType(), o.getScale().getType()},
                o.getOperand(), o.getScale(), g, o.getAxisAttr(), o.getEpsilonAttr());
            d[0] = lg.getDOperand();
            d[1] = lg.getDScale();
            if (o.getBias()) d[2] = lg.getDBias();
            return success();
          })
          .Case<ReshapeOp, SqueezeOp, UnsqueezeOp>([&](auto) {
            d[0] = gb.reshape(g, operandType(0).getShape());
            return success();
          })
          .Case<TransposeOp>([&](TransposeOp o) {
            ArrayRef<int64_t> perm = o.getPermutation();
            SmallVector<int64_t> inv(perm.size());
            for (auto [i, p] : llvm::enumerate(perm)) inv[p] = static_cast<int64_t>(i);
            d[0] = gb.transpose(g, inv);
            return success();
          })
          .Case<ExpandOp>([&](ExpandOp) {
            d[0] = gb.unbroadcast(g, operandType(0));
            return success();
          })
          .Case<SliceOp>([&](SliceOp o) {
            d[0] = InsertSliceOp::create(gb.b(), gb.loc(), operandType(0), g, o.getStartsAttr(),
                                         o.getStepsAttr());
            return success();
          })
          .Case<ConcatOp>([&](ConcatOp o) {
            int64_t axis = o.getAxis(), offset = 0;
            for (unsigned i = 0; i < op->getNumOperands(); ++i) {
              RankedTensorType t = operandType(i);
              SmallVector<int64_t> starts(t.getRank(), 0), steps(t.getRank(), 1);
              starts[axis] = offset;
              offset += t.getDimSize(axis);
              d[i] = SliceOp::create(gb.b(), gb.loc(), t, g, gb.b().getDenseI64ArrayAttr(starts),
                                     gb.b().getDenseI64ArrayAttr(steps));
            }
            return success();
          })
          .Case<SplitOp>([&](SplitOp o) {
            SmallVector<Value> parts;
            for (auto [r, dr] : llvm::zip(op->getResults(), dres))
              parts.push_back(dr ? dr : gb.zeros(typeOf(r)));
            d[0] = ConcatOp::create(gb.b(), gb.loc(), ValueRange(parts),
                                    {gb.b().getNamedAttr("axis", o.getAxisAttr())});
            return success();
          })
          .Case<GatherOp>([&](GatherOp o) {
            d[0] = GatherGradOp::create(gb.b(), gb.loc(), operandType(0), o.getIndices(), g,
                                        o.getAxisAttr());
            return success();
          })
          .Case<ConvOp>([&](ConvOp o) {
            auto cg = ConvGradOp::create(gb.b(), gb.loc(), TypeRange{operandType(0), operandType(1)},
                                         o.getInput(), o.getWeight(), g, o.getStridesAttr(),
                                         o.getDilationsAttr(), o.getPadsAttr(), o.getGroupAttr());
            d[0] = cg.getDInput();
            d[1] = cg.getDWeight();
            if (o.getBias()) {
              SmallVector<int64_t> axes{0};
              for (int64_t i = 2; i < typeOf(g).getRank(); ++i) axes.push_back(i);
              d[2] = gb.reduceSum(g, axes, /*keepdims=*/false);
            }
            return success();
          })
          .Case<PoolOp>([&](PoolOp o) {
            d[0] = PoolGradOp::create(gb.b(), gb.loc(), operandType(0), o.getInput(), g,
                                      o.getKindAttr(), o.getKernelAttr(), o.getStridesAttr(),
                                      o.getDilationsAttr(), o.getPadsAttr(),
                                      o.getCountIncludePadAttr());
            return success();
          })
          .Case<GatherElementsOp>([&](GatherElementsOp o) {
            d[0] = GatherElementsGradOp::create(gb.b(), gb.loc(), operandType(0), o.getIndices(), g,
                                                o.getAxisAttr());
            return success();
          })
          .Case<TriluOp>([&](TriluOp o) {
            d[0] = TriluOp::create(gb.b(), gb.loc(), g.getType(), g, o.getUpperAttr(), o.getKAttr());
            return success();
          })
          .Case<CumSumOp>([&](CumSumOp o) {
            // The adjoint of a running sum is the running sum the other way.
            d[0] = CumSumOp::create(gb.b(), gb.loc(), g.getType(), g, o.getAxisAttr(),
                                    o.getExclusiveAttr(), gb.b().getBoolAttr(!o.getReverse()));
            return success();
          })
          .Case<SoftmaxCrossEntropyOp>([&](SoftmaxCrossEntropyOp o) {
            d[0] = SoftmaxCrossEntropyGradOp::create(gb.b(), gb.loc(), operandType(0),
                                                     o.getLogits(), o.getLabels(), g,
                                                     o.getIgnoreIndexAttr());
            return success();
          })
          .Case<FloorOp, CeilOp, RoundOp, SignOp>([&](auto) {
            return success(); // piecewise constant: zero gradient
          })
          .Default([&](Operation *) -> LogicalResult {
            return op->emitError("no gradient rule for '")
                   << op->getName() << "' on the path from the parameters to the loss";
          });
  if (failed(ok)) return failure();
  return d;
}

} // namespace

FailureOr<SmallVector<Value>> mlir::ds::differentiate(OpBuilder &b, Value loss, Value seed,
                                                      ArrayRef<Value> wrt) {
  // Values that depend on a differentiated value ...
  llvm::SetVector<Value> forward(wrt.begin(), wrt.end());
  Block *block = loss.getParentBlock();
  for (Operation &op : *block)
    if (llvm::any_of(op.getOperands(), [&](Value v) { return forward.contains(v); }))
      for (Value r : op.getResults()) forward.insert(r);
  // ... and that the loss depends on: only these carry adjoints.
  llvm::DenseSet<Value> needed;
  needed.insert(loss);
  SmallVector<Operation *> order;
  for (Operation &op : llvm::reverse(*block)) {
    if (!llvm::any_of(op.getResults(), [&](Value r) { return needed.contains(r); })) continue;
    // Leaves (the ops defining `wrt` values) have no differentiated operand.
    if (!llvm::any_of(op.getOperands(), [&](Value v) { return forward.contains(v); })) continue;
    order.push_back(&op);
    for (Value v : op.getOperands())
      if (forward.contains(v)) needed.insert(v);
  }

  llvm::DenseMap<Value, Value> adjoint;
  adjoint[loss] = seed;
  for (Operation *op : order) {
    SmallVector<Value> dres;
    bool any = false;
    for (Value r : op->getResults()) {
      Value a = adjoint.lookup(r);
      dres.push_back(a);
      any |= static_cast<bool>(a);
    }
    if (!any) continue;
    GradientBuilder gb(b, op->getLoc());
    FailureOr<SmallVector<Value>> d = gradientOf(op, dres, gb);
    if (failed(d)) return failure();
    for (auto [operand, g] : llvm::zip(op->getOperands(), *d)) {
      if (!g || !needed.contains(operand)) continue;
      Value &slot = adjoint[operand];
      slot = slot ? Value(AddOp::create(b, op->getLoc(), slot, g)) : g;
    }
  }
  SmallVector<Value> grads;
  for (Value v : wrt) grads.push_back(adjoint.lookup(v));
  return grads;
}

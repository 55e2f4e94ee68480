//===- FuseMatmulEpilogues.cpp - what follows a product, into it ----------===//
//
// A transformer layer's products are each followed by memory-bound
// elementwise work on the whole result: the bias add, the activation, the
// residual add (or, in Llama's MLP, the gate multiply), and in training the
// add of each weight gradient into its accumulator. Folded into the product
// (ds.fused_matmul) that work happens on each block of the result while the
// GEMM still has it in cache, or as oneDNN post-ops.
//
// The chain is followed step by step from the product, each step optional
// and in the order the math allows: scale, bias, activation, addend (or
// the GELU gradient whose dy the product is: the backward of an MLP). A
// softmax over the product's rows (attention's scores), or the softmax
// gradient whose dy the product is, ends a chain of only a scale: the
// kernel normalizes each row block while it is in cache. Every
// value on the way must be read only by the next step, so nothing outside
// needs an intermediate the fused op no longer produces.
//
//===----------------------------------------------------------------------===//
#include "dialects/ds/DSOps.h"
#include "ds/Transforms/Passes.h"
#include "ds/Transforms/Scales.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/SetVector.h"

namespace mlir::ds {
#define GEN_PASS_DEF_FUSEMATMULEPILOGUESPASS
#include "ds/Transforms/Passes.h.inc"
} // namespace mlir::ds

using namespace mlir;
using namespace mlir::ds;

namespace {

RankedTensorType tensorType(Value v) { return cast<RankedTensorType>(v.getType()); }

/// What has been folded so far, and the value the chain has reached.
struct Epilogue {
  Operation *product; // a ds.matmul, or a ds.quantized_matmul with no epilogue yet
  Value current;                          // the chain's value so far
  Value lhs, rhs;                         // the operands, scales taken out
  SmallVector<Operation *> absorbed;      // ops replaced by the fused op
  double alpha = 1.0;
  Value bias, addend;                     // bias as [N]; addend in `current`'s type
  Activation activation = Activation::None;
  Combine combine = Combine::Add;
  Value pre;            // the activation's input, read elsewhere too (pre_activation)
  bool softmax = false; // rows normalized (ds.softmax / ds.masked_softmax)
  Value mask;           // the softmax's or softmax gradient's mask
  FloatAttr maskFill;
  FloatAttr roundScale; // a quantized product's result rounded to a uint8 grid and back
  IntegerAttr roundZero;

  int64_t columns() { return tensorType(product->getResult(0)).getShape().back(); }
  /// A quantized product takes the element-wise epilogue only (no row
  /// epilogues, gradients or pre-activation).
  bool quantized() const { return isa<QuantizedMatmulOp>(product); }
  bool hasActivation() const { return activation != Activation::None; }
};

/// The operand of a binary op that is not `v`, or null when both are `v`.
Value otherOperand(Operation *op, Value v) {
  Value a = op->getOperand(0), b = op->getOperand(1);
  if (a == v && b != v) return b;
  if (b == v && a != v) return a;
  return nullptr;
}

/// A value that is only the [N] row vector broadcast over rows: [N] or
/// [1, ..., 1, N].
bool isRowVector(Value v, int64_t n) {
  ArrayRef<int64_t> s = tensorType(v).getShape();
  return !s.empty() && s.back() == n &&
         llvm::all_of(s.drop_back(), [](int64_t d) { return d == 1; });
}

/// The activation `op` applies to `x`, with the ops it takes (silu is two).
std::optional<Activation> activationOf(Operation *op, Value x,
                                       SmallVectorImpl<Operation *> &ops) {
  std::optional<Activation> a;
  if (isa<ReluOp>(op)) a = Activation::Relu;
  else if (isa<SigmoidOp>(op)) a = Activation::Sigmoid;
  else if (isa<TanhOp>(op)) a = Activation::Tanh;
  else if (auto g = dyn_cast<GeluOp>(op))
    a = g.getApproximate() == GeluApproximation::Tanh ? Activation::GeluTanh : Activation::Gelu;
  else if (isa<MaxOp>(op)) {
    Value other = otherOperand(op, x);
    if (other && tensorType(other).getNumElements() == 1 && knownFloatSplat(other) == 0.0)
      a = Activation::Relu;
  }
  if (a) ops.push_back(op);
  return a;
}

/// x * sigmoid(x): x has exactly these two users.
bool isSilu(Value x, Operation *&sigmoid, Operation *&mul) {
  if (!llvm::hasNItems(x.getUsers(), 2)) return false;
  sigmoid = mul = nullptr;
  for (Operation *u : x.getUsers()) {
    if (isa<SigmoidOp>(u)) sigmoid = u;
    else if (isa<MulOp>(u)) mul = u;
  }
  if (!sigmoid || !mul || !sigmoid->getResult(0).hasOneUse() ||
      *sigmoid->getResult(0).getUsers().begin() != mul)
    return false;
  return otherOperand(mul, x) == sigmoid->getResult(0);
}

struct FuseMatmulEpiloguesPass
    : public mlir::ds::impl::FuseMatmulEpiloguesPassBase<FuseMatmulEpiloguesPass> {
  using FuseMatmulEpiloguesPassBase::FuseMatmulEpiloguesPassBase;
  void runOnOperation() override {
    SmallVector<MatmulOp> products;
    getOperation().walk([&](MatmulOp m) {
      // The epilogue's columns are the result's last dimension, which a
      // rank-1 right operand (a matrix-vector product) drops.
      if (tensorType(m.getLhs()).getElementType().isF32() &&
          tensorType(m.getRhs()).getElementType().isF32() && tensorType(m.getRhs()).getRank() >= 2)
        products.push_back(m);
    });
    llvm::SetVector<Operation *> scales; // a multiply several products read: once
    for (MatmulOp m : products) {
      Epilogue e{m, m.getResult(), m.getLhs(), m.getRhs()};
      for (Value *operand : {&e.lhs, &e.rhs})
        if (Operation *mul = takeScale(*operand, e.alpha)) scales.insert(mul);
      while (step(e)) {
      }
      if (!e.bias && !e.addend && !e.hasActivation() && !e.softmax && e.alpha == 1.0) continue;
      replace(e);
    }
    // Quantized products raised from an int8 model (ds-raise-quantized-matmul)
    // take their bias, activation and residual the same way.
    SmallVector<QuantizedMatmulOp> quantized;
    getOperation().walk([&](QuantizedMatmulOp q) {
      if (!q.getBias() && !q.getAddend() && q.getActivation() == Activation::None &&
          q.getAlpha().convertToDouble() == 1.0)
        quantized.push_back(q);
    });
    for (QuantizedMatmulOp q : quantized) {
      Epilogue e{q, q.getResult(), q.getLhs(), q.getWeight()};
      while (step(e)) {
      }
      // Then a QDQ model's QuantizeLinear/DequantizeLinear of the result,
      // applied as it is stored (not a pass over it).
      if (e.current.hasOneUse())
        if (auto fq = dyn_cast<FakeQuantizeOp>(*e.current.getUsers().begin())) {
          e.absorbed.push_back(fq);
          e.current = fq.getResult();
          e.roundScale = fq.getScaleAttr();
          e.roundZero = fq.getZeroPointAttr();
        }
      if (!e.bias && !e.addend && !e.hasActivation() && e.alpha == 1.0 && !e.roundScale) continue;
      replace(e);
    }
    // A quantized product between reshapes to and from 2-D (onnxruntime's
    // Gemm-based linear layers flatten the batch) takes the batched operand
    // itself: no copy when its result is a graph output (a view cannot be).
    SmallVector<QuantizedMatmulOp> flattened;
    getOperation().walk([&](QuantizedMatmulOp q) { flattened.push_back(q); });
    for (QuantizedMatmulOp q : flattened) unflatten(q);
    for (Operation *mul : scales)
      if (mul->use_empty()) mul->erase();
  }

  void unflatten(QuantizedMatmulOp q) {
    auto in = q.getLhs().getDefiningOp<ReshapeOp>();
    if (!in || q.getAddend() || !q.getResult().hasOneUse()) return;
    auto out = dyn_cast<ReshapeOp>(*q.getResult().getUsers().begin());
    if (!out) return;
    ArrayRef<int64_t> x = tensorType(in.getOperand()).getShape();
    ArrayRef<int64_t> y = tensorType(out.getResult()).getShape();
    if (x.empty() || y.size() != x.size() || x.back() != tensorType(q.getLhs()).getShape().back() ||
        x.drop_back() != y.drop_back())
      return;
    OpBuilder b(q);
    Operation *batched = b.clone(*q);
    batched->setOperand(0, in.getOperand());
    batched->getResult(0).setType(out.getResult().getType());
    out.getResult().replaceAllUsesWith(batched->getResult(0));
    out->erase();
    q->erase();
    if (in->use_empty()) in->erase();
  }

  /// An operand `x * c` (c a known scalar, Scales.h's movableScale) read only by
  /// products: (c x) y = c (x y), so each product reads x and scales its
  /// alpha by c, and the multiply (a pass over x: the scaled gradient of
  /// attention scores, say) goes once no product reads it.
  Operation *takeScale(Value &operand, double &alpha) {
    auto mul = operand.getDefiningOp<MulOp>();
    if (!mul || !llvm::all_of(mul->getUsers(), [](Operation *u) { return isa<MatmulOp>(u); }))
      return nullptr;
    for (auto [x, c] : {std::pair{mul.getLhs(), mul.getRhs()}, {mul.getRhs(), mul.getLhs()}}) {
      if (x.getType() != operand.getType() || tensorType(c).getNumElements() != 1) continue;
      std::optional<double> k = knownFloatSplat(c);
      if (!k || !movableScale(*k) || !movableScale(alpha * *k)) continue;
      alpha *= *k;
      operand = x;
      return mul;
    }
    return nullptr;
  }

  /// Folds the next op of the chain into `e`; false when the chain ends.
  bool step(Epilogue &e) {
    Value x = e.current;
    // x * sigmoid(x) reads x twice.
    Operation *sig = nullptr, *mul = nullptr;
    if (!e.hasActivation() && !e.addend && isSilu(x, sig, mul)) {
      e.activation = Activation::Silu;
      e.absorbed.append({sig, mul});
      e.current = mul->getResult(0);
      return true;
    }
    if (!x.hasOneUse()) return keepPreActivation(e);
    Operation *op = *x.getUsers().begin();
    if (op->getNumResults() != 1 || op->getBlock() != e.product->getBlock()) return false;
    if (e.quantized() && isa<GeluGradOp>(op)) return false;
    Value result = op->getResult(0);
    // A reshape keeping the last dimension changes nothing the epilogue
    // computes; the fused op works in the product's shape.
    if (isa<ReshapeOp>(op)) {
      ArrayRef<int64_t> s = tensorType(result).getShape();
      if (s.empty() || s.back() != e.columns()) return false;
      e.absorbed.push_back(op);
      e.current = result;
      return true;
    }
    if (result.getType() != x.getType()) return false; // broadcasting to more: not ours
    Value other = isa<AddOp, MulOp, DivOp, MaxOp>(op) ? otherOperand(op, x) : Value();
    // 1. scale, before anything else; one: two multiplies by c1 and c2 are
    // not one by c1 * c2 where p * c1 overflows or underflows.
    if (isa<MulOp, DivOp>(op) && other && !e.bias && !e.hasActivation() && !e.addend &&
        e.alpha == 1.0 &&
        tensorType(other).getNumElements() == 1 && (isa<MulOp>(op) || op->getOperand(0) == x)) {
      if (std::optional<double> c = knownFloatSplat(other); c && *c != 0.0 && std::isfinite(*c)) {
        e.alpha = isa<MulOp>(op) ? e.alpha * *c : e.alpha / *c;
        e.absorbed.push_back(op);
        e.current = result;
        return true;
      }
    }
    // 2. bias, before the activation.
    if (isa<AddOp>(op) && other && !e.bias && !e.hasActivation() && !e.addend &&
        isRowVector(other, e.columns()) && tensorType(other).getElementType().isF32()) {
      e.bias = other;
      e.absorbed.push_back(op);
      e.current = result;
      return true;
    }
    // 3. the activation.
    if (!e.hasActivation() && !e.addend) {
      SmallVector<Operation *> ops;
      if (std::optional<Activation> a = activationOf(op, x, ops)) {
        e.activation = *a;
        e.absorbed.append(ops);
        e.current = result;
        return true;
      }
    }
    // 4. a softmax over the product's rows, or the gradient of one the
    // product is the dy of: last, after nothing but a scale, on the
    // product's own shape (a mask broadcasts to that).
    if (rowEpilogues && !e.quantized() && !e.bias && !e.hasActivation() && !e.addend &&
        x.getType() == e.product->getResult(0).getType()) {
      const int64_t last = tensorType(x).getRank() - 1;
      if (auto sm = dyn_cast<MaskedSoftmaxOp>(op); sm && sm.getAxis() == last) {
        e.softmax = true;
        e.mask = sm.getMask();
        e.maskFill = sm.getMaskFillAttr();
      } else if (auto plain = dyn_cast<SoftmaxOp>(op); plain && plain.getAxis() == last) {
        e.softmax = true;
      } else if (auto sg = dyn_cast<SoftmaxGradOp>(op);
                 sg && sg.getDy() == x && sg.getSoftmax() != x && sg.getAxis() == last) {
        e.addend = sg.getSoftmax();
        e.combine = Combine::SoftmaxGrad;
        e.mask = sg.getMask();
      }
      if (e.softmax || e.addend) {
        e.absorbed.push_back(op);
        e.current = result;
        return false;
      }
    }
    // 5. a residual, gate or accumulator of the result's own shape, last;
    // or, in a backward, the GELU gradient the product is the dy of.
    if (auto gg = dyn_cast<GeluGradOp>(op); gg && !e.addend && gg.getDy() == x &&
                                            gg.getOperand() != x &&
                                            gg.getOperand().getType() == x.getType()) {
      e.addend = gg.getOperand();
      e.combine = gg.getApproximate() == GeluApproximation::Tanh ? Combine::GeluTanhGrad
                                                                 : Combine::GeluGrad;
      e.absorbed.push_back(op);
      e.current = result;
      return false;
    }
    if (isa<AddOp, MulOp>(op) && other && !e.addend && other.getType() == x.getType()) {
      e.addend = other;
      e.combine = isa<MulOp>(op) ? Combine::Mul : Combine::Add;
      e.absorbed.push_back(op);
      e.current = result;
      return false;
    }
    return false;
  }

  /// A training forward's activation of the product (+ bias), whose input
  /// the backward reads too: the activation is folded all the same, and
  /// the product also stores its input (pre_activation) for the others.
  /// They must come after the activation (the fused op's place).
  bool keepPreActivation(Epilogue &e) {
    Value x = e.current;
    if (e.quantized() || e.hasActivation() || e.addend || e.softmax ||
        x.getType() != e.product->getResult(0).getType())
      return false;
    // An inference weight (a constant) is packed once for oneDNN's matmul,
    // which has no second result: that and a separate activation is faster.
    if (Operation *w = e.rhs.getDefiningOp(); w && isa<ConstantOp, ParameterOp>(w)) return false;
    Operation *act = nullptr;
    std::optional<Activation> found;
    for (Operation *u : x.getUsers()) {
      SmallVector<Operation *> ops;
      if (u->getBlock() != e.product->getBlock()) continue;
      if (std::optional<Activation> a = activationOf(u, x, ops)) {
        if (act) return false; // two activations of it: leave them
        act = u;
        found = a;
      }
    }
    if (!act || !llvm::all_of(x.getUsers(), [&](Operation *u) {
          return u == act || (u->getBlock() == act->getBlock() && act->isBeforeInBlock(u));
        }))
      return false;
    e.activation = *found;
    e.pre = x;
    e.absorbed.push_back(act);
    e.current = act->getResult(0);
    return false;
  }

  void replace(Epilogue &e) {
    Operation *m = e.product;
    // After the last absorbed op (the product itself when only operand
    // scales were taken).
    Operation *last = e.absorbed.empty() ? m : e.absorbed.back();
    OpBuilder b(last);
    Location loc = last->getLoc();
    RankedTensorType productType = tensorType(m->getResult(0));
    Value bias = e.bias, addend = e.addend;
    if (bias && tensorType(bias).getRank() != 1)
      bias = ReshapeOp::create(b, loc, RankedTensorType::get({e.columns()}, b.getF32Type()), bias);
    if (addend && addend.getType() != productType)
      addend = ReshapeOp::create(b, loc, productType, addend);
    Value result, pre;
    if (auto q = dyn_cast<QuantizedMatmulOp>(m)) {
      result = QuantizedMatmulOp::create(
                   b, loc, productType, q.getLhs(), q.getWeight(), q.getScale(), q.getZeroPoint(),
                   bias, addend, q.getBitsAttr(), q.getGroupSizeAttr(), q.getActivationQuantAttr(),
                   b.getF64FloatAttr(e.alpha), ActivationAttr::get(b.getContext(), e.activation),
                   CombineAttr::get(b.getContext(), e.combine), q.getInputScaleAttr(),
                   q.getInputZeroPointAttr(), e.roundScale, e.roundZero)
                   .getResult();
    } else {
      auto mm = cast<MatmulOp>(m);
      auto fused = FusedMatmulOp::create(
          b, loc, productType, e.pre ? Type(productType) : Type(), e.lhs, e.rhs, bias, addend,
          e.mask, mm.getTransposeLhsAttr(), mm.getTransposeRhsAttr(), b.getF64FloatAttr(e.alpha),
          ActivationAttr::get(b.getContext(), e.activation),
          CombineAttr::get(b.getContext(), e.combine), DenseI64ArrayAttr(), DenseI64ArrayAttr(),
          IntegerAttr(), DenseI64ArrayAttr(), DenseI64ArrayAttr(), IntegerAttr(),
          DenseI64ArrayAttr(), DenseI64ArrayAttr(), e.softmax ? b.getUnitAttr() : UnitAttr(),
          e.maskFill);
      result = fused.getResult();
      pre = fused.getPreActivation();
    }
    if (result.getType() != e.current.getType())
      result = ReshapeOp::create(b, loc, e.current.getType(), result);
    if (e.pre) e.pre.replaceAllUsesWith(pre);
    e.current.replaceAllUsesWith(result);
    for (Operation *op : llvm::reverse(e.absorbed)) op->erase();
    m->erase();
    ++numFused;
    numOpsFused += e.absorbed.size();
  }
};

} // namespace

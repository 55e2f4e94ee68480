//===- FoldBatchNorm.cpp - per-channel affine ops into the convolution ----===//
//
// An inference BatchNormalization after a convolution is a per-output-
// channel affine map, y = a_c * conv + d_c (the importer writes it as a
// subtract, divide, multiply and add by per-channel constants). With a
// constant weight and bias the map folds into them at compile time:
// W'[c] = a_c W[c], b'[c] = a_c b[c] + d_c, and the normalization costs
// nothing at run time, as PyTorch's and onnxruntime's Conv+BN fusions do.
//
//===----------------------------------------------------------------------===//
#include "dialects/ds/DSOps.h"
#include "ds/Plan/KernelBridge.h"
#include "ds/Transforms/Passes.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/DenseSet.h"

#include <cmath>

namespace mlir::ds {
#define GEN_PASS_DEF_FOLDBATCHNORMPASS
#include "ds/Transforms/Passes.h.inc"
} // namespace mlir::ds

using namespace mlir;
using namespace mlir::ds;

namespace {

RankedTensorType tensorType(Value v) { return cast<RankedTensorType>(v.getType()); }

/// The f32 values of a constant or parameter, or nullopt.
std::optional<std::vector<float>> constantFloats(Value v) {
  auto t = tensorType(v);
  if (!t.getElementType().isF32()) return std::nullopt;
  Attribute attr;
  if (auto c = v.getDefiningOp<ConstantOp>()) attr = c.getValue();
  else if (auto p = v.getDefiningOp<ParameterOp>()) attr = p.getValue();
  else return std::nullopt;
  if (auto dense = dyn_cast<DenseFPElementsAttr>(attr); dense && dense.isSplat())
    return std::vector<float>(t.getNumElements(), dense.getSplatValue<float>());
  FailureOr<std::vector<uint8_t>> bytes = constantBytes(attr, v.getLoc());
  if (failed(bytes) || bytes->size() != t.getNumElements() * sizeof(float)) return std::nullopt;
  std::vector<float> out(t.getNumElements());
  std::memcpy(out.data(), bytes->data(), bytes->size());
  return out;
}

/// The values of `v` (one, or one per channel), computed in f64 from
/// constants and parameters through reshapes and the arithmetic the
/// importer writes for a normalization (var + eps, its square root); nullopt
/// for anything else.
std::optional<std::vector<double>> evaluate(Value v, int depth = 0) {
  Operation *def = v.getDefiningOp();
  if (!def || depth > 16) return std::nullopt;
  if (isa<ConstantOp, ParameterOp>(def)) {
    std::optional<std::vector<float>> f = constantFloats(v);
    if (!f) return std::nullopt;
    return std::vector<double>(f->begin(), f->end());
  }
  if (isa<ReshapeOp, SqueezeOp, UnsqueezeOp>(def)) return evaluate(def->getOperand(0), depth + 1);
  if (isa<SqrtOp, ReciprocalOp>(def)) {
    auto x = evaluate(def->getOperand(0), depth + 1);
    if (!x) return std::nullopt;
    for (double &e : *x) e = isa<SqrtOp>(def) ? std::sqrt(e) : 1.0 / e;
    return x;
  }
  if (isa<AddOp, SubOp, MulOp, DivOp>(def)) {
    auto a = evaluate(def->getOperand(0), depth + 1), b = evaluate(def->getOperand(1), depth + 1);
    if (!a || !b || (a->size() != 1 && b->size() != 1 && a->size() != b->size())) return std::nullopt;
    std::vector<double> out(std::max(a->size(), b->size()));
    for (size_t i = 0; i < out.size(); ++i) {
      double x = (*a)[a->size() == 1 ? 0 : i], y = (*b)[b->size() == 1 ? 0 : i];
      out[i] = isa<AddOp>(def) ? x + y : isa<SubOp>(def) ? x - y : isa<MulOp>(def) ? x * y : x / y;
    }
    return out;
  }
  return std::nullopt;
}

/// `v` as one value per channel of an [N, M, ...] result: one value, or
/// values varying along dimension 1 only.
std::optional<std::vector<double>> perChannel(Value v, RankedTensorType result) {
  ArrayRef<int64_t> s = tensorType(v).getShape();
  const int64_t rank = result.getRank(), m = result.getShape()[1];
  if (static_cast<int64_t>(s.size()) > rank) return std::nullopt;
  const int64_t offset = rank - static_cast<int64_t>(s.size());
  for (int64_t d = 0; d < static_cast<int64_t>(s.size()); ++d)
    if (s[d] != 1 && !(d + offset == 1 && s[d] == m)) return std::nullopt;
  std::optional<std::vector<double>> values = evaluate(v);
  if (!values) return std::nullopt;
  if (values->size() == 1) return std::vector<double>(m, values->front());
  if (static_cast<int64_t>(values->size()) != m) return std::nullopt;
  return values;
}

/// Erases the producers of `values` that nothing reads any more, and what
/// only they read. A value may be listed twice, or be read by another
/// listed value's producer (statistics CSE'd into one constant): each op
/// is looked at through the worklist, never through an erased value.
void eraseUnused(ArrayRef<Value> values) {
  SmallVector<Operation *> work;
  for (Value v : values)
    if (Operation *def = v.getDefiningOp()) work.push_back(def);
  llvm::DenseSet<Operation *> erased;
  while (!work.empty()) {
    Operation *op = work.pop_back_val();
    if (erased.contains(op) || !op->use_empty() || !isMemoryEffectFree(op)) continue;
    for (Value o : op->getOperands())
      if (Operation *def = o.getDefiningOp()) work.push_back(def);
    erased.insert(op);
    op->erase();
  }
}

/// y = a * x + d per channel: the ops from `x` on, each its running
/// value's only reader, that add, subtract, multiply or divide by
/// per-channel constants (an inference normalization).
struct AffineChain {
  std::vector<double> a, d;
  SmallVector<Operation *> chain;
  SmallVector<Value> sideInputs; // the constants' values, per op
  Value end;                     // the chain's result
};

AffineChain followAffine(Value x, Operation *first = nullptr) {
  auto type = tensorType(x);
  AffineChain f;
  f.end = x;
  if (type.getRank() < 2 || !type.getElementType().isF32()) return f;
  const int64_t m = type.getShape()[1];
  f.a.assign(m, 1.0);
  f.d.assign(m, 0.0);
  // `first` (one of x's readers) starts the chain even when x has others.
  while (first || f.end.hasOneUse()) {
    Operation *op = first ? first : *f.end.getUsers().begin();
    first = nullptr;
    if (!isa<AddOp, SubOp, MulOp, DivOp>(op) || op->getResult(0).getType() != type) break;
    Value lhs = op->getOperand(0), rhs = op->getOperand(1);
    bool left = lhs == f.end;
    if (left == (rhs == f.end)) break;
    // Subtraction and division only with the running value on the left.
    if (!left && isa<SubOp, DivOp>(op)) break;
    std::optional<std::vector<double>> c = perChannel(left ? rhs : lhs, type);
    if (!c) break;
    for (int64_t k = 0; k < m; ++k) {
      const double ck = (*c)[k];
      if (isa<AddOp>(op)) f.d[k] += ck;
      else if (isa<SubOp>(op)) f.d[k] -= ck;
      else if (isa<MulOp>(op)) f.a[k] *= ck, f.d[k] *= ck;
      else f.a[k] /= ck, f.d[k] /= ck;
    }
    f.chain.push_back(op);
    f.sideInputs.push_back(left ? rhs : lhs);
    f.end = op->getResult(0);
  }
  return f;
}

/// The chain is a normalization as the importer writes BatchNormalization:
/// (x - mean) / sqrt(var + eps) * scale + bias.
bool isNormalization(const AffineChain &f) {
  return f.chain.size() == 4 && isa<SubOp>(f.chain[0]) && isa<DivOp>(f.chain[1]) &&
         isa<MulOp>(f.chain[2]) && isa<AddOp>(f.chain[3]);
}

/// The folded map is finite: a zero variance with a zero epsilon (or any
/// division by zero) makes the chain's own result inf or NaN per element,
/// which x * a + d with infinite a and d would not reproduce.
bool finite(const AffineChain &f) {
  for (size_t k = 0; k < f.a.size(); ++k)
    if (!std::isfinite(f.a[k]) || !std::isfinite(f.d[k]) ||
        !std::isfinite(static_cast<float>(f.a[k])) || !std::isfinite(static_cast<float>(f.d[k])))
      return false;
  return true;
}

struct FoldBatchNormPass : public mlir::ds::impl::FoldBatchNormPassBase<FoldBatchNormPass> {
  void runOnOperation() override {
    SmallVector<ConvOp> convs;
    getOperation().walk([&](ConvOp c) { convs.push_back(c); });
    for (ConvOp conv : convs) fold(conv);
    // What is left (a normalization before a convolution, with a ReLU
    // between: DenseNet's pre-activation) becomes one multiply and one add
    // by constants, instead of a subtract, a divide, a multiply and an add
    // with the statistics' arithmetic at run time.
    SmallVector<std::pair<Value, Operation *>> starts;
    getOperation().walk([&](Operation *op) {
      if (!isa<AddOp, SubOp, MulOp, DivOp>(op)) return;
      for (Value v : op->getOperands()) {
        Operation *def = v.getDefiningOp();
        // Data, not a constant computation (the statistics' reshapes are
        // side inputs, erased with the chains they feed).
        if (!isa_and_nonnull<AddOp, SubOp, MulOp, DivOp, ConstantOp, ParameterOp>(def) &&
            tensorType(v) == tensorType(op->getResult(0)) && !evaluate(v))
          starts.push_back({v, op});
      }
    });
    for (auto [x, first] : starts) simplify(x, first);
  }

  void simplify(Value x, Operation *first) {
    AffineChain f = followAffine(x, first);
    // Only a normalization as the importer writes it: folding reassociates
    // (x - m) / s * g + b into x * a + d, which every framework accepts for
    // BatchNormalization but which would change other chains' results where
    // their intermediates cancel, overflow or divide by zero.
    if (!isNormalization(f) || !finite(f)) return;
    auto type = tensorType(x);
    const int64_t m = type.getShape()[1];
    std::vector<float> af(m), df(m);
    for (int64_t k = 0; k < m; ++k) af[k] = static_cast<float>(f.a[k]), df[k] = static_cast<float>(f.d[k]);
    // [1, M, 1, ...]: broadcast along channels (dimension 1).
    SmallVector<int64_t> shape(type.getRank(), 1);
    shape[1] = m;
    Operation *last = f.chain.back();
    OpBuilder b(last);
    auto ct = RankedTensorType::get(shape, b.getF32Type());
    auto bytes = [](const std::vector<float> &v) {
      return ArrayRef<uint8_t>(reinterpret_cast<const uint8_t *>(v.data()), v.size() * sizeof(float));
    };
    Value scale = ConstantOp::create(b, last->getLoc(), denseFromBytes(ct, bytes(af)));
    Value shift = ConstantOp::create(b, last->getLoc(), denseFromBytes(ct, bytes(df)));
    Value y = MulOp::create(b, last->getLoc(), type, x, scale);
    y = AddOp::create(b, last->getLoc(), type, y, shift);
    f.end.replaceAllUsesWith(y);
    for (Operation *op : llvm::reverse(f.chain)) op->erase();
    eraseUnused(f.sideInputs);
    ++numSimplified;
    numOpsFolded += f.chain.size();
  }

  void fold(ConvOp conv) {
    auto type = conv.getType();
    if (!type.getElementType().isF32() || conv.getChannelsLast() || conv.getClipMinAttr() ||
        conv.getActivation() != Activation::None ||
        conv.getClipMaxAttr() || conv.getAddend())
      return;
    std::optional<std::vector<float>> w = constantFloats(conv.getWeight());
    if (!w) return;
    const int64_t m = type.getShape()[1];
    std::vector<float> bias(m, 0.0f);
    if (Value b = conv.getBias()) {
      std::optional<std::vector<float>> bv = constantFloats(b);
      if (!bv || static_cast<int64_t>(bv->size()) != m) return;
      bias = *bv;
    }
    AffineChain f = followAffine(conv.getResult());
    // A normalization, or bias adds (a sum of constants changes rounding
    // only); scales otherwise stay where they are: folded into the weights
    // they would not overflow where the convolution's result times them does.
    const bool adds = llvm::all_of(f.chain, [](Operation *op) { return isa<AddOp, SubOp>(op); });
    if (f.chain.empty() || !(adds || isNormalization(f)) || !finite(f)) return;
    const std::vector<double> &a = f.a, &d = f.d;
    Value cur = f.end;
    SmallVector<Operation *> &chain = f.chain;
    SmallVector<Value> &sideInputs = f.sideInputs;
    // The folded weight and bias, rounded once to f32.
    const int64_t per = static_cast<int64_t>(w->size()) / m;
    std::vector<float> wf(w->size()), bf(m);
    for (int64_t k = 0; k < m; ++k) {
      for (int64_t i = 0; i < per; ++i) wf[k * per + i] = static_cast<float>(a[k] * (*w)[k * per + i]);
      bf[k] = static_cast<float>(a[k] * bias[k] + d[k]);
    }
    // A scale that overflows a weight changes the result, not just its rounding.
    if (!llvm::all_of(wf, [](float v) { return std::isfinite(v); }) ||
        !llvm::all_of(bf, [](float v) { return std::isfinite(v); }))
      return;
    OpBuilder b(conv);
    auto wt = tensorType(conv.getWeight());
    auto bt = RankedTensorType::get({m}, b.getF32Type());
    auto bytes = [](const std::vector<float> &v) {
      return ArrayRef<uint8_t>(reinterpret_cast<const uint8_t *>(v.data()), v.size() * sizeof(float));
    };
    // Keep the weight's name (the plan and the report show it).
    Value weight, newBias;
    if (auto p = conv.getWeight().getDefiningOp<ParameterOp>())
      weight = ParameterOp::create(b, conv.getLoc(), wt, p.getSymNameAttr(),
                                   denseFromBytes(wt, bytes(wf)));
    else
      weight = ConstantOp::create(b, conv.getLoc(), denseFromBytes(wt, bytes(wf)));
    newBias = ConstantOp::create(b, conv.getLoc(), denseFromBytes(bt, bytes(bf)));
    auto folded = ConvOp::create(b, conv.getLoc(), type, conv.getInput(), weight, newBias,
                                 /*addend=*/Value(), conv.getStridesAttr(), conv.getDilationsAttr(), conv.getPadsAttr(),
                                 conv.getGroupAttr(), FloatAttr(), FloatAttr(), UnitAttr(),
                                 ActivationAttr());
    cur.replaceAllUsesWith(folded.getResult());
    for (Operation *op : llvm::reverse(chain)) op->erase();
    Value oldWeight = conv.getWeight(), oldBias = conv.getBias();
    conv->erase();
    for (Value v : {oldWeight, oldBias})
      if (v && v.use_empty()) v.getDefiningOp()->erase();
    // The normalization's statistics and their arithmetic, now unread.
    eraseUnused(sideInputs);
    ++numFolded;
    numOpsFolded += chain.size();
  }
};

} // namespace

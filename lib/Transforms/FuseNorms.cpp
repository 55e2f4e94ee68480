//===- FuseNorms.cpp - RMSNorm spelled out becomes ds.rms_norm ------------===//
//
// Exporters write RMSNorm (Llama, Mistral, T5) as a square, a mean over the
// last dimension, an epsilon add, a square root, a reciprocal (or a
// division) and one or two multiplies: five passes over the activations
// and an intermediate per op. ds.rms_norm does it in one pass per row.
//
//===----------------------------------------------------------------------===//
#include "dialects/ds/DSOps.h"
#include "ds/Transforms/Passes.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"

namespace mlir::ds {
#define GEN_PASS_DEF_FUSENORMSPASS
#include "ds/Transforms/Passes.h.inc"
} // namespace mlir::ds

using namespace mlir;
using namespace mlir::ds;

namespace {

RankedTensorType tensorType(Value v) { return cast<RankedTensorType>(v.getType()); }

Operation *singleUser(Value v) { return v.hasOneUse() ? *v.getUsers().begin() : nullptr; }

/// The operand of binary `op` that is not `v` (null when both are).
Value otherOperand(Operation *op, Value v) {
  Value a = op->getOperand(0), b = op->getOperand(1);
  if (a == v && b != v) return b;
  if (b == v && a != v) return a;
  return nullptr;
}

std::optional<double> scalar(Value v) {
  if (tensorType(v).getNumElements() != 1) return std::nullopt;
  return knownFloatSplat(v);
}

struct FuseNormsPass : public mlir::ds::impl::FuseNormsPassBase<FuseNormsPass> {
  void runOnOperation() override {
    SmallVector<ReduceMeanOp> means;
    getOperation().walk([&](ReduceMeanOp m) { means.push_back(m); });
    for (ReduceMeanOp m : means) fuseFrom(m);
  }

  /// mean(x * x) over the last axis (kept), + eps, sqrt, then 1/s times x
  /// (reciprocal then multiply, or a division), then an optional [N] scale.
  void fuseFrom(ReduceMeanOp mean) {
    auto sq = mean.getOperand().getDefiningOp<MulOp>();
    if (!sq || sq.getLhs() != sq.getRhs() || !mean.getOperand().hasOneUse()) return;
    Value x = sq.getLhs();
    RankedTensorType xt = tensorType(x);
    int64_t rank = xt.getRank();
    if (!xt.getElementType().isF32() || rank < 1 || mean.getAxes() != ArrayRef<int64_t>{rank - 1} ||
        !mean.getKeepdims())
      return;
    SmallVector<Operation *> ops{sq, mean};
    // + eps
    auto add = dyn_cast_or_null<AddOp>(singleUser(mean.getResult()));
    if (!add) return;
    Value epsOperand = otherOperand(add, mean.getResult());
    std::optional<double> eps = epsOperand ? scalar(epsOperand) : std::nullopt;
    if (!eps || *eps < 0 || add.getType() != mean.getType()) return;
    ops.push_back(add);
    auto sqrt = dyn_cast_or_null<SqrtOp>(singleUser(add.getResult()));
    if (!sqrt) return;
    ops.push_back(sqrt);
    // x * (1 / s) (a reciprocal, or a division of the scalar 1), or x / s.
    Value normed;
    Operation *next = singleUser(sqrt.getResult());
    auto div = dyn_cast_or_null<DivOp>(next);
    bool inverse = isa_and_nonnull<ReciprocalOp>(next) ||
                   (div && div.getRhs() == sqrt.getResult() && scalar(div.getLhs()) == 1.0 &&
                    div.getType() == sqrt.getType());
    if (inverse) {
      Value inv = next->getResult(0);
      auto mul = dyn_cast_or_null<MulOp>(singleUser(inv));
      if (!mul || otherOperand(mul, inv) != x) return;
      ops.append({next, mul});
      normed = mul.getResult();
    } else if (div && div.getLhs() == x && div.getRhs() == sqrt.getResult()) {
      ops.push_back(div);
      normed = div.getResult();
    } else {
      return;
    }
    if (normed.getType() != x.getType()) return;
    // An optional scale: a multiply by an [N] (or [1..1, N]) f32 vector.
    Value scale;
    if (auto mul = dyn_cast_or_null<MulOp>(singleUser(normed))) {
      Value w = otherOperand(mul, normed);
      ArrayRef<int64_t> ws = w ? tensorType(w).getShape() : ArrayRef<int64_t>();
      if (w && !ws.empty() && ws.back() == xt.getShape().back() &&
          llvm::all_of(ws.drop_back(), [](int64_t d) { return d == 1; }) &&
          tensorType(w).getElementType().isF32() && mul.getType() == x.getType()) {
        scale = w;
        ops.push_back(mul);
        normed = mul.getResult();
      }
    }
    Operation *last = ops.back();
    OpBuilder b(last);
    if (scale && tensorType(scale).getRank() != 1)
      scale = ReshapeOp::create(b, last->getLoc(),
                                RankedTensorType::get({xt.getShape().back()}, b.getF32Type()), scale);
    auto norm = RmsNormOp::create(b, last->getLoc(), x.getType(), x, scale,
                                  b.getF32FloatAttr(static_cast<float>(*eps)));
    normed.replaceAllUsesWith(norm.getResult());
    for (Operation *op : llvm::reverse(ops)) op->erase();
    ++numFused;
  }
};

} // namespace

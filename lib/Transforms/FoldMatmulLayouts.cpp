//===- FoldMatmulLayouts.cpp - products read and write through transposes -===//
//
// Attention's head split ([B, T, H*D] -> [B, H, T, D]) and merge are
// transposes that copy whole activations, forward and (twice as many)
// backward. The GEMM needs only a unit stride along the rows or columns of
// each matrix and a leading dimension: it can read the split heads where
// they are, and write merged heads where they go. This pass gives f32
// products strided views (fused_matmul's lhs_* / rhs_* / result_*) so that
// those transposes are no longer computed. Pieces of a split (a fused QKV
// projection's query, key and value) are read at their offset in the
// split's operand, so the split's copies go too.
//
//===----------------------------------------------------------------------===//
#include "dialects/ds/DSOps.h"
#include "ds/Transforms/Passes.h"
#include "ds/Transforms/StridedView.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "runtime/plan/StridedViews.h"

namespace mlir::ds {
#define GEN_PASS_DEF_FOLDMATMULLAYOUTSPASS
#include "ds/Transforms/Passes.h.inc"
} // namespace mlir::ds

using namespace mlir;
using namespace mlir::ds;

namespace {

RankedTensorType tensorType(Value v) { return cast<RankedTensorType>(v.getType()); }

/// Element strides of a dense row-major tensor of `shape`.
SmallVector<int64_t> denseStrides(ArrayRef<int64_t> shape) {
  SmallVector<int64_t> s(shape.size(), 1);
  for (size_t i = shape.size(); i-- > 1;) s[i - 1] = s[i] * shape[i];
  return s;
}

/// A view the kernel reads or writes: the tensor in memory and how the
/// product indexes it.
struct Layout {
  Value base;
  SmallVector<int64_t> shape, strides;
  int64_t offset = 0;
};

/// Operand `v` of a product (its last two dimensions swapped when
/// `transposed`), read through the transposes and reshapes that made it;
/// nullopt when there is nothing to see through (the view is `v`'s own
/// dense layout) or the GEMM cannot read the view.
std::optional<Layout> operandLayout(Value v, bool transposed) {
  RankedTensorType t = tensorType(v);
  if (t.getRank() < 2 || !t.getElementType().isF32() || !t.hasStaticShape() ||
      t.getNumElements() == 0)
    return std::nullopt;
  StridedView view = traceView(v, /*throughSplits=*/true);
  if (view.base == v || !tensorType(view.base).getElementType().isF32()) return std::nullopt;
  Layout l{view.base, {}, {}, view.offset};
  for (const ViewDim &d : view.dims) {
    std::optional<int64_t> stride = d.stride();
    if (!stride) return std::nullopt;
    l.shape.push_back(d.size);
    l.strides.push_back(*stride);
  }
  // Reshapes only (strides of the dense layout where a dimension steps at
  // all): free already.
  SmallVector<int64_t> dense = denseStrides(t.getShape());
  bool moved = false;
  for (size_t i = 0; i < dense.size(); ++i) moved = moved || (l.shape[i] > 1 && l.strides[i] != dense[i]);
  if (!moved && view.offset == 0) return std::nullopt;
  if (transposed) {
    std::swap(l.shape[l.shape.size() - 1], l.shape[l.shape.size() - 2]);
    std::swap(l.strides[l.strides.size() - 1], l.strides[l.strides.size() - 2]);
  }
  if (!::ds::plan::gemmReadable(l.shape.data(), l.strides.data(), l.shape.size()))
    return std::nullopt;
  return l;
}

/// A product `result` read only by a transpose: the layout that writes it
/// straight into the transpose's result (`base`), when the GEMM can.
std::optional<Layout> resultLayout(Value result) {
  if (!result.hasOneUse()) return std::nullopt;
  auto t = dyn_cast<TransposeOp>(*result.getUsers().begin());
  RankedTensorType type = tensorType(result);
  if (!t || type.getRank() < 2 || !type.hasStaticShape() || type.getNumElements() == 0)
    return std::nullopt;
  // Result dimension d is the product's dimension perm[d].
  ArrayRef<int64_t> perm = t.getPermutation();
  SmallVector<int64_t> out = denseStrides(tensorType(t.getResult()).getShape());
  Layout l{t.getResult(), SmallVector<int64_t>(type.getShape()), SmallVector<int64_t>(perm.size()), 0};
  for (size_t d = 0; d < perm.size(); ++d) l.strides[perm[d]] = out[d];
  size_t r = l.shape.size();
  if (l.strides[r - 1] != 1 && l.strides[r - 2] != 1 && l.shape[r - 1] != 1 && l.shape[r - 2] != 1)
    return std::nullopt;
  return l;
}

/// Whether reading the left operand through `a` would cost more than the
/// transpose it saves: a view whose batch dimensions cannot merge into the
/// rows splits one GEMM against a shared 2-D weight into one per batch
/// entry, each streaming the whole weight (an LSTM's time-major outputs read
/// batch-first by the head: 4 x 32 rows re-reading 16 MB four times, where
/// copying the 256 KB operand lets one GEMM read it once). Weights under
/// 1 MB stay in cache between the batch's GEMMs: their views stay.
bool splitsSharedWeight(const Layout &a, Value rhs) {
  RankedTensorType w = tensorType(rhs);
  size_t r = a.shape.size();
  if (w.getRank() != 2 || r < 3 || w.getNumElements() < (1 << 18)) return false;
  int64_t batch = 1;
  bool merges = true;
  for (size_t i = 0; i + 2 < r; ++i) {
    batch *= a.shape[i];
    merges = merges && (a.shape[i] == 1 || a.strides[i] == a.shape[i + 1] * a.strides[i + 1]);
  }
  if (batch <= 1 || merges) return false;
  int64_t lhsElements = batch * a.shape[r - 2] * a.shape[r - 1];
  return w.getNumElements() * (batch - 1) > lhsElements;
}

struct FoldMatmulLayoutsPass
    : public mlir::ds::impl::FoldMatmulLayoutsPassBase<FoldMatmulLayoutsPass> {
  void runOnOperation() override {
    SmallVector<Operation *> products;
    getOperation().walk([&](Operation *op) {
      if (isa<MatmulOp, FusedMatmulOp>(op)) products.push_back(op);
    });
    for (Operation *op : products) fold(op);
  }

  void fold(Operation *op) {
    auto fused = dyn_cast<FusedMatmulOp>(op);
    if (fused && (fused.getLhsShape() || fused.getRhsShape() || fused.getResultShape() ||
                  fused.getPreActivation()))
      return;
    Value lhs = op->getOperand(0), rhs = op->getOperand(1), result = op->getResult(0);
    if (!tensorType(result).getElementType().isF32() || tensorType(lhs).getRank() < 2 ||
        tensorType(rhs).getRank() < 2)
      return;
    auto matmul = dyn_cast<MatmulOp>(op);
    bool ta = matmul ? matmul.getTransposeLhs() : fused.getTransposeLhs();
    bool tb = matmul ? matmul.getTransposeRhs() : fused.getTransposeRhs();
    std::optional<Layout> a = operandLayout(lhs, ta), b = operandLayout(rhs, tb);
    if (a && !b && splitsSharedWeight(*a, rhs)) a.reset();
    std::optional<Layout> c;
    // Row epilogues (softmax) normalize the product's rows as stored: no result view.
    if (!fused || (!fused.getBias() && !fused.getAddend() && !fused.getSoftmax() && !fused.getMask()))
      c = resultLayout(result);
    if (!a && !b && !c) return;

    OpBuilder builder(op);
    auto array = [&](const std::optional<Layout> &l, bool strides) {
      if (!l) return DenseI64ArrayAttr();
      return builder.getDenseI64ArrayAttr(strides ? l->strides : l->shape);
    };
    auto offset = [&](const std::optional<Layout> &l) {
      return l && l->offset ? builder.getI64IntegerAttr(l->offset) : IntegerAttr();
    };
    auto folded = FusedMatmulOp::create(
        builder, op->getLoc(), c ? c->base.getType() : result.getType(), Type(), a ? a->base : lhs,
        b ? b->base : rhs, fused ? fused.getBias() : Value(), fused ? fused.getAddend() : Value(),
        fused ? fused.getMask() : Value(), builder.getBoolAttr(ta && !a), builder.getBoolAttr(tb && !b),
        builder.getF64FloatAttr(fused ? fused.getAlpha().convertToDouble() : 1.0),
        ActivationAttr::get(builder.getContext(),
                            fused ? fused.getActivation() : Activation::None),
        CombineAttr::get(builder.getContext(), fused ? fused.getCombine() : Combine::Add),
        array(a, false), array(a, true), offset(a), array(b, false), array(b, true), offset(b),
        array(c, false), array(c, true), fused ? fused.getSoftmaxAttr() : UnitAttr(),
        fused ? fused.getMaskFillAttr() : FloatAttr());
    if (c) {
      Operation *transpose = c->base.getDefiningOp();
      c->base.replaceAllUsesWith(folded.getResult());
      transpose->erase();
      ++numResults;
    } else {
      result.replaceAllUsesWith(folded.getResult());
    }
    op->erase();
    numOperands += bool(a) + bool(b);
    eraseDeadProducers({lhs, rhs});
  }
};

} // namespace

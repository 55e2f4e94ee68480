//===- FuseAttention.cpp - scores, mask, softmax and product as one op ----===//
//
// Exporters write attention as two batched products around a softmax, with
// the scale, the mask add, PyTorch 2's NaN cleanup after the softmax, and
// the transposes, reshapes and head broadcasts (grouped-query attention)
// that arrange q, k and v. Unfused, each of those is a pass over memory and
// the [Sq, Sk] scores of every head are materialized twice. ds.attention
// does it per block of query rows with an online softmax, reading q, k and
// v through strided views (StridedView.h), so the layout ops go too.
//
// The match starts at each softmax over the last axis of a rank-4 f32
// value and walks to the products on either side; every intermediate must
// be read only by the next op, so nothing else needs a value the fused op
// no longer makes (in training the backward reads the probabilities: no
// match).
//
//===----------------------------------------------------------------------===//
#include "dialects/ds/DSOps.h"
#include "ds/Transforms/Passes.h"
#include "ds/Transforms/Scales.h"
#include "ds/Transforms/StridedView.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

namespace mlir::ds {
#define GEN_PASS_DEF_FUSEATTENTIONPASS
#include "ds/Transforms/Passes.h.inc"
} // namespace mlir::ds

using namespace mlir;
using namespace mlir::ds;

namespace {

RankedTensorType tensorType(Value v) { return cast<RankedTensorType>(v.getType()); }

Operation *singleUser(Value v) {
  return v.hasOneUse() ? *v.getUsers().begin() : nullptr;
}

/// The operand of binary `op` that is not `v` (null when both are).
Value otherOperand(Operation *op, Value v) {
  Value a = op->getOperand(0), b = op->getOperand(1);
  if (a == v && b != v) return b;
  if (b == v && a != v) return a;
  return nullptr;
}

/// A one-element known constant.
std::optional<double> scalar(Value v) {
  if (tensorType(v).getNumElements() != 1) return std::nullopt;
  return knownFloatSplat(v);
}

/// What one attention is made of, found from its softmax.
struct Match {
  SmallVector<Operation *> ops; // replaced, users before producers
  Value query, key, value, mask;
  std::optional<double> maskFill; // the mask selects (masked_fill) instead of adding
  bool keyTransposed = false;   // the scores product reads k^T as a transposed operand
  bool valueTransposed = false;
  double scale = 1.0;
  bool zeroNan = false, bshd = false;
  Value result;                 // the value the attention op replaces
};

/// Peels multiplications or divisions by known scalars off `v` (each read
/// only by the next), folding them into `scale`; records the ops.
Value peelScale(Value v, double &scale, SmallVectorImpl<Operation *> &ops) {
  while (true) {
    Operation *def = v.getDefiningOp();
    if (!def || !isa<MulOp, DivOp>(def) || !def->getResult(0).hasOneUse()) return v;
    Value a = def->getOperand(0), b = def->getOperand(1);
    // (x * c), (c * x) or (x / c) with c a known scalar.
    std::optional<double> cb = scalar(b), ca = isa<MulOp>(def) ? scalar(a) : std::nullopt;
    Value x;
    double c;
    if (cb && tensorType(a) == tensorType(def->getResult(0))) x = a, c = *cb;
    else if (ca && tensorType(b) == tensorType(def->getResult(0))) x = b, c = *ca;
    else return v;
    const double next = isa<MulOp>(def) ? scale * c : scale / c;
    if (!movableScale(c) || !movableScale(next)) return v;
    scale = next;
    ops.push_back(def);
    v = x;
  }
}

std::optional<Match> matchAt(SoftmaxOp sm) {
  auto type = tensorType(sm.getResult());
  if (type.getRank() != 4 || !type.getElementType().isF32() || sm.getAxis() != 3)
    return std::nullopt;
  Match m;
  // Down: [where(isnan(p), 0, p)], then p x v, then [transpose to BSHD].
  Value p = sm.getResult();
  SmallVector<Operation *> down;
  if (llvm::hasNItems(p.getUsers(), 2)) {
    IsNanOp isNan;
    WhereOp where;
    for (Operation *u : p.getUsers()) {
      if (auto n = dyn_cast<IsNanOp>(u)) isNan = n;
      else if (auto w = dyn_cast<WhereOp>(u)) where = w;
    }
    if (!isNan || !where || singleUser(isNan.getResult()) != where ||
        where.getCondition() != isNan.getResult() || where.getOnFalse() != p ||
        scalar(where.getOnTrue()) != 0.0 || where.getType() != p.getType())
      return std::nullopt;
    m.zeroNan = true;
    down.append({where, isNan});
    p = where.getResult();
  }
  auto pv = dyn_cast_or_null<MatmulOp>(singleUser(p));
  if (!pv || pv.getLhs() != p || pv.getTransposeLhs() || tensorType(pv.getResult()).getRank() != 4)
    return std::nullopt;
  m.value = pv.getRhs();
  m.valueTransposed = pv.getTransposeRhs();
  m.result = pv.getResult();
  // A transpose to [B, S, H, D] is the bshd result; so is one whose result
  // has those bytes once unit dimensions are dropped (nn.MultiheadAttention's
  // [S, B, H, D] at batch 1), reached by a free reshape.
  if (auto t = dyn_cast_or_null<TransposeOp>(singleUser(pv.getResult()))) {
    ArrayRef<int64_t> in = tensorType(pv.getResult()).getShape();
    auto nonUnit = [&](ArrayRef<int64_t> order) {
      SmallVector<int64_t> kept;
      for (int64_t d : order)
        if (in[d] != 1) kept.push_back(d);
      return kept;
    };
    if (t.getPermutation().size() == 4 &&
        nonUnit(t.getPermutation()) == nonUnit(ArrayRef<int64_t>{0, 2, 1, 3})) {
      m.bshd = true;
      m.result = t.getResult();
      m.ops.push_back(t);
    }
  }
  m.ops.push_back(pv);
  m.ops.append(down.begin(), down.end());
  m.ops.push_back(sm);
  // Up: [scores + mask], scaled scores, the q x k^T product, scaled operands.
  Value s = sm.getOperand();
  if (!s.hasOneUse()) return std::nullopt;
  if (auto add = dyn_cast_or_null<AddOp>(s.getDefiningOp())) {
    Value a = add.getLhs(), b = add.getRhs();
    auto fromProduct = [](Value v) {
      Operation *d = v.getDefiningOp();
      return d && isa<MatmulOp, MulOp, DivOp>(d);
    };
    Value scores = a.getType() == s.getType() && fromProduct(a) ? a : b;
    Value mask = scores == a ? b : a;
    if (scores.getType() != s.getType() || !tensorType(mask).getElementType().isF32() ||
        !scores.hasOneUse())
      return std::nullopt;
    m.mask = mask;
    m.ops.push_back(add);
    s = scores;
  } else if (auto where = dyn_cast_or_null<WhereOp>(s.getDefiningOp())) {
    // masked_fill: where(mask, fill, scores).
    std::optional<double> fill = knownFloatSplat(where.getOnTrue());
    if (!fill || tensorType(where.getOnTrue()).getNumElements() != 1 ||
        where.getOnFalse().getType() != s.getType() || !where.getOnFalse().hasOneUse())
      return std::nullopt;
    m.mask = where.getCondition();
    m.maskFill = fill;
    m.ops.push_back(where);
    s = where.getOnFalse();
  }
  s = peelScale(s, m.scale, m.ops);
  auto qk = dyn_cast_or_null<MatmulOp>(s.getDefiningOp());
  if (!qk || !s.hasOneUse() || qk.getTransposeLhs()) return std::nullopt;
  m.ops.push_back(qk);
  m.query = peelScale(qk.getLhs(), m.scale, m.ops);
  m.key = peelScale(qk.getRhs(), m.scale, m.ops);
  m.keyTransposed = qk.getTransposeRhs();
  return m;
}

/// One attention operand as the kernel reads it: the tensor in memory,
/// the [B, H, S, D] sizes and element strides of the view, and how many
/// heads of the view repeat each head in memory (grouped-query attention).
struct HeadView {
  Value base;
  int64_t shape[4], strides[4];
  int64_t group = 1;
  int64_t offset = 0; // a split's piece: where it starts in the split's operand
};

/// The view of `v` (rank 4), its last two dimensions swapped when `swap`;
/// nullopt when the kernel cannot read it: a dimension that is not one
/// stride (a head dimension may be a stride then a repeat), or neither of
/// the last two dimensions contiguous.
std::optional<HeadView> headView(Value v, bool swap) {
  if (tensorType(v).getRank() != 4) return std::nullopt;
  // Through splits too: q, k and v are often one projection's pieces.
  StridedView view = traceView(v, /*throughSplits=*/true);
  if (view.dims.size() != 4 || !tensorType(view.base).getElementType().isF32())
    return std::nullopt;
  if (swap) std::swap(view.dims[2], view.dims[3]);
  HeadView h{view.base, {}, {}, 1, view.offset};
  for (int i = 0; i < 4; ++i) {
    const ViewDim &d = view.dims[i];
    h.shape[i] = d.size;
    if (std::optional<int64_t> stride = d.stride(); stride && i == 1 && *stride == 0) {
      // Every head repeats one (one key/value head per tensor-parallel
      // rank): a single head read by all the query heads.
      h.group = d.size;
      h.shape[1] = 1;
      h.strides[1] = 0;
    } else if (stride) {
      h.strides[i] = *stride;
    } else if (i == 1 && d.parts.size() == 2 && d.parts[1].stride == 0) {
      h.group = d.parts[1].size;
      h.shape[1] = d.parts[0].size;
      h.strides[1] = d.parts[0].stride;
    } else {
      return std::nullopt;
    }
  }
  if (h.strides[2] != 1 && h.strides[3] != 1) return std::nullopt;
  return h;
}

struct FuseAttentionPass : public mlir::ds::impl::FuseAttentionPassBase<FuseAttentionPass> {
  void runOnOperation() override {
    SmallVector<SoftmaxOp> softmaxes;
    getOperation().walk([&](SoftmaxOp s) { softmaxes.push_back(s); });
    for (SoftmaxOp sm : softmaxes)
      if (std::optional<Match> m = matchAt(sm)) replace(*m);
  }

  void replace(Match &m) {
    std::optional<HeadView> q = headView(m.query, false);
    // The scores product reads k^T: k itself, stored [B, H, D, Sk] unless
    // the product already reads it transposed.
    std::optional<HeadView> k = headView(m.key, !m.keyTransposed);
    std::optional<HeadView> v = headView(m.value, m.valueTransposed);
    if (!q || !k || !v || q->group != 1) return;
    // Products broadcast a batch or head dimension of 1 (multi-query
    // attention: one key/value head for all): one shared head (Hkv = 1),
    // and a batch read with stride 0.
    for (HeadView *kv : {&*k, &*v}) {
      if (kv->shape[0] == 1 && q->shape[0] > 1) kv->shape[0] = q->shape[0], kv->strides[0] = 0;
      if (kv->shape[1] == 1 && kv->group == 1) kv->group = q->shape[1];
    }
    // Query heads are distinct; key and value heads repeat alike.
    if (k->group != v->group || k->shape[1] * k->group != q->shape[1] ||
        v->shape[1] * v->group != q->shape[1])
      return;
    OpBuilder b(m.ops.front());
    auto attr = [&](const int64_t (&a)[4]) { return b.getDenseI64ArrayAttr(ArrayRef<int64_t>(a)); };
    auto offset = [&](const HeadView &h) {
      return h.offset ? b.getI64IntegerAttr(h.offset) : IntegerAttr();
    };
    // The kernel writes [B, Hq, Sq, Dv] or [B, Sq, Hq, Dv]; a bshd result
    // of another shape (unit dimensions elsewhere) is a reshape of it.
    RankedTensorType resultType = tensorType(m.result);
    if (m.bshd) {
      const int64_t dv = v->shape[3];
      resultType = RankedTensorType::get({q->shape[0], q->shape[2], q->shape[1], dv},
                                         resultType.getElementType());
    }
    auto op = AttentionOp::create(
        b, m.ops.front()->getLoc(), resultType, q->base, k->base, v->base, m.mask,
        m.maskFill ? b.getF64FloatAttr(*m.maskFill) : FloatAttr(), attr(q->shape),
        attr(q->strides), attr(k->shape), attr(k->strides), attr(v->shape), attr(v->strides),
        offset(*q), offset(*k), offset(*v), b.getF64FloatAttr(m.scale),
        m.zeroNan ? b.getUnitAttr() : UnitAttr(), m.bshd ? b.getUnitAttr() : UnitAttr());
    // Shapes that do not line up (a mask that does not broadcast, heads
    // that do not group, a mask of another type) leave the ops as they were.
    bool valid;
    {
      ScopedDiagnosticHandler quiet(op.getContext(), [](Diagnostic &) { return success(); });
      valid = succeeded(op.verify());
    }
    if (!valid) {
      op->erase();
      return;
    }
    Value result = op.getResult();
    if (resultType != tensorType(m.result))
      result = ReshapeOp::create(b, op.getLoc(), tensorType(m.result), result);
    m.result.replaceAllUsesWith(result);
    llvm::SmallPtrSet<Operation *, 16> replaced(m.ops.begin(), m.ops.end());
    SmallVector<Value> inputs;
    for (Operation *o : m.ops)
      for (Value in : o->getOperands())
        if (!replaced.contains(in.getDefiningOp())) inputs.push_back(in);
    for (Operation *o : m.ops) o->erase();
    eraseDeadProducers(inputs);
    ++numFused;
  }
};

} // namespace

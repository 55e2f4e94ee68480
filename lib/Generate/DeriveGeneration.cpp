//===- DeriveGeneration.cpp - prefill and decode programs from a causal LM ===//
//
// An exporter writes a causal LM as one forward pass over a whole sequence.
// Generating with it as written would recompute the prefix for every new
// token. This pass derives what exporters make users write by hand: a
// program that runs a chunk of T new tokens per sequence against a KV
// cache, once with T = the prefill chunk and once with T = 1 (decode).
//
// The model is imported with the sequence as long as the cache (M tokens),
// so every position-dependent constant the exporter folded (position ids,
// position embeddings, RoPE tables, the causal mask) exists for all M
// positions. The pass then walks the graph from the token ids, following
// where the sequence and batch dimensions of each value are (a Layout:
// per axis, the factors it is made of), sets every extent that came from
// the sequence to T, gathers the rows of position-dependent constants at
// each row's positions, and turns each causal ds.attention into a
// ds.cached_attention on per-layer cache globals.
//
//===----------------------------------------------------------------------===//
#include "ds/Generate/Passes.h"

#include "dialects/ds/DSOps.h"
#include "ds/Plan/HostEvaluator.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/DenseSet.h"

#include <numeric>

namespace mlir::ds {
#define GEN_PASS_DEF_DERIVEGENERATIONPASS
#include "ds/Generate/Passes.h.inc"
} // namespace mlir::ds

using namespace mlir;
using namespace mlir::ds;

namespace {

RankedTensorType typeOf(Value v) { return cast<RankedTensorType>(v.getType()); }

/// What a piece of a dimension is: the batch, the sequence, or anything
/// else (heads, features, vocabulary), whose extent does not change.
enum class Sym : uint8_t { None, Batch, Seq };
struct Factor {
  Sym sym = Sym::None;
  int64_t extent = 1; // in the imported (M-token) graph
  bool operator==(const Factor &o) const { return sym == o.sym && extent == o.extent; }
};
/// One axis of a value: its factors, outermost first ([B*M] of a Gemm's
/// flattened input is {Batch, Seq}).
using Axis = SmallVector<Factor, 2>;
using Layout = SmallVector<Axis, 4>;

int64_t extentOf(const Axis &a) {
  int64_t e = 1;
  for (const Factor &f : a) e *= f.extent;
  return e;
}
bool holds(const Axis &a, Sym s) {
  return llvm::any_of(a, [&](const Factor &f) { return f.sym == s; });
}
/// An axis the step's extents depend on: it holds the sequence, or a batch
/// of more than one row.
bool symbolic(const Axis &a) {
  return llvm::any_of(a, [](const Factor &f) {
    return f.sym == Sym::Seq || (f.sym == Sym::Batch && f.extent > 1);
  });
}
Axis staticAxis(int64_t extent) { return Axis{Factor{Sym::None, extent}}; }
/// The axis is `s` and unit factors (a batch of one) only.
bool only(const Axis &a, Sym s) {
  int n = 0;
  for (const Factor &f : a) {
    if (f.extent == 1 && f.sym != Sym::Seq) continue;
    if (f.sym != s) return false;
    ++n;
  }
  return n == 1;
}

/// Derives one program (T tokens per row) in place in a clone of @main.
class Deriver {
public:
  Deriver(ModuleOp module, func::FuncOp f, int64_t t, int64_t m, int64_t b,
          SmallVectorImpl<std::pair<ml_program::GlobalOp, ml_program::GlobalOp>> &caches,
          DenseMap<Value, DenseElementsAttr> &evaluated)
      : module_(module), f_(f), t_(t), m_(m), b_(b), caches_(caches), evaluated_(evaluated) {}

  LogicalResult run();

private:
  InFlightDiagnostic fail(Operation *op, const Twine &why) {
    return op->emitError() << "cannot derive a generation step: " << why;
  }
  int64_t newExtent(const Axis &a, bool selected) const {
    int64_t e = 1;
    for (const Factor &f : a) e *= f.sym == Sym::Seq ? (selected ? 1 : t_) : f.extent;
    return e;
  }
  RankedTensorType newType(const Layout &l, Type element, bool selected) const {
    SmallVector<int64_t> shape;
    for (const Axis &a : l) shape.push_back(newExtent(a, selected));
    return RankedTensorType::get(shape, element);
  }
  bool dynamic(Value v) const { return layout_.count(v) != 0; }
  void setLayout(Value v, Layout l) {
    v.setType(newType(l, typeOf(v).getElementType(), false));
    layout_[v] = std::move(l);
  }

  LogicalResult visit(Operation *op);
  LogicalResult elementwise(Operation *op);
  LogicalResult matmul(MatmulOp op);
  LogicalResult reshape(Operation *op);
  LogicalResult attention(AttentionOp op);
  FailureOr<Value> positionTable(Operation *user, Value table, const Layout &out);
  FailureOr<DenseElementsAttr> evaluate(Value v, Operation *user);
  /// Axis `a` of `op`'s dynamic operand must not carry the sequence.
  LogicalResult alongStatic(Operation *op, Value operand, int64_t a, StringRef what);
  LogicalResult selectLastRows();

  ModuleOp module_;
  func::FuncOp f_;
  int64_t t_, m_, b_;
  SmallVectorImpl<std::pair<ml_program::GlobalOp, ml_program::GlobalOp>> &caches_;
  DenseMap<Value, DenseElementsAttr> &evaluated_;
  DenseMap<Value, Layout> layout_;
  llvm::DenseSet<Value> tables_; // position-table gathers this walk made
  Value positions_, lengths_, slots_, positionIndex_;
  unsigned attentions_ = 0;
};

LogicalResult Deriver::alongStatic(Operation *op, Value operand, int64_t a, StringRef what) {
  const Layout &l = layout_[operand];
  if (a < 0 || a >= static_cast<int64_t>(l.size()) || !symbolic(l[a])) return success();
  return fail(op, "'") << op->getName() << "' " << what << " along the "
                       << (holds(l[a], Sym::Seq) ? "sequence" : "batch")
                       << " (a causal LM's step can only work within a token)";
}

FailureOr<DenseElementsAttr> Deriver::evaluate(Value v, Operation *user) {
  FailureOr<DenseElementsAttr> r = evaluateConstantValue(v, evaluated_);
  if (failed(r)) return fail(user, "a value that depends on neither the tokens nor constants");
  return r;
}

/// A constant operand `table` meeting values whose layout is `out` varies
/// along the sequence: the rows each row of the batch needs, at its
/// positions, arranged to broadcast as the table did.
FailureOr<Value> Deriver::positionTable(Operation *user, Value table, const Layout &out) {
  const int64_t rank = static_cast<int64_t>(out.size());
  ArrayRef<int64_t> shape = typeOf(table).getShape();
  const int64_t r = static_cast<int64_t>(shape.size()), offset = rank - r;
  int64_t seqAxis = -1, batchAxis = -1;
  for (int64_t i = 0; i < rank; ++i) {
    if (holds(out[i], Sym::Seq)) seqAxis = i;
    if (holds(out[i], Sym::Batch) && extentOf(out[i]) > 1) batchAxis = i;
  }
  if (seqAxis < 0 || !only(out[seqAxis], Sym::Seq) || seqAxis - offset < 0 ||
      (batchAxis >= 0 && (!only(out[batchAxis], Sym::Batch) || batchAxis > seqAxis)))
    return fail(user, "a constant operand varies along the sequence in a layout it cannot be "
                      "gathered from");
  const int64_t s = seqAxis - offset;
  for (int64_t i = 0; i < s; ++i)
    if (shape[i] != 1)
      return fail(user, "a constant operand varies along the sequence and along dimension ")
             << i << " before it";
  FailureOr<DenseElementsAttr> values = evaluate(table, user);
  if (failed(values)) return failure();
  OpBuilder b(user);
  Location loc = user->getLoc();
  SmallVector<int64_t> rows{m_};
  rows.append(shape.begin() + s + 1, shape.end());
  Type element = typeOf(table).getElementType();
  auto whole = ConstantOp::create(b, loc, values->reshape(RankedTensorType::get(rows, element)));
  // [M, rest] gathered at [B, T] positions: [B, T, rest].
  SmallVector<int64_t> gathered{b_, t_};
  gathered.append(shape.begin() + s + 1, shape.end());
  auto g = GatherOp::create(b, loc, RankedTensorType::get(gathered, element), whole,
                            positionIndex_, b.getI64IntegerAttr(0), IntegerAttr());
  // Back to the table's arrangement, batch and sequence where `out` has
  // them (rank grows when the table had no batch axis to hold B).
  const int64_t tr = batchAxis >= 0 ? std::max(r, rank - batchAxis) : r;
  SmallVector<int64_t> target;
  for (int64_t k = 0; k < tr; ++k) {
    const int64_t resAxis = k + (rank - tr), tableAxis = k - (tr - r);
    if (resAxis == batchAxis) target.push_back(b_);
    else if (resAxis == seqAxis) target.push_back(t_);
    else target.push_back(tableAxis >= 0 ? shape[tableAxis] : 1);
  }
  Value arranged = g.getResult();
  if (ArrayRef<int64_t>(target) != ArrayRef<int64_t>(gathered))
    arranged = ReshapeOp::create(b, loc, RankedTensorType::get(target, element), g).getResult();
  tables_.insert(arranged);
  return arranged;
}

/// Numpy-broadcasting ops: each axis takes its factors from the dynamic
/// operands, which must agree; constants varying along the sequence are
/// gathered at the rows' positions.
LogicalResult Deriver::elementwise(Operation *op) {
  const int64_t rank = typeOf(op->getResult(0)).getRank();
  ArrayRef<int64_t> old = typeOf(op->getResult(0)).getShape();
  Layout out;
  for (int64_t i = 0; i < rank; ++i) {
    std::optional<Axis> chosen;
    for (Value o : op->getOperands()) {
      if (!dynamic(o)) continue;
      const Layout &l = layout_[o];
      const int64_t a = i - (rank - static_cast<int64_t>(l.size()));
      if (a < 0 || (extentOf(l[a]) == 1 && !holds(l[a], Sym::Batch))) continue;
      if (!chosen || (extentOf(*chosen) == 1 && extentOf(l[a]) != 1)) chosen = l[a];
      else if (*chosen != l[a] && extentOf(l[a]) != 1)
        return fail(op, "operands arrange the sequence differently");
    }
    out.push_back(chosen ? *chosen : staticAxis(old[i]));
  }
  for (OpOperand &use : op->getOpOperands()) {
    Value o = use.get();
    if (dynamic(o)) continue;
    ArrayRef<int64_t> s = typeOf(o).getShape();
    const int64_t offset = rank - static_cast<int64_t>(s.size());
    bool varies = false;
    for (int64_t a = 0; a < static_cast<int64_t>(s.size()); ++a) {
      const Axis &ax = out[a + offset];
      if (s[a] == 1 || !symbolic(ax)) continue;
      if (holds(ax, Sym::Seq)) varies = true;
      else if (s[a] != extentOf(ax) || ax.size() != 1)
        return fail(op, "a constant operand does not broadcast along the batch");
    }
    if (!varies) continue;
    FailureOr<Value> rows = positionTable(op, o, out);
    if (failed(rows)) return failure();
    use.set(*rows);
  }
  for (Value r : op->getResults()) setLayout(r, out);
  return success();
}

LogicalResult Deriver::matmul(MatmulOp op) {
  Value lhs = op.getLhs(), rhs = op.getRhs();
  if (dynamic(lhs) && dynamic(rhs))
    return fail(op, "a product of two values that both depend on the tokens, outside a fused "
                    "attention (is attention fused? ds-fuse-attention)");
  const bool left = dynamic(lhs);
  Value x = left ? lhs : rhs;
  const Layout &l = layout_[x];
  const int64_t r = static_cast<int64_t>(l.size());
  if (r < 2) return fail(op, "a product of a vector that depends on the tokens");
  const bool transposed = left ? op.getTransposeLhs() : op.getTransposeRhs();
  // The operand's kept (row or column) and contracted axes.
  const int64_t kept = left ? (transposed ? r - 1 : r - 2) : (transposed ? r - 2 : r - 1);
  const int64_t contracted = left ? (transposed ? r - 2 : r - 1) : (transposed ? r - 1 : r - 2);
  if (failed(alongStatic(op, x, contracted, "sums"))) return failure();
  RankedTensorType res = op.getType();
  const int64_t rank = res.getRank();
  Layout out;
  for (int64_t i = 0; i < rank - 2; ++i) {
    const int64_t a = i - (rank - r);
    if (a >= 0 && (extentOf(l[a]) != 1 || holds(l[a], Sym::Batch))) out.push_back(l[a]);
    else out.push_back(staticAxis(res.getDimSize(i)));
  }
  if (left) {
    out.push_back(l[kept]);
    out.push_back(staticAxis(res.getDimSize(rank - 1)));
  } else {
    out.push_back(staticAxis(res.getDimSize(rank - 2)));
    out.push_back(l[kept]);
  }
  // The other operand's batch dimensions must not vary with the tokens'.
  Value other = left ? rhs : lhs;
  ArrayRef<int64_t> os = typeOf(other).getShape();
  for (int64_t a = 0; a + 2 < static_cast<int64_t>(os.size()); ++a) {
    const int64_t i = a + (rank - static_cast<int64_t>(os.size()));
    if (os[a] != 1 && symbolic(out[i]))
      return fail(op, "a constant operand of a product varies along the sequence or batch");
  }
  setLayout(op.getResult(), out);
  return success();
}

/// A reshape regroups its operand's factors (outermost first) into the
/// result's dimensions; the sequence and batch must each stay whole.
LogicalResult Deriver::reshape(Operation *op) {
  Value in = op->getOperand(0);
  SmallVector<Factor> factors;
  for (const Axis &a : layout_[in])
    for (const Factor &f : a)
      if (f.sym != Sym::None || f.extent != 1) factors.push_back(f);
  // A batch of one goes where a unit dimension takes it, or nowhere.
  auto skipUnitBatch = [&](size_t &i) {
    while (i < factors.size() && factors[i].sym == Sym::Batch && factors[i].extent == 1) ++i;
  };
  ArrayRef<int64_t> shape = typeOf(op->getResult(0)).getShape();
  Layout out;
  size_t next = 0;
  for (int64_t d : shape) {
    Axis axis;
    int64_t have = 1;
    while (have < d) {
      skipUnitBatch(next);
      if (next == factors.size()) return fail(op, "a reshape of inconsistent sizes");
      Factor f = factors[next];
      if (have * f.extent <= d && d % (have * f.extent) == 0) {
        axis.push_back(f), have *= f.extent, ++next;
        continue;
      }
      // The dimension ends inside this factor: only a fixed one may split.
      const int64_t part = d / have;
      if (f.sym != Sym::None || d % have != 0 || f.extent % part != 0)
        return fail(op, "a reshape that splits the ")
               << (f.sym == Sym::Seq ? "sequence" : f.sym == Sym::Batch ? "batch" : "dimensions")
               << " across dimensions";
      axis.push_back(Factor{Sym::None, part});
      factors[next].extent /= part;
      have = d;
    }
    // A unit dimension takes a batch of one (it may have been squeezed).
    if (d == 1 && next < factors.size() && factors[next].sym == Sym::Batch &&
        factors[next].extent == 1)
      axis.push_back(factors[next++]);
    if (axis.empty()) axis.push_back(Factor{Sym::None, d});
    out.push_back(axis);
  }
  for (; next < factors.size(); ++next)
    if (factors[next].extent != 1)
      return fail(op, "a reshape of inconsistent sizes");
  setLayout(op->getResult(0), out);
  return success();
}

/// The factor strides of `operand`'s layout, in the imported graph and in
/// the step, outermost factor first.
struct FactorStrides {
  SmallVector<Factor> factors;
  SmallVector<int64_t> before, after;
};

LogicalResult Deriver::attention(AttentionOp op) {
  for (Value v : {op.getQuery(), op.getKey(), op.getValue()})
    if (!dynamic(v)) return fail(op, "an attention whose q, k and v do not all depend on the tokens");
  Value mask = op.getMask();
  if (!mask)
    return fail(op, "an attention without a mask is not causal (generation needs a causal LM)");
  if (dynamic(mask)) return fail(op, "an attention mask that depends on the tokens");
  FailureOr<DenseElementsAttr> values = evaluate(mask, op);
  if (failed(values)) return failure();
  // The mask, broadcast to [., ., M, M]: every slice causal, or causal
  // within a sliding window.
  ArrayRef<int64_t> ms = typeOf(mask).getShape();
  if (ms.size() < 2 || ms[ms.size() - 1] != m_ || ms[ms.size() - 2] != m_)
    return fail(op, "an attention mask that is not [.., M, M] over the sequence");
  const bool selects = op.getMaskFillAttr() != nullptr;
  const double fill = selects ? op.getMaskFillAttr().getValueAsDouble() : 0.0;
  constexpr double kDead = -1e30;
  std::vector<double> flat;
  if (selects) {
    for (bool x : values->getValues<bool>()) flat.push_back(x ? fill : 0.0);
  } else {
    for (float x : values->getValues<float>()) flat.push_back(x);
  }
  const int64_t slices = static_cast<int64_t>(flat.size()) / (m_ * m_);
  // The window: how many keys the last query sees (M: plain causal).
  int64_t window = 0;
  for (int64_t j = 0; j < m_ && !window; ++j)
    if (!(flat[(m_ - 1) * m_ + j] <= kDead)) window = m_ - j;
  for (int64_t s = 0; s < slices; ++s)
    for (int64_t i = 0; i < m_; ++i)
      for (int64_t j = 0; j < m_; ++j) {
        const double x = flat[(s * m_ + i) * m_ + j];
        const bool kept = !(x <= kDead);
        if (kept && x != 0.0)
          return fail(op, "an attention mask that adds a bias to the scores (") << x
                 << " at query " << i << ", key " << j << ") is not supported for generation";
        const bool causal = j <= i && (window == m_ || j > i - window);
        if (kept != causal)
          return fail(op, "the attention mask is not causal (query ")
                 << i << (kept ? " sees key " : " does not see key ") << j << ")";
      }
  // Views: each stride walks one factor of its operand; rescale by that
  // factor's stride in the step.
  auto remap = [&](Value operand, ArrayRef<int64_t> shape, ArrayRef<int64_t> strides,
                   std::optional<uint64_t> offset, StringRef name, SmallVectorImpl<int64_t> &nshape,
                   SmallVectorImpl<int64_t> &nstrides, int64_t &noffset) -> LogicalResult {
    FactorStrides fs;
    for (const Axis &a : layout_[operand])
      for (const Factor &f : a) fs.factors.push_back(f);
    const size_t n = fs.factors.size();
    fs.before.assign(n, 1), fs.after.assign(n, 1);
    for (size_t i = n; i-- > 1;) {
      const Factor &f = fs.factors[i];
      fs.before[i - 1] = fs.before[i] * f.extent;
      fs.after[i - 1] = fs.after[i] * (f.sym == Sym::Seq ? t_ : f.extent);
    }
    auto role = [&](int64_t dim) { return dim == 0 ? Sym::Batch : dim == 2 ? Sym::Seq : Sym::None; };
    for (int64_t d = 0; d < 4; ++d) {
      const int64_t size = shape[d], stride = strides[d];
      const Sym want = role(d);
      if (size == 1 || stride == 0) {
        if (want == Sym::Seq && size != 1)
          return fail(op, name) << " view does not step along the sequence";
        nshape.push_back(want == Sym::Seq ? t_ : size);
        nstrides.push_back(0);
        continue;
      }
      // The innermost factor this stride is a multiple of, stepping
      // within its extent.
      std::optional<size_t> at;
      for (size_t i = n; i-- > 0;)
        if (stride % fs.before[i] == 0 &&
            (i == 0 || (stride / fs.before[i]) * (size - 1) < fs.factors[i].extent)) {
          at = i;
          break;
        }
      if (!at) return fail(op, name) << " view has a stride across dimensions";
      const Factor &f = fs.factors[*at];
      const int64_t mult = stride / fs.before[*at];
      if (f.sym != want && !(want == Sym::None && f.sym == Sym::None) &&
          !(want == Sym::Batch && f.sym == Sym::Batch))
        return fail(op, name) << " view reads the "
                              << (f.sym == Sym::Seq ? "sequence" : f.sym == Sym::Batch ? "batch"
                                                                                        : "features")
                              << " along its dimension " << d;
      if (f.sym == Sym::Seq && (mult != 1 || size != m_))
        return fail(op, name) << " view does not read the whole sequence in order";
      nshape.push_back(f.sym == Sym::Seq ? t_ : size);
      nstrides.push_back(mult * fs.after[*at]);
    }
    noffset = 0;
    int64_t rest = static_cast<int64_t>(offset.value_or(0));
    for (size_t i = 0; i < n; ++i) {
      const int64_t idx = rest / fs.before[i];
      rest %= fs.before[i];
      if (idx != 0 && fs.factors[i].sym != Sym::None)
        return fail(op, name) << " view starts inside the sequence or batch";
      noffset += idx * fs.after[i];
    }
    return success();
  };
  SmallVector<int64_t> qs, qst, ks, kst, vs, vst;
  int64_t qo, ko, vo;
  if (failed(remap(op.getQuery(), op.getQueryShape(), op.getQueryStrides(), op.getQueryOffset(),
                   "query", qs, qst, qo)) ||
      failed(remap(op.getKey(), op.getKeyShape(), op.getKeyStrides(), op.getKeyOffset(), "key",
                   ks, kst, ko)) ||
      failed(remap(op.getValue(), op.getValueShape(), op.getValueStrides(), op.getValueOffset(),
                   "value", vs, vst, vo)))
    return failure();
  if (op.getKeyShape()[2] != m_ || op.getQueryShape()[2] != m_)
    return fail(op, "an attention whose queries or keys are not the whole sequence");
  if (qs[0] != b_ && !(qs[0] == 1 && b_ == 1))
    return fail(op, "an attention whose batch is not the tokens' batch");
  // The caches: one pair of globals per attention, shared by the programs.
  const unsigned index = attentions_++;
  Type f32 = Float32Type::get(op.getContext());
  // Keys in tiles of 16, transposed ([B, Hkv, M / 16, D, 16]): what the
  // kernel reads fastest. The caches round M up to whole tiles.
  const int64_t tiles = (m_ + kCachedKeyTile - 1) / kCachedKeyTile;
  auto kType = RankedTensorType::get({b_, ks[1], tiles, ks[3], kCachedKeyTile}, f32);
  auto vType = RankedTensorType::get({b_, vs[1], tiles * kCachedKeyTile, vs[3]}, f32);
  if (index == caches_.size()) {
    OpBuilder mb = OpBuilder::atBlockBegin(module_.getBody());
    auto global = [&](RankedTensorType t, const std::string &name) {
      return ml_program::GlobalOp::create(
          mb, op.getLoc(), name, t, /*is_mutable=*/true,
          DenseElementsAttr::get(t, mb.getFloatAttr(f32, 0.0)), mb.getStringAttr("private"));
    };
    caches_.push_back({global(kType, "kv." + std::to_string(index) + ".key"),
                       global(vType, "kv." + std::to_string(index) + ".value")});
  } else if (caches_[index].first.getType() != kType || caches_[index].second.getType() != vType) {
    return fail(op, "the programs disagree on the cache's shape");
  }
  OpBuilder b(op);
  Location loc = op.getLoc();
  auto kc = ml_program::GlobalLoadOp::create(
      b, loc, kType, SymbolRefAttr::get(caches_[index].first.getSymNameAttr()));
  auto vc = ml_program::GlobalLoadOp::create(
      b, loc, vType, SymbolRefAttr::get(caches_[index].second.getSymNameAttr()));
  const bool bshd = op.getResultBshd();
  SmallVector<int64_t> rs = bshd ? SmallVector<int64_t>{qs[0], t_, qs[1], vs[3]}
                                 : SmallVector<int64_t>{qs[0], qs[1], t_, vs[3]};
  auto offsetAttr = [&](int64_t o) { return o ? b.getI64IntegerAttr(o) : IntegerAttr(); };
  auto cached = CachedAttentionOp::create(
      b, loc, TypeRange{RankedTensorType::get(rs, f32), kType, vType}, op.getQuery(), op.getKey(),
      op.getValue(), kc, vc, positions_, lengths_, slots_, b.getDenseI64ArrayAttr(qs),
      b.getDenseI64ArrayAttr(qst), b.getDenseI64ArrayAttr(ks), b.getDenseI64ArrayAttr(kst),
      b.getDenseI64ArrayAttr(vs), b.getDenseI64ArrayAttr(vst), offsetAttr(qo), offsetAttr(ko),
      offsetAttr(vo), op.getScaleAttr(),
      window && window < m_ ? b.getI64IntegerAttr(window) : IntegerAttr(),
      bshd ? b.getUnitAttr() : UnitAttr());
  ml_program::GlobalStoreOp::create(b, loc,
                                    SymbolRefAttr::get(caches_[index].first.getSymNameAttr()),
                                    cached.getKeyCacheOut());
  ml_program::GlobalStoreOp::create(b, loc,
                                    SymbolRefAttr::get(caches_[index].second.getSymNameAttr()),
                                    cached.getValueCacheOut());
  Axis batch{Factor{Sym::Batch, b_}}, seq{Factor{Sym::Seq, m_}};
  Layout out = bshd ? Layout{batch, seq, staticAxis(qs[1]), staticAxis(vs[3])}
                    : Layout{batch, staticAxis(qs[1]), seq, staticAxis(vs[3])};
  layout_[cached.getResult()] = out;
  op.getResult().replaceAllUsesWith(cached.getResult());
  op.erase();
  return success();
}

LogicalResult Deriver::visit(Operation *op) {
  if (auto a = dyn_cast<AttentionOp>(op)) return attention(a);
  if (auto m = dyn_cast<MatmulOp>(op)) return matmul(m);
  if (op->hasTrait<OpTrait::ds::Elementwise>()) return elementwise(op);
  if (isa<ReshapeOp>(op)) return reshape(op);
  Value in = op->getNumOperands() ? op->getOperand(0) : Value();
  auto keep = [&](ArrayRef<int64_t> axes, StringRef what) -> LogicalResult {
    for (int64_t a : axes)
      if (failed(alongStatic(op, in, a, what))) return failure();
    Layout out = layout_[in];
    for (Value r : op->getResults()) setLayout(r, out);
    return success();
  };
  if (auto sq = dyn_cast<SqueezeOp>(op)) {
    Layout out;
    for (auto [i, a] : llvm::enumerate(layout_[in]))
      if (!llvm::is_contained(sq.getAxes(), static_cast<int64_t>(i))) out.push_back(a);
      else if (symbolic(a)) return fail(op, "a squeeze of the sequence");
    setLayout(op->getResult(0), out);
    return success();
  }
  if (auto usq = dyn_cast<UnsqueezeOp>(op)) {
    Layout out;
    const Layout &l = layout_[in];
    size_t next = 0;
    for (int64_t i = 0; i < usq.getType().getRank(); ++i)
      out.push_back(llvm::is_contained(usq.getAxes(), i) ? staticAxis(1) : l[next++]);
    setLayout(op->getResult(0), out);
    return success();
  }
  if (auto tr = dyn_cast<TransposeOp>(op)) {
    Layout out;
    for (int64_t p : tr.getPermutation()) out.push_back(layout_[in][p]);
    setLayout(op->getResult(0), out);
    return success();
  }
  if (auto sl = dyn_cast<SliceOp>(op)) {
    Layout out = layout_[in];
    ArrayRef<int64_t> rs = sl.getType().getShape();
    for (int64_t a = 0; a < static_cast<int64_t>(out.size()); ++a) {
      if (sl.getStarts()[a] == 0 && sl.getSteps()[a] == 1 && rs[a] == extentOf(out[a])) continue;
      if (failed(alongStatic(op, in, a, "slices"))) return failure();
      out[a] = staticAxis(rs[a]);
    }
    setLayout(op->getResult(0), out);
    return success();
  }
  if (auto cat = dyn_cast<ConcatOp>(op)) {
    const int64_t axis = cat.getAxis();
    std::optional<Layout> out;
    for (Value o : cat.getInputs()) {
      if (!dynamic(o)) {
        ArrayRef<int64_t> s = typeOf(o).getShape();
        for (auto [a, d] : llvm::enumerate(s))
          if (static_cast<int64_t>(a) != axis && d != 1 && out && symbolic((*out)[a]))
            return fail(op, "a concatenation with a constant along the sequence");
        continue;
      }
      if (failed(alongStatic(op, o, axis, "concatenates"))) return failure();
      if (!out) out = layout_[o];
    }
    (*out)[axis] = staticAxis(cat.getType().getDimSize(axis));
    for (Value o : cat.getInputs())
      if (!dynamic(o))
        for (auto [a, d] : llvm::enumerate(typeOf(o).getShape()))
          if (static_cast<int64_t>(a) != axis && symbolic((*out)[a]))
            return fail(op, "a concatenation with a constant along the sequence or batch");
    setLayout(op->getResult(0), *out);
    return success();
  }
  if (auto sp = dyn_cast<SplitOp>(op)) {
    if (failed(alongStatic(op, in, sp.getAxis(), "splits"))) return failure();
    for (Value r : sp.getResults()) {
      Layout out = layout_[in];
      out[sp.getAxis()] = staticAxis(typeOf(r).getDimSize(sp.getAxis()));
      setLayout(r, out);
    }
    return success();
  }
  if (auto g = dyn_cast<GatherOp>(op)) {
    const int64_t axis = g.getAxis();
    Layout out;
    ArrayRef<int64_t> ds = typeOf(g.getData()).getShape();
    if (dynamic(g.getData()) && dynamic(g.getIndices()))
      return fail(op, "a gather whose data and indices both depend on the tokens");
    if (dynamic(g.getIndices())) {
      for (int64_t a = 0; a < axis; ++a) out.push_back(staticAxis(ds[a]));
      for (const Axis &a : layout_[g.getIndices()]) out.push_back(a);
      for (int64_t a = axis + 1; a < static_cast<int64_t>(ds.size()); ++a)
        out.push_back(staticAxis(ds[a]));
    } else {
      if (failed(alongStatic(op, g.getData(), axis, "gathers"))) return failure();
      const Layout &l = layout_[g.getData()];
      for (int64_t a = 0; a < axis; ++a) out.push_back(l[a]);
      for (int64_t d : typeOf(g.getIndices()).getShape()) out.push_back(staticAxis(d));
      for (int64_t a = axis + 1; a < static_cast<int64_t>(l.size()); ++a) out.push_back(l[a]);
    }
    setLayout(g.getResult(), out);
    return success();
  }
  if (isa<ReduceSumOp, ReduceMeanOp, ReduceMaxOp, ReduceMinOp, ReduceProdOp>(op)) {
    ArrayRef<int64_t> axes = cast<DenseI64ArrayAttr>(op->getAttr("axes")).asArrayRef();
    const bool keepdims = cast<BoolAttr>(op->getAttr("keepdims")).getValue();
    for (int64_t a : axes)
      if (failed(alongStatic(op, in, a, "reduces"))) return failure();
    Layout out;
    for (auto [i, a] : llvm::enumerate(layout_[in])) {
      if (!llvm::is_contained(axes, static_cast<int64_t>(i))) out.push_back(a);
      else if (keepdims) out.push_back(staticAxis(1));
    }
    setLayout(op->getResult(0), out);
    return success();
  }
  if (auto s = dyn_cast<SoftmaxOp>(op)) return keep({s.getAxis()}, "normalizes");
  if (auto s = dyn_cast<LogSoftmaxOp>(op)) return keep({s.getAxis()}, "normalizes");
  if (auto n = dyn_cast<LayerNormOp>(op)) {
    SmallVector<int64_t> axes;
    for (int64_t a = n.getAxis(); a < n.getType().getRank(); ++a) axes.push_back(a);
    for (Value o : {n.getScale(), n.getBias()})
      if (o && dynamic(o)) return fail(op, "a normalization scale that depends on the tokens");
    return keep(axes, "normalizes");
  }
  if (auto n = dyn_cast<RmsNormOp>(op)) {
    if (n.getScale() && dynamic(n.getScale()))
      return fail(op, "a normalization scale that depends on the tokens");
    return keep({n.getType().getRank() - 1}, "normalizes");
  }
  if (auto e = dyn_cast<ExpandOp>(op)) {
    ArrayRef<int64_t> rs = e.getType().getShape();
    const Layout &l = layout_[in];
    const int64_t rank = static_cast<int64_t>(rs.size()), off = rank - static_cast<int64_t>(l.size());
    Layout out;
    for (int64_t i = 0; i < rank; ++i) {
      const int64_t a = i - off;
      if (a >= 0 && (extentOf(l[a]) == rs[i] || symbolic(l[a]))) out.push_back(l[a]);
      else out.push_back(staticAxis(rs[i]));
    }
    setLayout(e.getResult(), out);
    return success();
  }
  if (auto c = dyn_cast<CumSumOp>(op)) return keep({c.getAxis()}, "accumulates");
  // Tensor parallelism: a row-parallel product's partial sums, added over
  // the ranks element by element.
  if (isa<AllReduceOp>(op)) return keep({}, "");
  if (auto a = dyn_cast<ArgMaxOp>(op)) {
    if (failed(alongStatic(op, in, a.getAxis(), "reduces"))) return failure();
    Layout out;
    for (auto [i, ax] : llvm::enumerate(layout_[in]))
      if (static_cast<int64_t>(i) != a.getAxis()) out.push_back(ax);
      else if (a.getKeepdims()) out.push_back(staticAxis(1));
    setLayout(a.getResult(), out);
    return success();
  }
  return fail(op, "'") << op->getName()
                       << "' on values that depend on the tokens is not supported by "
                          "ds-derive-generation";
}

/// The LM head runs on each row's last real token only: the rows are
/// picked as early as the ops after them work on one token at a time.
LogicalResult Deriver::selectLastRows() {
  auto ret = cast<func::ReturnOp>(f_.getBody().front().getTerminator());
  Value logits;
  for (Value v : ret.getOperands()) {
    if (!dynamic(v)) continue;
    if (logits)
      return fail(ret, "the model returns more than one value that depends on the tokens; "
                       "generation keeps the logits only");
    logits = v;
  }
  if (!logits) return fail(ret, "no output depends on the tokens");
  auto rowsOf = [&](Value v) -> std::optional<int64_t> { // the sequence axis, if pickable
    const Layout &l = layout_[v];
    std::optional<int64_t> seq;
    for (auto [i, a] : llvm::enumerate(l)) {
      if (holds(a, Sym::Seq)) {
        if (!only(a, Sym::Seq) || seq) return std::nullopt;
        seq = i;
      } else if (static_cast<int64_t>(i) < (seq ? *seq : INT64_MAX) && extentOf(a) != 1 &&
                 !only(a, Sym::Batch)) {
        return std::nullopt;
      }
    }
    return seq;
  };
  const Layout &ll = layout_[logits];
  if (!rowsOf(logits) || *rowsOf(logits) != static_cast<int64_t>(ll.size()) - 2)
    return fail(ret, "the logits are not [batch, sequence, vocabulary]");
  // Walk up through ops that work on each token alone.
  Value at = logits;
  while (Operation *def = at.getDefiningOp()) {
    Value in;
    bool tokenwise = isa<RmsNormOp, LayerNormOp, SoftmaxOp, LogSoftmaxOp, MatmulOp, AllReduceOp>(def) ||
                     def->hasTrait<OpTrait::ds::Elementwise>();
    for (Value o : def->getOperands()) {
      if (tables_.contains(o)) tokenwise = false;
      if (!dynamic(o)) continue;
      if (in) tokenwise = false;
      in = o;
    }
    if (!tokenwise || !in || !in.hasOneUse() || !rowsOf(in) ||
        layout_[in].size() != layout_[at].size() || *rowsOf(in) != *rowsOf(at))
      break;
    if (auto mm = dyn_cast<MatmulOp>(def); mm && mm.getLhs() != in) break;
    at = in;
  }
  const int64_t seq = *rowsOf(at);
  RankedTensorType t = typeOf(at);
  int64_t inner = 1;
  for (int64_t d : t.getShape().drop_front(seq + 1)) inner *= d;
  OpBuilder b(f_.getContext());
  b.setInsertionPointAfterValue(at);
  Location loc = at.getLoc();
  Type i64 = b.getI64Type();
  // Row b*T + max(length - 1, 0) of the [B*T, rest] view.
  auto one = ConstantOp::create(b, loc, DenseElementsAttr::get(RankedTensorType::get({}, i64),
                                                               b.getI64IntegerAttr(1).getValue()));
  auto zero = ConstantOp::create(b, loc, DenseElementsAttr::get(RankedTensorType::get({}, i64),
                                                                b.getI64IntegerAttr(0).getValue()));
  auto last = MaxOp::create(b, loc, lengths_.getType(),
                            SubOp::create(b, loc, lengths_.getType(), lengths_, one), zero);
  SmallVector<int64_t> starts;
  for (int64_t r = 0; r < b_; ++r) starts.push_back(r * t_);
  auto base = ConstantOp::create(
      b, loc, DenseElementsAttr::get(RankedTensorType::get({b_}, i64), ArrayRef<int64_t>(starts)));
  auto rows = AddOp::create(b, loc, lengths_.getType(), base, last);
  Type element = t.getElementType();
  auto flat = ReshapeOp::create(b, loc, RankedTensorType::get({b_ * t_, inner}, element), at);
  auto picked = GatherOp::create(b, loc, RankedTensorType::get({b_, inner}, element), flat, rows,
                                 b.getI64IntegerAttr(0), IntegerAttr());
  Layout selected = layout_[at];
  auto back = ReshapeOp::create(b, loc, newType(selected, element, /*selected=*/true), picked);
  at.replaceAllUsesExcept(back.getResult(), flat);
  // Everything after it works on one token per row.
  llvm::DenseSet<Value> one1{back.getResult()};
  for (Operation *op = back->getNextNode(); op; op = op->getNextNode()) {
    if (!llvm::any_of(op->getOperands(), [&](Value o) { return one1.contains(o); })) continue;
    for (Value r : op->getResults()) {
      r.setType(newType(layout_[r], typeOf(r).getElementType(), true));
      one1.insert(r);
    }
  }
  return success();
}

LogicalResult Deriver::run() {
  Block &body = f_.getBody().front();
  if (body.getNumArguments() != 1)
    return f_.emitError("generation needs a model whose only input is the token ids "
                        "[batch, sequence]; this one has ")
           << body.getNumArguments() << " inputs (attention_mask and position_ids are fixed by "
                                        "ds-opt --generate; bind others with --bind-input)";
  BlockArgument ids = body.getArgument(0);
  auto idsType = dyn_cast<RankedTensorType>(ids.getType());
  if (!idsType || idsType.getRank() != 2 || !isa<IntegerType>(idsType.getElementType()) ||
      idsType.getDimSize(0) != b_ || idsType.getDimSize(1) != m_)
    return f_.emitError("generation needs token ids [") << b_ << ", " << m_ << "], got "
                                                        << ids.getType();
  MLIRContext *ctx = f_.getContext();
  Type i64 = IntegerType::get(ctx, 64);
  auto rowType = RankedTensorType::get({b_}, i64);
  positions_ = body.addArgument(rowType, f_.getLoc());
  lengths_ = body.addArgument(rowType, f_.getLoc());
  slots_ = body.addArgument(rowType, f_.getLoc());
  setLayout(ids, Layout{Axis{Factor{Sym::Batch, b_}}, Axis{Factor{Sym::Seq, m_}}});
  // Each row's positions: positions[b] + t, held inside the cache (rows
  // past a row's length compute what they compute, nothing reads them).
  OpBuilder b = OpBuilder::atBlockBegin(&body);
  Location loc = f_.getLoc();
  SmallVector<int64_t> steps;
  for (int64_t t = 0; t < t_; ++t) steps.push_back(t);
  auto tType = RankedTensorType::get({1, t_}, i64);
  auto arange = ConstantOp::create(b, loc, DenseElementsAttr::get(tType, ArrayRef<int64_t>(steps)));
  auto column = ReshapeOp::create(b, loc, RankedTensorType::get({b_, 1}, i64), positions_);
  auto idxType = RankedTensorType::get({b_, t_}, i64);
  auto sum = AddOp::create(b, loc, idxType, column, arange);
  auto limit = ConstantOp::create(
      b, loc, DenseElementsAttr::get(RankedTensorType::get({}, i64), APInt(64, m_ - 1)));
  positionIndex_ = MinOp::create(b, loc, idxType, sum, limit).getResult();
  Operation *first = positionIndex_.getDefiningOp()->getNextNode();

  for (Operation *op = first; op;) {
    Operation *next = op->getNextNode();
    if (!isa<func::ReturnOp>(op) &&
        llvm::any_of(op->getOperands(), [&](Value v) { return dynamic(v); }))
      if (failed(visit(op))) return failure();
    op = next;
  }
  if (t_ > 1 && failed(selectLastRows())) return failure();
  // The logits [B, V].
  auto ret = cast<func::ReturnOp>(body.getTerminator());
  SmallVector<Value> results;
  for (Value v : ret.getOperands()) {
    if (!dynamic(v)) continue;
    RankedTensorType t = typeOf(v);
    int64_t inner = t.getNumElements() / b_;
    OpBuilder rb(ret);
    results.push_back(
        ReshapeOp::create(rb, ret.getLoc(), RankedTensorType::get({b_, inner}, t.getElementType()), v));
  }
  if (results.empty()) return fail(ret, "no output depends on the tokens");
  ret->setOperands(results);
  SmallVector<Type> argTypes(body.getArgumentTypes());
  f_.setType(FunctionType::get(ctx, argTypes, TypeRange(ValueRange(results))));
  StringAttr idsName = f_.getArgAttrOfType<StringAttr>(0, "ds.name");
  SmallVector<DictionaryAttr> argAttrs;
  auto named = [&](StringRef n) {
    return DictionaryAttr::get(ctx, {NamedAttribute(StringAttr::get(ctx, "ds.name"),
                                                    StringAttr::get(ctx, n))});
  };
  argAttrs.push_back(named(idsName ? idsName.getValue() : "input_ids"));
  for (StringRef n : {"positions", "lengths", "slots"}) argAttrs.push_back(named(n));
  f_.setAllArgAttrs(argAttrs);
  f_.setAllResultAttrs(ArrayRef<DictionaryAttr>{named("logits")});
  return success();
}

class DeriveGenerationPass
    : public mlir::ds::impl::DeriveGenerationPassBase<DeriveGenerationPass> {
public:
  using DeriveGenerationPassBase::DeriveGenerationPassBase;
  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto main = module.lookupSymbol<func::FuncOp>("main");
    if (!main || main.isExternal() || !main.getBody().hasOneBlock()) {
      module.emitError("ds-derive-generation needs the model's forward pass as @main");
      return signalPassFailure();
    }
    auto ids = main.getNumArguments() > 0
                   ? dyn_cast<RankedTensorType>(main.getArgument(0).getType())
                   : RankedTensorType();
    if (!ids || ids.getRank() != 2 || !ids.hasStaticShape()) {
      main.emitError("generation needs token ids [batch, sequence] as the model's input");
      return signalPassFailure();
    }
    const int64_t b = ids.getDimSize(0), m = ids.getDimSize(1);
    if (chunk < 1) {
      module.emitError("ds-derive-generation: chunk must be >= 1");
      return signalPassFailure();
    }
    const int64_t c = std::min<int64_t>(chunk, m);
    SmallVector<std::pair<ml_program::GlobalOp, ml_program::GlobalOp>> caches;
    DenseMap<Value, DenseElementsAttr> evaluated;
    SmallVector<std::pair<int64_t, StringRef>> programs{{c, "prefill"}};
    if (c > 1) programs.push_back({1, "decode"});
    for (auto [t, name] : programs) {
      func::FuncOp f = main.clone();
      f.setSymName(name);
      OpBuilder(main).insert(f);
      Deriver d(module, f, t, m, b, caches, evaluated);
      if (failed(d.run())) return signalPassFailure();
    }
    main.erase();
    int64_t vocab = 0;
    if (auto f = module.lookupSymbol<func::FuncOp>("prefill"))
      vocab = cast<RankedTensorType>(f.getResultTypes()[0]).getDimSize(1);
    Builder bb(module.getContext());
    module->setAttr(kGenerationAttr,
                    bb.getDictionaryAttr({bb.getNamedAttr("batch", bb.getI64IntegerAttr(b)),
                                          bb.getNamedAttr("max_tokens", bb.getI64IntegerAttr(m)),
                                          bb.getNamedAttr("chunk", bb.getI64IntegerAttr(c)),
                                          bb.getNamedAttr("vocab", bb.getI64IntegerAttr(vocab)),
                                          bb.getNamedAttr("layers", bb.getI64IntegerAttr(
                                                                        caches.size()))}));
    if (caches.empty()) {
      module.emitError("ds-derive-generation: the model has no attention (is it fused? "
                       "ds-fuse-attention)");
      return signalPassFailure();
    }
  }
};

} // namespace

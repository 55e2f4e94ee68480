//===- TensorParallel.cpp - Megatron-style splits of weight matmul pairs --===//
//
// A column-parallel matmul (weights split by output column) feeds ops that
// can run on slices and ends in a row-parallel matmul (weights split by
// input row) whose partial sums one all_reduce completes: Megatron-LM's
// layout for attention (QKV | output projection) and MLPs (fc1 | fc2). This
// pass finds the pairs, checks every split divides, and states the column
// splits as ds.shard constraints; the rest follows from propagation.
//
//===----------------------------------------------------------------------===//
#include "ds/Partition/Passes.h"
#include "ds/Partition/Sharding.h"
#include "ds/Plan/KernelBridge.h"
#include "mlir/IR/Builders.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/StringSet.h"

#include <cstring>
#include <optional>

namespace mlir::ds {
#define GEN_PASS_DEF_TENSORPARALLELPASS
#include "ds/Partition/Passes.h.inc"
} // namespace mlir::ds

using namespace mlir;
using namespace mlir::ds;

namespace {

/// The layer a matmul belongs to, for messages: its weight's name and the
/// ONNX node it came from.
std::string layerName(MatmulOp m) {
  std::string s;
  if (auto p = m.getRhs().getDefiningOp<ParameterOp>()) s = "'" + p.getSymName().str() + "'";
  Location loc = m.getLoc();
  if (auto f = dyn_cast<FusedLoc>(loc); f && !f.getLocations().empty()) loc = f.getLocations()[0];
  if (auto n = dyn_cast<NameLoc>(loc)) s += " (node '" + n.getName().str() + "')";
  return s;
}

bool isWeightMatmul(Operation *op) {
  auto m = dyn_cast<MatmulOp>(op);
  return m && !m.getTransposeLhs() && !m.getTransposeRhs() &&
         m.getRhs().getDefiningOp<ParameterOp>() && m.getRhs().getType().getRank() == 2 &&
         m.getLhs().getType().getRank() >= 2;
}

bool isLeaf(Value v) {
  Operation *d = v.getDefiningOp();
  return d && isa<ConstantOp, ParameterOp, FillOp>(d);
}

/// A value computed from constants alone (an exporter's causal mask or
/// rotary table before ds-fold-constants; at inference parameters are
/// constants too): the same on every rank, so a region reads it whole.
bool isConstantOnly(Value root, bool parametersAreConstants, DenseMap<Value, bool> &memo) {
  // Depth-first without recursion: a graph may be thousands of ops deep.
  SmallVector<std::pair<Value, bool>> stack{{root, false}};
  while (!stack.empty()) {
    auto [v, expanded] = stack.pop_back_val();
    if (memo.count(v) && !expanded) continue;
    Operation *d = v.getDefiningOp();
    const bool leaf =
        d && (isa<ConstantOp, FillOp>(d) || (parametersAreConstants && isa<ParameterOp>(d)));
    if (!d || !(leaf || (d->getNumRegions() == 0 && d->getNumOperands() > 0 &&
                         isMemoryEffectFree(d) && !isa<ParameterOp>(d)))) {
      memo[v] = false;
      continue;
    }
    if (leaf) {
      memo[v] = true;
      continue;
    }
    if (!expanded) {
      memo[v] = false; // provisional until its operands are known
      stack.push_back({v, true});
      for (Value o : d->getOperands())
        if (!memo.count(o)) stack.push_back({o, false});
      continue;
    }
    memo[v] = llvm::all_of(d->getOperands(), [&](Value o) { return memo.lookup(o); });
  }
  return memo.lookup(root);
}

/// Ops a column split passes through on its way to the row-parallel matmul:
/// elementwise and layout-only ops, softmaxes, and products of activations.
bool isTransparent(Operation *op) {
  return (op->hasTrait<OpTrait::ds::Elementwise>() || op->hasTrait<OpTrait::ds::LayoutOnly>() ||
          isa<SoftmaxOp, LogSoftmaxOp, MatmulOp, SliceOp, ConcatOp, ExpandOp>(op)) &&
         !isWeightMatmul(op);
}

/// One column range of a fused weight's output, and the value (a split
/// result, slice or gather) that reads it.
struct FusedPart {
  int64_t start;
  int64_t size;
  Value replaced;
};

/// How a fused weight matmul's output is taken apart: its parts in column
/// order, and the ops that take it apart (erased once each part is its own
/// matmul).
struct FusedSplit {
  int64_t cols = 0; // the weight's columns
  Value out;        // the matmul's result, or its bias add's
  int64_t last = 0; // out's last axis
  AddOp bias;
  Value biasValue;
  ReshapeOp flat;      // [B*S, cols] back to [B, S, cols] (GPT-2's Conv1D)
  ReshapeOp packed;    // the packed form's reshape,
  TransposeOp packedT; // and its transpose if any
  SmallVector<FusedPart> parts;
  SmallVector<Operation *> users;
};

// A [cols] bias added to the output's only use splits along with the
// weight, so each part keeps its own bias add.
void findBias(MatmulOp m, FusedSplit &s) {
  s.out = m.getResult();
  if (!s.out.hasOneUse()) return;
  auto add = dyn_cast<AddOp>(*s.out.getUsers().begin());
  if (!add) return;
  Value other = add.getLhs() == s.out ? add.getRhs() : add.getLhs();
  auto ot = cast<RankedTensorType>(other.getType());
  if (isLeaf(other) && ot.getRank() == 1 && ot.getDimSize(0) == s.cols) {
    s.bias = add;
    s.biasValue = other;
    s.out = add.getResult();
  }
}

// Part i of the packed form is the one gather of constant index i (negative
// counts from the end) along the k axis; empty unless each index has one.
SmallVector<Value> gathersByIndex(ArrayRef<Operation *> pickers, int64_t axis, int64_t k) {
  SmallVector<Value> byIndex(k);
  if (pickers.empty()) return {};
  for (Operation *u : pickers) {
    auto g = dyn_cast<GatherOp>(u);
    DenseElementsAttr idx;
    if (g && g.getAxis() == static_cast<uint64_t>(axis))
      if (auto c = g.getIndices().getDefiningOp<ConstantOp>())
        idx = dyn_cast<DenseElementsAttr>(c.getValue());
    if (!idx || idx.getType().getRank() != 0) return {};
    int64_t i = (*idx.getValues<APInt>().begin()).getSExtValue();
    if (i < 0) i += k;
    if (i < 0 || i >= k || byIndex[i]) return {};
    byIndex[i] = g.getResult();
  }
  if (!llvm::all_of(byIndex, [](Value x) { return bool(x); })) return {};
  return byIndex;
}

// The packed form (timm, ViT): reshape [..., m] -> [..., k, rest...], maybe
// a transpose, then part i picked by a gather of index i along the k axis.
// Part i is then its own [..., m/k] reshaped to [..., rest] and transposed
// without the k axis. Leaves `s` as it was unless every index is gathered once.
void matchPacked(FusedSplit &s) {
  if (s.users.size() != 1) return;
  auto r = dyn_cast<ReshapeOp>(s.users.front());
  if (!r) return;
  int64_t last = s.last;
  ArrayRef<int64_t> in = cast<RankedTensorType>(s.out.getType()).getShape();
  ArrayRef<int64_t> rs = r.getType().getShape();
  if (!(rs.size() >= in.size() + 1 && rs.take_front(last) == in.take_front(last) &&
        rs[last] >= 2))
    return;
  Value v = r.getResult();
  int64_t axis = last;
  TransposeOp packedT;
  SmallVector<Operation *> pickers(v.getUsers().begin(), v.getUsers().end());
  if (pickers.size() == 1 && isa<TransposeOp>(pickers.front())) {
    packedT = cast<TransposeOp>(pickers.front());
    axis = llvm::find(packedT.getPermutation(), last) - packedT.getPermutation().begin();
    v = packedT.getResult();
    pickers.assign(v.getUsers().begin(), v.getUsers().end());
  }
  int64_t k = rs[last];
  SmallVector<Value> byIndex = gathersByIndex(pickers, axis, k);
  if (byIndex.empty()) return;
  s.packed = r;
  s.packedT = packedT;
  for (int64_t i = 0; i < k; ++i) s.parts.push_back({i * (s.cols / k), s.cols / k, byIndex[i]});
  s.users = pickers;
  if (packedT) s.users.push_back(packedT);
  s.users.push_back(r);
}

// The plain forms: one split of the last axis, or slices that keep every
// other axis whole. Any other user keeps the weight fused (false).
bool matchSlices(FusedSplit &s) {
  int64_t last = s.last;
  for (Operation *u : s.users) {
    auto split = dyn_cast<SplitOp>(u);
    if (split && split.getAxis() == last && s.users.size() == 1) {
      int64_t at = 0;
      for (Value r : split.getResults()) {
        int64_t n = cast<RankedTensorType>(r.getType()).getDimSize(last);
        s.parts.push_back({at, n, r});
        at += n;
      }
      continue;
    }
    auto slice = dyn_cast<SliceOp>(u);
    if (!slice) return false;
    ArrayRef<int64_t> in = cast<RankedTensorType>(s.out.getType()).getShape();
    ArrayRef<int64_t> res = slice.getType().getShape();
    for (int64_t d = 0; d < last; ++d)
      if (in[d] != res[d] || slice.getStarts()[d] != 0) return false;
    if (slice.getSteps()[last] != 1) return false;
    s.parts.push_back({slice.getStarts()[last], res[last], slice.getResult()});
  }
  return true;
}

// Only equal parts that tile all the columns (at least two) become
// separate weights: anything else is not a q/k/v-style fusion.
bool partsTileColumns(FusedSplit &s) {
  llvm::sort(s.parts, [](auto &a, auto &b) { return a.start < b.start; });
  int64_t at = 0;
  for (FusedPart &p : s.parts) {
    if (p.start != at || p.size != s.parts.front().size) return false;
    at += p.size;
  }
  return at == s.cols && s.parts.size() >= 2;
}

// Finds how m's output is split into equal column parts, if it only ever is.
std::optional<FusedSplit> findFusedSplit(MatmulOp m) {
  FusedSplit s;
  s.cols = m.getRhs().getType().getDimSize(1);
  findBias(m, s);
  // A reshape that only regroups the leading (token) axes comes along.
  if (s.out.hasOneUse())
    if (auto r = dyn_cast<ReshapeOp>(*s.out.getUsers().begin());
        r && r.getType().getRank() >= 2 && r.getType().getShape().back() == s.cols &&
        cast<RankedTensorType>(s.out.getType()).getShape().back() == s.cols) {
      s.flat = r;
      s.out = r.getResult();
    }
  s.last = cast<RankedTensorType>(s.out.getType()).getRank() - 1;
  s.users.assign(s.out.getUsers().begin(), s.out.getUsers().end());
  if (s.users.empty()) return std::nullopt;
  matchPacked(s);
  if (!s.packed && !matchSlices(s)) return std::nullopt;
  if (!partsTileColumns(s)) return std::nullopt;
  if (s.flat) s.users.push_back(s.flat); // erased after the ops that read it
  return s;
}

/// The fused weight's and bias's bytes, read before the IR changes so a
/// failure leaves it as it was.
struct FusedBytes {
  std::vector<uint8_t> weight, bias;
  int64_t rows;
  size_t elemBytes;
};

FailureOr<FusedBytes> readFusedBytes(MatmulOp m, const FusedSplit &s) {
  auto w = m.getRhs().getDefiningOp<ParameterOp>();
  FailureOr<std::vector<uint8_t>> wBytes = constantBytes(w.getValue(), w.getLoc());
  if (failed(wBytes)) return failure();
  FusedBytes fb;
  if (s.biasValue) {
    Operation *bd = s.biasValue.getDefiningOp();
    Attribute v = isa<ParameterOp>(bd) ? cast<ParameterOp>(bd).getValue()
                                       : Attribute(cast<ConstantOp>(bd).getValue());
    FailureOr<std::vector<uint8_t>> bb = constantBytes(v, bd->getLoc());
    if (failed(bb)) return failure();
    fb.bias = *bb;
  }
  fb.rows = m.getRhs().getType().getDimSize(0);
  fb.elemBytes = wBytes->size() / static_cast<size_t>(fb.rows * s.cols);
  fb.weight = std::move(*wBytes);
  return fb;
}

// Part i's own bias (a parameter "name#i" or a constant), added on the same
// side as the fused bias was.
/// What a trained part is of, for --export-onnx and checkpoints: the ONNX
/// initializer whose last-axis block `i` it holds (of its transpose when the
/// fused weight is stored transposed, ds.transpose_of).
void markPart(ParameterOp part, ParameterOp fused, size_t i) {
  Builder b(part.getContext());
  auto of = fused->getAttrOfType<StringAttr>("ds.transpose_of");
  part->setAttr("ds.part_of", of ? of : b.getStringAttr(fused.getSymName()));
  part->setAttr("ds.part_index", b.getI64IntegerAttr(static_cast<int64_t>(i)));
  if (of) part->setAttr("ds.part_transposed", b.getUnitAttr());
}

Value addPartBias(OpBuilder &b, MatmulOp m, FusedSplit &s, const FusedBytes &fb, size_t i,
                  Value y) {
  const FusedPart &part = s.parts[i];
  size_t es = fb.elemBytes;
  auto bt = RankedTensorType::get({part.size}, m.getRhs().getType().getElementType());
  ArrayRef<uint8_t> piece(fb.bias.data() + part.start * es, part.size * es);
  Value pb;
  if (auto bp = s.biasValue.getDefiningOp<ParameterOp>()) {
    auto pp = ParameterOp::create(b, bp.getLoc(), (bp.getSymName() + "#" + Twine(i)).str(),
                                  denseFromBytes(bt, piece));
    markPart(pp, bp, i);
    pb = pp;
  } else
    pb = ConstantOp::create(b, s.bias.getLoc(), denseFromBytes(bt, piece));
  return s.bias.getLhs() == m.getResult() ? Value(AddOp::create(b, s.bias.getLoc(), y, pb))
                                          : Value(AddOp::create(b, s.bias.getLoc(), pb, y));
}

// A packed part is [..., m/k]: reshaped to [..., rest] and transposed as the
// packed form was, without the k axis, it is what the gather gave.
Value unpackPart(OpBuilder &b, FusedSplit &s, Value y, Type elem) {
  SmallVector<int64_t> shape(s.packed.getType().getShape());
  shape.erase(shape.begin() + s.last);
  y = ReshapeOp::create(b, s.packed.getLoc(), RankedTensorType::get(shape, elem), y);
  if (s.packedT) {
    SmallVector<int64_t> perm;
    for (int64_t p : s.packedT.getPermutation())
      if (p != s.last) perm.push_back(p > s.last ? p - 1 : p);
    y = TransposeOp::create(b, s.packedT.getLoc(), y, b.getDenseI64ArrayAttr(perm));
  }
  return y;
}

// Part i as its own weight matmul ("name#i", ds.part_of the fused weight),
// with its bias and unpacking: the value that replaces the part's reader.
Value buildPart(OpBuilder &b, MatmulOp m, FusedSplit &s, const FusedBytes &fb, size_t i) {
  auto w = m.getRhs().getDefiningOp<ParameterOp>();
  Type elem = m.getRhs().getType().getElementType();
  const FusedPart &part = s.parts[i];
  int64_t rows = fb.rows, size = part.size;
  size_t es = fb.elemBytes;
  std::vector<uint8_t> bytes(rows * size * es);
  for (int64_t r = 0; r < rows; ++r)
    std::memcpy(bytes.data() + r * size * es, fb.weight.data() + (r * s.cols + part.start) * es,
                size * es);
  auto t = RankedTensorType::get({rows, size}, elem);
  auto pw = ParameterOp::create(b, w.getLoc(), (w.getSymName() + "#" + Twine(i)).str(),
                                denseFromBytes(t, bytes));
  markPart(pw, w, i);
  Value y = MatmulOp::create(b, m.getLoc(), m.getLhs(), pw.getResult());
  if (s.bias) y = addPartBias(b, m, s, fb, i, y);
  if (s.flat) {
    SmallVector<int64_t> shape(s.flat.getType().getShape());
    shape.back() = size;
    y = ReshapeOp::create(b, s.flat.getLoc(), RankedTensorType::get(shape, elem), y);
  }
  if (s.packed) y = unpackPart(b, s, y, elem);
  return y;
}

/// MatMul(x, Transpose(W)), as torch.onnx.export writes nn.Linear with
/// constant folding off: W stored transposed once ("W.T", ds.transpose_of
/// W, as the importer stores a Gemm's transB weight), so the pair search
/// sees a weight matmul and splits it.
LogicalResult foldTransposedWeights(func::FuncOp f) {
  SmallVector<TransposeOp> found;
  f.walk([&](TransposeOp t) {
    auto p = t.getOperand().getDefiningOp<ParameterOp>();
    if (p && p.getType().getRank() == 2 && t.getPermutation() == ArrayRef<int64_t>{1, 0} &&
        llvm::all_of(t->getUsers(), [&](Operation *u) {
          auto m = dyn_cast<MatmulOp>(u);
          return m && m.getRhs() == t.getResult() && m.getLhs() != t.getResult();
        }))
      found.push_back(t);
  });
  if (found.empty()) return success();
  llvm::StringSet<> taken;
  f->getParentOfType<ModuleOp>().walk([&](ParameterOp q) { taken.insert(q.getSymName()); });
  for (TransposeOp t : found) {
    auto p = t.getOperand().getDefiningOp<ParameterOp>();
    FailureOr<std::vector<uint8_t>> bytes = constantBytes(p.getValue(), p.getLoc());
    if (failed(bytes)) return failure();
    const int64_t rows = p.getType().getDimSize(0), cols = p.getType().getDimSize(1);
    const size_t es = bytes->size() / static_cast<size_t>(std::max<int64_t>(1, rows * cols));
    std::vector<uint8_t> out(bytes->size());
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c)
        std::memcpy(out.data() + (c * rows + r) * es, bytes->data() + (r * cols + c) * es, es);
    std::string name = (p.getSymName() + ".T").str();
    for (int i = 1; taken.contains(name); ++i) name = (p.getSymName() + ".T" + Twine(i)).str();
    taken.insert(name);
    OpBuilder b(t);
    auto np = ParameterOp::create(b, p.getLoc(), name, denseFromBytes(t.getType(), out));
    for (NamedAttribute a : p->getDiscardableAttrs())
      if (a.getName().strref().starts_with("ds.")) np->setAttr(a.getName(), a.getValue());
    np->setAttr("ds.transpose_of", b.getStringAttr(p.getSymName()));
    t.getResult().replaceAllUsesWith(np.getResult());
    t->erase();
    if (p->use_empty()) p->erase();
  }
  return success();
}

struct TensorParallelPass : public mlir::ds::impl::TensorParallelPassBase<TensorParallelPass> {
  using TensorParallelPassBase::TensorParallelPassBase;

  /// A fused weight whose output (plus bias) is only ever split into equal
  /// parts along its columns (GPT-2's c_attn, MultiheadAttention's
  /// in_proj) becomes one weight matmul per part, so a column split gives
  /// each rank whole heads of q, k and v.
  LogicalResult splitFused(MatmulOp m) {
    std::optional<FusedSplit> s = findFusedSplit(m);
    if (!s) return success();
    FailureOr<FusedBytes> fb = readFusedBytes(m, *s);
    if (failed(fb)) return failure();
    OpBuilder b(m);
    for (size_t i = 0; i < s->parts.size(); ++i)
      s->parts[i].replaced.replaceAllUsesWith(buildPart(b, m, *s, *fb, i));
    for (Operation *u : s->users) u->erase();
    if (s->bias) s->bias->erase();
    Operation *fusedWeight = m.getRhs().getDefiningOp();
    Operation *fusedBias = s->biasValue ? s->biasValue.getDefiningOp() : nullptr;
    m->erase();
    // The fused parameters are read by no one now (a training module
    // would otherwise list them as held constant).
    for (Operation *p : {fusedWeight, fusedBias})
      if (p && isa<ParameterOp>(p) && p->use_empty()) p->erase();
    ++numFusedSplit;
    return success();
  }

  void runOnOperation() override {
    ModuleOp module = getOperation();
    MLIRContext *ctx = &getContext();
    if (size < 1) {
      module.emitError("ds-tensor-parallel: size must be >= 1, got ") << size.getValue();
      return signalPassFailure();
    }
    MeshAttr mesh = MeshAttr::lookup(module);
    SmallVector<MeshAxisAttr> axes;
    if (mesh) axes.assign(mesh.getAxes().begin(), mesh.getAxes().end());
    if (mesh && mesh.getAxisSize(axis)) {
      if (*mesh.getAxisSize(axis) != size) {
        module.emitError("ds-tensor-parallel: the mesh's '") << axis << "' axis has size "
                                                            << *mesh.getAxisSize(axis)
                                                            << ", not " << size.getValue();
        return signalPassFailure();
      }
    } else {
      axes.push_back(MeshAxisAttr::get(ctx, axis, size));
    }
    mesh = MeshAttr::get(ctx, axes);
    module->setAttr("ds.mesh", mesh);
    if (size == 1) return;

    for (auto func : module.getOps<func::FuncOp>()) {
      if (func.isExternal()) continue;
      if (failed(foldTransposedWeights(func))) return signalPassFailure();
      SmallVector<MatmulOp> weightMatmuls;
      func.walk([&](MatmulOp m) {
        if (isWeightMatmul(m)) weightMatmuls.push_back(m);
      });
      for (MatmulOp m : weightMatmuls)
        if (failed(splitFused(m))) return signalPassFailure();

      llvm::SetVector<Operation *> rowParallel, colParallel;
      SmallVector<std::pair<OpOperand *, Sharding>> extraSplits;
      SmallVector<Operation *> candidates;
      DenseMap<Value, bool> constantOnly;
      func.walk([&](MatmulOp m) {
        if (isWeightMatmul(m)) candidates.push_back(m);
      });
      for (Operation *op : candidates) {
        auto m2 = cast<MatmulOp>(op);
        if (colParallel.contains(op)) continue;
        // The region between the column-parallel matmuls and m2.
        llvm::SetVector<Operation *> region, cols;
        SmallVector<Value> work{m2.getLhs()};
        bool ok = true;
        while (!work.empty() && ok) {
          Value v = work.pop_back_val();
          if (isLeaf(v) || isConstantOnly(v, !training, constantOnly)) continue;
          Operation *d = v.getDefiningOp();
          if (!d) { ok = false; break; }
          if (isWeightMatmul(d)) {
            if (rowParallel.contains(d)) ok = false;
            cols.insert(d);
            continue;
          }
          if (!isTransparent(d)) { ok = false; break; }
          if (region.insert(d))
            for (Value o : d->getOperands()) work.push_back(o);
        }
        if (!ok || cols.empty()) continue;
        // Nothing in the region may be used outside it (it will be split).
        auto inside = [&](Operation *u) { return u == op || region.contains(u); };
        bool escapes = false;
        for (Operation *r : llvm::concat<Operation *const>(region, cols))
          for (Operation *u : r->getUsers()) escapes |= !inside(u);
        if (escapes) continue;

        // Every split must divide.
        std::string layer = layerName(m2);
        int64_t in = m2.getRhs().getType().getDimSize(0);
        if (in % size) {
          m2.emitError("tensor parallelism: layer ") << layer << " has " << in
                                                     << " input features, which do not divide "
                                                        "over tp="
                                                     << size.getValue();
          return signalPassFailure();
        }
        for (Operation *c : cols) {
          auto m1 = cast<MatmulOp>(c);
          int64_t out = m1.getRhs().getType().getDimSize(1);
          if (out % size) {
            m1.emitError("tensor parallelism: layer ") << layerName(m1) << " has " << out
                                                       << " output features, which do not "
                                                          "divide over tp="
                                                       << size.getValue();
            return signalPassFailure();
          }
        }
        // Simulate the propagation over the region: the split must reach
        // m2's input intact (heads that do not divide lose it).
        DenseMap<Value, Sharding> sim;
        auto get = [&](Value v) {
          auto it = sim.find(v);
          return it != sim.end() ? it->second
                                 : Sharding::replicated(cast<RankedTensorType>(v.getType()).getRank());
        };
        for (Operation *c : cols) {
          Sharding s = Sharding::replicated(cast<RankedTensorType>(c->getResult(0).getType()).getRank());
          s.dims.back() = DimSharding{{StringRef(axis)}, 1};
          sim[c->getResult(0)] = s;
        }
        SmallVector<Operation *> ordered(region.begin(), region.end());
        llvm::sort(ordered, [](Operation *a, Operation *b) { return a->isBeforeInBlock(b); });
        bool normalizesSplitAxis = false;
        SmallVector<std::pair<OpOperand *, Sharding>> leafSplits;
        for (Operation *r : ordered) {
          SmallVector<Sharding> ins;
          for (Value o : r->getOperands()) ins.push_back(get(o));
          ShardingDecision d = decideSharding(r, ins, mesh);
          // Parameters read in the region (a column-parallel layer's
          // bias) are split as the region computes.
          for (auto [i, o] : llvm::enumerate(r->getOperands()))
            if (o.getDefiningOp<ParameterOp>() && i < d.operands.size() &&
                llvm::any_of(d.operands[i].dims, [](const DimSharding &x) { return x.isSplit(); }))
              leafSplits.push_back({&r->getOpOperand(i), d.operands[i]});
          for (auto [i, o] : llvm::enumerate(r->getOperands()))
            if (ins[i].dims != d.operands[i].dims && !isLeaf(o) &&
                llvm::any_of(ins[i].dims, [](const DimSharding &x) { return x.isSplit(); })) {
              // A softmax over the split features themselves (not over
              // attention's keys) needs them all, like a layer norm: the
              // pair stays whole, and that is no error.
              int64_t softmaxAxis = -1;
              if (auto sm = dyn_cast<SoftmaxOp>(r)) softmaxAxis = sm.getAxis();
              if (auto sm = dyn_cast<LogSoftmaxOp>(r)) softmaxAxis = sm.getAxis();
              if (softmaxAxis >= 0 && ins[i].dims[softmaxAxis].isSplit()) {
                normalizesSplitAxis = true;
                break;
              }
              auto t = cast<RankedTensorType>(o.getType());
              r->emitError("tensor parallelism: layer ")
                  << layer << " cannot stay split over tp=" << size.getValue() << " through this "
                  << r->getName() << " of " << t
                  << " (attention heads or a reshaped dimension that do not divide)";
              return signalPassFailure();
            }
          if (normalizesSplitAxis) break;
          for (auto [res, s] : llvm::zip(r->getResults(), d.results)) sim[res] = s;
        }
        if (normalizesSplitAxis) continue;
        Sharding lhs = get(m2.getLhs());
        if (lhs.dims.back().axes != SmallVector<StringRef>{StringRef(axis)} ||
            lhs.dims.back().outer != 1)
          continue;
        for (Operation *c : cols) colParallel.insert(c);
        rowParallel.insert(op);
        ++numPairs;
        // Training: every parameter the pair splits is constrained, so
        // its state is laid out split (ds-propagate-sharding): the
        // row-parallel weight by rows, the region's parameters as read.
        if (training) {
          ShardingDecision d2 =
              decideSharding(m2, {lhs, Sharding::replicated(2)}, mesh);
          leafSplits.push_back({&m2.getRhsMutable(), d2.operands[1]});
          for (auto &[operand, sharding] : leafSplits) extraSplits.push_back({operand, sharding});
        }
      }
      // Asked for tensor parallelism and given none would look like a
      // working split: say so (each rank then holds every weight).
      if (colParallel.empty() && !func.getBody().empty() && func.isPublic())
        func.emitWarning("tensor parallelism: no weight matmul pair (column-parallel, then "
                         "row-parallel) to split over tp=")
            << size.getValue() << " in '" << func.getSymName()
            << "': every weight is replicated on each rank";
      // State the column splits; the row splits and the all_reduce follow.
      for (Operation *c : colParallel) {
        auto m1 = cast<MatmulOp>(c);
        OpBuilder b(m1);
        auto s = ShardingAttr::get(ctx, {SmallVector<StringRef>{}, SmallVector<StringRef>{axis}});
        Value w = ShardOp::create(b, m1.getLoc(), m1.getRhs(), s);
        m1.getRhsMutable().assign(w);
      }
      for (auto &[operand, sharding] : extraSplits) {
        Operation *user = operand->getOwner();
        OpBuilder b(user);
        Value w = ShardOp::create(b, user->getLoc(), operand->get(), sharding.toAttr(ctx));
        operand->set(w);
      }
    }
  }
};

} // namespace

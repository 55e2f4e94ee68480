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
#include "llvm/ADT/SetVector.h"

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

/// Ops a column split passes through on its way to the row-parallel matmul:
/// elementwise and layout-only ops, softmaxes, and products of activations.
bool isTransparent(Operation *op) {
  return (op->hasTrait<OpTrait::ds::Elementwise>() || op->hasTrait<OpTrait::ds::LayoutOnly>() ||
          isa<SoftmaxOp, LogSoftmaxOp, MatmulOp>(op)) &&
         !isWeightMatmul(op);
}

struct TensorParallelPass : public mlir::ds::impl::TensorParallelPassBase<TensorParallelPass> {
  using TensorParallelPassBase::TensorParallelPassBase;

  /// A fused weight whose output (plus bias) is only ever split into equal
  /// parts along its columns (GPT-2's c_attn, MultiheadAttention's
  /// in_proj) becomes one weight matmul per part, so a column split gives
  /// each rank whole heads of q, k and v.
  LogicalResult splitFused(MatmulOp m) {
    auto w = m.getRhs().getDefiningOp<ParameterOp>();
    int64_t cols = m.getRhs().getType().getDimSize(1);
    Value out = m.getResult();
    AddOp bias;
    Value biasValue;
    if (out.hasOneUse())
      if (auto add = dyn_cast<AddOp>(*out.getUsers().begin())) {
        Value other = add.getLhs() == out ? add.getRhs() : add.getLhs();
        auto ot = cast<RankedTensorType>(other.getType());
        if (isLeaf(other) && ot.getRank() == 1 && ot.getDimSize(0) == cols) {
          bias = add;
          biasValue = other;
          out = add.getResult();
        }
      }
    int64_t last = cast<RankedTensorType>(out.getType()).getRank() - 1;
    // The parts: (start, size, value to replace).
    SmallVector<std::tuple<int64_t, int64_t, Value>> parts;
    SmallVector<Operation *> users(out.getUsers().begin(), out.getUsers().end());
    if (users.empty()) return success();
    // The packed form (timm, ViT): reshape [..., m] -> [..., k, rest...],
    // maybe a transpose, then part i picked by a gather of index i along
    // the k axis. Part i is then its own [..., m/k] reshaped to [..., rest]
    // and transposed without the k axis.
    ReshapeOp packed;
    TransposeOp packedT;
    int64_t packedAxis = -1;
    if (users.size() == 1)
      if (auto r = dyn_cast<ReshapeOp>(users.front())) {
        ArrayRef<int64_t> in = cast<RankedTensorType>(out.getType()).getShape();
        ArrayRef<int64_t> rs = r.getType().getShape();
        if (rs.size() >= in.size() + 1 && rs.take_front(last) == in.take_front(last) &&
            rs[last] >= 2) {
          Value v = r.getResult();
          int64_t axis = last;
          SmallVector<Operation *> pickers(v.getUsers().begin(), v.getUsers().end());
          if (pickers.size() == 1 && isa<TransposeOp>(pickers.front())) {
            packedT = cast<TransposeOp>(pickers.front());
            axis = llvm::find(packedT.getPermutation(), last) - packedT.getPermutation().begin();
            v = packedT.getResult();
            pickers.assign(v.getUsers().begin(), v.getUsers().end());
          }
          int64_t k = rs[last];
          SmallVector<Value> byIndex(k);
          bool ok = !pickers.empty();
          for (Operation *u : pickers) {
            auto g = dyn_cast<GatherOp>(u);
            DenseElementsAttr idx;
            if (g && g.getAxis() == static_cast<uint64_t>(axis))
              if (auto c = g.getIndices().getDefiningOp<ConstantOp>())
                idx = dyn_cast<DenseElementsAttr>(c.getValue());
            if (!idx || idx.getType().getRank() != 0) { ok = false; break; }
            int64_t i = (*idx.getValues<APInt>().begin()).getSExtValue();
            if (i < 0) i += k;
            if (i < 0 || i >= k || byIndex[i]) { ok = false; break; }
            byIndex[i] = g.getResult();
          }
          if (ok && llvm::all_of(byIndex, [](Value x) { return bool(x); })) {
            packed = r;
            packedAxis = axis;
            for (int64_t i = 0; i < k; ++i) parts.push_back({i * (cols / k), cols / k, byIndex[i]});
            users = pickers;
            if (packedT) users.push_back(packedT);
            users.push_back(r);
          }
        }
      }
    for (Operation *u : packed ? ArrayRef<Operation *>() : ArrayRef<Operation *>(users)) {
      if (auto split = dyn_cast<SplitOp>(u); split && split.getAxis() == last && users.size() == 1) {
        int64_t at = 0;
        for (Value r : split.getResults()) {
          int64_t n = cast<RankedTensorType>(r.getType()).getDimSize(last);
          parts.push_back({at, n, r});
          at += n;
        }
        continue;
      }
      auto slice = dyn_cast<SliceOp>(u);
      if (!slice) return success();
      ArrayRef<int64_t> in = cast<RankedTensorType>(out.getType()).getShape();
      ArrayRef<int64_t> res = slice.getType().getShape();
      for (int64_t d = 0; d < last; ++d)
        if (in[d] != res[d] || slice.getStarts()[d] != 0) return success();
      if (slice.getSteps()[last] != 1) return success();
      parts.push_back({slice.getStarts()[last], res[last], slice.getResult()});
    }
    llvm::sort(parts, [](auto &a, auto &b) { return std::get<0>(a) < std::get<0>(b); });
    int64_t at = 0;
    for (auto &[start, size, v] : parts) {
      if (start != at || size != std::get<1>(parts.front())) return success();
      at += size;
    }
    if (at != cols || parts.size() < 2) return success();

    FailureOr<std::vector<uint8_t>> wBytes = constantBytes(w.getValue(), w.getLoc());
    if (failed(wBytes)) return failure();
    std::vector<uint8_t> bBytes;
    if (biasValue) {
      Operation *bd = biasValue.getDefiningOp();
      Attribute v = isa<ParameterOp>(bd) ? cast<ParameterOp>(bd).getValue()
                                         : Attribute(cast<ConstantOp>(bd).getValue());
      FailureOr<std::vector<uint8_t>> bb = constantBytes(v, bd->getLoc());
      if (failed(bb)) return failure();
      bBytes = *bb;
    }
    auto wt = m.getRhs().getType();
    Type elem = wt.getElementType();
    int64_t rows = wt.getDimSize(0);
    size_t es = wBytes->size() / static_cast<size_t>(rows * cols);
    OpBuilder b(m);
    for (auto [i, part] : llvm::enumerate(parts)) {
      auto [start, size, replaced] = part;
      std::vector<uint8_t> bytes(rows * size * es);
      for (int64_t r = 0; r < rows; ++r)
        std::memcpy(bytes.data() + r * size * es, wBytes->data() + (r * cols + start) * es,
                    size * es);
      auto t = RankedTensorType::get({rows, size}, elem);
      auto pw = ParameterOp::create(b, w.getLoc(), (w.getSymName() + "#" + Twine(i)).str(),
                                    denseFromBytes(t, bytes));
      pw->setAttr("ds.part_of", b.getStringAttr(w.getSymName()));
      Value y = MatmulOp::create(b, m.getLoc(), m.getLhs(), pw.getResult());
      if (bias) {
        auto bt = RankedTensorType::get({size}, elem);
        ArrayRef<uint8_t> piece(bBytes.data() + start * es, size * es);
        Value pb;
        if (auto bp = biasValue.getDefiningOp<ParameterOp>())
          pb = ParameterOp::create(b, bp.getLoc(), (bp.getSymName() + "#" + Twine(i)).str(),
                                   denseFromBytes(bt, piece));
        else
          pb = ConstantOp::create(b, bias.getLoc(), denseFromBytes(bt, piece));
        y = bias.getLhs() == m.getResult() ? Value(AddOp::create(b, bias.getLoc(), y, pb))
                                           : Value(AddOp::create(b, bias.getLoc(), pb, y));
      }
      if (packed) {
        // [..., m/k] -> [..., rest] -> the transpose without the k axis.
        SmallVector<int64_t> shape(packed.getType().getShape());
        shape.erase(shape.begin() + last);
        y = ReshapeOp::create(b, packed.getLoc(), RankedTensorType::get(shape, elem), y);
        if (packedT) {
          SmallVector<int64_t> perm;
          for (int64_t p : packedT.getPermutation())
            if (p != last) perm.push_back(p > last ? p - 1 : p);
          y = TransposeOp::create(b, packedT.getLoc(), y, b.getDenseI64ArrayAttr(perm));
        }
      }
      replaced.replaceAllUsesWith(y);
    }
    for (Operation *u : users) u->erase();
    if (bias) bias->erase();
    m->erase();
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
      SmallVector<MatmulOp> weightMatmuls;
      func.walk([&](MatmulOp m) {
        if (isWeightMatmul(m)) weightMatmuls.push_back(m);
      });
      for (MatmulOp m : weightMatmuls)
        if (failed(splitFused(m))) return signalPassFailure();

      llvm::SetVector<Operation *> rowParallel, colParallel;
      SmallVector<Operation *> candidates;
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
          if (isLeaf(v)) continue;
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
        for (Operation *r : ordered) {
          SmallVector<Sharding> ins;
          for (Value o : r->getOperands()) ins.push_back(get(o));
          ShardingDecision d = decideSharding(r, ins, mesh);
          for (auto [i, o] : llvm::enumerate(r->getOperands()))
            if (ins[i].dims != d.operands[i].dims && !isLeaf(o) &&
                llvm::any_of(ins[i].dims, [](const DimSharding &x) { return x.isSplit(); })) {
              auto t = cast<RankedTensorType>(o.getType());
              r->emitError("tensor parallelism: layer ")
                  << layer << " cannot stay split over tp=" << size.getValue() << " through this "
                  << r->getName() << " of " << t
                  << " (attention heads or a reshaped dimension that do not divide)";
              return signalPassFailure();
            }
          for (auto [res, s] : llvm::zip(r->getResults(), d.results)) sim[res] = s;
        }
        Sharding lhs = get(m2.getLhs());
        if (lhs.dims.back().axes != SmallVector<StringRef>{StringRef(axis)} ||
            lhs.dims.back().outer != 1)
          continue;
        for (Operation *c : cols) colParallel.insert(c);
        rowParallel.insert(op);
        ++numPairs;
      }
      // State the column splits; the row splits and the all_reduce follow.
      for (Operation *c : colParallel) {
        auto m1 = cast<MatmulOp>(c);
        OpBuilder b(m1);
        auto s = ShardingAttr::get(ctx, {SmallVector<StringRef>{}, SmallVector<StringRef>{axis}});
        Value w = ShardOp::create(b, m1.getLoc(), m1.getRhs(), s);
        m1.getRhsMutable().assign(w);
      }
    }
  }
};

} // namespace

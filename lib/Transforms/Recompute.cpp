//===- Recompute.cpp - activation checkpointing ---------------------------===//
//
// Which forward values the backward keeps and which it recomputes. The
// forward of @train_step is cut at checkpoints (values every later forward
// op reaches only through them); each chosen segment between two
// checkpoints is copied in front of its first backward reader, behind
// ds.optimization_barrier so CSE cannot merge the copy back (Passes.td has
// the contract). Choices are made on the IR right after autodiff, before
// data parallelism: ZeRO-3 then gathers parameters for the copies as for
// any backward use, and mixed precision and fusion treat them as any op.
//
//===----------------------------------------------------------------------===//
#include "dialects/ds/DSOps.h"
#include "ds/Transforms/Passes.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MLProgram/IR/MLProgram.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"

#include <cmath>
#include <limits>

namespace mlir::ds {
#define GEN_PASS_DEF_RECOMPUTEPASS
#include "ds/Transforms/Passes.h.inc"
} // namespace mlir::ds

using namespace mlir;
using namespace mlir::ds;

namespace {

/// On a recomputed op: the segment (from 1) it recomputes.
constexpr StringLiteral kRecomputeAttr = "ds.recompute";

/// What a forward value depends on: the step's data (inputs, the dropout
/// key), the trained parameters, both (an activation) or neither.
enum : uint8_t { kData = 1, kParam = 2, kActivation = kData | kParam };

int64_t bytesOf(Value v) {
  auto t = cast<RankedTensorType>(v.getType());
  Type e = t.getElementType();
  return t.getNumElements() * (e.isInteger(1) ? 1 : (e.getIntOrFloatBitWidth() + 7) / 8);
}

/// Multiply-add flops of a matrix product or convolution (what recomputing
/// costs, to the first order); 0 for other ops.
double productFlops(Operation *op) {
  if (auto m = dyn_cast<MatmulOp>(op)) {
    auto lhs = cast<RankedTensorType>(m.getLhs().getType());
    int64_t k = lhs.getRank() == 1 ? lhs.getDimSize(0)
                : m.getTransposeLhs() ? lhs.getDimSize(lhs.getRank() - 2)
                                      : lhs.getDimSize(lhs.getRank() - 1);
    return 2.0 * cast<RankedTensorType>(m.getType()).getNumElements() * k;
  }
  if (auto c = dyn_cast<ConvOp>(op)) {
    auto w = cast<RankedTensorType>(op->getOperand(1).getType());
    return 2.0 * cast<RankedTensorType>(c->getResult(0).getType()).getNumElements() *
           (w.getNumElements() / std::max<int64_t>(1, w.getDimSize(0)));
  }
  return 0;
}

/// The numbered module an exporter's node name puts an op in: the path up
/// to the first component with an index ("/transformer/h.3/attn/MatMul" ->
/// "/transformer/h.3", "/layers/2/Relu" -> "/layers/2"); "" when none.
std::string layerOf(Operation *op) {
  std::string name;
  op->getLoc()->walk([&](Location l) {
    if (auto n = dyn_cast<NameLoc>(l)) {
      name = n.getName().str();
      return WalkResult::interrupt();
    }
    return WalkResult::advance();
  });
  StringRef s(name);
  if (!s.consume_front("node '")) return "";
  s = s.take_until([](char c) { return c == '\''; });
  SmallVector<StringRef> parts;
  s.split(parts, '/');
  if (!parts.empty()) parts.pop_back(); // the node's own name
  std::string key;
  for (StringRef p : parts) {
    if (p.empty()) continue;
    key += "/" + p.str();
    StringRef index = p.contains('.') ? p.rsplit('.').second : p;
    if (!index.empty() && llvm::all_of(index, llvm::isDigit)) return key;
  }
  return "";
}

/// The numbered module of a parameter name, "." separated as PyTorch
/// writes them ("model.layers.3.mlp.up_proj.weight" -> "model.layers.3");
/// "" when it has no index; nullopt for an exporter's anonymous name
/// ("onnx::MatMul_334", TorchScript's folded transposes), which says
/// nothing.
std::optional<std::string> layerOfParameter(StringRef name) {
  name.consume_front("param:");
  if (name.starts_with("onnx::")) return std::nullopt;
  SmallVector<StringRef> parts;
  name.split(parts, '.');
  std::string key;
  for (StringRef p : parts) {
    key += (key.empty() ? "" : ".") + p.str();
    if (!p.empty() && llvm::all_of(p, llvm::isDigit)) return key;
  }
  return std::string();
}

/// The parameter `v` is, or a layout op of (a tied head's transpose).
std::optional<std::string> parameterName(Value v) {
  for (int depth = 0; depth < 4 && v; ++depth) {
    Operation *d = v.getDefiningOp();
    if (!d) return std::nullopt;
    if (auto l = dyn_cast<ml_program::GlobalLoadOp>(d))
      return l.getGlobal().getLeafReference().str();
    if (auto p = dyn_cast<ParameterOp>(d)) return p.getSymName().str();
    if (!isa<TransposeOp, CastOp, ReshapeOp>(d)) return std::nullopt;
    v = d->getOperand(0);
  }
  return std::nullopt;
}

/// The forward of a training step as recompute decisions see it.
struct StepAnalysis {
  Block *block = nullptr;
  SmallVector<Operation *> ops;
  llvm::DenseMap<Operation *, int64_t> index;
  int64_t lossIndex = -1;
  llvm::DenseMap<Value, uint8_t> deps;
  llvm::DenseMap<Value, int64_t> lastForwardUse, firstBackwardUse;
  /// Possible checkpoints in forward order: the only activation live
  /// across some point of the forward.
  SmallVector<Value> cuts;

  LogicalResult analyze(func::FuncOp f) {
    block = &f.getBody().front();
    for (Operation &op : *block) {
      index[&op] = static_cast<int64_t>(ops.size());
      if (op.hasAttr("ds.loss")) lossIndex = static_cast<int64_t>(ops.size());
      ops.push_back(&op);
    }
    if (lossIndex < 0)
      return f.emitError("ds-recompute: no op is marked ds.loss, so the forward's end is "
                         "unknown (run ds-build-train-step first)");
    for (BlockArgument a : block->getArguments()) deps[a] = kData;
    for (int64_t i = 0; i <= lossIndex; ++i) {
      Operation *op = ops[i];
      uint8_t d = 0;
      if (isa<ml_program::GlobalLoadOp>(op)) d = kParam;
      else if (!isa<ConstantOp, ParameterOp>(op))
        for (Value v : op->getOperands()) d |= deps.lookup(v);
      for (Value r : op->getResults()) {
        deps[r] = d;
        int64_t last = i;
        for (Operation *u : r.getUsers()) {
          int64_t t = topIndex(u);
          if (t < 0) continue;
          if (t <= lossIndex) {
            last = std::max(last, t);
          } else {
            auto [it, fresh] = firstBackwardUse.try_emplace(r, t);
            if (!fresh) it->second = std::min(it->second, t);
          }
        }
        lastForwardUse[r] = last;
      }
    }
    findCuts();
    return success();
  }

  int64_t topIndex(Operation *user) const {
    Operation *top = block->findAncestorOpInBlock(*user);
    auto it = top ? index.find(top) : index.end();
    return it == index.end() ? -1 : it->second;
  }
  int64_t defIndex(Value v) const {
    Operation *d = v.getDefiningOp();
    return d ? index.lookup(d) : -1;
  }

private:
  /// A sweep over the forward with the count (and the sum of the ids) of
  /// the activations live across each point.
  void findCuts() {
    std::vector<int64_t> count(lossIndex + 2, 0), ids(lossIndex + 2, 0);
    SmallVector<Value> acts;
    for (int64_t i = 0; i <= lossIndex; ++i)
      for (Value r : ops[i]->getResults()) {
        if (deps.lookup(r) != kActivation) continue;
        int64_t last = lastForwardUse.lookup(r);
        if (last <= i) continue;
        acts.push_back(r);
        count[i] += 1;
        count[last] -= 1;
        ids[i] += static_cast<int64_t>(acts.size());
        ids[last] -= static_cast<int64_t>(acts.size());
      }
    int64_t live = 0, id = 0;
    for (int64_t i = 0; i < lossIndex; ++i) {
      live += count[i];
      id += ids[i];
      if (live != 1) continue;
      Value v = acts[id - 1];
      if (cuts.empty() || cuts.back() != v) cuts.push_back(v);
    }
  }
};

/// What one recompute plan keeps and copies.
struct Choice {
  SmallVector<int64_t> checkpoints; // indices into StepAnalysis::cuts, increasing
  int64_t recomputed = 0;           // segments 1..recomputed are recomputed
  bool cpu = false;
  int64_t partitions = 1; // > 1: checkpoints split over the "tp" mesh axis
};

/// A checkpoint split over the tensor-parallel ranks: its first dimension
/// they divide (null when none does).
ShardingAttr partitionedSharding(Value v, int64_t parts) {
  auto t = cast<RankedTensorType>(v.getType());
  Sharding s = Sharding::replicated(t.getRank());
  for (int64_t d = 0; d < t.getRank(); ++d)
    if (t.getDimSize(d) % parts == 0 && t.getDimSize(d) >= parts) {
      s.dims[d].axes.push_back("tp");
      return s.toAttr(v.getContext());
    }
  return {};
}

struct Outcome {
  int64_t recomputedOps = 0, checkpointBytes = 0, partitioned = 0;
  double recomputeFlops = 0;
};

/// Rewrites the analyzed function by `choice`.
Outcome apply(StepAnalysis &a, const Choice &choice) {
  Outcome out;
  llvm::DenseSet<Value> split; // checkpoints held partitioned
  SmallVector<Value> kept;
  for (int64_t c : choice.checkpoints) kept.push_back(a.cuts[c]);
  for (int64_t s = 0; s < choice.recomputed && s < static_cast<int64_t>(kept.size()); ++s) {
    const int64_t lo = s == 0 ? 0 : a.defIndex(kept[s - 1]) + 1;
    const int64_t hi = a.defIndex(kept[s]);
    Value input = s == 0 ? Value() : kept[s - 1];
    auto inSegment = [&](Value v) {
      int64_t d = a.defIndex(v);
      if (d < lo || d > hi || v == kept[s] || !(a.deps.lookup(v) & kData)) return false;
      Operation *def = v.getDefiningOp();
      return isMemoryEffectFree(def) && a.lastForwardUse.lookup(v) <= hi;
    };
    // The segment's values the backward reads, and what computes them.
    SmallVector<Value> saved;
    for (int64_t i = lo; i <= hi; ++i)
      for (Value r : a.ops[i]->getResults())
        if (a.firstBackwardUse.count(r) && inSegment(r)) saved.push_back(r);
    if (saved.empty()) continue;
    llvm::DenseSet<Operation *> copy;
    SmallVector<Value> work(saved.begin(), saved.end());
    while (!work.empty()) {
      Operation *def = work.pop_back_val().getDefiningOp();
      if (!copy.insert(def).second) continue;
      for (Value w : def->getOperands())
        if (inSegment(w)) work.push_back(w);
    }
    SmallVector<Operation *> order(copy.begin(), copy.end());
    llvm::sort(order, [&](Operation *x, Operation *y) { return a.index[x] < a.index[y]; });
    int64_t at = std::numeric_limits<int64_t>::max();
    for (Value v : saved) at = std::min(at, a.firstBackwardUse.lookup(v));
    Operation *anchor = a.ops[at];

    OpBuilder b(anchor);
    IRMapping map;
    // The segment's checkpoint, held on the host: offloaded where it is
    // made, fetched back here; the backward's other readers after this
    // point read the fetched copy too.
    // Partitioned (partition_activations): only this rank's part of it is
    // held, gathered whole again here.
    ShardingAttr part = input && choice.partitions > 1
                            ? partitionedSharding(input, choice.partitions)
                            : ShardingAttr();
    if ((choice.cpu || part) && input) {
      OpBuilder ob(input.getDefiningOp()->getBlock(), ++Block::iterator(input.getDefiningOp()));
      Value held = part ? Value(ShardOp::create(ob, input.getLoc(), input, part)) : input;
      if (choice.cpu) held = OffloadOp::create(ob, input.getLoc(), input.getType(), held);
      Value back = held;
      if (choice.cpu) back = FetchOp::create(b, input.getLoc(), input.getType(), back);
      if (part) {
        auto t = cast<RankedTensorType>(input.getType());
        back = ShardOp::create(b, input.getLoc(), back,
                               Sharding::replicated(t.getRank()).toAttr(b.getContext()));
        // (so the gathered copy is never merged back into the original)
        back = OptimizationBarrierOp::create(b, input.getLoc(), input.getType(), back);
        out.partitioned += 1;
        split.insert(input);
      }
      input.replaceUsesWithIf(back, [&](OpOperand &u) {
        int64_t t = a.topIndex(u.getOwner());
        return t >= at;
      });
      map.map(input, back);
    }
    for (Operation *op : order) {
      for (Value w : op->getOperands()) {
        if (map.contains(w) || copy.contains(w.getDefiningOp())) continue;
        // Data and activations come through a barrier; parameters and
        // constants are read as they are (a barrier on a weight would copy it).
        if (a.deps.lookup(w) & kData)
          map.map(w, OptimizationBarrierOp::create(b, w.getLoc(), w.getType(), w).getResult());
      }
      Operation *c = b.clone(*op, map);
      c->setAttr(kRecomputeAttr, b.getI64IntegerAttr(s + 1));
      ++out.recomputedOps;
      out.recomputeFlops += productFlops(op);
    }
    for (Value v : saved)
      v.replaceUsesWithIf(map.lookup(v), [&](OpOperand &u) {
        return a.topIndex(u.getOwner()) > a.lossIndex;
      });
  }
  // (a partitioned checkpoint holds its rank's part)
  for (int64_t s = 0; s < static_cast<int64_t>(kept.size()) && s < choice.recomputed; ++s)
    out.checkpointBytes += bytesOf(kept[s]) / (split.contains(kept[s]) ? choice.partitions : 1);
  return out;
}

/// The device bytes live at the busiest point of `block` in program order,
/// as ds-plan-memory would place them without fragmentation: weights,
/// state and outputs have homes, views share their operand's bytes.
int64_t estimatePeak(Block &block) {
  llvm::DenseMap<Operation *, int64_t> index;
  int64_t n = 0;
  for (Operation &op : block) index[&op] = n++;
  Operation *terminator = block.getTerminator();
  llvm::DenseSet<Value> returned(terminator->getOperands().begin(),
                                 terminator->getOperands().end());
  llvm::DenseMap<Value, Value> root;
  llvm::DenseMap<Value, int64_t> last;
  std::vector<int64_t> delta(n + 2, 0);
  auto homed = [](Operation *op) {
    return isa<ConstantOp, ParameterOp, ml_program::GlobalLoadOp, ml_program::GlobalStoreOp>(op);
  };
  for (Operation &op : block) {
    if (homed(&op) || &op == terminator) continue;
    for (Value r : op.getResults()) {
      Value owner = r;
      if (isa<ReshapeOp, SqueezeOp, UnsqueezeOp, OptimizationBarrierOp>(op)) {
        Value in = op.getOperand(0);
        if (Operation *d = in.getDefiningOp(); d && !homed(d) && !returned.contains(in))
          owner = root.lookup(in) ? root.lookup(in) : in;
      }
      if (owner != r) root[r] = owner;
      int64_t &l = last.try_emplace(owner, index[&op]).first->second;
      for (Operation *u : r.getUsers())
        if (Operation *top = block.findAncestorOpInBlock(*u)) l = std::max(l, index[top]);
    }
  }
  for (auto &[v, l] : last) {
    if (returned.contains(v) || isa<OffloadOp>(v.getDefiningOp())) continue; // host or output
    delta[index[v.getDefiningOp()]] += bytesOf(v);
    delta[l + 1] -= bytesOf(v);
  }
  int64_t live = 0, peak = 0;
  for (int64_t d : delta) peak = std::max(peak, live += d);
  return peak;
}

std::string megabytes(int64_t bytes) {
  return bytes < 1000000 ? llvm::formatv("{0:f1} kB", bytes / 1e3).str()
                         : llvm::formatv("{0:f1} MB", bytes / 1e6).str();
}

class RecomputePass : public mlir::ds::impl::RecomputePassBase<RecomputePass> {
public:
  using RecomputePassBase::RecomputePassBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto training = module->getAttrOfType<DictionaryAttr>("ds.training");
    std::string how = policy;
    if (how.empty()) {
      auto on = training ? training.getAs<BoolAttr>("activation_checkpointing") : BoolAttr();
      how = on && on.getValue() ? "layers" : "none";
    }
    if (how != "none" && how != "layers" && how != "sqrt" && how != "budget") {
      module.emitError("ds-recompute: unknown policy '")
          << how << "' (none, layers, sqrt or budget)";
      return signalPassFailure();
    }
    if (how == "budget" && budget <= 0) {
      module.emitError("ds-recompute: the budget policy needs a budget in bytes (> 0)");
      return signalPassFailure();
    }
    if (how == "none") return;
    func::FuncOp step = module.lookupSymbol<func::FuncOp>("train_step");
    if (!step || !step.getBody().hasOneBlock()) {
      module.emitError("ds-recompute needs a single-block @train_step (run ds-build-train-step "
                       "first)");
      return signalPassFailure();
    }
    int64_t count = checkpoints;
    if (count < 0 && training)
      if (auto n = training.getAs<IntegerAttr>("number_checkpoints"); n && n.getInt() > 0)
        count = n.getInt();
    bool onHost = cpu > 0;
    if (cpu < 0 && training)
      if (auto c = training.getAs<BoolAttr>("cpu_checkpointing")) onHost = c.getValue();
    bool split = partition > 0;
    if (partition < 0 && training)
      if (auto c = training.getAs<BoolAttr>("partition_activations")) split = c.getValue();
    // Partitioned over the tensor-parallel ranks: nothing to split without
    // them (as in DeepSpeed).
    int64_t parts = 1;
    if (MeshAttr mesh = MeshAttr::lookup(module); split && mesh)
      parts = mesh.getAxisSize("tp").value_or(1);

    StepAnalysis a;
    if (failed(a.analyze(step))) return signalPassFailure();
    if (a.cuts.empty()) {
      module.emitRemark("ds-recompute: the forward has no point that a single activation "
                        "crosses, so there is nothing to checkpoint; nothing is recomputed");
      return;
    }
    std::string used = how;
    SmallVector<int64_t> chosen;
    if (how == "layers" || how == "budget") {
      chosen = layerCheckpoints(a);
      if (chosen.empty()) {
        module.emitRemark("ds-recompute: neither node names nor parameter names number "
                          "layers (like '/h.3/' or 'layers.3.'), so checkpoints are placed by "
                          "Chen et al.'s sqrt(n) rule instead");
        used = how == "layers" ? "sqrt" : how;
        chosen = sqrtCheckpoints(a);
      } else if (count > 0 && count < static_cast<int64_t>(chosen.size())) {
        SmallVector<int64_t> spread;
        const int64_t m = chosen.size();
        for (int64_t k = 0; k < count; ++k)
          spread.push_back(chosen[(((k + 1) * m) + count - 1) / count - 1]);
        chosen = std::move(spread);
      }
    } else {
      chosen = sqrtCheckpoints(a);
    }
    Choice choice{chosen, static_cast<int64_t>(chosen.size()), onHost, parts};
    const int64_t before = estimatePeak(*a.block);
    if (how == "budget") {
      FailureOr<Choice> fit = fitBudget(step, a, choice, before);
      if (failed(fit)) return signalPassFailure();
      choice = *fit;
    }
    double forwardFlops = 0;
    for (int64_t i = 0; i <= a.lossIndex; ++i) forwardFlops += productFlops(a.ops[i]);
    Outcome out = apply(a, choice);
    const int64_t after = estimatePeak(step.getBody().front());
    numCheckpoints = choice.checkpoints.size();
    numRecomputed = out.recomputedOps;
    Builder b(module.getContext());
    module->setAttr(
        "ds.recompute",
        b.getDictionaryAttr({
            b.getNamedAttr("policy", b.getStringAttr(used)),
            b.getNamedAttr("checkpoints", b.getI64IntegerAttr(choice.checkpoints.size())),
            b.getNamedAttr("recomputed_segments", b.getI64IntegerAttr(choice.recomputed)),
            b.getNamedAttr("checkpoint_bytes", b.getI64IntegerAttr(out.checkpointBytes)),
            b.getNamedAttr("recomputed_ops", b.getI64IntegerAttr(out.recomputedOps)),
            b.getNamedAttr("recompute_flops", b.getF64FloatAttr(out.recomputeFlops)),
            b.getNamedAttr("forward_flops", b.getF64FloatAttr(forwardFlops)),
            b.getNamedAttr("estimated_peak_before", b.getI64IntegerAttr(before)),
            b.getNamedAttr("estimated_peak_after", b.getI64IntegerAttr(after)),
            b.getNamedAttr("cpu_checkpointing", b.getBoolAttr(choice.cpu)),
            b.getNamedAttr("partitioned_checkpoints", b.getI64IntegerAttr(out.partitioned)),
            b.getNamedAttr("partitions", b.getI64IntegerAttr(choice.partitions)),
        }));
  }

private:
  /// The last possible checkpoint of each numbered layer. Layers come
  /// from the node names when they carry module paths (TorchScript's
  /// "/h.3/attn/MatMul"), else from the parameters read: a value is in the
  /// layer of the last named parameter the forward read up to it (PyTorch
  /// 2's exporter names nodes "node_MatMul_12", but keeps
  /// "transformer.h.3.attn.c_attn.weight").
  static SmallVector<int64_t> layerCheckpoints(const StepAnalysis &a) {
    SmallVector<std::string> keys;
    bool named = false;
    for (Value c : a.cuts) {
      keys.push_back(layerOf(c.getDefiningOp()));
      named |= !keys.back().empty();
    }
    if (!named) {
      keys.clear();
      std::string current;
      size_t c = 0;
      for (int64_t i = 0; i <= a.lossIndex && c < a.cuts.size(); ++i) {
        for (Value v : a.ops[i]->getOperands())
          if (std::optional<std::string> p = parameterName(v))
            if (std::optional<std::string> k = layerOfParameter(*p)) current = *k;
        while (c < a.cuts.size() && a.defIndex(a.cuts[c]) == i) {
          keys.push_back(current);
          ++c;
        }
      }
    }
    SmallVector<int64_t> out;
    for (size_t j = 0; j < keys.size(); ++j)
      if (!keys[j].empty() && (j + 1 == keys.size() || keys[j + 1] != keys[j]))
        out.push_back(j);
    return out;
  }

  /// sqrt(n) of the n possible checkpoints, placed so the segments hold
  /// about equal bytes the backward reads.
  static SmallVector<int64_t> sqrtCheckpoints(const StepAnalysis &a) {
    const int64_t n = a.cuts.size();
    const int64_t k = std::max<int64_t>(1, std::llround(std::sqrt(static_cast<double>(n))));
    // Cumulative saved bytes up to each cut.
    SmallVector<double> cum;
    double total = 0;
    size_t c = 0;
    for (int64_t i = 0; i <= a.lossIndex && c < a.cuts.size(); ++i) {
      for (Value r : a.ops[i]->getResults())
        if (a.firstBackwardUse.count(r) && (a.deps.lookup(r) & kData)) total += bytesOf(r);
      while (c < a.cuts.size() && a.defIndex(a.cuts[c]) == i) {
        cum.push_back(total);
        ++c;
      }
    }
    SmallVector<int64_t> out;
    for (int64_t j = 1; j <= k; ++j) {
      double target = total * j / (k + 1);
      int64_t best = -1;
      for (int64_t i = 0; i < n; ++i)
        if (best < 0 || std::fabs(cum[i] - target) < std::fabs(cum[best] - target)) best = i;
      if (out.empty() || best > out.back()) out.push_back(best);
    }
    return out;
  }

  /// The estimated peak of `step` rewritten by `choice`, on a copy.
  static int64_t peakWith(func::FuncOp step, const Choice &choice) {
    func::FuncOp copy = step.clone();
    StepAnalysis a;
    int64_t peak = std::numeric_limits<int64_t>::max();
    if (succeeded(a.analyze(copy))) {
      apply(a, choice);
      peak = estimatePeak(copy.getBody().front());
    }
    copy.erase();
    return peak;
  }

  /// The fewest recomputed segments (the first ones) whose estimated peak
  /// fits the budget; every possible checkpoint when the layers' do not.
  FailureOr<Choice> fitBudget(func::FuncOp step, const StepAnalysis &a, Choice layers,
                              int64_t none) {
    if (none <= budget) return Choice{layers.checkpoints, 0, layers.cpu, layers.partitions};
    const int64_t n = layers.checkpoints.size();
    auto peakOf = [&](int64_t r) {
      Choice c = layers;
      c.recomputed = r;
      return peakWith(step, c);
    };
    if (peakOf(n) <= budget) {
      int64_t lo = 1, hi = n; // peakOf(hi) fits
      while (lo < hi) {
        int64_t mid = (lo + hi) / 2;
        if (peakOf(mid) <= budget) hi = mid;
        else lo = mid + 1;
      }
      layers.recomputed = hi;
      return layers;
    }
    Choice every{{}, static_cast<int64_t>(a.cuts.size()), layers.cpu, layers.partitions};
    for (int64_t i = 0; i < static_cast<int64_t>(a.cuts.size()); ++i) every.checkpoints.push_back(i);
    int64_t finest = peakWith(step, every);
    if (finest <= budget) return every;
    return step.emitError("ds-recompute: an activation budget of ")
           << megabytes(budget) << " cannot be met: without recomputation the step's "
           << "activations peak at about " << megabytes(none) << ", and recomputing from every "
           << "possible checkpoint still needs about " << megabytes(std::min(finest, peakOf(n)))
           << " (estimated before fusion)";
  }
};

} // namespace

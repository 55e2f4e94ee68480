//===- Offload.cpp - ZeRO-Offload: optimizer state on the host ------------===//
//
// Places each offloaded parameter's optimizer state and gradient
// accumulator in host memory, runs the ops that write them on the host,
// and inserts the transfers the placement needs (Passes.td has the
// contract, MemorySpaces.h the rules it establishes).
//
//===----------------------------------------------------------------------===//
#include "ds/Partition/Passes.h"
#include "ds/Plan/KernelBridge.h"
#include "ds/Plan/MemorySpaces.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MLProgram/IR/MLProgram.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringSet.h"
#include <functional>
#include <map>

namespace mlir::ds {
#define GEN_PASS_DEF_OFFLOADPASS
#include "ds/Partition/Passes.h.inc"
} // namespace mlir::ds

using namespace mlir;
using namespace mlir::ds;

namespace {

/// The state of a parameter's optimizer step (to host memory, or to NVMe
/// with "nvme"), and its gradient accumulator (always to host memory: it is
/// written every micro-step, as in DeepSpeed's ZeRO-Infinity).
constexpr StringRef kOptimizerStatePrefixes[] = {"adam_m:", "adam_v:", "momentum:", "master:"};
constexpr StringRef kGradientPrefix = "grad:";

class OffloadPass : public mlir::ds::impl::OffloadPassBase<OffloadPass> {
public:
  using OffloadPassBase::OffloadPassBase;

private:
  llvm::StringSet<> offloadedParams_;
  std::map<std::pair<const void *, const void *>, ml_program::GlobalOp> nvmeWeights_;
  int64_t paramBuffers_ = 5, subGroupSize_ = 1000000000;

public:

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto training = module->getAttrOfType<DictionaryAttr>("ds.training");
    std::string dev = device, paramDev = paramDevice;
    if (dev.empty() && training)
      if (auto s = training.getAs<StringAttr>("offload_optimizer")) dev = s.str();
    if (paramDev.empty() && training)
      if (auto s = training.getAs<StringAttr>("offload_param")) paramDev = s.str();
    if (dev.empty()) dev = "none";
    if (paramDev.empty()) paramDev = "none";
    if (weights != "none" && weights != "cpu" && weights != "nvme") {
      module.emitError("ds-offload: weights '")
          << weights << "' is not supported (cpu, nvme or none)";
      return signalPassFailure();
    }
    if (weights != "none") {
      if (training) {
        module.emitError("ds-offload: weights=cpu places an inference plan's weights; a "
                         "training plan offloads its parameters with offload_param");
        return signalPassFailure();
      }
      return offloadWeights(module);
    }
    if (dev == "none" && paramDev == "none") return;
    for (const std::string &d : {dev, paramDev})
      if (d != "cpu" && d != "nvme" && d != "none") {
        module.emitError("ds-offload: device '") << d << "' is not supported (cpu, nvme or none)";
        return signalPassFailure();
      }
    auto spaceOf = [](const std::string &d) {
      return d == "nvme" ? MemorySpace::Nvme : d == "cpu" ? MemorySpace::Host : MemorySpace::Device;
    };
    const MemorySpace stateSpace = spaceOf(dev), paramSpace = spaceOf(paramDev);
    double r = ratio;
    if (r < 0) {
      r = 1.0;
      if (training)
        if (auto a = training.getAs<FloatAttr>("offload_ratio")) r = a.getValueAsDouble();
    }
    if (!(r >= 0 && r <= 1)) {
      module.emitError("ds-offload: ratio must be in [0, 1], got ") << r;
      return signalPassFailure();
    }

    // The parameters to offload: in program order, until `r` of the
    // elements are covered.
    SmallVector<std::pair<StringRef, int64_t>> params;
    int64_t total = 0;
    for (auto g : module.getOps<ml_program::GlobalOp>())
      if (g.getSymName().starts_with("param:"))
        if (auto t = dyn_cast<RankedTensorType>(g.getType())) {
          params.push_back({g.getSymName().drop_front(strlen("param:")), t.getNumElements()});
          total += t.getNumElements();
        }
    llvm::StringSet<> chosen;
    int64_t covered = 0;
    for (auto [name, n] : params) {
      if (r < 1 && covered >= r * static_cast<double>(total)) break;
      chosen.insert(name);
      covered += n;
    }
    if (stateSpace != MemorySpace::Device) numOffloaded = chosen.size();
    auto place = [&](ml_program::GlobalOp g, MemorySpace space) {
      if (space != MemorySpace::Device)
        g->setAttr(kMemorySpaceAttr, MemorySpaceAttr::get(&getContext(), space));
    };
    // ZeRO-3's parameters offloaded: the partitioned ones (ZeRO-3 keeps
    // those under stage3_param_persistence_threshold whole on every rank and
    // on the device, and so does DeepSpeed's parameter offload).
    int64_t persistence = 100000;
    if (training)
      if (auto t = training.getAs<IntegerAttr>("stage3_param_persistence_threshold"))
        persistence = t.getInt();
    const bool partitioned = MeshAttr::lookup(module) != nullptr;
    auto knob = [&](StringRef key, int64_t dflt) {
      if (training)
        if (auto a = training.getAs<IntegerAttr>(key)) return a.getInt();
      return dflt;
    };
    // ZeRO-Infinity's parameter staging (DeepSpeed's offload_param keys):
    // with NVMe, partitions stay in host memory until max_in_cpu elements
    // are placed there; each swapped one must fit a buffer of buffer_size
    // elements, and buffer_count of them are in host memory at once.
    const int64_t maxInCpu = knob("offload_param_max_in_cpu", 1000000000);
    const int64_t bufferSize = knob("offload_param_buffer_size", 100000000);
    paramBuffers_ = std::max<int64_t>(1, knob("offload_param_buffer_count", 5));
    subGroupSize_ = subGroupSize > 0 ? subGroupSize : knob("sub_group_size", 1000000000);
    int64_t inCpu = 0;
    for (auto g : module.getOps<ml_program::GlobalOp>()) {
      StringRef name = g.getSymName();
      if (stateSpace != MemorySpace::Device) {
        if (name.starts_with(kGradientPrefix) &&
            chosen.contains(name.drop_front(kGradientPrefix.size())))
          place(g, MemorySpace::Host);
        for (StringRef prefix : kOptimizerStatePrefixes)
          if (name.starts_with(prefix) && chosen.contains(name.drop_front(prefix.size())))
            place(g, stateSpace);
      }
      auto t = dyn_cast<RankedTensorType>(g.getType());
      if (paramSpace != MemorySpace::Device && name.starts_with("param:") && t &&
          (partitioned ? g->hasAttr("ds.partition_numel") : t.getNumElements() >= persistence)) {
        MemorySpace where = paramSpace;
        if (where == MemorySpace::Nvme && inCpu + t.getNumElements() <= maxInCpu) {
          where = MemorySpace::Host;
          inCpu += t.getNumElements();
        }
        if (where == MemorySpace::Nvme && t.getNumElements() > bufferSize) {
          module.emitError("ds-offload: parameter '")
              << name.drop_front(strlen("param:")) << "' has " << t.getNumElements()
              << " elements in its partition, more than zero_optimization.offload_param."
                 "buffer_size ("
              << bufferSize << "): a parameter swapped in from NVMe is staged in one buffer; "
              << "raise buffer_size, or max_in_cpu to keep it in host memory";
          return signalPassFailure();
        }
        place(g, where);
        offloadedParams_.insert(name);
        ++numParamsOffloaded;
      }
    }

    MemorySpaces spaces(module);
    for (auto f : module.getOps<func::FuncOp>()) {
      if (f.isExternal() || !f.getBody().hasOneBlock()) continue;
      placeOps(f, spaces);
      insertTransfers(f, spaces);
      scheduleStateSwaps(f, spaces);
      prefetchParamSwaps(f, spaces);
      if (failed(spaces.verify(f))) return signalPassFailure();
    }
  }

private:
  /// A weight ZeRO-Inference keeps in host memory.
  bool isBigWeight(Value v) const {
    Operation *def = v.getDefiningOp();
    auto t = dyn_cast<RankedTensorType>(v.getType());
    return def && isa<ConstantOp, ParameterOp>(def) && t && t.getNumElements() >= weightsThreshold;
  }
  void placeWeight(Operation *def) {
    if (MemorySpaces::placement(def) != MemorySpace::Device) return;
    MemorySpaces::place(def, MemorySpace::Host);
    ++numWeightsOffloaded;
  }

  /// ZeRO-Inference from NVMe: a weight becomes a global on the drive (one
  /// per weight, shared by the programs that read it: a generation plan's
  /// prefill and decode), read into host memory where used.
  Value swapIn(OpBuilder &b, Value weight) {
    Operation *def = weight.getDefiningOp();
    Attribute value = isa<ConstantOp>(def) ? cast<ConstantOp>(def).getValue()
                                           : cast<ParameterOp>(def).getValue();
    auto key = std::make_pair(value.getAsOpaquePointer(), weight.getType().getAsOpaquePointer());
    ml_program::GlobalOp &g = nvmeWeights_[key];
    if (!g) {
      ModuleOp module = getOperation();
      OpBuilder mb = OpBuilder::atBlockBegin(module.getBody());
      std::string name = "weight:" + (isa<ParameterOp>(def)
                                          ? cast<ParameterOp>(def).getSymName().str()
                                          : "constant." + std::to_string(nvmeWeights_.size()));
      for (int i = 1; module.lookupSymbol(name); ++i) name += "." + std::to_string(i);
      g = ml_program::GlobalOp::create(mb, def->getLoc(), name, weight.getType(),
                                       /*is_mutable=*/true, value, mb.getStringAttr("private"));
      g->setAttr(kMemorySpaceAttr, MemorySpaceAttr::get(&getContext(), MemorySpace::Nvme));
      ++numWeightsOffloaded;
    }
    auto load = ml_program::GlobalLoadOp::create(b, def->getLoc(), weight.getType(),
                                                 SymbolRefAttr::get(g.getSymNameAttr()));
    ++numTransfers;
    return FetchOp::create(b, def->getLoc(), load.getResult());
  }

  /// ZeRO-Inference: the large weights in host memory (or on NVMe), each
  /// reader's fetch a layer ahead of it.
  void offloadWeights(ModuleOp module) {
    const bool nvme = weights == "nvme";
    for (auto f : module.getOps<func::FuncOp>()) {
      if (f.isExternal() || !f.getBody().hasOneBlock()) continue;
      Block &block = f.getBody().front();
      // Readers of offloaded weights in program order, each with its fetches.
      SmallVector<std::pair<Operation *, SmallVector<Operation *>>> readers;
      int64_t layers = 0;
      for (Operation &op : llvm::make_early_inc_range(block)) {
        if (isa<AttentionOp, CachedAttentionOp>(op)) ++layers;
        if (isData(&op) || isCollective(&op)) continue;
        // An embedding lookup runs where its table is: the token ids go
        // to the host and the rows come back, not the whole table.
        if (auto g = dyn_cast<GatherOp>(op); g && isBigWeight(g.getData())) {
          OpBuilder b(g);
          if (nvme) // the table comes to host memory for the lookup
            g.getDataMutable().assign(swapIn(b, g.getData()));
          else
            placeWeight(g.getData().getDefiningOp());
          MemorySpaces::place(g, MemorySpace::Host);
          auto ids = OffloadOp::create(b, g.getLoc(), g.getIndices());
          g.getIndicesMutable().assign(ids.getResult());
          b.setInsertionPointAfter(g);
          auto rows = FetchOp::create(b, g.getLoc(), g.getResult());
          g.getResult().replaceAllUsesExcept(rows.getResult(), rows);
          numTransfers += 2;
          continue;
        }
        SmallVector<Operation *> fetches;
        for (OpOperand &use : op.getOpOperands()) {
          if (!isBigWeight(use.get())) continue;
          Operation *def = use.get().getDefiningOp();
          OpBuilder b(&op);
          Value from = use.get();
          if (nvme) from = swapIn(b, from);
          else placeWeight(def);
          auto fetch = FetchOp::create(b, def->getLoc(), from);
          use.set(fetch.getResult());
          fetches.push_back(fetch);
          ++numTransfers;
        }
        if (!fetches.empty()) readers.push_back({&op, std::move(fetches)});
      }
      // The weights now read from their globals go.
      for (Operation &op : llvm::make_early_inc_range(block))
        if (isa<ConstantOp, ParameterOp>(op) && op.use_empty() && nvme) op.erase();
      // A layer ahead: reader i's fetches are issued when reader i - ahead
      // runs (the weights, if defined later, move up with them).
      const size_t ahead = std::max<size_t>(
          1, layers ? (readers.size() + layers - 1) / static_cast<size_t>(layers) : 1);
      // From NVMe, the swap-in (its global's load, the read into host
      // memory) another layer earlier: the drive reads layer k+2 while
      // layer k+1 is copied to the device and layer k computes.
      for (size_t i = 1; i < readers.size(); ++i) {
        Operation *before = readers[i - std::min(i, ahead)].first;
        Operation *earlier = readers[i - std::min(i, 2 * ahead)].first;
        for (Operation *fetch : readers[i].second) {
          Operation *def = fetch->getOperand(0).getDefiningOp();
          if (isa<FetchOp>(def)) { // NVMe: load -> swap-in -> fetch
            Operation *load = def->getOperand(0).getDefiningOp();
            if (earlier->isBeforeInBlock(def)) {
              load->moveBefore(earlier);
              def->moveBefore(earlier);
            }
          } else if (before->isBeforeInBlock(def)) {
            def->moveBefore(before);
          }
          fetch->moveBefore(before);
          ++numPrefetched;
        }
      }
      MemorySpaces spaces(module);
      if (failed(spaces.verify(f))) return signalPassFailure();
    }
  }

  static bool isData(Operation *op) {
    return isa<ConstantOp, ParameterOp, ml_program::GlobalLoadOp, ml_program::GlobalStoreOp,
               func::ReturnOp, OffloadOp, FetchOp>(op);
  }

  /// An op runs on the host when it updates host state (an optimizer
  /// update reading a host moment, or any op whose every result is stored
  /// only into host globals), or when everything it reads that is not a
  /// constant is in host memory. Collectives stay on the device.
  void placeOps(func::FuncOp f, const MemorySpaces &spaces) {
    auto storedOnlyToHost = [&](Operation &op) {
      if (op.getNumResults() == 0) return false;
      for (Value r : op.getResults()) {
        if (r.use_empty()) return false;
        for (Operation *u : r.getUsers()) {
          auto st = dyn_cast<ml_program::GlobalStoreOp>(u);
          if (!st || spaces.ofGlobal(st.getGlobal().getLeafReference()) == MemorySpace::Device)
            return false;
        }
      }
      return true;
    };
    for (Operation &op : f.getBody().front()) {
      if (isData(&op) || isCollective(&op)) continue;
      bool host = storedOnlyToHost(op);
      // An update runs where its optimizer state (operand 2: Adam's first
      // moment, SGD's momentum) lives.
      if (isOptimizerUpdate(&op))
        host = spaces.of(op.getOperand(2)) != MemorySpace::Device;
      if (!host) {
        int64_t hostOperands = 0, deviceOperands = 0;
        for (Value v : op.getOperands()) {
          Operation *def = v.getDefiningOp();
          if (def && isa<ConstantOp>(def)) continue;
          ++(spaces.of(v) != MemorySpace::Device ? hostOperands : deviceOperands);
        }
        host = hostOperands > 0 && deviceOperands == 0;
      }
      MemorySpaces::place(&op, host ? MemorySpace::Host : MemorySpace::Device);
    }
  }

  /// Moves swap-in `fetch` (with the global load it reads, when that is
  /// later) before `before`; false when it is already earlier or cannot
  /// move (a store to the same global lies between).
  static bool hoistSwapIn(Operation *fetch, Operation *before) {
    if (!before->isBeforeInBlock(fetch)) return false;
    Operation *def = fetch->getOperand(0).getDefiningOp();
    if (def && def->getBlock() == before->getBlock() && before->isBeforeInBlock(def)) {
      auto load = dyn_cast<ml_program::GlobalLoadOp>(def);
      if (!load) return false;
      for (Operation *op = before; op != def; op = op->getNextNode())
        if (auto st = dyn_cast<ml_program::GlobalStoreOp>(op))
          if (st.getGlobal() == load.getGlobal()) return false;
      def->moveBefore(before);
    }
    fetch->moveBefore(before);
    return true;
  }

  /// ZeRO-Infinity's optimizer swapping by sub-groups: consecutive updates
  /// whose state reaches sub_group_size elements form one (DeepSpeed's
  /// rule: a parameter is never split, a group closes once it has at least
  /// that many). A sub-group's swap-ins run as one batch, before the
  /// previous sub-group's first update, so the drive reads group k+1 while
  /// group k computes; its swap-outs run as one batch after its last
  /// update. Host memory then holds two sub-groups' state, not all of it.
  void scheduleStateSwaps(func::FuncOp f, const MemorySpaces &spaces) {
    struct Update {
      Operation *op;
      SmallVector<Operation *> ins, outs;
    };
    SmallVector<SmallVector<Update>> groups;
    int64_t filled = 0;
    for (Operation &op : f.getBody().front()) {
      if (!isOptimizerUpdate(&op)) continue;
      Update u{&op, {}, {}};
      for (Value v : op.getOperands())
        if (auto fetch = v.getDefiningOp<FetchOp>())
          if (spaces.of(fetch.getOperand()) == MemorySpace::Nvme) u.ins.push_back(fetch);
      for (Value r : op.getResults())
        for (Operation *user : r.getUsers())
          if (isa<OffloadOp>(user) && spaces.of(user->getResult(0)) == MemorySpace::Nvme)
            u.outs.push_back(user);
      if (u.ins.empty() && u.outs.empty()) continue;
      if (groups.empty() || filled >= subGroupSize_) {
        groups.emplace_back();
        filled = 0;
      }
      filled += cast<ShapedType>(op.getOperand(2).getType()).getNumElements();
      groups.back().push_back(std::move(u));
    }
    numSubGroups += groups.size();
    for (size_t k = 0; k < groups.size(); ++k) {
      Operation *before = groups[k ? k - 1 : 0].front().op;
      for (Update &u : groups[k])
        for (Operation *in : u.ins)
          if (hoistSwapIn(in, before) && k) ++numPrefetched;
      Operation *after = groups[k].back().op;
      for (Update &u : groups[k])
        for (Operation *out : u.outs) {
          out->moveAfter(after);
          after = out;
          for (Operation *user : llvm::to_vector(out->getUsers())) {
            user->moveAfter(after);
            after = user;
          }
        }
    }
  }

  /// Offloaded parameters' swap-ins (NVMe to host, before a use's fetch to
  /// the device) move up to buffer_count - 1 uses ahead: the drive reads
  /// ahead while the device computes, and at most buffer_count swapped-in
  /// partitions are in host memory at once (offload_param's staging bound).
  void prefetchParamSwaps(func::FuncOp f, const MemorySpaces &spaces) {
    SmallVector<std::pair<Operation *, SmallVector<Operation *>>> uses;
    for (Operation &op : f.getBody().front()) {
      auto fetch = dyn_cast<FetchOp>(op);
      if (!fetch || spaces.of(fetch.getOperand()) != MemorySpace::Nvme) continue;
      Operation *reader = nullptr;
      for (Operation *u : fetch->getUsers())
        if (!reader || u->isBeforeInBlock(reader)) reader = u;
      if (!reader || isOptimizerUpdate(reader)) continue;
      if (uses.empty() || uses.back().first != reader) uses.push_back({reader, {}});
      uses.back().second.push_back(fetch);
    }
    const size_t ahead = static_cast<size_t>(paramBuffers_ - 1);
    for (size_t i = 1; i < uses.size() && ahead > 0; ++i) {
      Operation *before = uses[i - std::min(i, ahead)].first;
      for (Operation *fetch : uses[i].second)
        if (hoistSwapIn(fetch, before)) ++numPrefetched;
    }
  }

  /// Gives every operand the space its reader needs: a constant is cloned
  /// there, anything else is transferred once per level (device < host <
  /// nvme), right after it is produced (so a copy engine or the swapper
  /// can overlap it with what follows).
  void insertTransfers(func::FuncOp f, const MemorySpaces &spaces) {
    Block &block = f.getBody().front();
    llvm::DenseMap<std::pair<Value, unsigned>, Value> moved;
    std::function<Value(Value, MemorySpace)> moveTo = [&](Value v, MemorySpace to) -> Value {
      auto key = std::make_pair(v, static_cast<unsigned>(to));
      if (Value done = moved.lookup(key)) return done;
      Operation *def = v.getDefiningOp();
      OpBuilder b(&getContext());
      if (def)
        b.setInsertionPointAfter(def);
      else
        b.setInsertionPointToStart(&block);
      Value out;
      MemorySpace from = spaces.of(v);
      if (def && isa<ConstantOp>(def)) {
        Operation *copy = b.clone(*def);
        MemorySpaces::place(copy, to);
        out = copy->getResult(0);
      } else if (static_cast<int>(to) > static_cast<int>(from)) { // farther, one level
        out = OffloadOp::create(b, v.getLoc(), v);
        ++numTransfers;
      } else {
        out = FetchOp::create(b, v.getLoc(), v);
        ++numTransfers;
      }
      if (!(def && isa<ConstantOp>(def)) && spaces.of(out) != to) out = moveTo(out, to);
      return moved[key] = out;
    };
    // An offloaded parameter is fetched right before each use (its
    // gather), not once for the step: the device holds it only that long.
    auto fetchBefore = [&](Operation *user, Value v, MemorySpace to) {
      OpBuilder b(user);
      while (spaces.of(v) != to) {
        v = static_cast<int>(to) > static_cast<int>(spaces.of(v))
                ? Value(OffloadOp::create(b, v.getLoc(), v))
                : Value(FetchOp::create(b, v.getLoc(), v));
        ++numTransfers;
      }
      return v;
    };
    auto isOffloadedParam = [&](Value v) {
      auto load = v.getDefiningOp<ml_program::GlobalLoadOp>();
      return load && offloadedParams_.contains(load.getGlobal().getLeafReference());
    };
    for (Operation &op : llvm::make_early_inc_range(block)) {
      if (isa<OffloadOp, FetchOp, ml_program::GlobalLoadOp>(op)) continue;
      MemorySpace needs = MemorySpaces::placement(&op);
      if (auto st = dyn_cast<ml_program::GlobalStoreOp>(op))
        needs = spaces.ofGlobal(st.getGlobal().getLeafReference());
      if (isa<ConstantOp, ParameterOp>(op)) continue;
      for (OpOperand &use : op.getOpOperands()) {
        if (spaces.of(use.get()) == needs) continue;
        use.set(isOffloadedParam(use.get()) &&
                        static_cast<int>(needs) < static_cast<int>(spaces.of(use.get()))
                    ? fetchBefore(&op, use.get(), needs)
                    : moveTo(use.get(), needs));
      }
    }
  }
};

} // namespace

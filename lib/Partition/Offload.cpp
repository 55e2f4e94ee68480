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
        place(g, paramSpace);
        offloadedParams_.insert(name);
        ++numParamsOffloaded;
      }
    }

    MemorySpaces spaces(module);
    for (auto f : module.getOps<func::FuncOp>()) {
      if (f.isExternal() || !f.getBody().hasOneBlock()) continue;
      placeOps(f, spaces);
      insertTransfers(f, spaces);
      if (stateSpace == MemorySpace::Nvme) prefetchSwaps(f, spaces);
      if (failed(spaces.verify(f))) return signalPassFailure();
    }
  }

private:
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
      if (isa<AdamUpdateOp, SgdUpdateOp>(op))
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

  /// NVMe swap-ins one update ahead: the state of parameter i+1 is read
  /// while parameter i's update computes (the runtime's I/O thread runs
  /// swaps, waiting only where bytes are shared). Swaps are grouped by the
  /// op that first reads them (one update reads a parameter's moments);
  /// each group after the first moves, with its loads, before the previous
  /// group's reader. One extra parameter's state is live in the host arena.
  void prefetchSwaps(func::FuncOp f, const MemorySpaces &spaces) {
    SmallVector<std::pair<Operation *, SmallVector<Operation *>>> groups;
    for (Operation &op : f.getBody().front()) {
      auto fetch = dyn_cast<FetchOp>(op);
      if (!fetch || spaces.of(fetch.getOperand()) != MemorySpace::Nvme) continue;
      Operation *reader = nullptr;
      for (Operation *u : fetch->getUsers())
        if (!reader || u->isBeforeInBlock(reader)) reader = u;
      if (!reader) continue;
      if (groups.empty() || groups.back().first != reader) groups.push_back({reader, {}});
      groups.back().second.push_back(fetch);
    }
    for (size_t i = 1; i < groups.size(); ++i) {
      Operation *before = groups[i - 1].first;
      for (Operation *fetch : groups[i].second) {
        Operation *load = fetch->getOperand(0).getDefiningOp();
        if (!before->isBeforeInBlock(fetch)) continue;
        if (load && load->getBlock() == before->getBlock() && before->isBeforeInBlock(load))
          load->moveBefore(before);
        fetch->moveBefore(before);
        ++numPrefetched;
      }
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

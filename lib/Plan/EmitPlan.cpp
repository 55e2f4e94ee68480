//===- EmitPlan.cpp - ds IR to a .dsplan ----------------------------------===//
//
// One program per function (@main is "forward"), one STATE buffer per
// mutable global, one WEIGHT buffer per constant or parameter. A
// global_load is the state buffer itself; a global_store either had its
// value computed in place (ds-plan-memory marked it `ds.in_place`) or
// becomes a copy step.
//
//===----------------------------------------------------------------------===//
#include "ds/Plan/EmitPlan.h"
#include "ds/Generate/Passes.h"
#include <map>
#include <tuple>
#include "llvm/Support/xxhash.h"

#include "dialects/ds/DSOps.h"
#include "ds/Plan/KernelBridge.h"
#include "ds/Plan/MemorySpaces.h"
#include "ds/Plan/Passes.h"
#include "runtime/plan/StateLayout.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MLProgram/IR/MLProgram.h"
#include "mlir/IR/AsmState.h"
#include "mlir/IR/DialectResourceBlobManager.h"

using namespace mlir;
using namespace mlir::ds;
namespace plan = ::ds::plan;
namespace rt = ::ds::rt;

uint64_t mlir::ds::modelFingerprint(ModuleOp module) {
  std::string text;
  llvm::raw_string_ostream os(text);
  module->print(os, OpPrintingFlags().elideLargeElementsAttrs(16).elideLargeResourceString(16));
  return llvm::xxh3_64bits(llvm::StringRef(text));
}

namespace {

std::string locationString(Location loc) {
  if (auto n = dyn_cast<NameLoc>(loc))
    return n.getName().str();
  if (auto f = dyn_cast<FusedLoc>(loc))
    if (!f.getLocations().empty())
      return locationString(f.getLocations().front());
  if (auto fl = dyn_cast<FileLineColLoc>(loc))
    return (fl.getFilename().str() + ":" + std::to_string(fl.getLine()));
  return "";
}

class PlanEmitter {
public:
  PlanEmitter(rt::PlanWriter &w, const MemorySpaces &spaces)
      : w_(w), p_(w.plan()), spaces_(spaces) {}

  /// Each rank's initial slice of a tensor-parallel state global (then its
  /// ZeRO block, when partitioned): cut as checkpoints cut a whole state
  /// for a layout (runtime/plan/StateLayout.h).
  LogicalResult emitRankSlices(ModuleOp module, ml_program::GlobalOp g, plan::Buffer &b) {
    MeshAttr mesh = MeshAttr::lookup(module);
    FailureOr<std::vector<uint8_t>> bytes = constantBytes(g->getAttr("ds.full_value"), g.getLoc());
    if (failed(bytes)) return failure();
    rt::HostArray whole;
    whole.dtype = b.dtype();
    whole.shape = rt::wholeShapeOf(b);
    whole.data = std::move(*bytes);
    b.set_state_init(plan::Buffer::STATE_INIT_WEIGHTS);
    for (int64_t r = 0; r < mesh.getNumRanks(); ++r) {
      absl::StatusOr<rt::HostArray> part = rt::rankPart(b, p_.mesh(), mesh.getNumRanks(), r, whole);
      if (!part.ok())
        return g.emitError("cannot cut the state per rank: ") << part.status().message();
      w_.addWeightShard(b, part->data.data(), part->data.size());
    }
    return success();
  }

  LogicalResult emitGlobals(ModuleOp module) {
    for (auto g : module.getOps<ml_program::GlobalOp>()) {
      auto t = dyn_cast<RankedTensorType>(g.getType());
      if (!t || !t.hasStaticShape())
        return g.emitError("state must be a statically shaped tensor");
      FailureOr<uint32_t> id = newBuffer(t, plan::Buffer::STATE, g.getLoc(), g.getSymName().str());
      if (failed(id)) return failure();
      plan::Buffer &b = *p_.mutable_buffers(*id);
      b.set_space(planSpace(spaces_.ofGlobal(g.getSymName())));
      if (auto n = g->getAttrOfType<IntegerAttr>("ds.partition_numel"))
        b.set_partition_numel(n.getInt());
      if (auto shape = g->getAttrOfType<DenseI64ArrayAttr>("ds.partition_shape"))
        for (int64_t d : shape.asArrayRef()) b.add_partition_shape(d);
      if (auto axis = g->getAttrOfType<StringAttr>("ds.partition_axis"))
        b.set_partition_axis(axis.str());
      auto split = g->getAttrOfType<ShardingAttr>("ds.sharding");
      if (split) {
        for (int64_t d = 0; d < split.getRank(); ++d) {
          SmallVector<StringRef> axes = split.axesOf(d);
          if (axes.empty()) continue;
          plan::StateSplit *ss = b.add_splits();
          ss->set_dim(d);
          for (StringRef a : axes) ss->add_axes(a.str());
        }
        if (auto whole = g->getAttrOfType<DenseI64ArrayAttr>("ds.whole_shape"))
          for (int64_t d : whole.asArrayRef()) b.add_whole_shape(d);
      }
      // Tensor parallelism and ZeRO-3: state that differs per rank keeps
      // its whole initial value in ds.full_value; each rank's initial state
      // is its slice (tensor parallelism), flattened, zero-padded and cut
      // into blocks (ZeRO), the block of its coordinate.
      if (split && b.splits_size() && g->getAttr("ds.full_value")) {
        if (failed(emitRankSlices(module, g, b))) return failure();
        state_[g.getSymName()] = *id;
        continue;
      }
      if (auto full = g->getAttr("ds.full_value")) {
        // Whole blocks are views of the IR's bytes; the last one is copied
        // with its zero padding.
        std::optional<ArrayRef<uint8_t>> view = constantView(full);
        std::vector<uint8_t> copy;
        if (!view) {
          FailureOr<std::vector<uint8_t>> bytes = constantBytes(full, g.getLoc());
          if (failed(bytes)) return failure();
          copy = std::move(*bytes);
        }
        ArrayRef<uint8_t> bytes = view ? *view : ArrayRef<uint8_t>(copy);
        uint64_t block = b.size_bytes();
        MeshAttr mesh = MeshAttr::lookup(module);
        int64_t ranks = mesh ? mesh.getNumRanks() : 1;
        int64_t blocks = ranks;
        if (!b.partition_axis().empty() && mesh && mesh.getAxisSize(b.partition_axis()))
          blocks = *mesh.getAxisSize(b.partition_axis());
        if (bytes.size() > block * blocks)
          return g.emitError("ds.full_value does not fit ") << blocks << " blocks of the state";
        b.set_state_init(plan::Buffer::STATE_INIT_WEIGHTS);
        for (int64_t r = 0; r < ranks; ++r) {
          uint64_t lo = rt::blockIndexOf(b, p_.mesh(), ranks, r) * block;
          if (view && lo + block <= bytes.size()) { // `copy` dies here: views only of the IR
            w_.addWeightShardView(b, bytes.data() + lo, block);
            continue;
          }
          std::vector<uint8_t> padded(block, 0);
          if (lo < bytes.size())
            std::memcpy(padded.data(), bytes.data() + lo, std::min<uint64_t>(block, bytes.size() - lo));
          w_.addWeightShard(b, padded.data(), block);
        }
        state_[g.getSymName()] = *id;
        continue;
      }
      Attribute init = g.getValueAttr();
      auto dense = dyn_cast_or_null<DenseElementsAttr>(init);
      bool zero = !init || (dense && dense.isSplat() && isa<FloatType>(dense.getElementType()) &&
                            dense.getSplatValue<APFloat>().isZero());
      if (zero) {
        b.set_state_init(plan::Buffer::STATE_INIT_ZERO);
      } else {
        b.set_state_init(plan::Buffer::STATE_INIT_WEIGHTS);
        if (failed(addConstant(b, init, g.getLoc()))) return failure();
      }
      state_[g.getSymName()] = *id;
    }
    return success();
  }

  /// A constant's bytes as a weight: the IR's own bytes when it holds them
  /// as the plan lays them out (the model's weights: no copy), else a copy.
  LogicalResult addConstant(plan::Buffer &b, Attribute value, Location loc) {
    if (std::optional<ArrayRef<uint8_t>> view = constantView(value)) {
      w_.addWeightView(b, view->data(), view->size());
      return success();
    }
    FailureOr<std::vector<uint8_t>> bytes = constantBytes(value, loc);
    if (failed(bytes)) return failure();
    w_.addWeight(b, bytes->data(), bytes->size());
    return success();
  }

  LogicalResult emitFunction(func::FuncOp func, StringRef programName) {
    prog_ = p_.add_programs();
    prog_->set_name(programName.str());
    outputFor_.clear();
    Block &block = func.getBody().front();
    for (BlockArgument arg : block.getArguments()) {
      std::string name = ioName(func.getArgAttrOfType<StringAttr>(arg.getArgNumber(), "ds.name"),
                                "input_", arg.getArgNumber());
      FailureOr<uint32_t> id = newBuffer(arg, plan::Buffer::INPUT, func.getLoc(), name);
      if (failed(id)) return failure();
      prog_->add_inputs(*id);
      if (func.getArgAttr(arg.getArgNumber(), "ds.rng_key")) prog_->set_rng_input(name);
    }
    Operation *ret = block.getTerminator();
    // The first time a returned value is produced it goes straight into its
    // output buffer; repeats, inputs, weights and state get a copy step.
    for (auto [i, v] : llvm::enumerate(ret->getOperands()))
      if (!outputFor_.count(v) && v.getDefiningOp() &&
          !isa<ConstantOp, ParameterOp, ml_program::GlobalLoadOp>(v.getDefiningOp()))
        outputFor_[v] = i;
    // Values computed straight into a global's state buffer.
    inPlace_.clear();
    for (auto store : block.getOps<ml_program::GlobalStoreOp>())
      if (store->hasAttr("ds.in_place"))
        inPlace_[store.getValue()] = store.getGlobal().getLeafReference();
    for (Operation &op : block) {
      if (&op == ret) continue;
      if (failed(emitOp(op))) return failure();
    }
    for (auto [i, v] : llvm::enumerate(ret->getOperands())) {
      std::string name = ioName(func.getResultAttrOfType<StringAttr>(i, "ds.name"),
                                "output_", i);
      auto it = outputFor_.find(v);
      if (it != outputFor_.end() && it->second == i) {
        p_.mutable_buffers(ids_[v])->set_io_name(name);
        prog_->add_outputs(ids_[v]);
        continue;
      }
      FailureOr<uint32_t> out = newBuffer(v, plan::Buffer::OUTPUT, ret->getLoc(), name,
                                          /*record=*/false);
      if (failed(out)) return failure();
      addCopy(ids_[v], *out, "return");
      prog_->add_outputs(*out);
    }
    return success();
  }

private:
  static std::string ioName(StringAttr attr, const char *prefix, size_t i) {
    return attr ? attr.str() : std::string(prefix) + std::to_string(i);
  }

  void addCopy(uint32_t from, uint32_t to, const std::string &where) {
    plan::Step *s = prog_->add_steps();
    s->set_kernel("copy");
    s->add_inputs(from);
    s->add_outputs(to);
    s->set_location(rt::utf8Escaped(where));
  }

  FailureOr<uint32_t> newBuffer(RankedTensorType t, plan::Buffer::Kind kind, Location loc,
                                const std::string &name) {
    if (!t || !t.hasStaticShape())
      return emitError(loc) << "plan buffers need static tensor types";
    FailureOr<plan::DType> dt = planDType(t.getElementType(), loc);
    if (failed(dt)) return failure();
    plan::Buffer *b = p_.add_buffers();
    uint32_t id = static_cast<uint32_t>(p_.buffers_size() - 1);
    b->set_id(id);
    b->set_kind(kind);
    b->set_dtype(*dt);
    for (int64_t d : t.getShape()) b->add_shape(d);
    b->set_size_bytes(static_cast<uint64_t>(t.getNumElements()) * rt::dtypeSize(*dt));
    if (kind == plan::Buffer::INPUT || kind == plan::Buffer::OUTPUT || kind == plan::Buffer::STATE)
      b->set_io_name(name);
    else
      b->set_debug_name(name);
    return id;
  }

  FailureOr<uint32_t> newBuffer(Value v, plan::Buffer::Kind kind, Location loc,
                                const std::string &name, bool record = true) {
    auto t = dyn_cast<RankedTensorType>(v.getType());
    if (!t) return emitError(loc) << "plan buffers need tensor types, got " << v.getType();
    FailureOr<uint32_t> id = newBuffer(t, kind, loc, name);
    if (succeeded(id) && record) ids_[v] = *id;
    return id;
  }

  FailureOr<uint32_t> stateId(Operation *op, SymbolRefAttr sym) {
    auto it = state_.find(sym.getLeafReference());
    if (it == state_.end())
      return op->emitError("refers to unknown global ") << sym;
    return it->second;
  }

  LogicalResult emitOp(Operation &op) {
    Location loc = op.getLoc();
    if (auto load = dyn_cast<ml_program::GlobalLoadOp>(op)) {
      FailureOr<uint32_t> id = stateId(&op, load.getGlobal());
      if (failed(id)) return failure();
      ids_[load.getResult()] = *id;
      return success();
    }
    if (auto store = dyn_cast<ml_program::GlobalStoreOp>(op)) {
      FailureOr<uint32_t> id = stateId(&op, store.getGlobal());
      if (failed(id)) return failure();
      if (store->hasAttr("ds.in_place")) return success(); // written by its producer
      auto it = ids_.find(store.getValue());
      if (it == ids_.end()) return op.emitError("stores a value with no buffer");
      if (it->second != *id) addCopy(it->second, *id, locationString(loc));
      return success();
    }
    if (isOnlySharded(&op)) return success(); // its shards are the weights
    if (isWeightShard(&op)) return emitWeightShards(cast<ShardSliceOp>(op));
    if (isa<ConstantOp, ParameterOp>(op)) {
      Attribute value = isa<ConstantOp>(op) ? cast<ConstantOp>(op).getValue()
                                            : cast<ParameterOp>(op).getValue();
      std::string name = isa<ParameterOp>(op) ? cast<ParameterOp>(op).getSymName().str()
                                              : locationString(loc);
      // Programs reading the same weight (a generation plan's prefill and
      // decode, a training plan's step and forward) share its bytes.
      const plan::MemorySpace space = planSpace(MemorySpaces::placement(&op));
      auto key = std::make_tuple(value.getAsOpaquePointer(),
                                 op.getResult(0).getType().getAsOpaquePointer(),
                                 static_cast<int>(space));
      if (auto it = weights_.find(key); it != weights_.end()) {
        ids_[op.getResult(0)] = it->second;
        return success();
      }
      FailureOr<uint32_t> id = newBuffer(op.getResult(0), plan::Buffer::WEIGHT, loc, name);
      if (failed(id)) return failure();
      p_.mutable_buffers(*id)->set_space(space);
      weights_[key] = *id;
      return addConstant(*p_.mutable_buffers(*id), value, loc);
    }
    if (op.getDialect() == nullptr || op.getDialect()->getNamespace() != "ds")
      return op.emitError("cannot be lowered to a plan step (not a ds op)");
    if (op.hasAttr(kArenaViewAttr)) return emitView(op);

    plan::Step *s = prog_->add_steps();
    // A forward op ds-recompute copied into the backward says so in
    // traces and profiles.
    s->set_location(rt::utf8Escaped(locationString(loc) +
                                    (op.hasAttr("ds.recompute") ? " [recomputed]" : "")));
    if (failed(describeStep(&op, *s))) return failure();
    if (op.hasAttr("ds.loss")) prog_->set_loss_step(static_cast<uint32_t>(prog_->steps_size()));
    for (Value v : op.getOperands()) {
      auto it = ids_.find(v);
      if (it == ids_.end())
        return op.emitError("operand has no buffer (defined outside the function?)");
      s->add_inputs(it->second);
    }
    auto offsets = op.getAttrOfType<DenseI64ArrayAttr>(kArenaOffsetsAttr);
    if (!offsets || offsets.size() != static_cast<int64_t>(op.getNumResults()))
      return op.emitError("has no arena placement; run ds-plan-memory before emitting a plan");
    for (auto [i, r] : llvm::enumerate(op.getResults())) {
      if (auto it = inPlace_.find(r); it != inPlace_.end()) {
        ids_[r] = state_[it->second];
        s->add_outputs(state_[it->second]);
        continue;
      }
      bool isOutput = outputFor_.count(r);
      FailureOr<uint32_t> id =
          newBuffer(r, isOutput ? plan::Buffer::OUTPUT : plan::Buffer::ARENA, loc,
                    locationString(loc));
      if (failed(id)) return failure();
      if (!isOutput) {
        if (offsets[i] < 0)
          return op.emitError("result ") << i << " has no arena offset";
        p_.mutable_buffers(*id)->set_offset(offsets[i]);
        p_.mutable_buffers(*id)->set_space(planSpace(spaces_.of(r)));
      }
      s->add_outputs(*id);
    }
    return success();
  }

  /// A reshape ds-plan-memory placed on its operand's bytes: a view buffer
  /// of the operand's (the root buffer, views of views included), no step.
  LogicalResult emitView(Operation &op) {
    auto it = ids_.find(op.getOperand(0));
    if (it == ids_.end()) return op.emitError("operand has no buffer");
    const plan::Buffer &target = p_.buffers(it->second);
    if (target.kind() != plan::Buffer::ARENA)
      return op.emitError("ds.arena_view of a value that is not an arena intermediate");
    uint32_t root = target.has_alias_of() ? target.alias_of() : it->second;
    auto offsets = op.getAttrOfType<DenseI64ArrayAttr>(kArenaOffsetsAttr);
    if (!offsets || offsets.size() != 1 || offsets[0] != static_cast<int64_t>(target.offset()))
      return op.emitError("ds.arena_view must sit at its operand's arena offset");
    FailureOr<uint32_t> id = newBuffer(op.getResult(0), plan::Buffer::ARENA, op.getLoc(),
                                       locationString(op.getLoc()));
    if (failed(id)) return failure();
    p_.mutable_buffers(*id)->set_offset(target.offset());
    p_.mutable_buffers(*id)->set_alias_of(root);
    p_.mutable_buffers(*id)->set_space(target.space());
    return success();
  }

  /// A shard_slice of a constant or parameter: one buffer whose bytes are,
  /// for each rank of the world, that rank's block (Buffer.rank_shards).
  LogicalResult emitWeightShards(ShardSliceOp s) {
    Operation *src = s.getOperand().getDefiningOp();
    Attribute value = isa<ConstantOp>(src) ? cast<ConstantOp>(src).getValue()
                                           : cast<ParameterOp>(src).getValue();
    std::string name = isa<ParameterOp>(src) ? cast<ParameterOp>(src).getSymName().str()
                                             : locationString(src->getLoc());
    FailureOr<std::vector<uint8_t>> bytes = constantBytes(value, s.getLoc());
    if (failed(bytes)) return failure();
    MeshAttr mesh = MeshAttr::lookup(s);
    if (!mesh) return s.emitError("needs a ds.mesh on the module");
    auto global = s.getOperand().getType();
    int64_t dim = s.getDim(), outer = s.getOuter();
    SmallVector<StringRef> axes;
    for (Attribute a : s.getAxes()) axes.push_back(cast<StringAttr>(a).getValue());
    int64_t n = 1;
    for (StringRef a : axes) n *= *mesh.getAxisSize(a);
    uint64_t es = bytes->size() / std::max<int64_t>(1, global.getNumElements());
    int64_t before = 1;
    for (int64_t d = 0; d < dim; ++d) before *= global.getDimSize(d);
    int64_t chunks = before * outer;
    uint64_t blk = bytes->size() / static_cast<uint64_t>(chunks * n);
    FailureOr<uint32_t> id = newBuffer(s.getResult(), plan::Buffer::WEIGHT, s.getLoc(), name);
    if (failed(id)) return failure();
    (void)es;
    std::vector<uint8_t> shard(static_cast<size_t>(chunks) * blk);
    int64_t ranks = mesh.getNumRanks();
    for (int64_t r = 0; r < ranks; ++r) {
      // r's index in the group: its coordinates on `axes`, row-major.
      int64_t rest = r, key = 0, scale = 1;
      SmallVector<int64_t> coord(mesh.getAxes().size());
      for (int64_t i = static_cast<int64_t>(coord.size()) - 1; i >= 0; --i) {
        coord[i] = rest % mesh.getAxes()[i].getSize();
        rest /= mesh.getAxes()[i].getSize();
      }
      for (int64_t i = static_cast<int64_t>(coord.size()) - 1; i >= 0; --i)
        if (llvm::is_contained(axes, mesh.getAxes()[i].getName())) {
          key += coord[i] * scale;
          scale *= mesh.getAxes()[i].getSize();
        }
      for (int64_t c = 0; c < chunks; ++c)
        std::memcpy(shard.data() + c * blk, bytes->data() + (c * n + key) * blk, blk);
      w_.addWeightShard(*p_.mutable_buffers(*id), shard.data(), shard.size());
    }
    return success();
  }

  static plan::MemorySpace planSpace(MemorySpace s) {
    return s == MemorySpace::Host   ? plan::HOST
           : s == MemorySpace::Nvme ? plan::NVME
                                    : plan::DEVICE;
  }

  rt::PlanWriter &w_;
  std::map<std::tuple<const void *, const void *, int>, uint32_t> weights_;
  plan::Plan &p_;
  const MemorySpaces &spaces_;
  plan::Program *prog_ = nullptr;
  llvm::DenseMap<Value, uint32_t> ids_;
  llvm::DenseMap<Value, size_t> outputFor_;
  llvm::DenseMap<Value, StringRef> inPlace_;
  llvm::StringMap<uint32_t> state_;
};

/// The module's ds.training attribute as the plan's Training message.
LogicalResult emitTraining(ModuleOp module, plan::Training &t) {
  auto d = module->getAttrOfType<DictionaryAttr>("ds.training");
  auto i64 = [&](StringRef k) {
    auto a = d.getAs<IntegerAttr>(k);
    return a ? a.getInt() : 0;
  };
  auto f64 = [&](StringRef k) {
    auto a = d.getAs<FloatAttr>(k);
    return a ? a.getValueAsDouble() : 0.0;
  };
  auto flag = [&](StringRef k) {
    auto a = d.getAs<BoolAttr>(k);
    return a && a.getValue();
  };
  auto str = [&](StringRef k) {
    auto a = d.getAs<StringAttr>(k);
    return a ? a.getValue() : StringRef();
  };
  t.set_micro_batch_size(i64("micro_batch_size"));
  t.set_gradient_accumulation_steps(i64("gradient_accumulation_steps"));
  t.set_train_batch_size(i64("train_batch_size"));
  t.set_world_size(i64("world_size"));
  t.set_tensor_parallel(i64("tensor_parallel"));
  t.set_zero_stage(i64("zero_stage"));
  t.set_gradient_clipping(f64("gradient_clipping"));
  t.set_steps_per_print(i64("steps_per_print"));
  t.set_precision(str("precision").str());
  t.set_wall_clock_breakdown(flag("wall_clock_breakdown"));
  if (flag("flops_profiler")) {
    plan::FlopsProfiler *f = t.mutable_flops_profiler();
    f->set_enabled(true);
    f->set_profile_step(i64("profile_step"));
    f->set_module_depth(i64("module_depth"));
    f->set_top_modules(i64("top_modules"));
    f->set_detailed(flag("profile_detailed"));
    f->set_output_file(str("profile_output_file").str());
  }
  t.set_checkpoint_tag_validation(str("checkpoint_tag_validation").str());
  if (flag("comms_logger")) {
    plan::CommsLogger *l = t.mutable_comms_logger();
    l->set_enabled(true);
    l->set_verbose(flag("comms_logger_verbose"));
    l->set_prof_all(flag("comms_logger_prof_all"));
    l->set_debug(flag("comms_logger_debug"));
    SmallVector<StringRef> ops;
    str("comms_logger_prof_ops").split(ops, ',', -1, /*KeepEmpty=*/false);
    for (StringRef op : ops) l->add_prof_ops(op.str());
  }
  if (flag("csv_monitor")) {
    t.mutable_csv_monitor()->set_enabled(true);
    t.mutable_csv_monitor()->set_output_path(str("csv_output_path").str());
    t.mutable_csv_monitor()->set_job_name(str("csv_job_name").str());
  }
  if (flag("tensorboard")) {
    t.mutable_tensorboard()->set_enabled(true);
    t.mutable_tensorboard()->set_output_path(str("tensorboard_output_path").str());
    t.mutable_tensorboard()->set_job_name(str("tensorboard_job_name").str());
  }
  if (str("precision") == "fp16") {
    plan::LossScaler *ls = t.mutable_loss_scaler();
    ls->set_static_scale(f64("loss_scale"));
    ls->set_initial_scale(f64("initial_loss_scale"));
    ls->set_scale_window(i64("loss_scale_window"));
    ls->set_hysteresis(i64("hysteresis"));
    ls->set_consecutive_hysteresis(flag("consecutive_hysteresis"));
    ls->set_min_scale(f64("min_loss_scale"));
  }
  plan::Optimizer *o = t.mutable_optimizer();
  StringRef kind = str("optimizer");
  o->set_kind(kind == "sgd"       ? plan::Optimizer::SGD
              : kind == "lion"    ? plan::Optimizer::LION
              : kind == "lamb"    ? plan::Optimizer::LAMB
              : kind == "muon"    ? plan::Optimizer::MUON
              : kind == "onebit_adam" ? plan::Optimizer::ONEBIT_ADAM
              : kind == "zero_one_adam" ? plan::Optimizer::ZERO_ONE_ADAM
              : kind == "onebit_lamb" ? plan::Optimizer::ONEBIT_LAMB
              : kind == "adagrad" ? plan::Optimizer::ADAGRAD
              : kind == "adam_l2" ? plan::Optimizer::ADAM_L2
                                  : plan::Optimizer::ADAMW);
  o->set_lr(f64("lr"));
  if (kind == "muon") o->set_muon_lr(f64("muon_lr"));
  if (kind == "onebit_adam" || kind == "onebit_lamb") o->set_freeze_step(i64("freeze_step"));
  if (kind == "zero_one_adam") {
    o->set_var_freeze_step(i64("var_freeze_step"));
    o->set_var_update_scaler(i64("var_update_scaler"));
    o->set_local_step_scaler(i64("local_step_scaler"));
    o->set_local_step_clipper(i64("local_step_clipper"));
  }
  o->set_beta1(f64("beta1"));
  o->set_beta2(f64("beta2"));
  o->set_eps(f64("eps"));
  o->set_weight_decay(f64("weight_decay"));
  o->set_bias_correction(flag("bias_correction"));
  o->set_momentum(f64("momentum"));
  o->set_dampening(f64("dampening"));
  o->set_nesterov(flag("nesterov"));
  plan::Schedule *s = t.mutable_schedule();
  StringRef sched = str("schedule");
  s->set_kind(sched == "warmup_lr"          ? plan::Schedule::WARMUP_LR
              : sched == "warmup_decay_lr"  ? plan::Schedule::WARMUP_DECAY_LR
              : sched == "warmup_cosine_lr" ? plan::Schedule::WARMUP_COSINE_LR
              : sched == "one_cycle"        ? plan::Schedule::ONE_CYCLE
              : sched == "lr_range_test"    ? plan::Schedule::LR_RANGE_TEST
                                            : plan::Schedule::CONSTANT);
  s->set_warmup_min_lr(f64("warmup_min_lr"));
  s->set_warmup_max_lr(f64("warmup_max_lr"));
  s->set_warmup_num_steps(i64("warmup_num_steps"));
  s->set_warmup_linear(flag("warmup_linear"));
  s->set_total_num_steps(i64("total_num_steps"));
  s->set_warmup_min_ratio(f64("warmup_min_ratio"));
  s->set_cos_min_ratio(f64("cos_min_ratio"));
  s->set_cycle_min_lr(f64("cycle_min_lr"));
  s->set_cycle_max_lr(f64("cycle_max_lr"));
  s->set_decay_lr_rate(f64("decay_lr_rate"));
  s->set_cycle_first_step_size(f64("cycle_first_step_size"));
  s->set_cycle_second_step_size(f64("cycle_second_step_size"));
  s->set_cycle_first_stair_count(i64("cycle_first_stair_count"));
  s->set_cycle_second_stair_count(i64("cycle_second_stair_count"));
  s->set_decay_step_size(f64("decay_step_size"));
  s->set_cycle_momentum(flag("cycle_momentum"));
  s->set_cycle_min_mom(f64("cycle_min_mom"));
  s->set_cycle_max_mom(f64("cycle_max_mom"));
  s->set_decay_mom_rate(f64("decay_mom_rate"));
  s->set_range_min_lr(f64("lr_range_test_min_lr"));
  s->set_range_step_size(i64("lr_range_test_step_size"));
  s->set_range_step_rate(f64("lr_range_test_step_rate"));
  s->set_range_staircase(flag("lr_range_test_staircase"));
  t.set_micro_step_program("train_step");
  t.set_optimizer_program("optimizer_step");
  for (const char *compressed : {"optimizer_step_compressed", "optimizer_step_lamb_compressed"})
    if (module.lookupSymbol(compressed)) t.set_compressed_optimizer_program(compressed);
  if (module.lookupSymbol("optimizer_step_sync")) {
    t.set_gradient_compressed_program("optimizer_step_onebit_grad");
    t.set_local_step_program("optimizer_step_local");
    t.set_sync_step_program("optimizer_step_sync");
  }
  t.set_loss_output("loss");
  if (auto inputs = d.getAs<ArrayAttr>("data_inputs"))
    for (Attribute a : inputs)
      if (auto sa = dyn_cast<StringAttr>(a)) t.add_data_inputs(sa.str());
  if (auto rng = d.getAs<StringAttr>("rng_input")) t.set_rng_input(rng.str());
  if (auto bindings = d.getAs<ArrayAttr>("export_bindings"))
    for (Attribute a : bindings) {
      auto e = dyn_cast<DictionaryAttr>(a);
      if (!e) continue;
      plan::ExportBinding *b = t.add_export_bindings();
      if (auto v = e.getAs<StringAttr>("initializer")) b->set_initializer(v.str());
      if (auto v = e.getAs<StringAttr>("state")) b->set_state(v.str());
      if (auto v = e.getAs<BoolAttr>("transpose")) b->set_transpose(v.getValue());
      if (auto v = e.getAs<IntegerAttr>("part")) b->set_part(v.getInt());
    }
  return success();
}

} // namespace

LogicalResult mlir::ds::emitPlan(ModuleOp module, const EmitPlanOptions &options,
                                 ::ds::rt::PlanWriter &writer) {
  SmallVector<func::FuncOp> funcs;
  for (auto f : module.getOps<func::FuncOp>())
    if (!f.isExternal()) funcs.push_back(f);
  func::FuncOp entry = module.lookupSymbol<func::FuncOp>("main");
  if (!entry && funcs.size() == 1) entry = funcs.front();
  // A generation plan's programs go by their own names.
  auto generation = module->getAttrOfType<DictionaryAttr>(kGenerationAttr);
  if (generation && !entry && !funcs.empty()) entry = funcs.front();
  if (!entry)
    return module.emitError("a plan needs an entry function named 'main'");
  if (entry.isExternal())
    return entry.emitError("the entry function '") << entry.getSymName()
           << "' is a declaration: it has no body to plan";
  int64_t arena = 0, hostArena = 0;
  MemorySpaces spaces(module);
  for (func::FuncOp f : funcs) {
    if (!f.getBody().hasOneBlock())
      return f.emitError("functions must have a single block");
    auto a = f->getAttrOfType<IntegerAttr>(kArenaBytesAttr);
    if (!a)
      return f.emitError("has no memory plan; run ds-plan-memory before emitting a plan");
    arena = std::max(arena, a.getInt());
    if (auto h = f->getAttrOfType<IntegerAttr>(kHostArenaBytesAttr))
      hostArena = std::max(hostArena, h.getInt());
    if (spaces.anyOffDevice() && failed(spaces.verify(f))) return failure();
  }
  plan::Plan &p = writer.plan();
  p.set_producer(options.producer);
  p.set_source(rt::utf8Escaped(options.source));
  p.set_model_fingerprint(options.modelFingerprint);
  p.set_arena_bytes(arena);
  p.set_host_arena_bytes(hostArena);
  p.set_device_memory_budget(options.deviceMemoryBudget);
  p.set_world_size(1);
  if (MeshAttr mesh = MeshAttr::lookup(module)) {
    p.set_world_size(static_cast<uint32_t>(mesh.getNumRanks()));
    for (MeshAxisAttr a : mesh.getAxes()) {
      plan::MeshAxis *ax = p.mutable_mesh()->add_axes();
      ax->set_name(a.getName().str());
      ax->set_size(a.getSize());
    }
  }
  PlanEmitter emitter(writer, spaces);
  if (failed(emitter.emitGlobals(module))) return failure();
  if (failed(emitter.emitFunction(entry, generation ? entry.getSymName() : "forward")))
    return failure();
  for (func::FuncOp f : funcs)
    if (f != entry && failed(emitter.emitFunction(f, f.getSymName())))
      return failure();
  if (module->hasAttr("ds.training") && failed(emitTraining(module, *p.mutable_training())))
    return failure();
  if (generation) {
    plan::Generation *g = p.mutable_generation();
    auto i64 = [&](StringRef k) {
      auto a = generation.getAs<IntegerAttr>(k);
      return a ? a.getInt() : 0;
    };
    g->set_batch(i64("batch"));
    g->set_max_tokens(i64("max_tokens"));
    g->set_chunk(i64("chunk"));
    g->set_vocab(i64("vocab"));
    g->set_layers(i64("layers"));
    g->set_prefill_program("prefill");
    if (module.lookupSymbol<func::FuncOp>("decode")) g->set_decode_program("decode");
    auto prefill = module.lookupSymbol<func::FuncOp>("prefill");
    if (!prefill) return module.emitError("a generation plan needs a 'prefill' function");
    if (auto name = prefill.getArgAttrOfType<StringAttr>(0, "ds.name")) g->set_input(name.str());
  }
  // ZeRO-Infinity: the swapper's settings, when some state is on NVMe.
  if (llvm::any_of(p.buffers(), [](const plan::Buffer &b) { return b.space() == plan::NVME; })) {
    auto t = module->getAttrOfType<DictionaryAttr>("ds.training");
    auto i64 = [&](StringRef k, int64_t deflt) {
      auto a = t ? t.getAs<IntegerAttr>(k) : IntegerAttr();
      return a ? a.getInt() : deflt;
    };
    auto path = t ? t.getAs<StringAttr>("offload_nvme_path") : StringAttr();
    plan::NvmeSwap *n = p.mutable_nvme();
    n->set_path(path ? path.str() : "");
    n->set_block_size(static_cast<uint64_t>(i64("aio_block_size", 1 << 20)));
    n->set_queue_depth(static_cast<uint32_t>(i64("aio_queue_depth", 8)));
    n->set_buffer_count(static_cast<uint32_t>(i64("offload_buffer_count", 4)));
  }
  return success();
}

//===- EmitPlan.cpp - ds IR to a .dsplan ----------------------------------===//
#include "ds/Plan/EmitPlan.h"

#include "dialects/ds/DSOps.h"
#include "ds/Plan/KernelBridge.h"
#include "ds/Plan/Passes.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/AsmState.h"
#include "mlir/IR/DialectResourceBlobManager.h"

using namespace mlir;
using namespace mlir::ds;
namespace plan = ::ds::plan;
namespace rt = ::ds::rt;

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
  PlanEmitter(rt::PlanWriter &w) : w_(w), p_(w.plan()) {}

  LogicalResult run(func::FuncOp func, int64_t arenaBytes) {
    p_.set_arena_bytes(arenaBytes);
    p_.set_world_size(1);
    prog_ = p_.add_programs();
    prog_->set_name("forward");
    Block &block = func.getBody().front();
    for (BlockArgument arg : block.getArguments()) {
      std::string name = ioName(func.getArgAttrOfType<StringAttr>(arg.getArgNumber(), "ds.name"),
                                "input_", arg.getArgNumber());
      FailureOr<uint32_t> id = newBuffer(arg, plan::Buffer::INPUT, func.getLoc(), name);
      if (failed(id)) return failure();
      prog_->add_inputs(*id);
    }
    Operation *ret = block.getTerminator();
    // The first time a returned value is produced it goes straight into its
    // output buffer; repeats, inputs and weights get a copy step.
    for (auto [i, v] : llvm::enumerate(ret->getOperands()))
      if (!outputFor_.count(v) && v.getDefiningOp() &&
          !isa<ConstantOp, ParameterOp>(v.getDefiningOp()))
        outputFor_[v] = i;
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
      plan::Step *s = prog_->add_steps();
      s->set_kernel("copy");
      s->add_inputs(ids_[v]);
      s->add_outputs(*out);
      s->set_location("return");
      prog_->add_outputs(*out);
    }
    return success();
  }

private:
  static std::string ioName(StringAttr attr, const char *prefix, size_t i) {
    return attr ? attr.str() : std::string(prefix) + std::to_string(i);
  }

  FailureOr<uint32_t> newBuffer(Value v, plan::Buffer::Kind kind, Location loc,
                                const std::string &name, bool record = true) {
    auto t = dyn_cast<RankedTensorType>(v.getType());
    if (!t || !t.hasStaticShape())
      return emitError(loc) << "plan buffers need static tensor types, got " << v.getType();
    FailureOr<plan::DType> dt = planDType(t.getElementType(), loc);
    if (failed(dt)) return failure();
    plan::Buffer *b = p_.add_buffers();
    uint32_t id = static_cast<uint32_t>(p_.buffers_size() - 1);
    b->set_id(id);
    b->set_kind(kind);
    b->set_dtype(*dt);
    for (int64_t d : t.getShape()) b->add_shape(d);
    b->set_size_bytes(static_cast<uint64_t>(t.getNumElements()) * rt::dtypeSize(*dt));
    if (kind == plan::Buffer::INPUT || kind == plan::Buffer::OUTPUT)
      b->set_io_name(name);
    else
      b->set_debug_name(name);
    if (record) ids_[v] = id;
    return id;
  }

  LogicalResult emitOp(Operation &op) {
    Location loc = op.getLoc();
    if (isa<ConstantOp, ParameterOp>(op)) {
      Attribute value = isa<ConstantOp>(op) ? cast<ConstantOp>(op).getValue()
                                            : cast<ParameterOp>(op).getValue();
      std::string name = isa<ParameterOp>(op) ? cast<ParameterOp>(op).getSymName().str()
                                              : locationString(loc);
      FailureOr<uint32_t> id = newBuffer(op.getResult(0), plan::Buffer::WEIGHT, loc, name);
      if (failed(id)) return failure();
      FailureOr<std::vector<uint8_t>> bytes = constantBytes(value, loc);
      if (failed(bytes)) return failure();
      w_.addWeight(*p_.mutable_buffers(*id), bytes->data(), bytes->size());
      return success();
    }
    if (op.getDialect() == nullptr || op.getDialect()->getNamespace() != "ds")
      return op.emitError("cannot be lowered to a plan step (not a ds op)");

    plan::Step *s = prog_->add_steps();
    s->set_location(locationString(loc));
    if (failed(describeStep(&op, *s))) return failure();
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
      bool isOutput = outputFor_.count(r);
      FailureOr<uint32_t> id =
          newBuffer(r, isOutput ? plan::Buffer::OUTPUT : plan::Buffer::ARENA, loc,
                    locationString(loc));
      if (failed(id)) return failure();
      if (!isOutput) {
        if (offsets[i] < 0)
          return op.emitError("result ") << i << " has no arena offset";
        p_.mutable_buffers(*id)->set_offset(offsets[i]);
      }
      s->add_outputs(*id);
    }
    return success();
  }

  rt::PlanWriter &w_;
  plan::Plan &p_;
  plan::Program *prog_ = nullptr;
  llvm::DenseMap<Value, uint32_t> ids_;
  llvm::DenseMap<Value, size_t> outputFor_;
};

} // namespace

LogicalResult mlir::ds::emitPlan(ModuleOp module, const EmitPlanOptions &options,
                                 ::ds::rt::PlanWriter &writer) {
  func::FuncOp entry = module.lookupSymbol<func::FuncOp>("main");
  if (!entry) {
    auto funcs = llvm::to_vector(module.getOps<func::FuncOp>());
    if (funcs.size() != 1)
      return module.emitError("a plan needs an entry function named 'main'");
    entry = funcs.front();
  }
  if (!entry.getBody().hasOneBlock())
    return entry.emitError("the entry function must have a single block");
  auto arena = entry->getAttrOfType<IntegerAttr>(kArenaBytesAttr);
  if (!arena)
    return entry.emitError("has no memory plan; run ds-plan-memory before emitting a plan");
  writer.plan().set_producer(options.producer);
  writer.plan().set_source(options.source);
  PlanEmitter emitter(writer);
  return emitter.run(entry, arena.getInt());
}

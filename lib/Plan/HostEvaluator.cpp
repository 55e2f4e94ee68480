//===- HostEvaluator.cpp - run ds ops at compile time ---------------------===//
#include "ds/Plan/HostEvaluator.h"

#include "ds/Plan/KernelBridge.h"
#include "dialects/ds/DSOps.h"
#include "mlir/IR/BuiltinTypes.h"
#include "runtime/backend/AllBackends.h"
#include "runtime/backend/BackendRegistry.h"
#include "runtime/plan/DType.h"

using namespace mlir;
using namespace mlir::ds;
namespace plan = ::ds::plan;
namespace rt = ::ds::rt;

/// The CPU backend, created once: folding must not depend on which devices
/// the machine has.
static FailureOr<rt::Backend *> hostBackend(Operation *op) {
  static absl::StatusOr<std::unique_ptr<rt::Backend>> backend =
      []() -> absl::StatusOr<std::unique_ptr<rt::Backend>> {
    if (absl::Status st = rt::registerAllBackends(); !st.ok()) return st;
    return rt::createBackend("cpu", rt::BackendOptions{});
  }();
  if (!backend.ok())
    return op->emitError("cannot fold: ") << std::string(backend.status().message());
  return backend->get();
}

FailureOr<DenseElementsAttr>
mlir::ds::evaluateConstantValue(Value v, DenseMap<Value, DenseElementsAttr> &memo) {
  if (auto it = memo.find(v); it != memo.end()) return it->second;
  Operation *def = v.getDefiningOp();
  if (!def || def->getNumRegions() != 0) return failure();
  if (auto c = dyn_cast<ConstantOp>(def)) {
    auto d = dyn_cast<DenseElementsAttr>(c.getValue());
    if (!d) {
      FailureOr<std::vector<uint8_t>> bytes = constantBytes(c.getValue(), c.getLoc());
      if (failed(bytes)) return failure();
      d = denseFromBytes(c.getType(), *bytes);
    }
    return memo[v] = d;
  }
  if (auto p = dyn_cast<ParameterOp>(def)) {
    // Parameters hold resources: their bytes, as a dense value.
    FailureOr<std::vector<uint8_t>> bytes = constantBytes(p.getValue(), p.getLoc());
    if (failed(bytes)) return failure();
    return memo[v] = denseFromBytes(p.getType(), *bytes);
  }
  if (!isa<DSDialect>(def->getDialect()) || isCollective(def)) return failure();
  SmallVector<Attribute> operands;
  for (Value o : def->getOperands()) {
    FailureOr<DenseElementsAttr> c = evaluateConstantValue(o, memo);
    if (failed(c)) return failure();
    operands.push_back(*c);
  }
  FailureOr<SmallVector<DenseElementsAttr>> r = evaluateOnHost(def, operands);
  if (failed(r)) return failure();
  for (auto [res, attr] : llvm::zip(def->getResults(), *r)) memo[res] = attr;
  return memo[v];
}

FailureOr<SmallVector<DenseElementsAttr>>
mlir::ds::evaluateOnHost(Operation *op, ArrayRef<Attribute> operands) {
  plan::Step step;
  if (failed(describeStep(op, step)))
    return failure();
  FailureOr<rt::Backend *> backend = hostBackend(op);
  if (failed(backend)) return failure();
  auto toView = [&](Type type, std::vector<uint8_t> &storage) -> FailureOr<rt::TensorView> {
    auto t = cast<RankedTensorType>(type);
    FailureOr<plan::DType> dt = planDType(t.getElementType(), op->getLoc());
    if (failed(dt)) return failure();
    rt::TensorView v;
    v.dtype = *dt;
    v.shape.assign(t.getShape().begin(), t.getShape().end());
    v.numel = t.getNumElements();
    if (storage.empty())
      storage.resize(std::max<size_t>(1, v.numel * rt::dtypeSize(*dt)));
    v.data = storage.data();
    return v;
  };
  std::vector<std::vector<uint8_t>> inBytes(operands.size()), outBytes(op->getNumResults());
  std::vector<rt::TensorView> ins, outs;
  for (auto [i, attr] : llvm::enumerate(operands)) {
    FailureOr<std::vector<uint8_t>> bytes = constantBytes(attr, op->getLoc());
    if (failed(bytes)) return failure();
    inBytes[i] = std::move(*bytes);
    FailureOr<rt::TensorView> v = toView(op->getOperand(i).getType(), inBytes[i]);
    if (failed(v)) return failure();
    ins.push_back(*v);
  }
  for (auto [i, r] : llvm::enumerate(op->getResults())) {
    FailureOr<rt::TensorView> v = toView(r.getType(), outBytes[i]);
    if (failed(v)) return failure();
    outs.push_back(*v);
  }
  // Host memory is the CPU backend's memory: views are bound directly.
  auto prepared = (*backend)->prepare(step, ins, outs);
  if (!prepared.ok())
    return op->emitError("cannot fold: ") << std::string(prepared.status().message());
  absl::Status st = (*prepared)();
  if (!st.ok())
    return op->emitError("cannot fold: ") << std::string(st.message());
  SmallVector<DenseElementsAttr> results;
  for (auto [i, r] : llvm::enumerate(op->getResults())) {
    auto t = cast<RankedTensorType>(r.getType());
    size_t n = outs[i].numel * rt::dtypeSize(outs[i].dtype);
    results.push_back(denseFromBytes(t, ArrayRef<uint8_t>(outBytes[i].data(), n)));
  }
  return results;
}

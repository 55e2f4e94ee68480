//===- KernelBridge.cpp - ds ops as plan steps ----------------------------===//
//
// Writes what an op says of itself (KernelStepOpInterface) in the plan's
// schema, and converts constants between MLIR attributes and plan bytes.
//
//===----------------------------------------------------------------------===//
#include "ds/Plan/KernelBridge.h"

#include "dialects/ds/DSOps.h"
#include "mlir/IR/DialectResourceBlobManager.h"
#include "runtime/plan/DType.h"
#include "runtime/kernels/ElementMath.h"

#include <cstring>

using namespace mlir;
using namespace mlir::ds;
namespace plan = ::ds::plan;

FailureOr<plan::DType> mlir::ds::planDType(Type t, Location loc) {
  if (t.isF32()) return plan::F32;
  if (t.isF64()) return plan::F64;
  if (t.isF16()) return plan::F16;
  if (t.isBF16()) return plan::BF16;
  if (t.isInteger(1)) return plan::BOOL;
  if (t.isUnsignedInteger(8)) return plan::U8;
  if (t.isUnsignedInteger(16)) return plan::U16;
  if (t.isUnsignedInteger(32)) return plan::U32;
  if (t.isUnsignedInteger(64)) return plan::U64;
  if (t.isSignlessInteger(8)) return plan::I8;
  if (t.isSignlessInteger(16)) return plan::I16;
  if (t.isSignlessInteger(32)) return plan::I32;
  if (t.isSignlessInteger(64)) return plan::I64;
  if (isa<Float8E4M3FNType>(t)) return plan::F8E4M3FN;
  if (isa<Float8E4M3FNUZType>(t)) return plan::F8E4M3FNUZ;
  if (isa<Float8E5M2Type>(t)) return plan::F8E5M2;
  if (isa<Float8E5M2FNUZType>(t)) return plan::F8E5M2FNUZ;
  if (isa<Float8E8M0FNUType>(t)) return plan::F8E8M0;
  if (isa<Float4E2M1FNType>(t)) return plan::F4E2M1;
  if (t.isSignlessInteger(4)) return plan::I4;
  if (t.isUnsignedInteger(4)) return plan::U4;
  if (t.isSignlessInteger(2)) return plan::I2;
  if (t.isUnsignedInteger(2)) return plan::U2;
  return emitError(loc) << "element type " << t << " has no plan dtype";
}

static int64_t elementBytes(Type e) {
  return e.isInteger(1) ? 1 : (e.getIntOrFloatBitWidth() + 7) / 8;
}

std::optional<ArrayRef<uint8_t>> mlir::ds::constantView(Attribute attr) {
  auto typed = dyn_cast<TypedAttr>(attr);
  auto type = typed ? dyn_cast<ShapedType>(typed.getType()) : ShapedType();
  if (!type || type.getElementType().isInteger(1)) return std::nullopt;
  int64_t want = type.getNumElements() * elementBytes(type.getElementType());
  ArrayRef<char> data;
  if (auto res = dyn_cast<DenseResourceElementsAttr>(attr)) {
    AsmResourceBlob *blob = res.getRawHandle().getBlob();
    if (!blob) return std::nullopt;
    data = blob->getData();
  } else if (auto dense = dyn_cast<DenseElementsAttr>(attr); dense && !dense.isSplat()) {
    data = dense.getRawData();
  } else {
    return std::nullopt;
  }
  if (static_cast<int64_t>(data.size()) != want) return std::nullopt; // constantBytes says why
  return ArrayRef<uint8_t>(reinterpret_cast<const uint8_t *>(data.data()), data.size());
}

FailureOr<std::vector<uint8_t>> mlir::ds::constantBytes(Attribute attr, Location loc) {
  auto typed = dyn_cast<TypedAttr>(attr);
  auto type = typed ? dyn_cast<ShapedType>(typed.getType()) : ShapedType();
  if (!type)
    return emitError(loc) << "constant " << attr << " is not a shaped value";
  Type e = type.getElementType();
  int64_t n = type.getNumElements();
  if (auto res = dyn_cast<DenseResourceElementsAttr>(attr)) {
    AsmResourceBlob *blob = res.getRawHandle().getBlob();
    if (!blob)
      return emitError(loc) << "resource '" << res.getRawHandle().getKey()
                            << "' has no data (was it elided when printing?)";
    ArrayRef<char> data = blob->getData();
    if (static_cast<int64_t>(data.size()) != n * elementBytes(e))
      return emitError(loc) << "resource '" << res.getRawHandle().getKey() << "' holds "
                            << data.size() << " bytes, its type needs " << n * elementBytes(e);
    return std::vector<uint8_t>(data.begin(), data.end());
  }
  auto dense = dyn_cast<DenseElementsAttr>(attr);
  if (!dense)
    return emitError(loc) << "unsupported constant attribute kind";
  std::vector<uint8_t> out;
  if (e.isInteger(1)) {
    out.reserve(n);
    for (bool v : dense.getValues<bool>()) out.push_back(v ? 1 : 0);
    return out;
  }
  size_t eb = elementBytes(e);
  ArrayRef<char> raw = dense.getRawData();
  if (dense.isSplat()) {
    out.resize(n * eb);
    for (int64_t i = 0; i < n; ++i) std::memcpy(out.data() + i * eb, raw.data(), eb);
  } else {
    out.assign(raw.begin(), raw.end());
  }
  return out;
}

FailureOr<TypedAttr> mlir::ds::roundedTo16Bit(Attribute value, RankedTensorType type,
                                              StringRef resourceKey, Location loc) {
  // A splat stays one (ds-opt --shapes-only's placeholders are never expanded).
  if (auto d = dyn_cast<DenseElementsAttr>(value); d && d.isSplat() && d.getElementType().isF32()) {
    float f = d.getSplatValue<float>();
    bool loses = false;
    APFloat h(f);
    h.convert(type.getElementType().isBF16() ? APFloat::BFloat() : APFloat::IEEEhalf(),
              APFloat::rmNearestTiesToEven, &loses);
    return cast<TypedAttr>(DenseElementsAttr::get(type, FloatAttr::get(type.getElementType(), h)));
  }
  std::optional<ArrayRef<uint8_t>> view = constantView(value);
  std::vector<uint8_t> copy;
  if (!view) {
    FailureOr<std::vector<uint8_t>> bytes = constantBytes(value, loc);
    if (failed(bytes)) return failure();
    copy = std::move(*bytes);
  }
  ArrayRef<uint8_t> bytes = view ? *view : ArrayRef<uint8_t>(copy);
  const bool bf16 = type.getElementType().isBF16();
  size_t n = bytes.size() / 4;
  std::vector<uint8_t> out(n * 2);
  for (size_t i = 0; i < n; ++i) {
    float f;
    std::memcpy(&f, bytes.data() + 4 * i, 4);
    uint16_t h = bf16 ? ::ds::math::floatToBf16(f) : ::ds::math::floatToHalf(f);
    std::memcpy(out.data() + 2 * i, &h, 2);
  }
  if (isa<DenseResourceElementsAttr>(value)) {
    auto *owned = new std::vector<uint8_t>(std::move(out)); // the blob owns it, uncopied
    AsmResourceBlob blob(ArrayRef<char>(reinterpret_cast<const char *>(owned->data()), owned->size()),
                         alignof(uint64_t), [owned](void *, size_t, size_t) { delete owned; },
                         /*dataIsMutable=*/true);
    return cast<TypedAttr>(DenseResourceElementsAttr::get(type, resourceKey, std::move(blob)));
  }
  return cast<TypedAttr>(denseFromBytes(type, out));
}

DenseElementsAttr mlir::ds::denseFromBytes(RankedTensorType type, ArrayRef<uint8_t> bytes) {
  if (type.getElementType().isInteger(1)) {
    SmallVector<bool> bits(bytes.begin(), bytes.end());
    return DenseElementsAttr::get(type, bits);
  }
  return DenseElementsAttr::getFromRawBuffer(
      type, ArrayRef<char>(reinterpret_cast<const char *>(bytes.data()), bytes.size()));
}

bool mlir::ds::isCollective(Operation *op) {
  return isa<AllReduceOp, AllGatherOp, ReduceScatterOp, ShardSliceOp, BroadcastOp, AllToAllOp,
             CompressedAllReduceOp>(op);
}

bool mlir::ds::isWeightShard(Operation *op) {
  auto s = dyn_cast<ShardSliceOp>(op);
  return s && s.getOperand().getDefiningOp() &&
         isa<ConstantOp, ParameterOp>(s.getOperand().getDefiningOp());
}

bool mlir::ds::isOnlySharded(Operation *op) {
  return isa<ConstantOp, ParameterOp>(op) && !op->use_empty() &&
         llvm::all_of(op->getUsers(), [](Operation *u) { return isWeightShard(u); });
}

LogicalResult mlir::ds::describeStep(Operation *op, plan::Step &s) {
  auto kernelOp = dyn_cast<KernelStepOpInterface>(op);
  if (!kernelOp) return op->emitError("has no runtime kernel");
  KernelStep step;
  step.kernel = op->getName().stripDialect().str();
  kernelOp.describeKernelStep(step);
  s.set_kernel(step.kernel);
  s.set_stream(step.stream);
  for (auto &[name, value] : step.attrs) {
    plan::Attribute &a = (*s.mutable_attrs())[name];
    if (auto *i = std::get_if<int64_t>(&value)) a.set_i(*i);
    else if (auto *f = std::get_if<double>(&value)) a.set_f(*f);
    else if (auto *str = std::get_if<std::string>(&value)) a.set_s(*str);
    else
      for (int64_t x : std::get<SmallVector<int64_t>>(value)) a.mutable_ints()->add_values(x);
  }
  return success();
}

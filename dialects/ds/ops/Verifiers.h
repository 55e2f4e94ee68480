//===- Verifiers.h - checks the op families' verifiers share ---*- C++ -*-===//
//
// Private to dialects/ds: the helpers the verifiers and type inference of
// several op families (DSOps.cpp and ops/*.cpp) use.
//
//===----------------------------------------------------------------------===//
#ifndef DS_DIALECTS_DS_OPS_VERIFIERS_H
#define DS_DIALECTS_DS_OPS_VERIFIERS_H

#include <cmath>
#include <string>

#include "dialects/ds/DSOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/IR/TypeUtilities.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallSet.h"
#include "runtime/plan/StridedViews.h"

namespace mlir::ds::verifiers {

inline RankedTensorType rankedType(Value v) {
  return cast<RankedTensorType>(v.getType());
}

inline std::string shapeStr(ArrayRef<int64_t> shape) {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << "[";
  llvm::interleave(shape, os, "x");
  os << "]";
  return s;
}

/// Axes must be sorted, unique and in [0, bound).
inline LogicalResult checkAxes(std::optional<Location> loc, ArrayRef<int64_t> axes,
                               int64_t bound, StringRef what) {
  for (size_t i = 0; i < axes.size(); ++i) {
    if (axes[i] < 0 || axes[i] >= bound)
      return emitOptionalError(loc, what, " axis ", axes[i],
                               " is out of range [0, ", bound, ")");
    if (i > 0 && axes[i] <= axes[i - 1])
      return emitOptionalError(loc, what, " axes must be sorted and unique");
  }
  return success();
}

/// `op` needs an operand of rank >= 1 and `axis` in [0, rank).
inline LogicalResult verifyAxis(Operation *op, int64_t axis, int64_t rank) {
  if (rank < 1)
    return op->emitOpError("needs an operand of rank >= 1");
  if (axis < 0 || axis >= rank)
    return op->emitOpError("axis ") << axis << " is out of range [0, " << rank << ")";
  return success();
}

/// A strided view of `operand` (attention's and fused_matmul's operands):
/// runtime/plan/StridedViews.h's rules, which the kernels apply too.
inline LogicalResult verifyView(Operation *op, StringRef name, Value operand,
                                ArrayRef<int64_t> shape, ArrayRef<int64_t> strides,
                                int64_t offset = 0) {
  if (shape.size() != strides.size())
    return op->emitOpError(name) << "_shape and " << name << "_strides differ in length";
  const int64_t numel = cast<RankedTensorType>(operand.getType()).getNumElements();
  if (const char *problem =
          ::ds::plan::viewProblem(shape.data(), strides.data(), shape.size(), numel, offset))
    return op->emitOpError(name) << " " << problem << " " << operand.getType();
  return success();
}

/// `mask` broadcasts to `shape` (a mask never enlarges what it masks).
inline LogicalResult verifyMaskBroadcasts(Operation *op, Value mask, ArrayRef<int64_t> shape) {
  ArrayRef<int64_t> m = cast<RankedTensorType>(mask.getType()).getShape();
  if (m.size() > shape.size() || failed(broadcastShapes({m, shape})) ||
      *broadcastShapes({m, shape}) != shape)
    return op->emitOpError("mask ") << mask.getType() << " does not broadcast to "
                                    << shapeStr(shape);
  return success();
}

/// A uint8 quantization's scale and zero point (named as the op names them).
inline LogicalResult verifyInputQuantization(Operation *op, double scale, int64_t zeroPoint,
                                             StringRef scaleName = "input_scale",
                                             StringRef zeroName = "input_zero_point") {
  if (!(scale > 0) || !std::isfinite(static_cast<float>(scale)))
    return op->emitOpError(scaleName) << " must be positive and finite as an f32, got " << scale;
  if (zeroPoint < 0 || zeroPoint > 255)
    return op->emitOpError(zeroName) << " must be in [0, 255], got " << zeroPoint;
  return success();
}

} // namespace mlir::ds::verifiers

#endif // DS_DIALECTS_DS_OPS_VERIFIERS_H

//===- GradientBuilder.h - building blocks of gradient rules ----*- C++ -*-===//
//
// What GradientOpInterface implementations build their rules from: ds ops
// created at the differentiated op's location, and `unbroadcast`, which
// sums a broadcast result's gradient back to an operand's shape.
//
//===----------------------------------------------------------------------===//
#ifndef DS_DIALECTS_DS_GRADIENTBUILDER_H
#define DS_DIALECTS_DS_GRADIENTBUILDER_H

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"

namespace mlir::ds {

class GradientBuilder {
public:
  GradientBuilder(OpBuilder &b, Location loc) : b_(b), loc_(loc) {}

  OpBuilder &b() { return b_; }
  Location loc() const { return loc_; }

  /// A rank-0 constant of `elem`.
  Value scalar(Type elem, double v);
  Value zeros(RankedTensorType t);
  Value add(Value a, Value c);
  Value sub(Value a, Value c);
  Value mul(Value a, Value c);
  Value div(Value a, Value c);
  Value neg(Value a);
  Value mulScalar(Value a, double s);
  Value where(Value c, Value t, Value f);
  /// `v` itself when it already has that shape.
  Value reshape(Value v, ArrayRef<int64_t> shape);
  Value transpose(Value v, ArrayRef<int64_t> perm);
  /// Swaps the last two dimensions.
  Value swapLast2(Value v);
  /// `v` itself when `axes` is empty.
  Value reduceSum(Value v, ArrayRef<int64_t> axes, bool keepdims);
  Value expand(Value v, RankedTensorType t);
  /// Sums `g` (shaped like a broadcast result) back to `target`'s shape.
  Value unbroadcast(Value g, RankedTensorType target);

private:
  OpBuilder &b_;
  Location loc_;
};

} // namespace mlir::ds

#endif // DS_DIALECTS_DS_GRADIENTBUILDER_H

//===- OpFacts.h - helpers shared by the op family files --------*- C++ -*-===//
//
// Private to dialects/ds/ops/: each family file implements the interfaces
// of DSInterfaces.td (gradient, sharding rule, kernel step) for its ops.
//
//===----------------------------------------------------------------------===//
#ifndef DS_DIALECTS_DS_OPS_OPFACTS_H
#define DS_DIALECTS_DS_OPS_OPFACTS_H

#include "dialects/ds/DSOps.h"
#include "dialects/ds/GradientBuilder.h"

namespace mlir::ds::facts {

inline RankedTensorType typeOf(Value v) { return cast<RankedTensorType>(v.getType()); }
inline ArrayRef<int64_t> shapeOf(Value v) { return typeOf(v).getShape(); }
inline int64_t rankOf(Value v) { return typeOf(v).getRank(); }

/// The sharding of operand 0 (without partial sums) with the dimensions
/// `unsplit` made whole, for operand 0 and every result of its rank; other
/// operands replicated. The rule of ops that work along one axis (softmax,
/// split, slice). Defined in DataMovementOps.cpp.
ShardingDecision keepExcept(Operation *op, const Sharding &in, ArrayRef<int64_t> unsplit);

/// The rule elementwise ops share (numpy broadcasting; scalars
/// replicated). Defined in ElementwiseOps.cpp.
ShardingDecision elementwiseRule(Operation *op, ArrayRef<Sharding> in);

} // namespace mlir::ds::facts

#endif // DS_DIALECTS_DS_OPS_OPFACTS_H

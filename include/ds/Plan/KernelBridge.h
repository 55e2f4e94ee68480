//===- KernelBridge.h - ds ops as plan steps --------------------*- C++ -*-===//
//
// How a ds op becomes a plan step: the kernel name, stream and attributes
// the op gives through KernelStepOpInterface, in the plan's schema; plan
// dtypes and constant bytes. The plan emitter writes plans with it, and
// host evaluation (HostEvaluator.h) runs the same steps at compile time.
//
//===----------------------------------------------------------------------===//
#ifndef DS_PLAN_KERNELBRIDGE_H
#define DS_PLAN_KERNELBRIDGE_H

#include <optional>
#include <vector>

#include "mlir/IR/Operation.h"
#include "runtime/proto/plan.pb.h"

namespace mlir::ds {

/// The plan element type of an MLIR element type.
FailureOr<::ds::plan::DType> planDType(Type type, Location loc);

/// Little-endian bytes of a dense or dense_resource constant (i1 as one
/// byte per element).
FailureOr<std::vector<uint8_t>> constantBytes(Attribute value, Location loc);
/// The same bytes without a copy, where the IR already holds them in that
/// layout (dense_resource blobs, non-splat dense of non-i1 types); nullopt
/// otherwise (then use constantBytes). Valid while the attribute lives.
std::optional<ArrayRef<uint8_t>> constantView(Attribute value);

/// A DenseElementsAttr of `type` from bytes laid out as constantBytes does.
DenseElementsAttr denseFromBytes(RankedTensorType type, ArrayRef<uint8_t> bytes);

/// An f32 constant's values rounded to nearest even in `type` (bf16 or f16
/// elements): a dense_resource (named `resourceKey`) when `value` is one,
/// so large weights stay out of the attribute uniquer, else dense.
FailureOr<TypedAttr> roundedTo16Bit(Attribute value, RankedTensorType type, StringRef resourceKey,
                                    Location loc);

/// A shard_slice of a constant or parameter: no step, but per-rank weights.
bool isWeightShard(Operation *op);
/// Collectives (their results depend on the rank: never folded).
bool isCollective(Operation *op);
/// A constant or parameter read only through weight shards (it gets no
/// replicated buffer of its own).
bool isOnlySharded(Operation *op);

/// Kernel name and attributes of a ds op; fails for ops with no kernel.
LogicalResult describeStep(Operation *op, ::ds::plan::Step &step);

} // namespace mlir::ds

#endif // DS_PLAN_KERNELBRIDGE_H

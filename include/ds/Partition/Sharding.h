//===- Sharding.h - shardings as values, and per-op sharding rules -*- C++ -*-===//
//
// The passes of lib/Partition reason about shardings through the plain
// structs of dialects/ds/DSInterfaces.h (ShardingAttr is their IR form) and
// one rule per op, ShardingRuleOpInterface: given the shardings its
// operands arrive with, which shardings the op needs of its operands and
// which its results get. Propagation applies the rules; ds-insert-collectives
// applies them again and moves every operand from the sharding it has to
// the one the op needs.
//
//===----------------------------------------------------------------------===//
#ifndef DS_PARTITION_SHARDING_H
#define DS_PARTITION_SHARDING_H

#include "dialects/ds/DSOps.h"

namespace mlir::ds {

/// The sharding `v` has: from its defining op's `ds.sharding` (result 0) or
/// `ds.shardings`, or its function argument's `ds.sharding`; replicated
/// when none is recorded.
Sharding shardingOf(Value v);
/// Records `s` for `v` (replicated shardings are recorded too, so a pass can
/// tell decided from unknown).
void setSharding(Value v, const Sharding &s);

/// On an ml_program.global: how the state is laid out over the mesh (a
/// ShardingAttr; absent: whole on every rank). Set by ds-propagate-sharding
/// from the tensor-parallel constraints on a parameter's loads.
constexpr llvm::StringLiteral kStateShardingAttr = "ds.sharding";

/// The layout of the global `op` (a load or store) refers to.
Sharding stateSharding(Operation *loadOrStore);

/// The rule of `op` (its ShardingRuleOpInterface) applied to the shardings
/// its operands have now. Ops without a rule compute on replicated values
/// (always correct).
ShardingDecision decideSharding(Operation *op, ArrayRef<Sharding> operands, MeshAttr mesh);

/// Whether a value laid out as `s` needs no communication to be used as `t`
/// (same sharding), and the rank-local shape of `type` under `s`.
FailureOr<SmallVector<int64_t>> localShape(RankedTensorType type, const Sharding &s,
                                           MeshAttr mesh);

} // namespace mlir::ds

#endif // DS_PARTITION_SHARDING_H

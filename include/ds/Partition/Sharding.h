//===- Sharding.h - shardings as values, and per-op sharding rules -*- C++ -*-===//
//
// The passes of lib/Partition reason about shardings through these plain
// structs (ShardingAttr is their IR form) and one rule per op kind: given
// the shardings its operands arrive with, which shardings the op needs of
// its operands and which its results get. Propagation applies the rules;
// ds-insert-collectives applies them again and moves every operand from the
// sharding it has to the one the op needs.
//
//===----------------------------------------------------------------------===//
#ifndef DS_PARTITION_SHARDING_H
#define DS_PARTITION_SHARDING_H

#include "dialects/ds/DSOps.h"

namespace mlir::ds {

/// How one dimension is split: by `axes` (major to minor), in blocks of the
/// second factor of [outer, extent / outer].
struct DimSharding {
  SmallVector<StringRef> axes;
  int64_t outer = 1;
  bool isSplit() const { return !axes.empty(); }
  bool operator==(const DimSharding &o) const {
    return axes == o.axes && (axes.empty() || outer == o.outer);
  }
  bool operator!=(const DimSharding &o) const { return !(*this == o); }
};

struct Sharding {
  SmallVector<DimSharding> dims;
  SmallVector<StringRef> partial; // unreduced partial sum over these axes

  static Sharding replicated(int64_t rank) { return Sharding{SmallVector<DimSharding>(rank), {}}; }
  static Sharding fromAttr(ShardingAttr a);
  ShardingAttr toAttr(MLIRContext *ctx) const;
  bool isReplicated() const;
  bool isPartial() const { return !partial.empty(); }
  Sharding withoutPartial() const { return Sharding{dims, {}}; }
  bool operator==(const Sharding &o) const { return dims == o.dims && partial == o.partial; }
  bool operator!=(const Sharding &o) const { return !(*this == o); }
};

/// Product of the sizes of `axes` in `mesh`.
int64_t groupSizeOf(ArrayRef<StringRef> axes, MeshAttr mesh);

/// The sharding `v` has: from its defining op's `ds.sharding` (result 0) or
/// `ds.shardings`, or its function argument's `ds.sharding`; replicated
/// when none is recorded.
Sharding shardingOf(Value v);
/// Records `s` for `v` (replicated shardings are recorded too, so a pass can
/// tell decided from unknown).
void setSharding(Value v, const Sharding &s);

/// What an op needs of its operands and gives its results.
struct ShardingDecision {
  SmallVector<Sharding> operands;
  SmallVector<Sharding> results;
};

/// The rule of `op`'s kind applied to the shardings its operands have now.
/// Ops without a rule compute on replicated values (always correct).
ShardingDecision decideSharding(Operation *op, ArrayRef<Sharding> operands, MeshAttr mesh);

/// Whether a value laid out as `s` needs no communication to be used as `t`
/// (same sharding), and the rank-local shape of `type` under `s`.
FailureOr<SmallVector<int64_t>> localShape(RankedTensorType type, const Sharding &s,
                                           MeshAttr mesh);

} // namespace mlir::ds

#endif // DS_PARTITION_SHARDING_H

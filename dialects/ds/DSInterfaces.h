//===- DSInterfaces.h - per-op facts of the ds dialect ----------*- C++ -*-===//
//
// The C++ side of DSInterfaces.td: the traits, and the plain types the
// interfaces speak in (shardings, kernel steps). The implementations live
// per op family in dialects/ds/ops/.
//
//===----------------------------------------------------------------------===//
#ifndef DS_DIALECTS_DS_DSINTERFACES_H
#define DS_DIALECTS_DS_DSINTERFACES_H

#include <string>
#include <utility>
#include <variant>

#include "dialects/ds/DSAttributes.h"
#include "mlir/IR/OpDefinition.h"

namespace mlir::OpTrait::ds {
/// See DS_ElementwiseTrait in DSInterfaces.td.
template <typename ConcreteType>
class Elementwise : public TraitBase<ConcreteType, Elementwise> {};
/// See DS_LayoutOnly in DSInterfaces.td.
template <typename ConcreteType>
class LayoutOnly : public TraitBase<ConcreteType, LayoutOnly> {};
} // namespace mlir::OpTrait::ds

namespace mlir::ds {

class GradientBuilder; // dialects/ds/GradientBuilder.h

//===----------------------------------------------------------------------===//
// Shardings (ShardingAttr is their IR form)
//===----------------------------------------------------------------------===//

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

/// What an op needs of its operands and gives its results. Empty: the op
/// computes on replicated values.
struct ShardingDecision {
  SmallVector<Sharding> operands;
  SmallVector<Sharding> results;
};

/// Product of the sizes of `axes` in `mesh`.
int64_t groupSizeOf(ArrayRef<StringRef> axes, MeshAttr mesh);

/// ShardingRuleOpInterface's default: the elementwise rule for ops with the
/// Elementwise trait, no decision (replicate) otherwise.
ShardingDecision defaultShardingRule(Operation *op, ArrayRef<Sharding> operands);

//===----------------------------------------------------------------------===//
// Kernel steps
//===----------------------------------------------------------------------===//

/// A runtime step as the compiler describes it, free of the plan schema
/// (lib/Plan/KernelBridge.cpp writes it as a plan::Step).
struct KernelStep {
  using AttrValue = std::variant<int64_t, double, std::string, SmallVector<int64_t>>;
  std::string kernel;
  unsigned stream = 0; // 0: compute; 1: communication
  SmallVector<std::pair<std::string, AttrValue>> attrs;

  void setInt(StringRef name, int64_t v) { attrs.push_back({name.str(), v}); }
  void setFloat(StringRef name, double v) { attrs.push_back({name.str(), v}); }
  void setString(StringRef name, StringRef v) { attrs.push_back({name.str(), v.str()}); }
  void setInts(StringRef name, ArrayRef<int64_t> v) {
    attrs.push_back({name.str(), SmallVector<int64_t>(v)});
  }
};

} // namespace mlir::ds

#include "dialects/ds/DSInterfaces.h.inc"

#endif // DS_DIALECTS_DS_DSINTERFACES_H

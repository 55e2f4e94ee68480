//===- StridedView.h - layout ops read as strided indexing -----*- C++ -*-===//
//
// Transposes, reshapes and broadcasts only move or repeat elements. A
// consumer that indexes its operand with strides can read through them:
// traceView describes a value as a strided view of the tensor that is
// really in memory, so a fused kernel reads that tensor directly and the
// layout ops (and their copies) disappear with their last reader.
//
//===----------------------------------------------------------------------===//
#ifndef DS_TRANSFORMS_STRIDEDVIEW_H
#define DS_TRANSFORMS_STRIDEDVIEW_H

#include "mlir/IR/Value.h"
#include "llvm/ADT/SmallVector.h"

#include <optional>

namespace mlir::ds {

/// A run of indices: `size` steps of `stride` elements (0: a broadcast).
struct ViewPart {
  int64_t size, stride;
};

/// One dimension of a view, in mixed radix: its index splits into one digit
/// per part (the first part most significant), each digit stepping by its
/// part's stride. Most dimensions have one part; a reshape that merged
/// dimensions which are not adjacent in memory (batch and heads after a
/// transpose), or a broadcast merged into a dimension (grouped-query
/// attention's repeated heads), keeps several.
struct ViewDim {
  int64_t size = 1;
  SmallVector<ViewPart, 2> parts; // none when size is 1

  /// The stride of a one-part dimension (0 for size 1), else nullopt.
  std::optional<int64_t> stride() const {
    if (parts.empty()) return 0;
    if (parts.size() == 1) return parts.front().stride;
    return std::nullopt;
  }
};

/// `value` element [i0, ..., in) is element offset + sum_k offset_k(i_k)
/// of the row-major `base`, offset_k being dims[k]'s mixed-radix strides.
struct StridedView {
  Value base;
  SmallVector<ViewDim> dims;
  int64_t offset = 0; // non-zero only through a split or a select
};

/// The view of `v` through the reshape, squeeze, unsqueeze, transpose and
/// expand ops that produce it (and, at an offset, with `throughSplits`,
/// `ds.split`'s pieces and a `ds.gather` of one constant index: PyTorch's
/// select), down to the first value they cannot see through
/// (which is then the base; `v` itself when its producer is none of them).
StridedView traceView(Value v, bool throughSplits = false);

/// Erases the producers of `values` and, transitively, producers nothing
/// reads any more (the layout ops that fed operands a fused op now reads
/// through views). Constants and parameters stay.
void eraseDeadProducers(ArrayRef<Value> values);

} // namespace mlir::ds

#endif // DS_TRANSFORMS_STRIDEDVIEW_H
